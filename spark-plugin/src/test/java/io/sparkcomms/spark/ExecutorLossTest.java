package io.sparkcomms.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.CommException;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.ReduceOp;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import org.apache.spark.SparkConf;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.JavaSparkContext;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * An executor JVM dies (Runtime.halt) in the middle of an allReduce of a barrier stage
 * ({@code local-cluster[2,1,1024]}, one rank per executor process): its peer's collective fails with
 * a {@link CommException} within the configured {@code spark.sparkcomms.timeout} (so the peer's task
 * ends and frees its slot), Spark relaunches the barrier stage on a replacement executor, and the
 * retried attempt's allReduce is correct.
 */
class ExecutorLossTest {
  static final long TIMEOUT_MS = 20_000;
  @TempDir static Path dir;

  @BeforeAll static void setUp() {
    LocalClusters.setSystemProperties(dir);
  }

  @Test @Timeout(600) void anExecutorKilledMidCollectiveFailsTheStageAndTheRetrySucceeds() throws Exception {
    Path events = dir.resolve("events.log");
    String eventsPath = events.toString();
    SparkConf conf = LocalClusters.conf("local-cluster[2,1,1024]", 2, "sparkcomms-executor-loss")
        .set("spark.sparkcomms.timeout", TIMEOUT_MS + "ms");
    List<String> out;
    try (JavaSparkContext sc = new JavaSparkContext(conf)) {
      out = BarrierJobs.collectRetriable(sc.parallelize(List.of(0, 1), 2), String.class, it -> {
        int p = it.next();
        int attempt = TaskContext.get().stageAttemptNumber();
        Communicator comm = BarrierComms.get();
        double[] v = new double[100_000];                          // 800 KB: tree algorithm
        Arrays.fill(v, p + 1);
        if (attempt == 0 && p == 0) {
          // Rank 0 enters the allReduce (its peer is not there yet) and its JVM halts inside it.
          haltIn(300, eventsPath);
          comm.allReduce(HostTensor.of(v), ReduceOp.SUM);
          Thread.sleep(60_000);                                    // not reached: halted above
        }
        if (attempt == 0) {
          Thread.sleep(1_500);                                     // rank 0 is dead by now
          long t0 = System.nanoTime();
          try {
            comm.allReduce(HostTensor.of(v), ReduceOp.SUM);
            log(eventsPath, "survivor completed the allReduce (wrong)");
          } catch (CommException e) {
            log(eventsPath, "survivor " + e.getClass().getSimpleName() + " after "
                + (System.nanoTime() - t0) / 1_000_000 + " ms: " + e.getMessage().replace('\n', ' '));
            throw e;
          }
        }
        comm.allReduce(HostTensor.of(v), ReduceOp.SUM);
        return List.of("attempt " + attempt + " rank " + comm.rank() + "/" + comm.size() + " pid "
            + ProcessHandle.current().pid() + " sum " + v[0] + " " + v[v.length - 1]).iterator();
      });
    }
    List<String> ev = Files.readAllLines(events);
    System.out.println("executor loss: events " + ev + "; results " + out);

    assertTrue(ev.stream().anyMatch(l -> l.startsWith("halt pid ")), "rank 0's executor halted: " + ev);
    String survivor = ev.stream().filter(l -> l.startsWith("survivor ")).findFirst()
        .orElseThrow(() -> new AssertionError("the surviving rank's collective never returned: " + ev));
    assertTrue(survivor.matches("survivor Comm(Aborted|Timeout)Exception after \\d+ ms: .*"),
        "the survivor's allReduce fails with a communicator error: " + survivor);
    assertTrue(survivor.contains("rank 0"), "the error names the dead rank: " + survivor);

    assertEquals(2, out.size(), out.toString());
    out = new ArrayList<>(out);
    out.sort(Comparator.comparing(l -> l.replaceAll(".* rank (\\d+)/.*", "$1")));   // repartition(1) mixes the order
    String haltedPid = ev.stream().filter(l -> l.startsWith("halt pid ")).findFirst().orElseThrow().substring(9);
    for (int r = 0; r < 2; r++) {
      String line = out.get(r);
      assertTrue(line.matches("attempt [1-9]\\d* rank " + r + "/2 pid \\d+ sum 3\\.0 3\\.0"),
          "a retried attempt (not attempt 0) allReduces correctly: " + line);
      assertTrue(!line.contains(" pid " + haltedPid + " "), "the dead executor ran nothing after: " + line);
    }
  }

  /** Appends one line to the shared events file (executors and the test run on one machine). */
  /** Halts this JVM in {@code ms} milliseconds (from a daemon thread), logging "halt pid P" first. */
  static void haltIn(long ms, String eventsPath) {
    Thread killer = new Thread(() -> {
      try {
        Thread.sleep(ms);
      } catch (InterruptedException e) {
        return;
      }
      log(eventsPath, "halt pid " + ProcessHandle.current().pid());
      Runtime.getRuntime().halt(1);
    });
    killer.setDaemon(true);
    killer.start();
  }

  static void log(String file, String line) {
    try {
      Files.writeString(Path.of(file), line + "\n", StandardOpenOption.CREATE, StandardOpenOption.APPEND);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }
}
