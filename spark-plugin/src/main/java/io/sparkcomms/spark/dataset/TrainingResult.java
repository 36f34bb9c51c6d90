package io.sparkcomms.spark.dataset;

import java.io.Serializable;
import java.util.Map;

/** What {@link DataParallelTrainer#fit} returns: final parameters, loss of every epoch, how it ran. */
public final class TrainingResult implements Serializable {
  private static final long serialVersionUID = 1L;
  private final float[] params;
  private final double[] lossPerEpoch;
  private final int resumedFromEpoch;
  private final int ranks;
  private final String backend;
  private final Map<String, Long> callsByProtocol;
  private final long trainNanos;

  TrainingResult(float[] params, double[] lossPerEpoch, int resumedFromEpoch, int ranks, String backend,
      Map<String, Long> callsByProtocol, long trainNanos) {
    this.params = params;
    this.lossPerEpoch = lossPerEpoch;
    this.resumedFromEpoch = resumedFromEpoch;
    this.ranks = ranks;
    this.backend = backend;
    this.callsByProtocol = callsByProtocol;
    this.trainNanos = trainNanos;
  }

  /** The trained parameters. */
  public float[] params() { return params.clone(); }

  /** Mean training loss of every epoch, the ones restored from a checkpoint included. */
  public double[] lossPerEpoch() { return lossPerEpoch.clone(); }

  /** Epochs restored from a checkpoint (0: trained from the initial parameters). */
  public int resumedFromEpoch() { return resumedFromEpoch; }

  public int ranks() { return ranks; }

  /** The communicator backend ("host" or "gpu"). */
  public String backend() { return backend; }

  /** Collective calls of rank 0 per protocol that ran (FLAT, TREE, LP, ...), this run only. */
  public Map<String, Long> callsByProtocol() { return callsByProtocol; }

  /** Time in the barrier task of rank 0 (training loop, checkpoints included). */
  public long trainNanos() { return trainNanos; }

  @Override public String toString() {
    return "TrainingResult{epochs=" + lossPerEpoch.length + ", resumedFrom=" + resumedFromEpoch + ", ranks=" + ranks
        + ", backend=" + backend + ", calls=" + callsByProtocol + ", finalLoss="
        + (lossPerEpoch.length == 0 ? "n/a" : lossPerEpoch[lossPerEpoch.length - 1]) + "}";
  }
}
