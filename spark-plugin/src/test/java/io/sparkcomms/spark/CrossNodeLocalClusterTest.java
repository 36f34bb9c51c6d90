package io.sparkcomms.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.CollectiveChecker;
import io.sparkcomms.collectives.CommException;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.hier.HierarchicalCommunicator;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.List;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.apache.spark.SparkConf;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.JavaSparkContext;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A barrier stage whose executors are assigned to two simulated nodes ({@code spark.sparkcomms.node.names}):
 * the communicator shares memory inside each node and crosses nodes over Spark's network library on
 * loopback. Every collective against the float64 reference at 2 x 2, 3 + 1 and 2 x 3 ranks; an
 * executor killed on one node fails every rank on both, and the retried stage is correct.
 */
class CrossNodeLocalClusterTest {
  @TempDir static Path dir;

  @BeforeAll static void setUp() {
    LocalClusters.setSystemProperties(dir);
  }

  @ParameterizedTest
  @ValueSource(strings = {"0=n0,1=n0,2=n1,3=n1", "0=n0,1=n0,2=n0,3=n1", "0=n0,1=n0,2=n0,3=n1,4=n1,5=n1"})
  @Timeout(900)
  void everyCollectiveMatchesTheReferenceAcrossTwoNodes(String names) {
    int n = names.split(",").length;
    SparkConf conf = LocalClusters.conf("local-cluster[" + n + ",1,512]", n, "sparkcomms-cross-node")
        .set("spark.sparkcomms.node.names", names);
    List<String> out;
    try (JavaSparkContext sc = new JavaSparkContext(conf)) {
      out = BarrierJobs.collect(sc.parallelize(IntStream.range(0, n).boxed().collect(Collectors.toList()), n), String.class, it -> {
        Communicator c = BarrierComms.get();
        CollectiveChecker k = new CollectiveChecker(c, 1234);
        int[] small = {1, 7, 1023};
        for (int count : small) {
          for (DataType dt : DataType.values()) {
            for (ReduceOp op : ReduceOp.examples()) {
              if (!op.supports(dt)) continue;
              k.allReduce(dt, op, count, false, CollectiveChecker.Shape.UNIFORM);
              k.reduceScatter(dt, op, count, CollectiveChecker.Shape.UNIFORM);
            }
            k.allGather(dt, count, CollectiveChecker.Shape.UNIFORM);
            k.allToAll(dt, count, CollectiveChecker.Shape.UNIFORM);
            k.broadcast(dt, count, count % c.size(), false);
          }
        }
        k.runRootedAndV(small, small, EnumSet.of(Collective.REDUCE, Collective.GATHER, Collective.SCATTER,
            Collective.ALL_GATHER_V, Collective.REDUCE_SCATTER_V));
        k.runPointToPoint(new int[] {1, 1023});
        int big = 1_000_003;
        k.allReduce(DataType.FLOAT32, ReduceOp.SUM, big, false, CollectiveChecker.Shape.NORMAL);
        k.allReduce(DataType.FLOAT64, ReduceOp.AVG, big, true, CollectiveChecker.Shape.UNIFORM);
        k.allGather(DataType.FLOAT32, big, CollectiveChecker.Shape.UNIFORM);
        k.broadcast(DataType.FLOAT64, big, c.size() - 1, false);
        k.reduceScatter(DataType.FLOAT32, ReduceOp.SUM, big / c.size(), CollectiveChecker.Shape.UNIFORM);
        c.barrier();
        String layout = c instanceof HierarchicalCommunicator h ? h.layout().toString() : "(not across nodes)";
        return List.of(c.rank() + " " + c.backendName() + " " + layout + " " + k.checkedCalls() + " "
            + (k.failures().isEmpty() ? "OK" : String.join("; ", k.failures()))).iterator();
      });
    }
    System.out.println("cross-node " + names + ": " + out);
    assertEquals(n, out.size());
    for (String line : out) {
      assertTrue(line.endsWith(" OK"), line);
      assertTrue(line.contains(" host+net ") && line.contains("n0["), "a communicator across the two nodes: " + line);
      assertTrue(line.contains("n1["), line);
    }
  }

  @Test @Timeout(900)
  void anExecutorKilledOnOneNodeFailsEveryRankOnBothAndTheRetryIsCorrect() throws Exception {
    long timeoutMs = 20_000;
    Path events = dir.resolve("cross-node-events.log");
    String eventsPath = events.toString();
    // executors that replace a dead one (ids 4, 5) join node n1 too
    SparkConf conf = LocalClusters.conf("local-cluster[4,1,512]", 4, "sparkcomms-cross-node-loss")
        .set("spark.sparkcomms.node.names", "0=n0,1=n0,2=n1,3=n1,4=n1,5=n1")
        .set("spark.sparkcomms.timeout", timeoutMs + "ms");
    List<String> out;
    try (JavaSparkContext sc = new JavaSparkContext(conf)) {
      out = BarrierJobs.collectRetriable(sc.parallelize(List.of(0, 1, 2, 3), 4), String.class, it -> {
        int p = it.next();
        int attempt = TaskContext.get().stageAttemptNumber();
        Communicator comm = BarrierComms.get();
        double[] v = new double[1000];
        Arrays.fill(v, p + 1);
        if (attempt == 0 && p == 3) {
          ExecutorLossTest.haltIn(300, eventsPath);
          comm.allReduce(HostTensor.of(v), ReduceOp.SUM);
          Thread.sleep(60_000);  // not reached: halted above
        }
        if (attempt == 0) {
          Thread.sleep(1_500);  // rank 3 is dead by now
          long t0 = System.nanoTime();
          try {
            comm.allReduce(HostTensor.of(v), ReduceOp.SUM);
            ExecutorLossTest.log(eventsPath, "survivor " + p + " completed the allReduce (wrong)");
          } catch (CommException e) {
            ExecutorLossTest.log(eventsPath, "survivor " + p + " " + e.getClass().getSimpleName() + " after "
                + (System.nanoTime() - t0) / 1_000_000 + " ms");
            throw e;
          }
        }
        comm.allReduce(HostTensor.of(v), ReduceOp.SUM);
        return List.of("attempt " + attempt + " rank " + comm.rank() + " " + comm.backendName() + " sum " + v[0] + " " + v[v.length - 1]).iterator();
      });
    }
    List<String> ev = Files.readAllLines(events);
    System.out.println("cross-node executor loss: events " + ev + "; results " + out);
    assertTrue(ev.stream().anyMatch(l -> l.startsWith("halt pid ")), ev.toString());
    List<String> survivors = new ArrayList<>();
    for (String l : ev) if (l.startsWith("survivor ")) survivors.add(l);
    assertEquals(3, survivors.size(), "ranks 0 and 1 (node n0) and 2 (node n1) each fail: " + ev);
    for (String s : survivors) {
      assertTrue(s.matches("survivor [012] Comm\\w*Exception after (\\d+) ms"), s);
      long ms = Long.parseLong(s.replaceAll(".* after (\\d+) ms", "$1"));
      assertTrue(ms <= timeoutMs + 5_000, "failed within the timeout: " + s);
    }
    assertEquals(4, out.size(), out.toString());
    for (String line : out) {
      assertTrue(line.matches("attempt [1-9]\\d* rank [0-3] host\\+net sum 10\\.0 10\\.0"), "a retried attempt is correct: " + line);
    }
  }
}
