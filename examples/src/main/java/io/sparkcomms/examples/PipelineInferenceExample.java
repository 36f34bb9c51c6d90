package io.sparkcomms.examples;

import io.sparkcomms.collectives.BatchSendRecv;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.examples.models.MlpModel;
import io.sparkcomms.spark.dataset.BarrierDatasets;
import io.sparkcomms.spark.dataset.BarrierOptions;
import io.sparkcomms.spark.dataset.DenseLayer;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;

/**
 * Example: pipeline-parallel batch inference with point-to-point transfers. The MLP's layers are cut
 * into consecutive stages, one per task of the barrier stage (4 by default), as a model too large
 * for one executor would be; rows enter at the first stage and leave at the last:
 * <ol>
 *   <li>every task sends its partition's rows to the first stage (its row count, then the ids and
 *       features: {@code send}/{@code recv}; the first stage receives from every task in one
 *       {@link BatchSendRecv});</li>
 *   <li>the first stage cuts the rows into micro-batches; each later stage receives a micro-batch's
 *       activations from the stage before ({@code recv}), applies its layers and sends the result on
 *       ({@code send}), so that once the pipeline is full every stage computes at the same time, each
 *       on another micro-batch;</li>
 *   <li>the last stage sends every task the outputs of its own rows (one batch with every task), so the
 *       rows come back in the partitions they came from.</li>
 * </ol>
 * The driver checks every output against single-rank inference of the same model and prints each
 * stage's time computing and time in transfers.
 *
 * <pre>bin/sparkcomms-example infer-pipeline [--rows 4000] [--widths 128,256,256,256,16] [--micro-batch 64]</pre>
 */
public final class PipelineInferenceExample {
  static final String USAGE = "usage: bin/sparkcomms-example infer-pipeline [--master URL (default local-cluster[4,1,1024])]"
      + " [--rows 4000] [--widths 128,256,256,256,16 (at least one layer per stage)]"
      + " [--ranks N (pipeline stages; default: every task slot)] [--micro-batch 64 (rows per micro-batch)]";

  private PipelineInferenceExample() {}

  /** One scored row, in the partition it came from. */
  record Scored(int id, float[] x, float[] y) implements Serializable {}

  /** What one stage did: its layers, micro-batches, and time computing vs in transfers. */
  record StageReport(int rank, int firstLayer, int layers, int microBatches, long computeNanos, long transferNanos) implements Serializable {}

  /** Runs the example with {@code --key value} options ({@link #USAGE}); exit status 0 on a match. */
  public static void main(String[] args) {
    ExampleArgs a = new ExampleArgs(USAGE, args, "rows", "widths", "ranks", "micro-batch").requirePositive("rows", "ranks", "micro-batch");
    String[] w = a.get("widths", "128,256,256,256,16").split(",");
    int[] widths = new int[w.length];
    for (int i = 0; i < w.length; i++) widths[i] = Integer.parseInt(w[i].trim());
    if (widths.length < 2) throw ExampleArgs.usageError("--widths needs at least two numbers (one layer)");
    int given = a.getInt("ranks", 0);
    if (given > widths.length - 1) {
      throw ExampleArgs.usageError("--ranks " + given + " is more stages than the " + (widths.length - 1) + " layers of --widths");
    }
    SparkSession spark = ExampleArgs.session("sparkcomms-infer-pipeline");
    int status;
    try {
      int ranks = given > 0 ? given : ExampleArgs.slots(spark);
      if (ranks > widths.length - 1) {
        System.err.println("sparkcomms-example: the application's " + ranks + " task slots are more pipeline stages than the "
            + (widths.length - 1) + " layers of --widths (pass --ranks or more layers; -h for the options)");
        status = 2;
      } else {
        status = run(spark, a.getInt("rows", 4000), widths, ranks, a.getInt("micro-batch", 64));
      }
    } finally {
      spark.stop();
    }
    System.exit(status);
  }

  /** Layers [first, first+count) of stage {@code s} of {@code stages} for {@code layers} layers (consecutive, near-equal). */
  static int firstLayer(int s, int stages, int layers) { return (int) ((long) s * layers / stages); }

  /** {@code rows} inputs (row-major, {@code layers.get(from).inputs()} wide) through layers [from, to), float32 as {@link MlpModel#forward}. */
  static float[] forward(List<DenseLayer> layers, float[][] w, int from, int to, float[] a, int rows) {
    for (int li = from; li < to; li++) {
      DenseLayer l = layers.get(li);
      int in = l.inputs(), out = l.outputs();
      float[] bias = l.bias();
      float[] y = new float[rows * out];
      for (int r = 0; r < rows; r++) {
        for (int o = 0; o < out; o++) {
          float s = 0;
          int base = o * in;
          for (int i = 0; i < in; i++) s += w[li][base + i] * a[r * in + i];
          y[r * out + o] = l.activation().apply(s + bias[o]);
        }
      }
      a = y;
    }
    return a;
  }

  /** Runs the example; 0 when every output matches single-rank inference. */
  public static int run(SparkSession spark, int rows, int[] widths, int ranks, int micro) {
    MlpModel model = MlpModel.random(23, DenseLayer.Activation.IDENTITY, widths);
    List<DenseLayer> layers = model.layers();
    Dataset<Row> data = spark.range(rows).repartition(ranks)
        .selectExpr("CAST(id AS INT) AS id",
            "transform(sequence(1, " + widths[0] + "), j -> CAST(cos(id * 0.29 + j * 0.7) AS FLOAT)) AS features")
        .cache();
    long count = data.count();
    int w0 = widths[0], wOut = widths[widths.length - 1];

    long t0 = System.nanoTime();
    List<Object> out = BarrierDatasets.mapPartitions(data.javaRDD(), (comm, it) -> {
      int s = comm.rank(), n = comm.size(), last = n - 1;
      int from = firstLayer(s, n, layers.size()), to = firstLayer(s + 1, n, layers.size());
      float[][] w = new float[layers.size()][];
      for (int li = from; li < to; li++) w[li] = layers.get(li).weights();
      List<Row> mine = new ArrayList<>();
      it.forEachRemaining(mine::add);
      int[] ids = new int[mine.size()];
      float[] x = new float[mine.size() * w0];
      for (int k = 0; k < mine.size(); k++) {
        ids[k] = mine.get(k).getInt(0);
        List<Float> f = mine.get(k).getList(1);
        for (int j = 0; j < w0; j++) x[k * w0 + j] = f.get(j);
      }
      long compute = 0, transfer = 0, t = System.nanoTime();

      // 1. every task's rows to the first stage: the counts, then the features, rank order
      long[] counts = new long[n];
      counts[s] = mine.size();
      float[] all = null;
      if (s == 0) {
        BatchSendRecv b = comm.batch();
        long[][] got = new long[n][1];
        for (int q = 1; q < n; q++) b.recv(HostTensor.of(got[q]), q);
        b.issue().waitFor();
        for (int q = 1; q < n; q++) counts[q] = got[q][0];
        long total = Arrays.stream(counts).sum();
        all = new float[Math.toIntExact(total * w0)];
        System.arraycopy(x, 0, all, 0, x.length);
        b = comm.batch();
        int at = x.length;
        List<float[]> parts = new ArrayList<>();
        for (int q = 1; q < n; q++) {
          float[] p = new float[Math.toIntExact(counts[q] * w0)];
          parts.add(p);
          if (p.length > 0) b.recv(HostTensor.of(p), q);
        }
        b.issue().waitFor();
        for (float[] p : parts) {
          System.arraycopy(p, 0, all, at, p.length);
          at += p.length;
        }
      } else {
        comm.send(HostTensor.of(new long[] {mine.size()}), 0);
        if (x.length > 0) comm.send(HostTensor.of(x), 0);
      }
      comm.broadcast(HostTensor.of(counts), 0);  // every stage learns every task's row count
      long total = Arrays.stream(counts).sum();
      transfer += System.nanoTime() - t;

      // 2. micro-batches through the stages
      int batches = (int) ((total + micro - 1) / micro);
      float[] outputs = s == last ? new float[Math.toIntExact(total * wOut)] : null;
      for (int j = 0; j < batches; j++) {
        int r = (int) Math.min(micro, total - (long) j * micro);
        float[] act;
        t = System.nanoTime();
        if (s == 0) {
          act = Arrays.copyOfRange(all, j * micro * w0, (j * micro + r) * w0);
        } else {
          act = new float[r * widths[from]];
          comm.recv(HostTensor.of(act), s - 1);
          transfer += System.nanoTime() - t;
          t = System.nanoTime();
        }
        float[] y = forward(layers, w, from, to, act, r);
        compute += System.nanoTime() - t;
        if (s < last) {
          t = System.nanoTime();
          comm.send(HostTensor.of(y), s + 1);
          transfer += System.nanoTime() - t;
        } else {
          System.arraycopy(y, 0, outputs, j * micro * wOut, y.length);
        }
      }

      // 3. the last stage returns every task's outputs (rows in the first stage's order: task by task)
      t = System.nanoTime();
      float[] ys = new float[mine.size() * wOut];
      if (s == last) {
        BatchSendRecv b = comm.batch();
        long at = 0;
        for (int q = 0; q < n; q++) {
          float[] part = Arrays.copyOfRange(outputs, (int) (at * wOut), (int) ((at + counts[q]) * wOut));
          at += counts[q];
          if (q == s) ys = part;
          else if (part.length > 0) b.send(HostTensor.of(part), q);
        }
        b.issue().waitFor();
      } else if (ys.length > 0) {
        comm.recv(HostTensor.of(ys), last);
      }
      transfer += System.nanoTime() - t;

      List<Object> result = new ArrayList<>();
      for (int k = 0; k < mine.size(); k++) {
        result.add(new Scored(ids[k], Arrays.copyOfRange(x, k * w0, (k + 1) * w0), Arrays.copyOfRange(ys, k * wOut, (k + 1) * wOut)));
      }
      result.add(new StageReport(s, from, to - from, batches, compute, transfer));
      return result.iterator();
    }, BarrierOptions.defaults().ranks(ranks)).collect();
    double seconds = (System.nanoTime() - t0) / 1e9;

    double err = 0, maxRef = 0;
    long scored = 0;
    List<StageReport> stages = new ArrayList<>();
    java.util.Set<Integer> seen = new java.util.HashSet<>();
    for (Object o : out) {
      if (o instanceof StageReport r) {
        stages.add(r);
        continue;
      }
      Scored sc = (Scored) o;
      scored++;
      seen.add(sc.id());
      float[] ref = model.forward(sc.x());
      for (int j = 0; j < ref.length; j++) {
        err = Math.max(err, Math.abs(ref[j] - sc.y()[j]));
        maxRef = Math.max(maxRef, Math.abs(ref[j]));
      }
    }
    stages.sort(java.util.Comparator.comparingInt(StageReport::rank));
    boolean ok = scored == count && seen.size() == count && stages.size() == ranks && err <= 1e-5 * Math.max(1, maxRef);
    System.out.printf("pipeline-parallel inference: MLP %s (%,d parameters, %d layers) in %d stages, micro-batches of %d rows%n",
        Arrays.toString(widths), model.parameterCount(), layers.size(), ranks, micro);
    for (StageReport r : stages) {
      System.out.printf("stage %d (task %d): layers %d-%d, %d micro-batches, compute %.1f ms, in send/recv %.1f ms%n", r.rank(), r.rank(),
          r.firstLayer(), r.firstLayer() + r.layers() - 1, r.microBatches(), r.computeNanos() / 1e6, r.transferNanos() / 1e6);
    }
    System.out.printf("rows %d of %d scored, back in their partitions; max |pipeline - single-rank| = %.3g%n", scored, count, err);
    System.out.printf("time: the stage %.2f s (Spark job and communicator setup included)%n", seconds);
    System.out.println(ok ? "MATCH" : "MISMATCH");
    data.unpersist();
    return ok ? 0 : 1;
  }
}
