package io.sparkcomms.spark;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.rendezvous.RendezvousException;
import io.sparkcomms.spark.RendezvousProtocol.Abort;
import io.sparkcomms.spark.RendezvousProtocol.Deposit;
import io.sparkcomms.spark.RendezvousProtocol.Poll;
import io.sparkcomms.spark.RendezvousProtocol.Reply;
import io.sparkcomms.spark.RendezvousProtocol.Slot;
import io.sparkcomms.spark.RendezvousProtocol.Status;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The driver's rendezvous registry, and {@link PluginRendezvous} ranks (threads) talking to it through the driver plugin. */
class RendezvousRegistryTest {
  private static Slot slot(int round, int rank, int size) { return new Slot(7, 0, 0, round, rank, size); }

  private static byte[] b(String s) { return s.getBytes(StandardCharsets.UTF_8); }

  private static Deposit deposit(int round, int rank, int size, String blob) {
    return new Deposit(slot(round, rank, size), b(blob), 1000);
  }

  private static List<String> strings(byte[][] blobs) {
    List<String> out = new ArrayList<>();
    for (byte[] x : blobs) out.add(new String(x, StandardCharsets.UTF_8));
    return out;
  }

  @Test void depositPollCompleteAndForget() {
    RendezvousRegistry r = new RendezvousRegistry();
    Reply first = r.deposit(deposit(0, 1, 3, "b"));
    assertEquals(Status.PENDING, first.status());
    assertArrayEquals(new int[] {0, 2}, first.missing());
    assertArrayEquals(new int[] {0, 2}, r.poll(new Poll(slot(0, 1, 3))).missing());
    assertEquals(Status.PENDING, r.deposit(deposit(0, 0, 3, "a")).status());
    assertEquals(Status.PENDING, r.deposit(deposit(0, 0, 3, "a")).status(), "a repeated deposit is idempotent");
    Reply last = r.deposit(deposit(0, 2, 3, "c"));                 // the last rank gets the blobs at once
    assertEquals(Status.DONE, last.status());
    assertEquals(List.of("a", "b", "c"), strings(last.blobs()));
    assertEquals(1, r.roundCount());
    assertEquals(List.of("a", "b", "c"), strings(r.poll(new Poll(slot(0, 0, 3))).blobs()));
    assertEquals(List.of("a", "b", "c"), strings(r.poll(new Poll(slot(0, 0, 3))).blobs()), "a repeated fetch");
    assertEquals(1, r.roundCount());
    assertEquals(Status.DONE, r.poll(new Poll(slot(0, 1, 3))).status());
    assertEquals(0, r.roundCount(), "forgotten once every rank fetched it");
    assertEquals(1, r.groupCount());

    // Next round; a rank going back to round 0 fails the group for everyone.
    assertEquals(Status.PENDING, r.deposit(deposit(1, 0, 3, "x")).status());
    Reply back = r.deposit(deposit(0, 1, 3, "b"));
    assertEquals(Status.FAILED, back.status());
    assertTrue(back.message().contains("round 0, which every rank has completed"), back.message());
    assertEquals(back.message(), r.poll(new Poll(slot(1, 0, 3))).message());
  }

  @Test void inconsistentRanksFailTheGroup() {
    RendezvousRegistry r = new RendezvousRegistry();
    r.deposit(deposit(0, 0, 2, "a"));
    Reply size = r.deposit(deposit(0, 1, 3, "b"));
    assertEquals(Status.FAILED, size.status());
    assertTrue(size.message().contains("rank 1 says the group has 3 ranks, another rank said 2"), size.message());
    assertEquals(Status.FAILED, r.poll(new Poll(slot(0, 0, 2))).status());

    RendezvousRegistry r2 = new RendezvousRegistry();
    r2.deposit(deposit(0, 0, 2, "a"));
    Reply twice = r2.deposit(deposit(0, 0, 2, "other"));
    assertTrue(twice.message().contains("two different blobs"), twice.message());

    assertEquals(Status.FAILED, new RendezvousRegistry().deposit(deposit(0, 2, 2, "a")).status(), "rank out of range");
    Reply unknown = new RendezvousRegistry().poll(new Poll(slot(0, 0, 2)));
    assertTrue(unknown.message().contains("holds no rendezvous"), unknown.message());
  }

  @Test void abortAndStageEndFailWaitingRanks() {
    RendezvousRegistry r = new RendezvousRegistry();
    r.deposit(deposit(0, 0, 3, "a"));
    r.abort(new Abort(slot(0, 2, 3), "timed out"));
    Reply p = r.poll(new Poll(slot(0, 0, 3)));
    assertEquals(Status.FAILED, p.status());
    assertTrue(p.message().contains("rank 2 gave up: timed out"), p.message());
    assertEquals(Status.FAILED, r.deposit(deposit(0, 1, 3, "b")).status(), "a late rank fails too");

    // Another stage attempt is independent; ending it forgets its groups and fails its late messages.
    Slot other = new Slot(8, 1, 0, 0, 0, 2);
    assertEquals(Status.PENDING, r.deposit(new Deposit(other, b("a"), 1000)).status());
    assertEquals(2, r.groupCount());
    r.stageEnded(8, 1);
    assertEquals(1, r.groupCount());
    Reply ended = r.poll(new Poll(other));
    assertTrue(ended.message().contains("stage 8 attempt 1") && ended.message().contains("has ended"), ended.message());
    assertEquals(Status.FAILED, r.deposit(new Deposit(new Slot(8, 1, 0, 0, 1, 2), b("b"), 1000)).status());
    assertEquals(Status.PENDING, r.deposit(new Deposit(new Slot(8, 2, 0, 0, 0, 2), b("a"), 1000)).status(),
        "the retried attempt is a new group");
    r.stageEnded(7, 0);
    r.stageEnded(8, 2);
    assertEquals(0, r.groupCount());
  }

  @Test void idleGroupsAreForgottenAfterTheirTtl() {
    AtomicLong now = new AtomicLong();
    RendezvousRegistry r = new RendezvousRegistry(now::get);
    r.deposit(new Deposit(slot(0, 0, 2), b("a"), 1000));                   // TTL: MIN_TTL (60 s)
    r.deposit(new Deposit(new Slot(9, 0, 0, 0, 0, 2), b("a"), 100_000));    // TTL: 200 s
    now.addAndGet(Duration.ofSeconds(59).toNanos());
    r.poll(new Poll(new Slot(9, 0, 0, 0, 0, 2)));
    assertEquals(2, r.groupCount());
    now.addAndGet(Duration.ofSeconds(2).toNanos());
    r.poll(new Poll(new Slot(9, 0, 0, 0, 0, 2)));
    assertEquals(1, r.groupCount(), "the first group was idle for 61 s");
    now.addAndGet(Duration.ofSeconds(199).toNanos());
    assertEquals(Status.PENDING, r.poll(new Poll(new Slot(9, 0, 0, 0, 0, 2))).status(), "touched 199 s ago: kept");
    now.addAndGet(Duration.ofSeconds(201).toNanos());
    assertEquals(Status.FAILED, r.poll(new Poll(new Slot(9, 0, 0, 0, 0, 2))).status());
    assertEquals(0, r.groupCount());
  }

  // ------------------------------------------------------------------ PluginRendezvous against the driver plugin

  private static PluginRendezvous rank(SparkCommsDriverPlugin driver, int stage, int rank, int size, AtomicBoolean killed) {
    // through PluginWire both ways, as over Spark's RPC
    return new PluginRendezvous(m -> PluginWire.decode(driver.receive(PluginWire.encode(m))), stage, 0, 0, rank, size,
        "test", killed::get);
  }

  @Test @Timeout(30) void ranksMeetOverTheDriverPluginInMilliseconds() throws Exception {
    SparkCommsDriverPlugin driver = new SparkCommsDriverPlugin();
    int size = 4;
    ExecutorService pool = Executors.newFixedThreadPool(size);
    try {
      List<Future<List<String>>> fs = new ArrayList<>();
      for (int p = 0; p < size; p++) {
        int me = p;
        fs.add(pool.submit(() -> {
          List<String> out = new ArrayList<>();
          try (PluginRendezvous rv = rank(driver, 1, me, size, new AtomicBoolean())) {
            for (int round = 0; round < 3; round++) {
              Thread.sleep(me * 5L);                                  // ranks arrive at different times
              long t0 = System.nanoTime();
              out.add(String.join(",", strings(rv.allGather(b(round + ":" + me), Duration.ofSeconds(10)))));
              out.add("ms=" + (System.nanoTime() - t0) / 1_000_000);
            }
          }
          return out;
        }));
      }
      for (int p = 0; p < size; p++) {
        List<String> out = fs.get(p).get(20, TimeUnit.SECONDS);
        for (int round = 0; round < 3; round++) {
          assertEquals(round + ":0," + round + ":1," + round + ":2," + round + ":3", out.get(2 * round));
          long ms = Long.parseLong(out.get(2 * round + 1).substring(3));
          assertTrue(ms < 900, "a round took " + ms + " ms (BarrierTaskContext.allGather takes a second)");
        }
      }
    } finally {
      pool.shutdownNow();
    }
  }

  @Test @Timeout(30) void aMissingRankRaisesOnEveryWaitingRankWithinTheTimeout() throws Exception {
    SparkCommsDriverPlugin driver = new SparkCommsDriverPlugin();
    ExecutorService pool = Executors.newFixedThreadPool(2);
    try {
      long t0 = System.nanoTime();
      List<Future<RendezvousException>> fs = new ArrayList<>();
      for (int p = 0; p < 2; p++) {                                  // ranks 0 and 1 of 3; rank 2 never comes
        int me = p;
        fs.add(pool.submit(() -> assertThrows(RendezvousException.class,
            () -> rank(driver, 2, me, 3, new AtomicBoolean()).allGather(b("x"), Duration.ofMillis(me == 0 ? 400 : 5000)))));
      }
      RendezvousException first = fs.get(0).get(10, TimeUnit.SECONDS);
      assertTrue(first.getMessage().contains("missing rank(s) [1, 2]") || first.getMessage().contains("missing rank(s) [2]"),
          first.getMessage());
      RendezvousException second = fs.get(1).get(10, TimeUnit.SECONDS);
      long ms = (System.nanoTime() - t0) / 1_000_000;
      assertTrue(second.getMessage().contains("rank 0 gave up"), "rank 0 aborted the group: " + second.getMessage());
      assertTrue(ms < 3000, "rank 1 stopped at rank 0's abort, not at its own 5 s timeout: " + ms + " ms");
    } finally {
      pool.shutdownNow();
    }
  }

  @Test @Timeout(30) void aKilledTaskOrAnEndedStageStopsTheWait() throws Exception {
    SparkCommsDriverPlugin driver = new SparkCommsDriverPlugin();
    AtomicBoolean killed = new AtomicBoolean();
    ExecutorService pool = Executors.newFixedThreadPool(2);
    try {
      Future<RendezvousException> k = pool.submit(() -> assertThrows(RendezvousException.class,
          () -> rank(driver, 3, 0, 2, killed).allGather(b("x"), Duration.ofSeconds(20))));
      Thread.sleep(50);
      killed.set(true);
      assertTrue(k.get(5, TimeUnit.SECONDS).getMessage().contains("the task was killed"));

      driver.rendezvousRegistry().stageEnded(4, 0);
      RendezvousException ended = assertThrows(RendezvousException.class,
          () -> rank(driver, 4, 0, 2, new AtomicBoolean()).allGather(b("x"), Duration.ofSeconds(20)));
      assertTrue(ended.getMessage().contains("has ended"), ended.getMessage());
    } finally {
      pool.shutdownNow();
    }
  }
}
