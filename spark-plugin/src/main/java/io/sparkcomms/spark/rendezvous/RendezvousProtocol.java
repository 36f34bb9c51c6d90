package io.sparkcomms.spark.rendezvous;

import java.time.Duration;
import java.util.Arrays;

/**
 * The executor-to-driver messages of the plugin RPC rendezvous ({@link PluginRendezvous} ↔
 * {@link RendezvousRegistry}). They travel as the plugin's authenticated byte messages
 * ({@code io.sparkcomms.spark.plugin.PluginWire}), which also enforce the limits below. Blobs are
 * small: segment names, pids, IPC handles.
 *
 * <p>Every rank of a round sends one {@link Deposit}, then {@link Poll}s until the driver answers
 * {@link Status#DONE} with every rank's blob (or {@link Status#FAILED}). The driver never waits: a
 * round that is not complete yet is answered {@link Status#PENDING} with the ranks still missing,
 * and a deposit the driver cannot attribute yet ({@link Status#UNVERIFIED}) is sent again.
 * {@link Abort} marks the whole group failed, so peers stop waiting at their next poll. The driver
 * accepts a rank's messages only from the task that runs that partition of the stage attempt.
 */
public final class RendezvousProtocol {
  /** Most ranks of one group: the largest communicator a backend builds (the host backend's 64). */
  public static final int MAX_RANKS = 64;
  /** Largest blob one rank deposits for one round. */
  public static final int MAX_BLOB_BYTES = 256 << 10;
  /** Longest deposit timeout the driver honours when it decides how long to keep an idle group. */
  public static final Duration MAX_TIMEOUT = Duration.ofHours(1);

  private RendezvousProtocol() {}

  /**
   * One rank's place in one round: the barrier stage attempt, the communicator {@code group} within
   * its tasks (the n-th rendezvous a task builds), the round (the n-th allGather), the rank among
   * {@code size}, and the task attempt ({@code TaskContext.taskAttemptId()}) that speaks for the rank.
   */
  public record Slot(int stageId, int stageAttempt, int group, int round, int rank, int size, long taskId) {
    /** The group this slot belongs to (round, rank and task dropped). */
    GroupKey groupKey() { return new GroupKey(stageId, stageAttempt, group); }

    @Override public String toString() {
      return "stage " + stageId + " attempt " + stageAttempt + " group " + group + " round " + round + " rank " + rank
          + "/" + size;
    }
  }

  /** A communicator's ranks: one barrier stage attempt, the n-th rendezvous of its tasks. */
  public record GroupKey(int stageId, int stageAttempt, int group) {}

  /** {@code slot.rank()}'s blob for {@code slot.round()}; {@code timeoutMs} bounds how long the driver keeps it. */
  public record Deposit(Slot slot, byte[] blob, long timeoutMs) {
    @Override public String toString() { return "Deposit(" + slot + ", " + blob.length + " bytes)"; }
  }

  /** Is {@code slot.round()} complete? */
  public record Poll(Slot slot) {}

  /** {@code slot.rank()} gives up on its group (timed out, failed, killed) for {@code reason}. */
  public record Abort(Slot slot, String reason) {}

  /**
   * {@link #UNVERIFIED}: the driver has not yet learned (from its SparkListener) which task runs the
   * rank's partition, so it kept nothing; the rank sends its deposit again.
   */
  public enum Status { PENDING, DONE, FAILED, UNVERIFIED }

  /**
   * The driver's answer: {@link Status#DONE} with {@code blobs} by rank; {@link Status#PENDING} with
   * the {@code missing} ranks; {@link Status#FAILED} with a {@code message} that says why;
   * {@link Status#UNVERIFIED} with a message naming what the driver waits to learn.
   */
  public record Reply(Status status, byte[][] blobs, int[] missing, String message) {
    public static Reply done(byte[][] blobs) { return new Reply(Status.DONE, blobs, new int[0], ""); }

    public static Reply pending(int[] missing) { return new Reply(Status.PENDING, null, missing, ""); }

    public static Reply failed(String message) { return new Reply(Status.FAILED, null, new int[0], message); }

    public static Reply unverified(String message) { return new Reply(Status.UNVERIFIED, null, new int[0], message); }

    @Override public String toString() {
      return status + (status == Status.PENDING ? " missing " + Arrays.toString(missing) : "")
          + (message.isEmpty() ? "" : ": " + message);
    }
  }
}
