package io.sparkcomms.examples;

import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.examples.models.MlpModel;
import io.sparkcomms.spark.BarrierComms;
import io.sparkcomms.spark.dataset.BarrierDatasets;
import io.sparkcomms.spark.dataset.BarrierOptions;
import io.sparkcomms.spark.dataset.DenseLayer;
import io.sparkcomms.spark.dataset.TensorParallelInference;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.broadcast.Broadcast;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;

/**
 * Example: tensor-parallel groups inside a data-parallel job. The barrier stage's N tasks (4 by
 * default) form N/g groups of g (2 by default): each group holds the MLP split g ways and runs
 * tensor-parallel inference of its members' rows on its own communicator, a child of the stage's
 * made by {@link BarrierComms#split(int[])}; after every chunk of rows, between the groups' calls,
 * all N tasks allReduce a data-parallel accumulator on the stage's communicator (rows processed
 * and the sum of the outputs). The driver checks each group's outputs and the accumulator every
 * task saw against single-rank inference of the same model, then runs the same inference through
 * {@link TensorParallelInference#groupSize(int)}, the one-line form when no call across groups is
 * needed.
 *
 * <pre>bin/sparkcomms-example infer-groups [--rows 4000] [--widths 128,512,512,16] [--group 2] [--batch 32] [--chunk 500]</pre>
 */
public final class TensorParallelGroupsExample {
  static final String USAGE = "usage: bin/sparkcomms-example infer-groups [--master URL (default local-cluster[4,1,1024])]"
      + " [--rows 4000] [--widths 128,512,512,16] [--group 2 (tasks per tensor-parallel group)]"
      + " [--ranks N (default: every task slot; a multiple of --group)] [--batch 32 (rows per task per step)]"
      + " [--chunk 500 (rows per task between two allReduces across groups)] [--split alternating|rows|columns]";

  private TensorParallelGroupsExample() {}

  /** One scored row: its id, features, outputs and the group that computed it. */
  record Scored(int group, int id, float[] x, float[] y) implements Serializable {}

  /** What one task saw: its group's rows (allReduce in the group) and the accumulator across groups. */
  record Seen(int rank, int group, long groupRows, long totalRows, double[] outputSum) implements Serializable {}

  /** Runs the example with {@code --key value} options ({@link #USAGE}); exit status 0 on a match. */
  public static void main(String[] args) {
    ExampleArgs a = new ExampleArgs(USAGE, args, "rows", "widths", "group", "ranks", "batch", "chunk", "split")
        .requirePositive("rows", "group", "ranks", "batch", "chunk");
    String[] w = a.get("widths", "128,512,512,16").split(",");
    int[] widths = new int[w.length];
    for (int i = 0; i < w.length; i++) widths[i] = Integer.parseInt(w[i].trim());
    TensorParallelInference.Split split = TensorParallelInference.Split.valueOf(a.get("split", "alternating").toUpperCase(Locale.ROOT));
    int group = a.getInt("group", 2);
    int given = a.getInt("ranks", 0);
    if (given > 0 && given % group != 0) {
      throw ExampleArgs.usageError("--group " + group + " does not divide --ranks " + given);   // before Spark starts
    }
    SparkSession spark = ExampleArgs.session("sparkcomms-infer-groups");
    int status;
    try {
      int ranks = given > 0 ? given : ExampleArgs.slots(spark);
      if (ranks % group != 0) {
        System.err.println("sparkcomms-example: --group " + group + " does not divide the application's " + ranks
            + " task slots (-h for the options)");
        status = 2;
      } else {
        status = run(spark, a.getInt("rows", 4000), widths, group, ranks, a.getInt("batch", 32), a.getInt("chunk", 500), split);
      }
    } finally {
      spark.stop();
    }
    System.exit(status);
  }

  /** Runs the example; 0 when every output and the accumulator match single-rank inference. */
  public static int run(SparkSession spark, int rows, int[] widths, int g, int ranks, int batch, int chunk,
      TensorParallelInference.Split split) {
    MlpModel model = MlpModel.random(17, DenseLayer.Activation.IDENTITY, widths);
    Dataset<Row> data = spark.range(rows).repartition(ranks)
        .selectExpr("CAST(id AS INT) AS id",
            "transform(sequence(1, " + widths[0] + "), j -> CAST(sin(id * 0.37 + j * 1.3) AS FLOAT)) AS features")
        .cache();
    long count = data.count();
    TensorParallelInference tp = new TensorParallelInference(model).featuresCol("features").outputCol("scores")
        .batchSize(batch).split(split);
    Broadcast<TensorParallelInference> bc = JavaSparkContext.fromSparkContext(spark.sparkContext()).broadcast(tp);

    long t0 = System.nanoTime();
    List<Object> out = BarrierDatasets.mapPartitions(data.javaRDD(), (comm, it) -> {
      int rank = comm.rank();
      // every task makes the same splits in the same order: one per group, by rank list
      Communicator mine = null;
      for (int k = 0; k < comm.size() / g; k++) {
        int[] members = new int[g];
        for (int i = 0; i < g; i++) members[i] = k * g + i;
        Communicator c = BarrierComms.split(members);
        if (c != null) mine = c;
      }
      List<Row> in = new ArrayList<>();
      it.forEachRemaining(in::add);
      long[] chunks = {(in.size() + chunk - 1) / chunk};
      comm.allReduce(HostTensor.of(chunks), ReduceOp.MAX);         // all tasks, all groups: the same chunk count
      int outW = widths[widths.length - 1];
      double[] total = new double[1 + outW];                        // rows, then the sum of each output
      List<Object> result = new ArrayList<>();
      for (int c = 0; c < chunks[0]; c++) {
        List<float[]> xs = new ArrayList<>();
        List<Integer> ids = new ArrayList<>();
        for (int k = c * chunk; k < Math.min(in.size(), (c + 1) * chunk); k++) {
          List<Float> f = in.get(k).getList(1);
          float[] x = new float[f.size()];
          for (int j = 0; j < x.length; j++) x[j] = f.get(j);
          xs.add(x);
          ids.add(in.get(k).getInt(0));
        }
        List<float[]> ys = bc.value().infer(mine, xs);              // tensor-parallel, on the group's communicator
        double[] acc = new double[1 + outW];
        acc[0] = ys.size();
        for (float[] y : ys) for (int j = 0; j < outW; j++) acc[1 + j] += y[j];
        comm.allReduce(HostTensor.of(acc), ReduceOp.SUM);           // data-parallel, on the stage's communicator
        for (int j = 0; j < acc.length; j++) total[j] += acc[j];
        for (int k = 0; k < ys.size(); k++) result.add(new Scored(rank / g, ids.get(k), xs.get(k), ys.get(k)));
      }
      long[] groupRows = {in.size()};
      mine.allReduce(HostTensor.of(groupRows), ReduceOp.SUM);
      result.add(new Seen(rank, rank / g, groupRows[0], (long) total[0], Arrays.copyOfRange(total, 1, total.length)));
      return result.iterator();
    }, BarrierOptions.defaults().ranks(ranks)).collect();
    double stageSeconds = (System.nanoTime() - t0) / 1e9;

    int groups = ranks / g;
    long[] rowsOf = new long[groups];
    double[] errOf = new double[groups];
    double maxRef = 0;
    double[] refSum = new double[model.outputs()];
    Map<Integer, float[]> ref = new HashMap<>();
    List<Seen> seen = new ArrayList<>();
    for (Object o : out) {
      if (o instanceof Seen s) {
        seen.add(s);
        continue;
      }
      Scored s = (Scored) o;
      float[] r = model.forward(s.x());
      ref.put(s.id(), r);
      rowsOf[s.group()]++;
      for (int j = 0; j < r.length; j++) {
        errOf[s.group()] = Math.max(errOf[s.group()], Math.abs(r[j] - s.y()[j]));
        maxRef = Math.max(maxRef, Math.abs(r[j]));
        refSum[j] += r[j];
      }
    }
    double tol = 1e-4 * Math.max(1, maxRef);
    boolean ok = ref.size() == count && seen.size() == ranks;

    System.out.printf("tensor-parallel groups: MLP %s (%,d parameters), %d tasks = %d groups of %d, %s split in each group,"
        + " batch %d rows per task, chunks of %d rows per task%n", Arrays.toString(widths), model.parameterCount(), ranks, groups, g,
        split.name().toLowerCase(Locale.ROOT), batch, chunk);
    for (int k = 0; k < groups; k++) {
      boolean groupOk = errOf[k] <= tol;
      for (Seen s : seen) if (s.group() == k && s.groupRows() != rowsOf[k]) groupOk = false;
      ok &= groupOk;
      System.out.printf("group %d (tasks %d-%d, BarrierComms.split by rank list): rows %d  max |tensor-parallel - single-rank| = %.3g%s%n",
          k, k * g, k * g + g - 1, rowsOf[k], errOf[k], groupOk ? "" : "  MISMATCH");
    }
    double sumErr = 0;
    boolean sameEverywhere = true;
    for (Seen s : seen) {
      sameEverywhere &= s.totalRows() == count && Arrays.equals(s.outputSum(), seen.get(0).outputSum());
      for (int j = 0; j < refSum.length; j++) sumErr = Math.max(sumErr, Math.abs(s.outputSum()[j] - refSum[j]));
    }
    boolean sumOk = sameEverywhere && sumErr <= tol * count;
    ok &= sumOk;
    System.out.printf("across groups (allReduce over all %d tasks after each chunk): every task saw rows %d (input %d)%s,"
        + " sum of the %d outputs off single-rank by at most %.3g%s%n", ranks, seen.isEmpty() ? -1 : seen.get(0).totalRows(), count,
        sameEverywhere ? "" : " NOT on every task", refSum.length, sumErr, sumOk ? "" : "  MISMATCH");

    long t1 = System.nanoTime();
    List<Row> direct = new TensorParallelInference(model).featuresCol("features").outputCol("scores").batchSize(batch).split(split)
        .groupSize(g).barrierOptions(BarrierOptions.defaults().ranks(ranks)).transform(data).collectAsList();
    double transformSeconds = (System.nanoTime() - t1) / 1e9;
    double directErr = 0;
    boolean allKnown = true;
    for (Row r : direct) {
      float[] e = ref.get(r.getInt(0));
      if (e == null) {
        allKnown = false;
        continue;
      }
      List<Float> y = r.getList(2);
      for (int j = 0; j < e.length; j++) directErr = Math.max(directErr, Math.abs(e[j] - y.get(j)));
    }
    boolean directOk = allKnown && direct.size() == count && directErr <= tol;
    ok &= directOk;
    System.out.printf("the same model through TensorParallelInference.groupSize(%d).transform: rows %d  max |... - single-rank| = %.3g%s%n",
        g, direct.size(), directErr, directOk ? "" : "  MISMATCH");
    System.out.printf("time: the stage with groups %.2f s, transform %.2f s (Spark jobs, communicator setup and splits included)%n",
        stageSeconds, transformSeconds);
    System.out.println(ok ? "MATCH" : "MISMATCH");
    data.unpersist();
    return ok ? 0 : 1;
  }
}
