package io.sparkcomms.spark.rendezvous;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
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

/** The driver's rendezvous registry (PluginRendezvousTest has ranks talking to it through the driver plugin). */
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
}
