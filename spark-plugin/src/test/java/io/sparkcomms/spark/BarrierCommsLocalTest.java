package io.sparkcomms.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.Protocol;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.spark.plugin.SparkCommsMetrics;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.spark.SparkConf;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

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
    assertTrue(m.calls(Protocol.FLAT) >= 4 && m.calls(Protocol.TREE) >= 4, "metrics: flat " + m.calls(Protocol.FLAT)
        + " tree " + m.calls(Protocol.TREE));
    assertTrue(m.bytes(Protocol.TREE) >= 4 * 1_600_000L);
    assertTrue(m.calls(io.sparkcomms.collectives.Collective.ALL_REDUCE) >= 8, "allReduce calls " + m.calls(io.sparkcomms.collectives.Collective.ALL_REDUCE));
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

  /** What attempt 0's surviving ranks got from BarrierComms.get() (tasks are threads of this JVM). */
  static final java.util.Queue<String> ATTEMPT0_ERRORS = new java.util.concurrent.ConcurrentLinkedQueue<>();

  @Test void aRankThatDiesBeforeTheRendezvousStopsItsPeersAtOnce() {
    ATTEMPT0_ERRORS.clear();
    List<String> out = BarrierJobs.collectRetriable(fourPartitions(), String.class, it -> {
      int p = it.next();
      TaskContext tc = TaskContext.get();
      if (tc.stageAttemptNumber() == 0 && p == 0) throw new IllegalStateException("rank 0 dies before BarrierComms.get()");
      double[] v = {1};
      Communicator comm;
      try {
        comm = BarrierComms.get();
      } catch (RuntimeException e) {
        if (tc.stageAttemptNumber() == 0) ATTEMPT0_ERRORS.add(e.getClass().getSimpleName() + ": " + e.getMessage());
        throw e;
      }
      comm.allReduce(HostTensor.of(v), ReduceOp.SUM);
      return List.of("attempt " + tc.stageAttemptNumber() + " sum " + v[0]).iterator();
    });
    assertEquals(4, out.size());
    for (String s : out) assertTrue(s.endsWith("sum 4.0") && !s.startsWith("attempt 0"), out.toString());
    // The peers waiting in attempt 0's rendezvous hold the 4 slots the retry needs: they are stopped
    // when the stage fails (the task is killed or the stage attempt has ended), not by the 20 s
    // rendezvous timeout, whose error names the missing ranks (or the unattributed deposit).
    System.out.println("attempt 0's waiting ranks: " + ATTEMPT0_ERRORS);
    for (String e : ATTEMPT0_ERRORS) {
      assertTrue(!e.contains("missing rank") && !e.contains("could not attribute"), "a waiting rank timed out: " + ATTEMPT0_ERRORS);
    }
    assertEquals(0, BarrierComms.openCount());
  }

  /** Tasks of both concurrent jobs count down here before they build a communicator (local mode: one JVM). */
  static volatile CountDownLatch allFourRunning;

  /**
   * Two threads submit a 2-task barrier job each at the same time; the four tasks run at once (they
   * all pass a latch before BarrierComms.get()), and each job gets its own 2-rank communicator: sizes,
   * sums and the gathered job tags show no rank of the other job.
   */
  @Test @Timeout(120) void twoConcurrentBarrierJobsGetSeparateCommunicators() throws Exception {
    allFourRunning = new CountDownLatch(4);
    ExecutorService submitters = Executors.newFixedThreadPool(2);
    try {
      Future<List<String>> a = submitters.submit(() -> concurrentJob(1));
      Future<List<String>> b = submitters.submit(() -> concurrentJob(2));
      List<String> outA = a.get(100, TimeUnit.SECONDS);
      List<String> outB = b.get(100, TimeUnit.SECONDS);
      // job j: rank r adds (r + 1) * 10^j over 300k doubles (tree, chunked) and gathers the tag j
      assertEquals(List.of("job 1 rank 0/2 met=true sum 30.0 30.0 tags [1, 1]", "job 1 rank 1/2 met=true sum 30.0 30.0 tags [1, 1]"),
          outA, "job 1");
      assertEquals(List.of("job 2 rank 0/2 met=true sum 300.0 300.0 tags [2, 2]", "job 2 rank 1/2 met=true sum 300.0 300.0 tags [2, 2]"),
          outB, "job 2");
      assertEquals(0, BarrierComms.openCount());
    } finally {
      submitters.shutdownNow();
    }
  }

  private List<String> concurrentJob(int job) {
    sc.setJobGroup("concurrent-" + job, "concurrent barrier job " + job, false);
    return BarrierJobs.collect(sc.parallelize(List.of(0, 1), 2), String.class, it -> {
      int p = it.next();
      CountDownLatch latch = allFourRunning;
      latch.countDown();
      boolean met = latch.await(60, TimeUnit.SECONDS);          // false: the jobs did not overlap
      Communicator comm = BarrierComms.get();
      double[] v = new double[300_000];
      Arrays.fill(v, (p + 1) * Math.pow(10, job));
      comm.allReduce(HostTensor.of(v), ReduceOp.SUM);
      long[] tags = new long[comm.size()];
      comm.allGather(HostTensor.of(new long[] {job}), HostTensor.of(tags));
      return List.of("job " + job + " rank " + comm.rank() + "/" + comm.size() + " met=" + met + " sum " + v[0] + " "
          + v[v.length - 1] + " tags " + Arrays.toString(tags)).iterator();
    });
  }

  @Test void splitChildrenWorkBetweenParentCallsAndCloseWithTheTask() {
    List<String> out = BarrierJobs.collect(fourPartitions(), String.class, it -> {
      Communicator comm = BarrierComms.get();
      Communicator listed = BarrierComms.split(new int[] {3, 1});         // child rank 0 is stage rank 3
      Communicator parity = BarrierComms.split(comm.rank() % 2, -comm.rank());   // higher rank first
      long[] stage = {comm.rank()};
      long[] inList = {comm.rank()};
      if (listed != null) listed.allReduce(HostTensor.of(inList), ReduceOp.SUM);
      comm.allReduce(HostTensor.of(stage), ReduceOp.SUM);                  // the parent between the children's calls
      long[] byParity = new long[2];
      parity.allGather(HostTensor.of(new long[] {comm.rank()}), HostTensor.of(byParity));
      return List.of(comm.rank() + ": list " + (listed == null ? "-" : listed.rank() + "/" + listed.size() + " sum " + inList[0])
          + ", parity " + parity.rank() + "/" + parity.size() + " " + Arrays.toString(byParity) + ", stage " + stage[0]).iterator();
    });
    assertEquals(List.of(
        "0: list -, parity 1/2 [2, 0], stage 6",
        "1: list 1/2 sum 4, parity 1/2 [3, 1], stage 6",
        "2: list -, parity 0/2 [2, 0], stage 6",
        "3: list 0/2 sum 4, parity 0/2 [3, 1], stage 6"), out);
    assertEquals(0, BarrierComms.openChildCount(), "children are closed when their tasks complete");
    assertEquals(0, BarrierComms.openCount());

    Exception mismatch = assertThrows(Exception.class, () -> BarrierJobs.collect(fourPartitions(), String.class, it -> {
      int p = it.next();
      BarrierComms.split(p == 2 ? new int[] {0, 2} : new int[] {0, 1});
      return List.of("unreachable").iterator();
    }));
    assertTrue(String.valueOf(mismatch.getMessage()).contains("ranks disagree on the rank list"), mismatch.getMessage());
    assertThrows(IllegalStateException.class, () -> BarrierComms.closeWithTask(null), "outside a task");
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
