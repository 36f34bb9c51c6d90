package io.sparkcomms.spark.dataset;

import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.math.Activation;
import io.sparkcomms.collectives.math.DenseMath;
import io.sparkcomms.collectives.math.Matrix;
import java.util.ArrayList;
import java.util.List;

/**
 * One rank's shards of a network of {@link DenseLayer}s split Megatron-style over a tensor-parallel
 * group, and the split forward pass, in one {@link DenseMath}'s memory (on a GPU: weights,
 * activations and partial outputs stay on the device, reduced there): what
 * {@link TensorParallelInference} runs for {@link TensorParallelInference.Split#ALTERNATING}. No
 * Spark class is involved, so code without Spark can run it too. Layers alternate: an even layer is split by output rows
 * (each rank computes its slice of the outputs from the whole input), the odd layer after it by input
 * columns (each rank multiplies the slice it holds, and one allReduce SUM adds the partial products),
 * so two layers cost one allReduce. A model whose last layer is a row-split one ends with an
 * allGather of the slices.
 *
 * <p>Slices are {@code ceil(width / ranks)} wide on every rank, the last ones padded with zero
 * weights (so every rank's matrices and the allGather blocks have one shape); a padded output
 * column is never read as a result, and the column-split layer after it has zero weights for it.
 */
public final class DenseShards {
  private final DenseMath math;
  private final int rank;
  private final int ranks;
  private final int rowsPerStep;
  private final List<Shard> shards = new ArrayList<>();
  private final int outputs;
  private final Matrix local;      // [batch][in]: this rank's rows of one step
  private final Matrix input;      // [ranks * batch][in]: the group's rows of one step
  private final Matrix gathered;   // [ranks][ranks * batch][slice]: last row-split layer's slices, or null

  private record Shard(boolean rowSplit, int lo, int hi, int width, Matrix w, Matrix b, Activation act, Matrix out) {}

  /**
   * @param batch rows per rank per step: the group's step runs {@code ranks * batch} rows
   */
  public DenseShards(DenseMath math, List<DenseLayer> ls, int rank, int ranks, int batch) {
    if (ranks < 1 || rank < 0 || rank >= ranks) throw new IllegalArgumentException("rank " + rank + " of " + ranks);
    if (batch < 1) throw new IllegalArgumentException("batch must be >= 1, got " + batch);
    this.math = math;
    this.rank = rank;
    this.ranks = ranks;
    this.rowsPerStep = Math.toIntExact((long) ranks * batch);
    if (ls.isEmpty()) throw new IllegalArgumentException("a network needs at least one layer");
    for (int i = 0; i < ls.size(); i++) {
      DenseLayer l = ls.get(i);
      Activation act = l.activation().math();
      float[] wf = l.weights(), bf = l.bias();
      int in = l.inputs(), out = l.outputs();
      Math.toIntExact((long) rowsPerStep * Math.max(in, out) * ranks);   // every buffer below fits an int index
      if (i % 2 == 0) {                                   // by output rows: rows [lo, hi) of W, padded to `width` rows
        int width = ceilDiv(out, ranks), lo = Math.min(out, rank * width), hi = Math.min(out, lo + width);
        float[] w = new float[width * in], b = new float[width];
        System.arraycopy(wf, lo * in, w, 0, (hi - lo) * in);
        System.arraycopy(bf, lo, b, 0, hi - lo);
        shards.add(new Shard(true, lo, hi, width, math.upload(w, width, in), math.upload(b, 1, width), act,
            math.zeros(rowsPerStep, width)));
      } else {                                            // by input columns: the previous layer's slice, same padding
        int width = ceilDiv(in, ranks), lo = Math.min(in, rank * width), hi = Math.min(in, lo + width);
        float[] w = new float[out * width];
        for (int o = 0; o < out; o++) System.arraycopy(wf, o * in + lo, w, o * width, hi - lo);
        shards.add(new Shard(false, lo, hi, width, math.upload(w, out, width), math.upload(bf, 1, out), act,
            math.zeros(rowsPerStep, out)));
      }
    }
    outputs = ls.get(ls.size() - 1).outputs();
    local = math.zeros(batch, ls.get(0).inputs());
    input = math.zeros(rowsPerStep, ls.get(0).inputs());
    Shard last = shards.get(shards.size() - 1);
    gathered = last.rowSplit() ? math.zeros(ranks * rowsPerStep, last.width()) : null;
  }

  private static int ceilDiv(int a, int b) { return (a + b - 1) / b; }

  /**
   * One step of the group: this rank's {@code batch} rows ({@code localRows}, row-major, zero-padded
   * by the caller when it has fewer) go up (the step's one upload) and are allGathered with the
   * group's, every layer runs on the shards over {@code group}, and the outputs of all the step's
   * rows, {@code [ranks * batch][outputs]} row-major, come back (its one download); rank q's rows
   * are rows {@code q * batch ..}. Collective over {@code group}.
   */
  public float[] step(Communicator group, float[] localRows) {
    math.upload(localRows, local);
    group.allGather(local.tensor(), input.tensor());
    Matrix x = input;
    for (Shard s : shards) {
      math.gemm(1f, x, false, s.w(), true, 0f, s.out());
      if (s.rowSplit()) {
        math.biasActivation(s.out(), s.b(), s.act());
      } else {
        group.allReduce(s.out().tensor(), ReduceOp.SUM);
        math.biasActivation(s.out(), s.b(), s.act());
      }
      x = s.out();
    }
    Shard last = shards.get(shards.size() - 1);
    if (!last.rowSplit()) return math.download(last.out());
    group.allGather(last.out().tensor(), gathered.tensor());
    float[] g = math.download(gathered);
    float[] y = new float[rowsPerStep * outputs];
    int width = last.width();
    for (int q = 0; q < ranks; q++) {
      int lo = Math.min(outputs, q * width), hi = Math.min(outputs, lo + width);
      for (int r = 0; r < rowsPerStep; r++) {
        System.arraycopy(g, (q * rowsPerStep + r) * width, y, r * outputs + lo, hi - lo);
      }
    }
    return y;
  }

  public int rank() { return rank; }

  /** Weights and biases this rank holds (zero padding included). */
  public long shardParameters() {
    long n = 0;
    for (Shard s : shards) n += s.w().count() + s.b().count();
    return n;
  }
}
