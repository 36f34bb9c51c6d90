package io.sparkcomms.spark.rendezvous;

import io.sparkcomms.spark.rendezvous.RendezvousProtocol.Abort;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol.Deposit;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol.GroupKey;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol.Poll;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol.Reply;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol.Slot;
import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.LongSupplier;

/**
 * The driver's side of the plugin RPC rendezvous: holds the blobs ranks deposit until every rank of
 * the round has fetched them. Lives as long as the driver plugin; thread-safe. Every call returns at
 * once (it runs on Spark's RPC dispatcher): an incomplete round is answered
 * {@link RendezvousProtocol.Status#PENDING} and the rank polls again.
 *
 * <p>What it keeps, and when it forgets it:
 * <ul>
 *   <li>a round, until every rank has fetched it (rounds of a group complete in order, so the group
 *       remembers only the first round it still holds);</li>
 *   <li>a group (one communicator's ranks), until its stage attempt ends ({@link #stageEnded}, from a
 *       SparkListener) or nobody touched it for {@code max(2 × the ranks' timeout, }{@link #MIN_TTL}{@code )};</li>
 *   <li>the ids of the last {@link #MAX_ENDED} ended stage attempts, so a rank of an ended attempt
 *       (a zombie of a failed or retried barrier stage) gets an error instead of waiting.</li>
 * </ul>
 *
 * <p>A group fails as a whole (every rank's next deposit or poll gets the message) when a rank
 * {@link #abort}s, when ranks disagree about its size, or when a rank deposits two different blobs
 * for one round.
 */
public final class RendezvousRegistry {
  /** Least time an idle group is kept. */
  static final Duration MIN_TTL = Duration.ofSeconds(60);
  /** Ended stage attempts remembered. */
  static final int MAX_ENDED = 10_000;
  private static final long SWEEP_EVERY_NANOS = 1_000_000_000L;

  private record StageAttempt(int stageId, int attempt) {}

  private static final class Round {
    final byte[][] blobs;
    final boolean[] fetched;
    int deposited;
    int fetchedCount;

    Round(int size) {
      blobs = new byte[size][];
      fetched = new boolean[size];
    }
  }

  private static final class Group {
    final int size;
    final Map<Integer, Round> rounds = new HashMap<>();
    int forgottenBelow;
    long touched;
    long ttlNanos = MIN_TTL.toNanos();
    String failure;

    Group(int size) { this.size = size; }
  }

  private final LongSupplier nanoClock;
  private final Map<GroupKey, Group> groups = new HashMap<>();
  private final Map<StageAttempt, Boolean> ended = new LinkedHashMap<>(16, 0.75f, false) {
    @Override protected boolean removeEldestEntry(Map.Entry<StageAttempt, Boolean> eldest) { return size() > MAX_ENDED; }
  };
  private long lastSweep;

  public RendezvousRegistry() { this(System::nanoTime); }

  /** With a clock in nanoseconds (tests). */
  RendezvousRegistry(LongSupplier nanoClock) {
    this.nanoClock = nanoClock;
    this.lastSweep = nanoClock.getAsLong();
  }

  /** Stores {@code d}'s blob; answers DONE when it completes the round, else PENDING (or FAILED). */
  public synchronized Reply deposit(Deposit d) {
    long now = sweep();
    Slot s = d.slot();
    String invalid = invalid(s);
    if (invalid != null) return Reply.failed(invalid);
    Group g = groups.computeIfAbsent(s.groupKey(), k -> new Group(s.size()));
    g.touched = now;
    g.ttlNanos = Math.max(g.ttlNanos, 2 * Duration.ofMillis(Math.max(0, d.timeoutMs())).toNanos());
    String bad = check(g, s);
    if (bad != null) return Reply.failed(bad);
    Round r = g.rounds.computeIfAbsent(s.round(), k -> new Round(g.size));
    byte[] prev = r.blobs[s.rank()];
    if (prev == null) {
      r.blobs[s.rank()] = d.blob().clone();
      r.deposited++;
    } else if (!Arrays.equals(prev, d.blob())) {
      return fail(g, "rank " + s.rank() + " deposited two different blobs for round " + s.round()
          + " (two tasks with the same partition id?)");
    }
    return answer(g, s, r);
  }

  /** DONE with every blob once the round is complete, PENDING with the missing ranks, or FAILED. */
  public synchronized Reply poll(Poll p) {
    long now = sweep();
    Slot s = p.slot();
    String invalid = invalid(s);
    if (invalid != null) return Reply.failed(invalid);
    Group g = groups.get(s.groupKey());
    if (g == null) {
      return Reply.failed(describe(s) + ": the driver holds no rendezvous for this group (it was forgotten after "
          + "being idle, or the rank polled before depositing)");
    }
    g.touched = now;
    String bad = check(g, s);
    if (bad != null) return Reply.failed(bad);
    Round r = g.rounds.get(s.round());
    if (r == null || r.blobs[s.rank()] == null) {
      return fail(g, "rank " + s.rank() + " polled round " + s.round() + " without depositing its blob first");
    }
    return answer(g, s, r);
  }

  /** Fails {@code a}'s group, so its other ranks stop waiting at their next poll. */
  public synchronized void abort(Abort a) {
    long now = sweep();
    Slot s = a.slot();
    if (invalid(s) != null) return;
    Group g = groups.computeIfAbsent(s.groupKey(), k -> new Group(s.size()));
    g.touched = now;
    if (g.failure == null) g.failure = describe(s) + ": rank " + s.rank() + " gave up: " + a.reason();
  }

  /** Forgets every group of the stage attempt; its late messages are answered FAILED. */
  public synchronized void stageEnded(int stageId, int attempt) {
    ended.put(new StageAttempt(stageId, attempt), Boolean.TRUE);
    groups.keySet().removeIf(k -> k.stageId() == stageId && k.stageAttempt() == attempt);
  }

  /** Groups held (tests, diagnostics). */
  synchronized int groupCount() { return groups.size(); }

  /** Rounds held over all groups (tests, diagnostics). */
  synchronized int roundCount() {
    int n = 0;
    for (Group g : groups.values()) n += g.rounds.size();
    return n;
  }

  private Reply answer(Group g, Slot s, Round r) {
    if (r.deposited < g.size) {
      int[] missing = new int[g.size - r.deposited];
      for (int i = 0, j = 0; i < g.size; i++) if (r.blobs[i] == null) missing[j++] = i;
      return Reply.pending(missing);
    }
    if (!r.fetched[s.rank()]) {
      r.fetched[s.rank()] = true;
      if (++r.fetchedCount == g.size) {
        g.rounds.remove(s.round());
        g.forgottenBelow = Math.max(g.forgottenBelow, s.round() + 1);
      }
    }
    return Reply.done(r.blobs);
  }

  /** Why {@code s} cannot go on in {@code g}, or null. */
  private String check(Group g, Slot s) {
    if (g.failure != null) return g.failure;
    if (s.size() != g.size) {
      return fail(g, "rank " + s.rank() + " says the group has " + s.size() + " ranks, another rank said " + g.size)
          .message();
    }
    if (s.round() < g.forgottenBelow) {
      return fail(g, "rank " + s.rank() + " is at round " + s.round() + ", which every rank has completed already "
          + "(the tasks make different numbers of rendezvous calls?)").message();
    }
    return null;
  }

  private String invalid(Slot s) {
    if (ended.containsKey(new StageAttempt(s.stageId(), s.stageAttempt()))) {
      return describe(s) + ": the stage attempt has ended (a task of the barrier stage failed, or the stage was "
          + "retried or cancelled)";
    }
    if (s.size() <= 0 || s.rank() < 0 || s.rank() >= s.size() || s.round() < 0) return describe(s) + ": invalid slot";
    return null;
  }

  private Reply fail(Group g, String why) {
    if (g.failure == null) g.failure = "rendezvous failed: " + why;
    return Reply.failed(g.failure);
  }

  private static String describe(Slot s) { return "sparkcomms rendezvous of " + s; }

  private long sweep() {
    long now = nanoClock.getAsLong();
    if (now - lastSweep >= SWEEP_EVERY_NANOS) {
      lastSweep = now;
      groups.values().removeIf(g -> now - g.touched > g.ttlNanos);
    }
    return now;
  }
}
