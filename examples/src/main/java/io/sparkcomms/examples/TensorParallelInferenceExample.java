package io.sparkcomms.examples;

import io.sparkcomms.examples.models.MlpModel;
import io.sparkcomms.spark.dataset.BarrierOptions;
import io.sparkcomms.spark.dataset.DenseLayer;
import io.sparkcomms.spark.dataset.TensorParallelInference;
import java.util.List;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;

/**
 * Example (b): tensor-parallel batch inference of an MLP over a Dataset. The model (random weights
 * from a seed, 256-1024-1024-16 by default, ReLU) is split across the ranks Megatron-style (first
 * layer by output rows, second by input columns, ...), every batch is shared by the group through
 * allGather and partial outputs are summed by allReduce. The outputs are checked against
 * single-rank inference of the whole model on the driver.
 *
 * <pre>bin/sparkcomms-example infer [--rows 4000] [--widths 256,1024,1024,16] [--batch 32] [--ranks N] [--split alternating]</pre>
 */
public final class TensorParallelInferenceExample {
  static final String USAGE = "usage: bin/sparkcomms-example infer [--master URL (default local-cluster[2,1,1024])] [--rows 4000] [--widths 256,1024,1024,16]"
      + " [--batch 32] [--ranks N (default: every task slot)] [--split alternating|rows|columns]";

  public static void main(String[] args) {
    ExampleArgs a = new ExampleArgs(USAGE, args, "rows", "widths", "batch", "ranks", "split")
        .requirePositive("rows", "batch", "ranks");
    SparkSession spark = ExampleArgs.session("sparkcomms-infer");
    int status;
    try {
      String[] w = a.get("widths", "256,1024,1024,16").split(",");
      int[] widths = new int[w.length];
      for (int i = 0; i < w.length; i++) widths[i] = Integer.parseInt(w[i].trim());
      status = run(spark, a.getInt("rows", 4000), widths, a.getInt("batch", 32), a.getInt("ranks", ExampleArgs.slots(spark)),
          TensorParallelInference.Split.valueOf(a.get("split", "alternating").toUpperCase(java.util.Locale.ROOT)));
    } finally {
      spark.stop();
    }
    System.exit(status);
  }

  /** Runs the example; 0 when every output matches single-rank inference. */
  public static int run(SparkSession spark, int rows, int[] widths, int batch, int ranks, TensorParallelInference.Split split) {
    MlpModel model = MlpModel.random(17, DenseLayer.Activation.IDENTITY, widths);
    Dataset<Row> data = spark.range(rows).repartition(ranks)
        .selectExpr("CAST(id AS INT) AS id",
            "transform(sequence(1, " + widths[0] + "), j -> CAST(sin(id * 0.37 + j * 1.3) AS FLOAT)) AS features")
        .cache();
    data.count();
    TensorParallelInference tp = new TensorParallelInference(model).featuresCol("features").outputCol("scores")
        .batchSize(batch).split(split).barrierOptions(BarrierOptions.defaults().ranks(ranks));
    long t0 = System.nanoTime();
    List<Row> out = tp.transform(data).collectAsList();
    double tpSeconds = (System.nanoTime() - t0) / 1e9;
    long t1 = System.nanoTime();
    double maxErr = 0;
    double maxRef = 0;
    for (Row r : out) {
      List<Object> f = r.getList(1);
      float[] x = new float[f.size()];
      for (int j = 0; j < x.length; j++) x[j] = (Float) f.get(j);
      float[] ref = model.forward(x);
      List<Object> y = r.getList(2);
      for (int j = 0; j < ref.length; j++) {
        maxErr = Math.max(maxErr, Math.abs(ref[j] - (Float) y.get(j)));
        maxRef = Math.max(maxRef, Math.abs(ref[j]));
      }
    }
    double refSeconds = (System.nanoTime() - t1) / 1e9;
    boolean ok = out.size() == rows && maxErr <= 1e-4 * Math.max(1, maxRef);
    System.out.printf("tensor-parallel MLP inference: widths %s (%,d parameters), %s split over %d ranks, batch %d rows per rank%n",
        java.util.Arrays.toString(widths), model.parameterCount(), split.name().toLowerCase(java.util.Locale.ROOT), ranks, batch);
    System.out.printf("rows %d  time %.2f s (Spark job, communicator setup included)  single-rank reference on the driver %.2f s%n",
        out.size(), tpSeconds, refSeconds);
    System.out.printf("max |tensor-parallel - single-rank| = %.3g (largest output %.3g): %s%n", maxErr, maxRef,
        ok ? "MATCH" : "MISMATCH");
    data.unpersist();
    return ok ? 0 : 1;
  }
}
