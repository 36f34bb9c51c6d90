package io.sparkcomms.spark.dataset;

import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.ReduceOp;
import java.io.Serializable;
import java.util.Iterator;
import java.util.List;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.functions;

/**
 * Sum and mean of a vector column through one allReduce: the drop-in for
 * {@code rdd.treeAggregate(zero, add, merge)} and {@code Summarizer.mean/sum}. Columns may be
 * {@code array<float>}, {@code array<double>} or ML/MLlib {@code Vector} (dense or sparse).
 *
 * <pre>{@code
 * double[] mean = VectorColumns.mean(df, "features");
 * VectorColumns.Summary s = VectorColumns.summary(df, "features", BarrierOptions.defaults().ranks(4));
 * }</pre>
 *
 * <p>Each rank (one partition of a barrier stage) adds its rows into a local {@code double[]}
 * (straight from Spark's internal rows, no boxing), then the ranks allReduce SUM it in FLOAT64
 * with the row count in the last slot, and rank 0's copy goes to the driver: one result instead of
 * one per partition. Null rows are skipped (and not counted); vectors of different sizes, or a null
 * element, are an error on every rank. Every vector of the column must have the same size.
 */
public final class VectorColumns {
  private VectorColumns() {}

  /** Row count, element-wise sum and mean of a vector column. */
  public static final class Summary implements Serializable {
    private static final long serialVersionUID = 1L;
    private final long count;
    private final double[] sum;
    private final long rank0Nanos;

    Summary(long count, double[] sum, long rank0Nanos) {
      this.count = count;
      this.sum = sum;
      this.rank0Nanos = rank0Nanos;
    }

    /**
     * Time rank 0 spent summing its rows and in the allReduce calls (not the communicator setup,
     * not Spark's scheduling): what the aggregation itself costs.
     */
    public long rank0Nanos() { return rank0Nanos; }

    /** Non-null rows. */
    public long count() { return count; }

    /** Element-wise sum (empty when there are no rows). */
    public double[] sum() { return sum.clone(); }

    /** Element-wise mean (empty when there are no rows). */
    public double[] mean() {
      double[] m = new double[sum.length];
      for (int j = 0; j < m.length; j++) m[j] = sum[j] / count;
      return m;
    }

    public int dimension() { return sum.length; }
  }

  /** Element-wise sum of {@code column}. */
  public static double[] sum(Dataset<?> data, String column) { return summary(data, column, BarrierOptions.defaults()).sum(); }

  /** Element-wise mean of {@code column} (the non-null rows'). */
  public static double[] mean(Dataset<?> data, String column) { return summary(data, column, BarrierOptions.defaults()).mean(); }

  /** Count, sum and mean of {@code column} in one barrier stage. */
  public static Summary summary(Dataset<?> data, String column, BarrierOptions options) {
    Dataset<?> one = data.select(functions.col(column));
    VectorAccumulator acc = VectorAccumulator.forColumn(one.schema(), one.schema().fields()[0].name());
    JavaRDD<InternalRow> rows = one.queryExecution().toRdd().toJavaRDD();
    List<Summary> out = BarrierDatasets.collectFromRank0(rows, (comm, it) -> List.of(reduce(comm, it, acc)).iterator(), options);
    return out.get(0);
  }

  /** One rank's part: local sum, then the allReduce. Every rank returns the same summary. */
  static Summary reduce(Communicator comm, Iterator<InternalRow> rows, VectorAccumulator acc) {
    long t0 = System.nanoTime();
    double[][] local = new double[1][];
    long count = 0;
    while (rows.hasNext()) {
      if (acc.add(rows.next(), 0, local) >= 0) count++;
    }
    int dim = local[0] == null ? -1 : local[0].length - 1;
    long[] dims = {dim, dim < 0 ? Long.MIN_VALUE : -dim};         // max dimension, -(min dimension)
    comm.allReduce(HostTensor.of(dims), ReduceOp.MAX);
    if (dims[0] < 0) return new Summary(0, new double[0], System.nanoTime() - t0);       // no rows anywhere
    if (dims[0] != -dims[1]) {
      throw new IllegalArgumentException("vectors of different sizes across partitions: " + (-dims[1]) + " and " + dims[0]);
    }
    double[] s = local[0] != null ? local[0] : new double[(int) dims[0] + 1];
    s[s.length - 1] = count;
    comm.allReduce(HostTensor.of(s), ReduceOp.SUM);
    long total = Math.round(s[s.length - 1]);
    return new Summary(total, java.util.Arrays.copyOf(s, s.length - 1), System.nanoTime() - t0);
  }
}
