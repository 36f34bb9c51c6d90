package io.sparkcomms.spark.rendezvous;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.spark.rendezvous.RendezvousProtocol.Abort;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol.Deposit;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol.Poll;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol.Reply;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol.Slot;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol.Status;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/**
 * The driver's rendezvous registry (PluginRendezvousTest has ranks talking to it through the driver
 * plugin). Partition p of a stage attempt runs as task 100 + p on executor "e" + p unless a test says
 * otherwise.
 */
class RendezvousRegistryTest {
  private static Slot slot(int stage, int attempt, int group, int round, int rank, int size) {
    return new Slot(stage, attempt, group, round, rank, size, 100 + rank);
  }

  private static Slot slot(int round, int rank, int size) { return slot(7, 0, 0, round, rank, size); }

  private static String exec(int rank) { return "e" + rank; }

  private static byte[] b(String s) { return s.getBytes(StandardCharsets.UTF_8); }

  private static Deposit deposit(int round, int rank, int size, String blob) {
    return new Deposit(slot(round, rank, size), b(blob), 1000);
  }

  /** A registry whose listener reported barrier stage attempts {@code stages} (pairs) with {@code tasks} tasks each. */
  private static RendezvousRegistry registry(AtomicLong clock, int tasks, int... stages) {
    RendezvousRegistry r = clock == null ? new RendezvousRegistry() : new RendezvousRegistry(clock::get);
    for (int i = 0; i < stages.length; i += 2) started(r, stages[i], stages[i + 1], tasks);
    return r;
  }

  private static void started(RendezvousRegistry r, int stage, int attempt, int tasks) {
    r.barrierStageSubmitted(stage, attempt);
    for (int p = 0; p < tasks; p++) r.taskStarted(stage, attempt, p, exec(p), 100 + p);
  }

  private static Reply dep(RendezvousRegistry r, int round, int rank, int size, String blob) {
    return r.deposit(exec(rank), deposit(round, rank, size, blob));
  }

  private static Reply poll(RendezvousRegistry r, Slot s) { return r.poll(exec(s.rank()), new Poll(s)); }

  private static List<String> strings(byte[][] blobs) {
    List<String> out = new ArrayList<>();
    for (byte[] x : blobs) out.add(new String(x, StandardCharsets.UTF_8));
    return out;
  }

  @Test void depositPollCompleteAndForget() {
    RendezvousRegistry r = registry(null, 3, 7, 0);
    Reply first = dep(r, 0, 1, 3, "b");
    assertEquals(Status.PENDING, first.status());
    assertArrayEquals(new int[] {0, 2}, first.missing());
    assertArrayEquals(new int[] {0, 2}, poll(r, slot(0, 1, 3)).missing());
    assertEquals(Status.PENDING, dep(r, 0, 0, 3, "a").status());
    assertEquals(Status.PENDING, dep(r, 0, 0, 3, "a").status(), "a repeated deposit is idempotent");
    Reply last = dep(r, 0, 2, 3, "c");                             // the last rank gets the blobs at once
    assertEquals(Status.DONE, last.status());
    assertEquals(List.of("a", "b", "c"), strings(last.blobs()));
    assertEquals(1, r.roundCount());
    assertEquals(List.of("a", "b", "c"), strings(poll(r, slot(0, 0, 3)).blobs()));
    assertEquals(List.of("a", "b", "c"), strings(poll(r, slot(0, 0, 3)).blobs()), "a repeated fetch");
    assertEquals(1, r.roundCount());
    assertEquals(Status.DONE, poll(r, slot(0, 1, 3)).status());
    assertEquals(0, r.roundCount(), "forgotten once every rank fetched it");
    assertEquals(0, r.heldBytes());
    assertEquals(1, r.groupCount());

    // Next round; a rank going back to round 0 fails the group for everyone.
    assertEquals(Status.PENDING, dep(r, 1, 0, 3, "x").status());
    Reply back = dep(r, 0, 1, 3, "b");
    assertEquals(Status.FAILED, back.status());
    assertTrue(back.message().contains("round 0, which every rank has completed"), back.message());
    assertEquals(back.message(), poll(r, slot(1, 0, 3)).message());
    assertEquals(0, r.heldBytes(), "a failed group holds no blobs");
  }

  @Test void inconsistentRanksFailTheGroup() {
    RendezvousRegistry r = registry(null, 3, 7, 0);
    dep(r, 0, 0, 2, "a");
    Reply size = dep(r, 0, 1, 3, "b");
    assertEquals(Status.FAILED, size.status());
    assertTrue(size.message().contains("rank 1 says the group has 3 ranks, another rank said 2"), size.message());
    assertEquals(Status.FAILED, poll(r, slot(0, 0, 2)).status());

    RendezvousRegistry r2 = registry(null, 2, 7, 0);
    dep(r2, 0, 0, 2, "a");
    Reply twice = dep(r2, 0, 0, 2, "other");
    assertTrue(twice.message().contains("two different blobs"), twice.message());

    RendezvousRegistry r3 = registry(null, 3, 7, 0);
    Reply ahead = dep(r3, 2, 0, 2, "a");
    assertEquals(Status.FAILED, ahead.status());
    assertTrue(ahead.message().contains("rank 0 is at round 2 while round 0 is not complete"), ahead.message());

    assertEquals(Status.FAILED, registry(null, 3, 7, 0).deposit(exec(2), deposit(0, 2, 2, "a")).status(), "rank out of range");
    Reply unknown = poll(registry(null, 2, 7, 0), slot(0, 0, 2));
    assertTrue(unknown.message().contains("holds no rendezvous"), unknown.message());
  }

  @Test void abortAndStageEndFailWaitingRanks() {
    RendezvousRegistry r = registry(null, 3, 7, 0, 8, 1, 8, 2);
    dep(r, 0, 0, 3, "a");
    assertNull(r.abort(exec(2), new Abort(slot(0, 2, 3), "timed out")));
    Reply p = poll(r, slot(0, 0, 3));
    assertEquals(Status.FAILED, p.status());
    assertTrue(p.message().contains("rank 2 gave up: timed out"), p.message());
    assertEquals(Status.FAILED, dep(r, 0, 1, 3, "b").status(), "a late rank fails too");

    // Another stage attempt is independent; ending it forgets its groups and fails its late messages.
    Slot other = slot(8, 1, 0, 0, 0, 2);
    assertEquals(Status.PENDING, r.deposit(exec(0), new Deposit(other, b("a"), 1000)).status());
    assertEquals(2, r.groupCount());
    r.stageEnded(8, 1);
    assertEquals(1, r.groupCount());
    Reply ended = poll(r, other);
    assertTrue(ended.message().contains("stage 8 attempt 1") && ended.message().contains("has ended"), ended.message());
    assertEquals(Status.FAILED, r.deposit(exec(1), new Deposit(slot(8, 1, 0, 0, 1, 2), b("b"), 1000)).status());
    assertEquals(Status.PENDING, r.deposit(exec(0), new Deposit(slot(8, 2, 0, 0, 0, 2), b("a"), 1000)).status(),
        "the retried attempt is a new group");
    r.stageEnded(7, 0);
    r.stageEnded(8, 2);
    assertEquals(0, r.groupCount());
    assertEquals(0, r.heldBytes());
  }

  @Test void idleGroupsAreForgottenAfterTheirTtl() {
    AtomicLong now = new AtomicLong();
    RendezvousRegistry r = registry(now, 2, 7, 0, 9, 0);
    Slot nine = slot(9, 0, 0, 0, 0, 2);
    r.deposit(exec(0), new Deposit(slot(0, 0, 2), b("a"), 1000));      // TTL: MIN_TTL (60 s)
    r.deposit(exec(0), new Deposit(nine, b("a"), 100_000));             // TTL: 200 s
    now.addAndGet(Duration.ofSeconds(59).toNanos());
    poll(r, nine);
    assertEquals(2, r.groupCount());
    now.addAndGet(Duration.ofSeconds(2).toNanos());
    poll(r, nine);
    assertEquals(1, r.groupCount(), "the first group was idle for 61 s");
    now.addAndGet(Duration.ofSeconds(199).toNanos());
    assertEquals(Status.PENDING, poll(r, nine).status(), "touched 199 s ago: kept");
    now.addAndGet(Duration.ofSeconds(201).toNanos());
    assertEquals(Status.FAILED, poll(r, nine).status());
    assertEquals(0, r.groupCount());
    assertEquals(0, r.heldBytes());
  }

  /** A deposit's timeout sets how long an idle group is kept, up to RendezvousProtocol.MAX_TIMEOUT. */
  @Test void aDepositTimeoutCannotKeepAGroupBeyondTheCap() {
    AtomicLong now = new AtomicLong();
    RendezvousRegistry r = registry(now, 2, 7, 0, 9, 0);
    r.deposit(exec(0), new Deposit(slot(0, 0, 2), b("a"), Long.MAX_VALUE / 2));
    now.addAndGet(RendezvousProtocol.MAX_TIMEOUT.multipliedBy(2).plusSeconds(2).toNanos());
    r.deposit(exec(0), new Deposit(slot(9, 0, 0, 0, 0, 2), b("a"), 1000));   // sweeps
    assertEquals(1, r.groupCount(), "idle for 2 × MAX_TIMEOUT + 2 s: forgotten");
  }

  /** Rank 1's deposit from another executor or task is refused and changes nothing; the real rank 1 completes the round. */
  @Test void aForgedDepositForAnotherRankIsRefusedAndTheRealRankWorks() {
    RendezvousRegistry r = registry(null, 2, 7, 0);
    Reply forged = r.deposit("e0", new Deposit(slot(0, 1, 2), b("evil"), 1000));     // executor of rank 0
    assertEquals(Status.FAILED, forged.status());
    assertTrue(forged.message().contains("refused a deposit from task 101 on executor e0: partition 1 runs as task 101 "
        + "on executor e1"), forged.message());
    Reply wrongTask = r.deposit("e1", new Deposit(new Slot(7, 0, 0, 0, 1, 2, 999), b("evil"), 1000));
    assertTrue(wrongTask.message().contains("refused a deposit from task 999 on executor e1"), wrongTask.message());
    Reply elsewhere = r.deposit("e1", new Deposit(slot(5, 0, 0, 0, 1, 2), b("evil"), 1000));   // not a barrier stage
    assertEquals(Status.UNVERIFIED, elsewhere.status());
    assertEquals(0, r.groupCount(), "no refused deposit made a group");

    assertEquals(Status.PENDING, dep(r, 0, 0, 2, "r0").status());
    Reply real = dep(r, 0, 1, 2, "r1");
    assertEquals(Status.DONE, real.status(), real.toString());
    assertEquals(List.of("r0", "r1"), strings(real.blobs()));
  }

  /** Polls and aborts from anything but a member's task are refused: no blobs, and the group goes on. */
  @Test void aStrayPollOrAbortByANonMemberDoesNotFailTheGroup() {
    RendezvousRegistry r = registry(null, 2, 7, 0);
    assertEquals(Status.PENDING, dep(r, 0, 0, 2, "r0").status());
    Reply strayPoll = r.poll("intruder", new Poll(slot(0, 1, 2)));            // rank 1 has not deposited
    assertEquals(Status.FAILED, strayPoll.status());
    assertTrue(strayPoll.message().contains("refused a poll from task 101 on executor intruder"), strayPoll.message());
    String strayAbort = r.abort("intruder", new Abort(slot(0, 0, 2), "stop"));
    assertTrue(strayAbort != null && strayAbort.contains("refused an abort from task 100 on executor intruder"), strayAbort);
    assertTrue(r.abort("e1", new Abort(slot(0, 0, 2), "stop")) != null, "rank 1's executor cannot abort as rank 0");

    Reply done = dep(r, 0, 1, 2, "r1");
    assertEquals(Status.DONE, done.status(), done.toString());
    Reply peek = r.poll("intruder", new Poll(slot(0, 0, 2)));
    assertEquals(Status.FAILED, peek.status());
    assertNull(peek.blobs(), "a non-member gets no blobs");
    assertEquals(List.of("r0", "r1"), strings(poll(r, slot(0, 0, 2)).blobs()));
  }

  /** Until the listener reports the rank's task, a deposit is answered UNVERIFIED and kept nowhere. */
  @Test void aDepositBeforeTheListenerReportsItsTaskIsHeldOff() {
    RendezvousRegistry r = new RendezvousRegistry();
    Reply early = dep(r, 0, 0, 2, "r0");
    assertEquals(Status.UNVERIFIED, early.status());
    assertTrue(early.message().contains("has not learned yet which task runs partition 0"), early.message());
    r.barrierStageSubmitted(7, 0);
    assertEquals(Status.UNVERIFIED, dep(r, 0, 0, 2, "r0").status(), "stage known, task not yet");
    assertEquals(0, r.groupCount());
    assertEquals(0, r.heldBytes());
    r.taskStarted(7, 0, 0, exec(0), 100);
    r.taskStarted(7, 0, 1, exec(1), 101);
    assertEquals(Status.PENDING, dep(r, 0, 0, 2, "r0").status());
    assertEquals(Status.DONE, dep(r, 0, 1, 2, "r1").status());

    r.taskStarted(3, 0, 0, exec(0), 100);       // a task of a stage the listener did not report as a barrier stage
    assertEquals(Status.UNVERIFIED, r.deposit(exec(0), new Deposit(slot(3, 0, 0, 0, 0, 2), b("x"), 1000)).status());
  }

  @Test void tooManyGroupsAreRefused() {
    RendezvousRegistry r = registry(null, 2, 7, 0);
    for (int g = 0; g < RendezvousRegistry.MAX_GROUPS; g++) {
      assertEquals(Status.PENDING, r.deposit(exec(0), new Deposit(slot(7, 0, g, 0, 0, 2), b("x"), 1000)).status());
    }
    Reply over = r.deposit(exec(0), new Deposit(slot(7, 0, RendezvousRegistry.MAX_GROUPS, 0, 0, 2), b("x"), 1000));
    assertEquals(Status.FAILED, over.status());
    assertTrue(over.message().contains("refused: the driver holds " + RendezvousRegistry.MAX_GROUPS
        + " rendezvous groups, its limit"), over.message());
    assertEquals(RendezvousRegistry.MAX_GROUPS, r.groupCount());
    assertEquals(Status.DONE, dep(r, 0, 1, 2, "y").status(), "an existing group goes on");
    r.stageEnded(7, 0);
    assertEquals(0, r.groupCount(), "an ended stage frees its groups");
  }

  @Test void tooManyBytesAreRefused() {
    RendezvousRegistry r = registry(null, 2, 7, 0);
    byte[] blob = new byte[RendezvousProtocol.MAX_BLOB_BYTES];
    int fit = (int) (RendezvousRegistry.MAX_HELD_BYTES / blob.length);
    for (int g = 0; g < fit; g++) {
      assertEquals(Status.PENDING, r.deposit(exec(0), new Deposit(slot(7, 0, g, 0, 0, 2), blob, 1000)).status());
    }
    assertEquals(RendezvousRegistry.MAX_HELD_BYTES, r.heldBytes());
    Reply over = r.deposit(exec(0), new Deposit(slot(7, 0, fit, 0, 0, 2), blob, 1000));
    assertEquals(Status.FAILED, over.status());
    assertTrue(over.message().contains("more would pass its limit of " + RendezvousRegistry.MAX_HELD_BYTES), over.message());
    Reply big = r.deposit(exec(0), new Deposit(slot(7, 0, fit + 1, 0, 0, 2), new byte[RendezvousProtocol.MAX_BLOB_BYTES + 1], 1000));
    assertTrue(big.message().contains("refused a blob of " + (RendezvousProtocol.MAX_BLOB_BYTES + 1) + " bytes"), big.message());
    r.stageEnded(7, 0);
    assertEquals(0, r.heldBytes(), "an ended stage frees its bytes");
  }
}
