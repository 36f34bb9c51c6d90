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
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.LongSupplier;

/**
 * The driver's side of the plugin RPC rendezvous: holds the blobs ranks deposit until every rank of
 * the round has fetched them. Lives as long as the driver plugin; thread-safe. Every call returns at
 * once (it runs on Spark's RPC dispatcher): an incomplete round is answered
 * {@link RendezvousProtocol.Status#PENDING} and the rank polls again.
 *
 * <p>Who may speak for a rank: every call names the executor that sent it (proven by the plugin's
 * message authentication, not chosen by the message), and the slot names the task attempt. Rank
 * {@code r} of stage attempt ({@code s}, {@code a}) is the task that runs partition {@code r} of it,
 * as the driver's SparkListener reports ({@link #barrierStageSubmitted}, {@link #taskStarted}). A
 * deposit, poll or abort from any other executor or task is refused and changes nothing: a stranger
 * can neither take a rank's place, nor read a group's blobs, nor fail it. A deposit that arrives
 * before the listener reported its task is answered {@link RendezvousProtocol.Status#UNVERIFIED} and
 * kept nowhere; the rank sends it again.
 *
 * <p>What it keeps, and when it forgets it:
 * <ul>
 *   <li>a round, until every rank has fetched it (rounds of a group complete in order, so a group
 *       holds at most its first unfinished round and the one after);</li>
 *   <li>a group (one communicator's ranks), until its stage attempt ends ({@link #stageEnded}, from a
 *       SparkListener) or nobody touched it for {@code max(2 × the ranks' timeout, }{@link #MIN_TTL}{@code )},
 *       the timeout capped at {@link RendezvousProtocol#MAX_TIMEOUT};</li>
 *   <li>which task runs each of the first {@link RendezvousProtocol#MAX_RANKS} partitions of every
 *       running barrier stage attempt (at most {@link #MAX_TRACKED_STAGES}), until it ends;</li>
 *   <li>the ids of the last {@link #MAX_ENDED} ended stage attempts, so a rank of an ended attempt
 *       (a zombie of a failed or retried barrier stage) gets an error instead of waiting.</li>
 * </ul>
 * At most {@link #MAX_GROUPS} groups and {@link #MAX_HELD_BYTES} bytes of blobs are held; beyond
 * that a deposit is refused with an error that says so.
 *
 * <p>A group fails as a whole (every rank's next deposit or poll gets the message) when one of its
 * ranks {@link #abort}s, when its ranks disagree about its size, when a rank deposits two different
 * blobs for one round or skips ahead of the others, or when a rank's blob does not fit in the limits.
 */
public final class RendezvousRegistry {
  /** Least time an idle group is kept. */
  static final Duration MIN_TTL = Duration.ofSeconds(60);
  /** Ended stage attempts remembered. */
  static final int MAX_ENDED = 10_000;
  /** Groups held at once. Each is one communicator of a running barrier stage. */
  public static final int MAX_GROUPS = 1024;
  /** Blob bytes held at once, over all groups. */
  public static final long MAX_HELD_BYTES = 64L << 20;
  /** Running barrier stage attempts whose tasks are remembered; the eldest is forgotten beyond it. */
  static final int MAX_TRACKED_STAGES = 4096;
  private static final long SWEEP_EVERY_NANOS = 1_000_000_000L;

  private record StageAttempt(int stageId, int attempt) {}

  /** The task attempt that runs a partition, and its executor. */
  private record Task(String executorId, long taskId) {}

  private static final class Round {
    final byte[][] blobs;
    final boolean[] fetched;
    int deposited;
    int fetchedCount;
    long bytes;

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
  private final Map<StageAttempt, Task[]> tasks = new LinkedHashMap<>(16, 0.75f, false) {
    @Override protected boolean removeEldestEntry(Map.Entry<StageAttempt, Task[]> eldest) {
      return size() > MAX_TRACKED_STAGES;
    }
  };
  private final Map<StageAttempt, Boolean> ended = new LinkedHashMap<>(16, 0.75f, false) {
    @Override protected boolean removeEldestEntry(Map.Entry<StageAttempt, Boolean> eldest) { return size() > MAX_ENDED; }
  };
  private long heldBytes;
  private long lastSweep;

  public RendezvousRegistry() { this(System::nanoTime); }

  /** With a clock in nanoseconds (tests). */
  RendezvousRegistry(LongSupplier nanoClock) {
    this.nanoClock = nanoClock;
    this.lastSweep = nanoClock.getAsLong();
  }

  /** Stage attempt ({@code stageId}, {@code attempt}) is a barrier stage: remember which tasks run its partitions. */
  public synchronized void barrierStageSubmitted(int stageId, int attempt) {
    StageAttempt sa = new StageAttempt(stageId, attempt);
    if (!ended.containsKey(sa)) tasks.putIfAbsent(sa, new Task[RendezvousProtocol.MAX_RANKS]);
  }

  /**
   * Task {@code taskId} on {@code executorId} runs {@code partition} of the stage attempt. Kept for
   * barrier stage attempts only, and for partitions that can be a rank.
   */
  public synchronized void taskStarted(int stageId, int attempt, int partition, String executorId, long taskId) {
    Task[] t = tasks.get(new StageAttempt(stageId, attempt));
    if (t != null && partition >= 0 && partition < t.length) t[partition] = new Task(executorId, taskId);
  }

  /**
   * Stores {@code d}'s blob, sent by {@code executorId}; answers DONE when it completes the round,
   * else PENDING (or FAILED, or UNVERIFIED when the driver does not know the rank's task yet).
   */
  public synchronized Reply deposit(String executorId, Deposit d) {
    long now = sweep();
    Slot s = d.slot();
    String invalid = invalid(s);
    if (invalid != null) return Reply.failed(invalid);
    Reply stranger = notItsTask(executorId, s, "a deposit");
    if (stranger != null) return stranger;
    if (d.blob().length > RendezvousProtocol.MAX_BLOB_BYTES) {
      return Reply.failed(describe(s) + ": refused a blob of " + d.blob().length + " bytes; the limit is "
          + RendezvousProtocol.MAX_BLOB_BYTES);
    }
    Group g = groups.get(s.groupKey());
    if (g == null) {
      if (groups.size() >= MAX_GROUPS) {
        return Reply.failed(describe(s) + ": refused: the driver holds " + groups.size() + " rendezvous groups, its "
            + "limit (each is a communicator of a running barrier stage; ended stages free theirs)");
      }
      g = new Group(s.size());
      groups.put(s.groupKey(), g);
    }
    g.touched = now;
    long timeoutMs = Math.min(Math.max(0, d.timeoutMs()), RendezvousProtocol.MAX_TIMEOUT.toMillis());
    g.ttlNanos = Math.max(g.ttlNanos, 2 * Duration.ofMillis(timeoutMs).toNanos());
    String bad = check(g, s);
    if (bad != null) return Reply.failed(bad);
    if (s.round() > g.forgottenBelow + 1) {
      return fail(g, "rank " + s.rank() + " is at round " + s.round() + " while round " + g.forgottenBelow
          + " is not complete (the tasks make different numbers of rendezvous calls?)");
    }
    Group group = g;
    Round r = g.rounds.computeIfAbsent(s.round(), k -> new Round(group.size));
    byte[] prev = r.blobs[s.rank()];
    if (prev == null) {
      if (heldBytes + d.blob().length > MAX_HELD_BYTES) {
        return fail(g, "the driver holds " + heldBytes + " bytes of rendezvous blobs; rank " + s.rank() + "'s "
            + d.blob().length + " more would pass its limit of " + MAX_HELD_BYTES);
      }
      r.blobs[s.rank()] = d.blob().clone();
      r.deposited++;
      r.bytes += d.blob().length;
      heldBytes += d.blob().length;
    } else if (!Arrays.equals(prev, d.blob())) {
      return fail(g, "rank " + s.rank() + " deposited two different blobs for round " + s.round()
          + " (two tasks with the same partition id?)");
    }
    return answer(g, s, r);
  }

  /** DONE with every blob once the round is complete, PENDING with the missing ranks, or FAILED. */
  public synchronized Reply poll(String executorId, Poll p) {
    long now = sweep();
    Slot s = p.slot();
    String invalid = invalid(s);
    if (invalid != null) return Reply.failed(invalid);
    Reply stranger = notItsTask(executorId, s, "a poll");
    if (stranger != null) return stranger;
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

  /**
   * Fails {@code a}'s group, so its other ranks stop waiting at their next poll. Returns null when
   * done, else why the abort was refused (it did not come from the rank's task; the group is untouched).
   */
  public synchronized String abort(String executorId, Abort a) {
    long now = sweep();
    Slot s = a.slot();
    String invalid = invalid(s);
    if (invalid != null) return invalid;
    Reply stranger = notItsTask(executorId, s, "an abort");
    if (stranger != null) return stranger.message();
    Group g = groups.get(s.groupKey());
    if (g == null) {
      if (groups.size() >= MAX_GROUPS) return describe(s) + ": the driver holds " + groups.size() + " groups, its limit";
      g = new Group(s.size());
      groups.put(s.groupKey(), g);
    }
    g.touched = now;
    if (g.failure == null) failQuietly(g, describe(s) + ": rank " + s.rank() + " gave up: " + a.reason());
    return null;
  }

  /** Forgets every group and task of the stage attempt; its late messages are answered FAILED. */
  public synchronized void stageEnded(int stageId, int attempt) {
    StageAttempt sa = new StageAttempt(stageId, attempt);
    ended.put(sa, Boolean.TRUE);
    tasks.remove(sa);
    for (Iterator<Map.Entry<GroupKey, Group>> it = groups.entrySet().iterator(); it.hasNext(); ) {
      Map.Entry<GroupKey, Group> e = it.next();
      if (e.getKey().stageId() == stageId && e.getKey().stageAttempt() == attempt) {
        dropRounds(e.getValue());
        it.remove();
      }
    }
  }

  /** Groups held (diagnostics, tests). */
  public synchronized int groupCount() { return groups.size(); }

  /** Rounds held over all groups (tests, diagnostics). */
  synchronized int roundCount() {
    int n = 0;
    for (Group g : groups.values()) n += g.rounds.size();
    return n;
  }

  /** Blob bytes held over all groups (diagnostics, tests). */
  public synchronized long heldBytes() { return heldBytes; }

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
        heldBytes -= r.bytes;
        g.forgottenBelow = Math.max(g.forgottenBelow, s.round() + 1);
      }
    }
    return Reply.done(r.blobs);
  }

  /**
   * Null when {@code executorId} runs the task that {@code s} names and that task runs partition
   * {@code s.rank()}; else the answer to the stranger (UNVERIFIED while the listener has not
   * reported the partition's task).
   */
  private Reply notItsTask(String executorId, Slot s, String what) {
    Task[] running = tasks.get(new StageAttempt(s.stageId(), s.stageAttempt()));
    Task t = running == null ? null : running[s.rank()];
    if (t == null) {
      return Reply.unverified(describe(s) + ": the driver has not learned yet which task runs partition " + s.rank()
          + " (its SparkListener reports barrier stages and task starts shortly after they happen)");
    }
    if (t.executorId().equals(executorId) && t.taskId() == s.taskId()) return null;
    return Reply.failed(describe(s) + ": refused " + what + " from task " + s.taskId() + " on executor " + executorId
        + ": partition " + s.rank() + " runs as task " + t.taskId() + " on executor " + t.executorId());
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
    if (s.size() <= 0 || s.size() > RendezvousProtocol.MAX_RANKS || s.rank() < 0 || s.rank() >= s.size()
        || s.round() < 0 || s.group() < 0) {
      return describe(s) + ": invalid slot (ranks are 0 to size - 1, size at most " + RendezvousProtocol.MAX_RANKS + ")";
    }
    return null;
  }

  private Reply fail(Group g, String why) {
    failQuietly(g, "rendezvous failed: " + why);
    return Reply.failed(g.failure);
  }

  /** Marks {@code g} failed (the first reason stays) and frees its blobs: a failed group completes no round. */
  private void failQuietly(Group g, String message) {
    if (g.failure == null) g.failure = message;
    dropRounds(g);
  }

  private void dropRounds(Group g) {
    for (Round r : g.rounds.values()) heldBytes -= r.bytes;
    g.rounds.clear();
  }

  private static String describe(Slot s) { return "sparkcomms rendezvous of " + s; }

  private long sweep() {
    long now = nanoClock.getAsLong();
    if (now - lastSweep >= SWEEP_EVERY_NANOS) {
      lastSweep = now;
      for (Iterator<Group> it = groups.values().iterator(); it.hasNext(); ) {
        Group g = it.next();
        if (now - g.touched > g.ttlNanos) {
          dropRounds(g);
          it.remove();
        }
      }
    }
    return now;
  }
}
