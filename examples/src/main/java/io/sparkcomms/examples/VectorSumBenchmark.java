package io.sparkcomms.examples;

import io.sparkcomms.spark.dataset.BarrierOptions;
import io.sparkcomms.spark.dataset.VectorColumns;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;

/**
 * Example (c): element-wise sum of an {@code array<float>} column through allReduce
 * ({@link VectorColumns#sum}) against Spark's {@code treeAggregate} on the same cached data, both
 * reading the rows the same way (Spark's internal rows, no boxing) and both returning a
 * {@code double[]} to the driver. Prints every timed iteration and the medians, and checks that
 * both sums agree.
 *
 * <pre>bin/sparkcomms-example vector-sum [--dim 1000000] [--rows 8] [--partitions N] [--iters 3]</pre>
 * ({@code --rows}: rows per partition). The defaults, with the script's default master for this
 * example ({@code local-cluster[4,1,1024]}, so four partitions), are the run bench/README.md quotes.
 */
public final class VectorSumBenchmark {
  static final String USAGE = "usage: bin/sparkcomms-example vector-sum [--master URL (default local-cluster[4,1,1024])]"
      + " [--dim 1000000] [--rows 8 (per partition)] [--partitions N (default: every task slot)] [--iters 3] [--depth 2]";

  /** Medians of both methods, seconds. */
  public record Result(int dim, int partitions, long rows, double allReduceSeconds, double treeAggregateSeconds,
      double maxAbsDiff, double[] allReduceTimes, double[] treeAggregateTimes, double inTaskSeconds) {}

  public static void main(String[] args) {
    ExampleArgs a = new ExampleArgs(USAGE, args, "dim", "rows", "partitions", "iters", "depth")
        .requirePositive("dim", "rows", "partitions", "iters", "depth");
    SparkSession spark = ExampleArgs.session("sparkcomms-vector-sum");
    boolean ok;
    try {
      Result r = run(spark, a.getInt("dim", 1_000_000), a.getInt("rows", 8), a.getInt("partitions", ExampleArgs.slots(spark)),
          a.getInt("iters", 3), a.getInt("depth", 2));
      ok = r.maxAbsDiff() <= 1e-6 * r.rows();
    } finally {
      spark.stop();
    }
    if (!ok) {
      System.err.println("the two sums differ");
      System.exit(1);
    }
  }

  public static Result run(SparkSession spark, int dim, int rowsPerPartition, int partitions, int iters, int depth) {
    long rows = (long) rowsPerPartition * partitions;
    Dataset<Row> data = spark.range(0, rows, 1, partitions)
        .selectExpr("transform(sequence(0, " + (dim - 1) + "), j -> CAST(((id * 7 + j) % 1000) / 8.0 AS FLOAT)) AS v")
        .cache();
    if (!(data.schema().apply("v").dataType() instanceof org.apache.spark.sql.types.ArrayType at
        && at.elementType() instanceof org.apache.spark.sql.types.FloatType)) {
      throw new IllegalStateException("expected array<float>, got " + data.schema().apply("v").dataType().simpleString());
    }
    data.count();
    BarrierOptions barrier = BarrierOptions.defaults().ranks(partitions);
    JavaRDD<InternalRow> internal = data.queryExecution().toRdd().toJavaRDD();
    double[] ours = null;
    double[] theirs = null;
    double[] tOurs = new double[iters];
    double[] tTheirs = new double[iters];
    double[] tInTask = new double[iters];
    for (int i = -1; i < iters; i++) {                           // i = -1: warm-up of both
      long t0 = System.nanoTime();
      VectorColumns.Summary sum = VectorColumns.summary(data, "v", barrier);
      ours = sum.sum();
      long t1 = System.nanoTime();
      theirs = internal.treeAggregate(new double[dim], (acc, row) -> {
        ArrayData arr = row.getArray(0);
        for (int j = 0; j < dim; j++) acc[j] += arr.getFloat(j);
        return acc;
      }, (x, y) -> {
        for (int j = 0; j < dim; j++) x[j] += y[j];
        return x;
      }, depth);
      long t2 = System.nanoTime();
      if (i >= 0) {
        tOurs[i] = (t1 - t0) / 1e9;
        tInTask[i] = sum.rank0Nanos() / 1e9;
        tTheirs[i] = (t2 - t1) / 1e9;
      }
    }
    double diff = 0;
    for (int j = 0; j < dim; j++) diff = Math.max(diff, Math.abs(ours[j] - theirs[j]));
    Result r = new Result(dim, partitions, rows, median(tOurs), median(tTheirs), diff, tOurs, tTheirs, median(tInTask));
    System.out.printf("vector-column sum: %,d floats per row, %d rows in %d partitions (%.1f MB cached), %d iterations after a warm-up%n",
        dim, rows, partitions, rows * dim * 4 / 1e6, iters);
    System.out.printf("  allReduce (VectorColumns.sum)   median %.3f s   all %s%n", r.allReduceSeconds(), fmt(tOurs));
    System.out.printf("  treeAggregate (depth %d)         median %.3f s   all %s%n", depth, r.treeAggregateSeconds(), fmt(tTheirs));
    System.out.printf("  speed-up %.2fx; max |difference| %.3g%n", r.treeAggregateSeconds() / r.allReduceSeconds(), diff);
    System.out.printf("  of which rank 0's row summing + allReduce: median %.3f s   all %s%n", r.inTaskSeconds(), fmt(tInTask));
    System.out.println("  (the rest of the allReduce path is Spark scheduling of the barrier stage and the communicator");
    System.out.println("   setup: a rendezvous over the plugin's RPC channel, tens of milliseconds)");
    data.unpersist();
    return r;
  }

  static double median(double[] t) {
    double[] s = t.clone();
    Arrays.sort(s);
    return s.length == 0 ? Double.NaN : s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  }

  static String fmt(double[] t) {
    List<String> out = new ArrayList<>();
    for (double x : t) out.add(String.format("%.3f", x));
    return out.toString();
  }
}
