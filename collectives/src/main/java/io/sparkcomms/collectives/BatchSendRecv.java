package io.sparkcomms.collectives;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;

/**
 * Sends and receives that run together (torchcomms' BatchSendRecv, an NCCL group of send/recv):
 * {@code comm.batch().send(a, 1).recv(b, 3).issue()}. The transfers with different peers run at the
 * same time, so no order of batches across ranks can deadlock; with one peer, the i-th send of a
 * rank meets the i-th recv of the other (each recv the same dtype and count as its send). A tensor
 * must not be written by two transfers of one batch. A builder is issued once; {@link #issue()}
 * returns at once, and the batch runs after this communicator's earlier calls, as an async call does.
 */
public final class BatchSendRecv {
  /** One transfer of a batch: this rank sends {@code tensor} to {@code peer}, or receives it from there. */
  public record Transfer(boolean send, Tensor tensor, int peer) {}

  private final List<Transfer> ops = new ArrayList<>();
  private final Function<List<Transfer>, Work> issuer;
  private boolean issued;

  /** A batch that {@code issuer} runs (a communicator's, or a wrapper's that adapts the tensors). */
  public BatchSendRecv(Function<List<Transfer>, Work> issuer) { this.issuer = issuer; }

  /** Adds a send of {@code tensor} to rank {@code peer}. */
  public BatchSendRecv send(Tensor tensor, int peer) {
    add(new Transfer(true, tensor, peer));
    return this;
  }

  /** Adds a receive into {@code tensor} from rank {@code peer}. */
  public BatchSendRecv recv(Tensor tensor, int peer) {
    add(new Transfer(false, tensor, peer));
    return this;
  }

  /** The transfers added so far. */
  public List<Transfer> transfers() { return List.copyOf(ops); }

  /** How many transfers were added so far. */
  public int size() { return ops.size(); }

  /**
   * Starts the transfers. A peer outside the communicator or this rank itself raises
   * {@link IllegalArgumentException} before any transfer starts; everything else is reported by the
   * returned {@link Work} (an empty batch is complete at once).
   */
  public Work issue() {
    if (issued) throw new IllegalStateException("this batch was issued already");
    issued = true;
    return issuer.apply(List.copyOf(ops));
  }

  private void add(Transfer op) {
    if (issued) throw new IllegalStateException("this batch was issued already");
    ops.add(op);
  }
}
