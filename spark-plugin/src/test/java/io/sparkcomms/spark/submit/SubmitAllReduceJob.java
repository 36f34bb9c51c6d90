package io.sparkcomms.spark.submit;

import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.spark.BarrierComms;
import io.sparkcomms.spark.SparkCommsPlugin;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.rdd.RDD;
import scala.jdk.javaapi.CollectionConverters;
import scala.reflect.ClassTag;
import scala.reflect.ClassTag$;
import scala.runtime.AbstractFunction1;

/**
 * The application {@code SparkSubmitPluginTest} submits (packed by the test into its own jar, with
 * only this package): a barrier stage of {@code args[0]} tasks, each allReduces 100k doubles
 * (rank r contributes r + 0.5, element 0 = r) and prints one {@code SUBMIT-RESULT} line. Public API
 * only, as a user's job would be.
 */
public final class SubmitAllReduceJob {
  private SubmitAllReduceJob() {}

  public static void main(String[] args) {
    int ranks = Integer.parseInt(args[0]);
    try (JavaSparkContext sc = new JavaSparkContext(new SparkConf())) {
      System.out.println("SUBMIT-DRIVER plugin class from " + where(SparkCommsPlugin.class));
      List<Integer> parts = new ArrayList<>();
      for (int i = 0; i < ranks; i++) parts.add(i);
      JavaRDD<Integer> rdd = sc.parallelize(parts, ranks);
      ClassTag<String> tag = ClassTag$.MODULE$.apply(String.class);
      RDD<String> out = rdd.rdd().barrier().mapPartitions(new AllReduceTask(), false, tag);
      for (String line : new JavaRDD<>(out, tag).collect()) System.out.println("SUBMIT-RESULT " + line);
    }
  }

  static String where(Class<?> c) {
    return String.valueOf(c.getProtectionDomain().getCodeSource().getLocation());
  }

  static String gpu() {
    var r = TaskContext.get().resources().get("gpu");
    return r.isDefined() ? r.get().addresses()[0] : "none";
  }

  static final class AllReduceTask extends AbstractFunction1<scala.collection.Iterator<Integer>, scala.collection.Iterator<String>>
      implements Serializable {
    private static final long serialVersionUID = 1L;

    @Override public scala.collection.Iterator<String> apply(scala.collection.Iterator<Integer> it) {
      int p = it.next();
      Communicator comm = BarrierComms.get();
      double[] v = new double[100_000];
      Arrays.fill(v, p + 0.5);
      v[0] = p;
      comm.allReduce(HostTensor.of(v), ReduceOp.SUM);
      String line = comm.rank() + "/" + comm.size() + " " + v[0] + " " + v[v.length - 1] + " executor="
          + SparkEnv.get().executorId() + " gpu=" + gpu() + " pid=" + ProcessHandle.current().pid() + " backend=" + comm.backendName()
          + " BarrierComms-from=" + where(BarrierComms.class) + " Communicator-from=" + where(Communicator.class);
      return CollectionConverters.asScala(List.of(line).iterator());
    }
  }
}
