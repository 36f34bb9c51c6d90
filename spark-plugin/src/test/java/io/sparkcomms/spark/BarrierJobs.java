package io.sparkcomms.spark;

import java.io.Serializable;
import java.util.Iterator;
import java.util.List;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.rdd.RDD;
import scala.jdk.javaapi.CollectionConverters;
import scala.reflect.ClassTag;
import scala.reflect.ClassTag$;
import scala.runtime.AbstractFunction1;

/** Runs a Java function over every partition of an RDD in a barrier stage (test helper). */
final class BarrierJobs {
  private BarrierJobs() {}

  /** A partition function that Spark can ship to executors. */
  interface PartitionFn<T, S> extends Serializable {
    Iterator<S> apply(Iterator<T> partition) throws Exception;
  }

  /** {@code rdd.barrier().mapPartitions(fn).collect()}. */
  static <T, S> List<S> collect(JavaRDD<T> rdd, Class<S> type, PartitionFn<T, S> fn) {
    ClassTag<S> tag = ClassTag$.MODULE$.apply(type);
    RDD<S> out = rdd.rdd().barrier().mapPartitions(new ScalaFn<>(fn), false, tag);
    return new JavaRDD<>(out, tag).collect();
  }

  /**
   * Like {@link #collect} with a shuffle after the barrier stage, so the barrier stage is a shuffle
   * map stage: Spark retries a failed barrier stage only then (a failed barrier result stage aborts
   * the job).
   */
  static <T, S> List<S> collectRetriable(JavaRDD<T> rdd, Class<S> type, PartitionFn<T, S> fn) {
    ClassTag<S> tag = ClassTag$.MODULE$.apply(type);
    RDD<S> out = rdd.rdd().barrier().mapPartitions(new ScalaFn<>(fn), false, tag);
    return new JavaRDD<>(out, tag).repartition(1).collect();
  }

  /** {@code rdd.mapPartitions(fn).collect()} without barrier mode. */
  static <T, S> List<S> collectPlain(JavaRDD<T> rdd, PartitionFn<T, S> fn) {
    return rdd.mapPartitions(fn::apply).collect();
  }

  private static final class ScalaFn<T, S> extends AbstractFunction1<scala.collection.Iterator<T>, scala.collection.Iterator<S>>
      implements Serializable {
    private final PartitionFn<T, S> fn;

    ScalaFn(PartitionFn<T, S> fn) { this.fn = fn; }

    @Override public scala.collection.Iterator<S> apply(scala.collection.Iterator<T> it) {
      try {
        return CollectionConverters.asScala(fn.apply(CollectionConverters.asJava(it)));
      } catch (RuntimeException e) {
        throw e;
      } catch (Exception e) {
        throw new RuntimeException(e);
      }
    }
  }
}
