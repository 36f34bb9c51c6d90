package io.sparkcomms.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.Algorithm;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.ReduceOp;
import java.util.Arrays;
import java.util.List;
import org.apache.spark.SparkConf;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** BarrierComms in {@code local[4]}: four task threads of one JVM on the host backend. */
class BarrierCommsLocalTest {
  static JavaSparkContext sc;

  @BeforeAll static void start() {
    sc = new JavaSparkContext(new SparkConf()
        .setMaster("local[4,4]")    // 4 threads; up to 4 task failures, so a failed barrier stage is retried
        .setAppName("sparkcomms-local")
        .set("spark.plugins", SparkCommsPlugin.class.getName())
        .set("spark.ui.enabled", "false")
        .set("spark.sparkcomms.timeout", "20s")
        .set("spark.sparkcomms.stagingBytes", "1M"));
  }

  @AfterAll static void stop() {
    if (sc != null) sc.stop();
  }

  private JavaRDD<Integer> fourPartitions() { return sc.parallelize(List.of(0, 1, 2, 3), 4); }

  @Test void fourTasksAllReduce() {
    List<String> out = BarrierJobs.collect(fourPartitions(), String.class, it -> {
      int p = it.next();
      Communicator comm = BarrierComms.get();
      double[] small = {p, 10.0 * p, 1};
      comm.allReduce(HostTensor.of(small), ReduceOp.SUM);
      double[] large = new double[200_000];                      // 1.6 MB: tree algorithm, chunked
      Arrays.fill(large, p + 1);
      comm.allReduce(HostTensor.of(large), ReduceOp.SUM);
      boolean same = BarrierComms.get() == comm;
      return List.of(comm.rank() + "/" + comm.size() + " " + comm.backendName() + " " + Arrays.toString(small) + " "
          + large[0] + " " + large[large.length - 1] + " cached=" + same).iterator();
    });
    assertEquals(List.of(
        "0/4 host [6.0, 60.0, 4.0] 10.0 10.0 cached=true",
        "1/4 host [6.0, 60.0, 4.0] 10.0 10.0 cached=true",
        "2/4 host [6.0, 60.0, 4.0] 10.0 10.0 cached=true",
        "3/4 host [6.0, 60.0, 4.0] 10.0 10.0 cached=true"), out);
    assertEquals(0, BarrierComms.openCount(), "communicators are closed when their tasks complete");
    SparkCommsMetrics m = SparkCommsMetrics.current().orElseThrow();
    assertTrue(m.calls(Algorithm.FLAT) >= 4 && m.calls(Algorithm.TREE) >= 4, "metrics: flat " + m.calls(Algorithm.FLAT)
        + " tree " + m.calls(Algorithm.TREE));
    assertTrue(m.bytes(Algorithm.TREE) >= 4 * 1_600_000L);
  }

  @Test void aRetriedStageGetsAFreshCommunicator() {
    List<String> out = BarrierJobs.collectRetriable(fourPartitions(), String.class, it -> {
      int p = it.next();
      TaskContext tc = TaskContext.get();
      Communicator comm = BarrierComms.get();
      if (tc.stageAttemptNumber() == 0 && p == 0) {
        throw new IllegalStateException("rank 0 dies in the first attempt");
      }
      double[] v = {1};
      comm.allReduce(HostTensor.of(v), ReduceOp.SUM);           // peers of the dead rank fail here, fast
      return List.of("attempt " + tc.stageAttemptNumber() + " sum " + v[0]).iterator();
    });
    assertEquals(4, out.size());
    assertEquals(0, BarrierComms.openCount());
    for (String s : out) {
      assertTrue(s.endsWith("sum 4.0") && !s.startsWith("attempt 0"), out.toString());
    }
  }

  @Test void tasksMeetOverThePluginRpc() {
    List<String> out = BarrierJobs.collect(fourPartitions(), String.class, it -> {
      long t0 = System.nanoTime();
      Communicator comm = BarrierComms.get();
      long ms = (System.nanoTime() - t0) / 1_000_000;
      return List.of(comm.rank() + " " + BarrierComms.rendezvousOfCurrentTask().orElseThrow() + " setup " + ms + " ms").iterator();
    });
    assertEquals(4, out.size());
    for (String s : out) assertTrue(s.contains("plugin RPC rendezvous"), out.toString());
  }

  @Test void aRankThatDiesBeforeTheRendezvousStopsItsPeersAtOnce() {
    long t0 = System.nanoTime();
    List<String> out = BarrierJobs.collectRetriable(fourPartitions(), String.class, it -> {
      int p = it.next();
      TaskContext tc = TaskContext.get();
      if (tc.stageAttemptNumber() == 0 && p == 0) throw new IllegalStateException("rank 0 dies before BarrierComms.get()");
      double[] v = {1};
      BarrierComms.get().allReduce(HostTensor.of(v), ReduceOp.SUM);
      return List.of("attempt " + tc.stageAttemptNumber() + " sum " + v[0]).iterator();
    });
    long ms = (System.nanoTime() - t0) / 1_000_000;
    assertEquals(4, out.size());
    for (String s : out) assertTrue(s.endsWith("sum 4.0") && !s.startsWith("attempt 0"), out.toString());
    // The peers waiting in attempt 0's rendezvous hold the 4 slots the retry needs: had they waited for
    // the 20 s timeout, the job would take longer.
    assertTrue(ms < 15_000, "the retried job took " + ms + " ms");
    assertEquals(0, BarrierComms.openCount());
  }

  @Test void outsideABarrierStageIsAClearError() {
    IllegalStateException onDriver = assertThrows(IllegalStateException.class, BarrierComms::get);
    assertTrue(onDriver.getMessage().contains("outside any Spark task"), onDriver.getMessage());

    Exception inTask = assertThrows(Exception.class, () -> BarrierJobs.collectPlain(fourPartitions(), it -> {
      BarrierComms.get();
      return it;
    }));
    assertTrue(String.valueOf(inTask.getMessage()).contains("is not a barrier stage"), inTask.getMessage());
  }
}
