package io.sparkcomms.spark.rendezvous;

import java.io.Serializable;
import java.util.Arrays;

/**
 * The executor-to-driver messages of the plugin RPC rendezvous ({@link PluginRendezvous} ↔
 * {@link RendezvousRegistry}), sent with {@code PluginContext.ask} over Spark's RPC (which
 * {@code spark.authenticate} protects). Blobs are small: segment names, pids, IPC handles.
 *
 * <p>Every rank of a round sends one {@link Deposit}, then {@link Poll}s until the driver answers
 * {@link Status#DONE} with every rank's blob (or {@link Status#FAILED}). The driver never waits: a
 * round that is not complete yet is answered {@link Status#PENDING} with the ranks still missing.
 * {@link Abort} marks the whole group failed, so peers stop waiting at their next poll.
 */
public final class RendezvousProtocol {
  private RendezvousProtocol() {}

  /**
   * One rank's place in one round: the barrier stage attempt, the communicator {@code group} within
   * its tasks (the n-th rendezvous a task builds), the round (the n-th allGather), and the rank among
   * {@code size}.
   */
  public record Slot(int stageId, int stageAttempt, int group, int round, int rank, int size) implements Serializable {
    /** The group this slot belongs to (round and rank dropped). */
    GroupKey groupKey() { return new GroupKey(stageId, stageAttempt, group); }

    @Override public String toString() {
      return "stage " + stageId + " attempt " + stageAttempt + " group " + group + " round " + round + " rank " + rank
          + "/" + size;
    }
  }

  /** A communicator's ranks: one barrier stage attempt, the n-th rendezvous of its tasks. */
  public record GroupKey(int stageId, int stageAttempt, int group) implements Serializable {}

  /** {@code slot.rank()}'s blob for {@code slot.round()}; {@code timeoutMs} bounds how long the driver keeps it. */
  public record Deposit(Slot slot, byte[] blob, long timeoutMs) implements Serializable {
    @Override public String toString() { return "Deposit(" + slot + ", " + blob.length + " bytes)"; }
  }

  /** Is {@code slot.round()} complete? */
  public record Poll(Slot slot) implements Serializable {}

  /** {@code slot.rank()} gives up on its group (timed out, failed, killed) for {@code reason}. */
  public record Abort(Slot slot, String reason) implements Serializable {}

  public enum Status { PENDING, DONE, FAILED }

  /**
   * The driver's answer: {@link Status#DONE} with {@code blobs} by rank; {@link Status#PENDING} with
   * the {@code missing} ranks; {@link Status#FAILED} with a {@code message} that says why.
   */
  public record Reply(Status status, byte[][] blobs, int[] missing, String message) implements Serializable {
    public static Reply done(byte[][] blobs) { return new Reply(Status.DONE, blobs, new int[0], ""); }

    public static Reply pending(int[] missing) { return new Reply(Status.PENDING, null, missing, ""); }

    public static Reply failed(String message) { return new Reply(Status.FAILED, null, new int[0], message); }

    @Override public String toString() {
      return status + (status == Status.PENDING ? " missing " + Arrays.toString(missing) : "")
          + (message.isEmpty() ? "" : ": " + message);
    }
  }
}
