package io.sparkcomms.spark.dataset;

import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.spark.BarrierComms;
import io.sparkcomms.spark.CommAccumulators;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import org.apache.spark.HashPartitioner;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoder;
import scala.Tuple2;
import scala.jdk.javaapi.CollectionConverters;
import scala.reflect.ClassTag;
import scala.reflect.ClassTag$;
import scala.runtime.AbstractFunction1;

/**
 * Barrier {@code mapPartitions} with a communicator, from the Dataset and JavaRDD APIs:
 *
 * <pre>{@code
 * Dataset<Double> partitionSums = BarrierDatasets.mapPartitions(numbers, (comm, rows) -> {
 *   double[] s = {0};
 *   rows.forEachRemaining(x -> s[0] += x);
 *   comm.allReduce(HostTensor.of(s), ReduceOp.SUM);           // every rank now holds the total
 *   return List.of(s[0]).iterator();
 * }, Encoders.DOUBLE());
 * }</pre>
 *
 * <p>Every partition becomes one rank of a barrier stage (all tasks run at once, see
 * {@link BarrierOptions#ranks()}); the function gets the stage's communicator
 * ({@link io.sparkcomms.spark.BarrierComms}), which is closed when the task ends. The returned Dataset
 * is lazy: every action on it reruns the barrier stage (cache it to avoid that).
 *
 * <p>Stage page: each call registers a fresh set of {@link CommAccumulators} on the driver (unless
 * {@code spark.sparkcomms.accumulators.enabled} is false, or {@link BarrierOptions#accumulators}
 * gives one), and every task adds its communicators' calls, bytes and time to them when it ends.
 * Every action on the output adds to the same set.
 *
 * <p>Retries: a barrier stage is retried by Spark only as a shuffle map stage; with
 * {@link BarrierOptions#retriable(boolean)} the output goes through an identity shuffle so it is one.
 *
 * <p>Spark refuses a barrier stage whose RDD chain changes the number of partitions inside the stage
 * ({@code coalesce}, {@code limit}, a union): put a {@code repartition(n)} (a shuffle) before the
 * helper instead of a {@code coalesce(n)}.
 */
public final class BarrierDatasets {
  private BarrierDatasets() {}

  /** {@link #mapPartitions(Dataset, CommPartitionFunction, Encoder, BarrierOptions)} with default options. */
  public static <T, U> Dataset<U> mapPartitions(Dataset<T> data, CommPartitionFunction<T, U> fn, Encoder<U> encoder) {
    return mapPartitions(data, fn, encoder, BarrierOptions.defaults());
  }

  /** Runs {@code fn} on every partition of {@code data} as one rank of a barrier stage; the outputs form a Dataset. */
  public static <T, U> Dataset<U> mapPartitions(Dataset<T> data, CommPartitionFunction<T, U> fn, Encoder<U> encoder,
      BarrierOptions options) {
    JavaRDD<U> out = mapPartitions(data.javaRDD(), fn, options);
    return data.sparkSession().createDataset(out.rdd(), encoder);
  }

  /** The JavaRDD form: {@code rdd.barrier().mapPartitions(...)} with the communicator handed to {@code fn}. */
  public static <T, U> JavaRDD<U> mapPartitions(JavaRDD<T> data, CommPartitionFunction<T, U> fn, BarrierOptions options) {
    JavaRDD<T> in = withRanks(data, options.ranks());
    ClassTag<U> tag = anyRef();
    CommAccumulators acc = options.accumulators() != null ? options.accumulators()
        : CommAccumulators.registerIfEnabled(data.context());
    RDD<U> out = in.rdd().barrier().mapPartitions(new ScalaPartitionFn<>(options.comm(), acc, fn), false, tag);
    JavaRDD<U> j = new JavaRDD<>(out, tag);
    return options.retriable() ? identityShuffle(j) : j;
  }

  /**
   * Runs {@code fn} on every rank and collects what rank 0 returns (the other ranks' outputs are
   * dropped): the shape of helpers whose result every rank holds after an allReduce.
   */
  public static <T, U> List<U> collectFromRank0(JavaRDD<T> data, CommPartitionFunction<T, U> fn, BarrierOptions options) {
    CommPartitionFunction<T, U> rank0 = (comm, rows) -> {
      Iterator<U> it = fn.call(comm, rows);
      if (comm.rank() == 0) return it;
      while (it.hasNext()) it.next();                           // run it to the end on every rank
      return java.util.Collections.emptyIterator();
    };
    return new ArrayList<>(mapPartitions(data, rank0, options).collect());
  }

  /**
   * {@code data} with {@code ranks} partitions, repartitioned (a shuffle) when it has another number:
   * a barrier stage may not contain a coalesce, so a shuffle is the only way to change the count.
   * {@code ranks == 0}: repartitioned to {@code defaultParallelism} only when it has more partitions
   * (a barrier stage needs a free slot for every task at once).
   */
  public static <T> JavaRDD<T> withRanks(JavaRDD<T> data, int ranks) {
    int n = data.getNumPartitions();
    int target = ranks == 0 ? Math.min(n, data.context().defaultParallelism()) : ranks;
    return n == target ? data : data.repartition(target);
  }

  /**
   * The same partitions through a shuffle (partition i to partition i, rows in order), so the stage
   * that computes {@code data} becomes a shuffle map stage, which Spark retries as a whole when it fails.
   */
  public static <T> JavaRDD<T> identityShuffle(JavaRDD<T> data) {
    int n = data.getNumPartitions();
    JavaRDD<Tuple2<Integer, T>> keyed = data.mapPartitionsWithIndex((idx, it) -> {
      List<Tuple2<Integer, T>> out = new ArrayList<>();
      it.forEachRemaining(x -> out.add(new Tuple2<>(idx, x)));
      return out.iterator();
    }, true);
    return JavaPairRDD.fromJavaRDD(keyed).partitionBy(new HashPartitioner(n)).values();
  }

  @SuppressWarnings("unchecked")
  static <U> ClassTag<U> anyRef() { return (ClassTag<U>) ClassTag$.MODULE$.AnyRef(); }

  /** The Scala function Spark's {@code RDDBarrier.mapPartitions} needs. */
  static final class ScalaPartitionFn<T, U> extends AbstractFunction1<scala.collection.Iterator<T>, scala.collection.Iterator<U>>
      implements Serializable {
    private static final long serialVersionUID = 1L;
    private final CommSettings settings;
    /** Where the task's statistics go when it ends; null: nowhere but the executor's metrics. */
    private final CommAccumulators accumulators;
    private final CommPartitionFunction<T, U> fn;

    ScalaPartitionFn(CommSettings settings, CommAccumulators accumulators, CommPartitionFunction<T, U> fn) {
      this.settings = settings;
      this.accumulators = accumulators;
      this.fn = fn;
    }

    @Override public scala.collection.Iterator<U> apply(scala.collection.Iterator<T> rows) {
      if (accumulators != null) BarrierComms.addStatsTo(accumulators);   // before the communicator: see addStatsTo
      Communicator comm = settings.communicator();
      try {
        return CollectionConverters.asScala(fn.call(comm, CollectionConverters.asJava(rows)));
      } catch (RuntimeException e) {
        throw e;
      } catch (Exception e) {
        throw new RuntimeException(e);
      }
    }
  }
}
