package io.sparkcomms.collectives.observe;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.CommMismatchException;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.CommTimeoutException;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.Protocol;
import io.sparkcomms.collectives.RankGroup;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.host.HostCommunicator;
import io.sparkcomms.collectives.rendezvous.InJvmRendezvous;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.time.Duration;
import java.util.List;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;

/** The per-communicator flight record: its bound, and the dump attached to timeouts and mismatches. */
class FlightRecorderTest {
  private static final CommOptions SMALL = CommOptions.builder().stagingBytes(1 << 16).build();

  @Test void theRingHoldsTheLastCallsOldestFirst() {
    try (RankGroup g = new RankGroup(2, SMALL.toBuilder().flightRecorderSize(4).build())) {
      List<List<CallRecord>> recs = g.run(r -> {
        for (int i = 0; i < 10; i++) g.comm(r).allReduce(HostTensor.of(new float[i + 1]), ReduceOp.SUM);
        return g.comm(r).flightRecord();
      });
      for (List<CallRecord> rec : recs) {
        assertEquals(List.of(7L, 8L, 9L, 10L), rec.stream().map(CallRecord::seq).toList());
        long prevStart = 0;
        for (CallRecord c : rec) {
          assertEquals(Collective.ALL_REDUCE, c.collective());
          assertEquals(DataType.FLOAT32, c.dtype());
          assertEquals(c.seq(), c.count(), "call i reduced i elements");
          assertEquals(4 * c.seq(), c.bytes());
          assertEquals(Protocol.FLAT, c.protocol());
          assertEquals(CallRecord.State.OK, c.state());
          assertEquals("ok", c.outcome());
          assertTrue(c.durationNanos() >= 0);
          assertTrue(c.startMillis() >= prevStart && c.startMillis() > 0);
          prevStart = c.startMillis();
        }
        assertThrows(UnsupportedOperationException.class, () -> rec.add(rec.get(0)), "an immutable snapshot");
      }
    }
  }

  @Test void theDefaultRingHolds64AndZeroHoldsNone() {
    try (RankGroup g = new RankGroup(2, SMALL)) {
      List<List<CallRecord>> recs = g.run(r -> {
        for (int i = 0; i < 70; i++) g.comm(r).barrier();
        return g.comm(r).flightRecord();
      });
      for (List<CallRecord> rec : recs) {
        assertEquals(CommOptions.DEFAULT_FLIGHT_RECORDER_SIZE, rec.size());
        assertEquals(7, rec.get(0).seq());
        assertEquals(70, rec.get(63).seq());
      }
    }
    try (RankGroup g = new RankGroup(2, SMALL.toBuilder().flightRecorderSize(0).build())) {
      List<Object> res = g.runCatching(r -> {
        g.comm(r).barrier();
        g.comm(r).allReduce(HostTensor.of(new float[r + 1]), ReduceOp.SUM);
        return null;
      });
      for (int r = 0; r < 2; r++) {
        CommMismatchException e = assertInstanceOf(CommMismatchException.class, res.get(r));
        assertEquals(0, e.getSuppressed().length, "no record, no dump");
        assertEquals(List.of(), g.comm(r).flightRecord());
      }
    }
  }

  /** Ranks that call allReduce with different counts: every rank's mismatch carries its own record. */
  @Test void aMismatchCarriesTheRecordOfEachRank() {
    try (RankGroup g = new RankGroup(2, SMALL);
         Recording.Warnings log = new Recording.Warnings(CallObserver.class)) {
      List<Object> res = g.runCatching(r -> {
        g.comm(r).barrier();
        g.comm(r).allReduce(HostTensor.of(new float[r == 0 ? 4 : 8]), ReduceOp.SUM);
        return "no failure";
      });
      for (int r = 0; r < 2; r++) {
        CommMismatchException e = assertInstanceOf(CommMismatchException.class, res.get(r));
        String dump = dumpOf(e);
        List<String> lines = dump.lines().toList();
        assertEquals(3, lines.size(), dump);
        assertTrue(lines.get(0).startsWith("flight record of rank " + r + " of 2 (host backend): last 2 of 2 calls"), dump);
        assertTrue(lines.get(1).startsWith("  #1 barrier sync FLAT start="), dump);
        assertTrue(lines.get(1).endsWith(" ok"), dump);
        String count = r == 0 ? "4" : "8";
        assertTrue(lines.get(2).startsWith("> #2 allReduce FLOAT32 count=" + count + " bytes=" + 4 * Integer.parseInt(count) + " sync - start="), dump);
        assertTrue(lines.get(2).contains(" ms failed: " + CommMismatchException.class.getName() + ": "), dump);
        assertTrue(lines.get(2).endsWith(e.getMessage().replace('\n', ' ')), dump);
        // what a Spark task failure reason shows: the exception printed with its suppressed ones
        StringWriter sw = new StringWriter();
        e.printStackTrace(new PrintWriter(sw));
        assertTrue(sw.toString().contains("Suppressed: " + FlightRecordDump.class.getName() + ": flight record of rank " + r), sw.toString());
        assertTrue(log.containing("rank " + r + ": allReduce #2 failed").size() == 1, "logged once");
        CallRecord last = g.comm(r).flightRecord().get(1);
        assertEquals(CallRecord.State.FAILED, last.state());
        assertTrue(last.failure().startsWith(CommMismatchException.class.getName() + ": "), last.failure());
      }
      g.assertStillWorks();
      for (int r = 0; r < 2; r++) {
        List<CallRecord> rec = g.comm(r).flightRecord();
        assertEquals(3, rec.size());
        assertEquals(CallRecord.State.OK, rec.get(2).state(), "the communicator stays usable");
      }
    }
  }

  /** Rank 1 skips the third call: rank 0 times out there, and its record names that call and the two before. */
  @Test void aTimeoutCarriesTheRecordNamingTheCallThatTimedOut() throws Exception {
    String dump = skippedCall(c -> c.allReduce(HostTensor.of(new float[8]), ReduceOp.SUM));
    assertTrue(dump.contains("> #3 allReduce FLOAT32 count=8 bytes=32 sync - start="), dump);
  }

  /** The same through an async call: the failure its Work raises carries the record. */
  @Test void anAsyncTimeoutCarriesTheRecordToo() throws Exception {
    String dump = skippedCall(c -> c.allReduceAsync(HostTensor.of(new float[8]), HostTensor.of(new float[8]), ReduceOp.SUM).waitFor());
    assertTrue(dump.contains("> #3 allReduce FLOAT32 count=8 bytes=32 async - start="), dump);
  }

  /**
   * Two ranks make a barrier and an allReduce; then rank 0 (timeout 300 ms) makes {@code third} and
   * rank 1 (timeout 60 s) does not. Returns rank 0's dump. Rank 0 enters the first two calls after
   * rank 1 has had time to arrive, so its short timeout is not spent waiting there.
   */
  private static String skippedCall(Consumer<Communicator> third) throws Exception {
    InJvmRendezvous.Group grp = InJvmRendezvous.group(2);
    List<Object> made = RankGroup.runCatching(2, 60, r -> HostCommunicator.create(grp.member(r),
        SMALL.toBuilder().timeout(Duration.ofMillis(r == 0 ? 300 : 60_000)).build()));
    Communicator c0 = (Communicator) made.get(0);
    Communicator c1 = (Communicator) made.get(1);
    try {
      List<Object> res = RankGroup.runCatching(2, 60, r -> {
        Communicator c = r == 0 ? c0 : c1;
        if (r == 0) pause();
        c.barrier();
        if (r == 0) pause();
        c.allReduce(HostTensor.of(new float[4]), ReduceOp.SUM);
        if (r == 1) return "skipped";
        third.accept(c);
        return "no failure";
      });
      assertEquals("skipped", res.get(1));
      CommTimeoutException e = assertInstanceOf(CommTimeoutException.class, res.get(0));
      String dump = dumpOf(e);
      List<String> lines = dump.lines().toList();
      assertEquals(4, lines.size(), dump);
      assertTrue(lines.get(0).startsWith("flight record of rank 0 of 2 (host backend): last 3 of 3 calls"), dump);
      assertTrue(lines.get(1).startsWith("  #1 barrier sync FLAT start=") && lines.get(1).endsWith(" ok"), dump);
      assertTrue(lines.get(2).startsWith("  #2 allReduce FLOAT32 count=4 bytes=16 sync FLAT ") && lines.get(2).endsWith(" ok"), dump);
      assertTrue(lines.get(3).contains(" ms failed: " + CommTimeoutException.class.getName() + ": "), dump);
      CallRecord last = c0.flightRecord().get(2);
      assertEquals(CallRecord.State.FAILED, last.state());
      assertTrue(last.outcome().startsWith(CommTimeoutException.class.getName()), last.outcome());
      return dump;
    } finally {
      c0.close();
      c1.close();
    }
  }

  private static void pause() {
    try {
      Thread.sleep(100);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  /** The text of the one FlightRecordDump suppressed in {@code e}. */
  private static String dumpOf(Throwable e) {
    List<Throwable> dumps = java.util.Arrays.stream(e.getSuppressed()).filter(s -> s instanceof FlightRecordDump).toList();
    assertEquals(1, dumps.size(), "one dump in " + java.util.Arrays.toString(e.getSuppressed()));
    assertEquals(0, dumps.get(0).getStackTrace().length, "a dump has no stack trace");
    return dumps.get(0).getMessage();
  }
}
