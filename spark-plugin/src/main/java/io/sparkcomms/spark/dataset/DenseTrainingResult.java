package io.sparkcomms.spark.dataset;

import java.io.Serializable;

/**
 * What {@link DenseClassifierTrainer#fit} returns (rank 0's view; the parameters are equal on every
 * rank): the trained parameters, every step's loss, where the math ran, and what a step cost.
 *
 * @param params the parameters, {@link DenseClassifier}'s layout
 * @param stepLosses rank 0's batch loss of every step, in order
 * @param stepsPerEpoch steps of each epoch
 * @param backend the communicator's backend ("host" or "gpu")
 * @param math where the model lived ({@link io.sparkcomms.collectives.math.DenseMath#description()})
 * @param worstStepTransfers the host transfers of the step that made the most
 * @param lossOnlyPerStep whether every step's one host transfer was its 4-byte loss
 * @param stagedCalls collectives whose tensors went through host staging (GPU backend; 0 otherwise)
 * @param stepMicros mean time of a step
 * @param computeOnlyMicros mean time of the same step without its allReduce
 */
public record DenseTrainingResult(float[] params, float[] stepLosses, int stepsPerEpoch, String backend, String math,
    String worstStepTransfers, boolean lossOnlyPerStep, long stagedCalls, double stepMicros, double computeOnlyMicros)
    implements Serializable {
  /** Mean of rank 0's step losses of each epoch. */
  public double[] lossPerEpoch() {
    int epochs = stepLosses.length / Math.max(1, stepsPerEpoch);
    double[] out = new double[epochs];
    for (int e = 0; e < epochs; e++) {
      double s = 0;
      for (int k = 0; k < stepsPerEpoch; k++) s += stepLosses[e * stepsPerEpoch + k];
      out[e] = s / stepsPerEpoch;
    }
    return out;
  }
}
