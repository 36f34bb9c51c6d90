package io.sparkcomms.spark;

import static io.sparkcomms.spark.StageAccumulables.asDouble;
import static io.sparkcomms.spark.StageAccumulables.asLong;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.CommStats;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.Protocol;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.spark.dataset.BarrierDatasets;
import io.sparkcomms.spark.dataset.BarrierOptions;
import io.sparkcomms.spark.dataset.DataParallelTrainer;
import io.sparkcomms.spark.dataset.TrainingResult;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The stage page's {@link CommAccumulators} in {@code local[4]} (host backend): what the tasks of
 * {@code io.sparkcomms.spark.dataset}'s barrier stages add, as the driver and the UI's listener events see it.
 */
class CommAccumulatorsLocalTest {
  static JavaSparkContext sc;

  @BeforeAll static void start() {
    sc = new JavaSparkContext(new SparkConf()
        .setMaster("local[4]")
        .setAppName("sparkcomms-accumulators")
        .set("spark.plugins", SparkCommsPlugin.class.getName())
        .set("spark.ui.enabled", "false")
        .set("spark.sparkcomms.timeout", "20s")
        .set("spark.sparkcomms.stagingBytes", "1M"));
  }

  @AfterAll static void stop() {
    if (sc != null) sc.stop();
  }

  private static JavaRDD<Integer> fourPartitions() { return sc.parallelize(List.of(0, 1, 2, 3), 4); }

  /** Per protocol, the calls of every task's communicator as the tasks saw them when their function returned. */
  private static Map<Protocol, Long> sum(List<Map<Protocol, Long>> perTask) {
    Map<Protocol, Long> m = new EnumMap<>(Protocol.class);
    for (Map<Protocol, Long> t : perTask) t.forEach((p, n) -> m.merge(p, n, Long::sum));
    return m;
  }

  @Test void aBarrierJobShowsEveryTasksCallsOnItsStage() throws Exception {
    StageAccumulables ui = StageAccumulables.listen(sc.sc());
    List<Map<Protocol, Long>> seen = BarrierDatasets.mapPartitions(fourPartitions(), (comm, rows) -> {
      for (int i = 0; i < 3; i++) comm.allReduce(HostTensor.of(new double[] {comm.rank(), i}), ReduceOp.SUM);  // 16 bytes each
      return List.<Map<Protocol, Long>>of(new EnumMap<>(comm.stats().callsByProtocol())).iterator();
    }, BarrierOptions.defaults()).collect();
    ui.drain();

    Map<String, Object> stage = ui.onlyStage();
    assertEquals(12, asLong(stage, CommAccumulators.CALLS), "4 tasks x 3 allReduces: " + stage);
    assertEquals(12 * 16, asLong(stage, CommAccumulators.BYTES), "12 calls of 2 doubles: " + stage);
    assertTrue(asDouble(stage, CommAccumulators.TIME_MS) >= 0, stage.toString());
    Map<Protocol, Long> expected = sum(seen);
    assertEquals(12, expected.values().stream().mapToLong(Long::longValue).sum(), "the tasks' own stats: " + expected);
    for (Protocol p : Protocol.values()) {
      String name = CommAccumulators.protocolCallsName(p);
      assertEquals(expected.getOrDefault(p, 0L), stage.containsKey(name) ? asLong(stage, name) : 0L, name + ": " + stage);
    }

    List<Map<String, Object>> tasks = ui.tasks().stream().filter(t -> !t.isEmpty()).toList();
    assertEquals(4, tasks.size(), "every task updates them: " + ui.tasks());
    for (Map<String, Object> t : tasks) {
      assertEquals(3, asLong(t, CommAccumulators.CALLS), t.toString());
      assertEquals(3 * 16, asLong(t, CommAccumulators.BYTES), t.toString());
    }
    assertEquals(0, BarrierComms.accumulatorTaskCount(), "the tasks' registrations end with them");
  }

  @Test void childCommunicatorsAddToTheHolderTheJobWasGiven() throws Exception {
    CommAccumulators mine = CommAccumulators.register(sc.sc());
    StageAccumulables ui = StageAccumulables.listen(sc.sc());
    List<long[]> seen = BarrierDatasets.mapPartitions(fourPartitions(), (comm, rows) -> {
      comm.allReduce(HostTensor.of(new double[] {1}), ReduceOp.SUM);
      Communicator pair = BarrierComms.split(comm.rank() / 2, comm.rank());
      for (int i = 0; i < 2; i++) pair.allReduce(HostTensor.of(new float[] {1, 2, 3, 4}), ReduceOp.SUM);
      CommStats a = comm.stats();
      CommStats b = pair.stats();
      long bytes = 0;
      for (Protocol p : Protocol.values()) bytes += a.bytes(p) + b.bytes(p);
      return List.of(new long[] {a.totalCalls(), b.totalCalls(), bytes}).iterator();
    }, BarrierOptions.defaults().accumulators(mine)).collect();
    ui.drain();

    long parent = 0;
    long children = 0;
    long bytes = 0;
    for (long[] s : seen) {
      parent += s[0];
      children += s[1];
      bytes += s[2];
    }
    assertEquals(8, children, "2 allReduces on every task's pair");
    assertEquals(parent + children, mine.calls(), "the stage's and the pairs' calls: " + mine);
    assertEquals(bytes, mine.bytes(), mine.toString());
    assertTrue(mine.bytes() >= 4 * (8 + 2 * 16), mine.toString());
    assertTrue(mine.millis() >= 0, mine.toString());
    assertEquals(mine.calls(), mine.callsByProtocol().values().stream().mapToLong(Long::longValue).sum(), mine.toString());
    assertEquals(mine.calls(), asLong(ui.onlyStage(), CommAccumulators.CALLS), "what the stage page shows");
    assertTrue(ui.perStageCounts().values().stream().allMatch(n -> n == 1),
        "the given holder only, no second set: " + ui.perStageCounts());
  }

  @Test void theTrainersStageCountsEveryRanksCalls() throws Exception {
    List<float[]> rows = new ArrayList<>();
    for (int i = 0; i < 8; i++) rows.add(new float[] {i, 1});
    StageAccumulables ui = StageAccumulables.listen(sc.sc());
    TrainingResult r = new DataParallelTrainer<float[]>((params, batch, grad) -> {
      double loss = 0;
      for (float[] x : batch) {
        double d = params[0] * x[0] + params[1] - 2 * x[0];
        loss += d * d / batch.size();
        grad[0] += (float) (2 * d * x[0] / batch.size());
        grad[1] += (float) (2 * d / batch.size());
      }
      return loss;
    }).initialParams(new float[2]).epochs(2).learningRate(0.01).fit(sc.parallelize(rows, 4));
    ui.drain();

    long rank0 = r.callsByProtocol().values().stream().mapToLong(Long::longValue).sum();
    assertEquals(5, rank0, "the row count allReduce, then a gradient and a loss allReduce per epoch: " + r.callsByProtocol());
    assertEquals(4 * rank0, asLong(ui.onlyStage(), CommAccumulators.CALLS), "every rank makes rank 0's calls");
  }

  @Test void registeringAfterTheCommunicatorExistsIsRefused() {
    CommAccumulators late = CommAccumulators.register(sc.sc());
    List<String> out = BarrierJobs.collect(fourPartitions(), String.class, it -> {
      BarrierComms.get();
      try {
        BarrierComms.addStatsTo(late);
        return List.of("accepted").iterator();
      } catch (IllegalStateException e) {
        return List.of(e.getMessage().contains("before the task's first BarrierComms.get()") ? "refused" : e.getMessage()).iterator();
      }
    });
    assertEquals(List.of("refused", "refused", "refused", "refused"), out);
    assertEquals(0, late.calls());
  }

  @Test void addTurnsStatsIntoTheAccumulators() {
    CommAccumulators acc = CommAccumulators.register(sc.sc());
    CommStats s = new CommStats();
    s.record(io.sparkcomms.collectives.Collective.ALL_REDUCE, Protocol.LAMPORT, 1024, 2_000_000);
    s.record(io.sparkcomms.collectives.Collective.ALL_GATHER, Protocol.FLAT, 100, 500_000);
    s.record(io.sparkcomms.collectives.Collective.ALL_REDUCE, Protocol.LAMPORT, 1024, 1_000_000);
    acc.add(s);
    acc.add(null);
    assertEquals(3, acc.calls());
    assertEquals(2, acc.calls(Protocol.LAMPORT));
    assertEquals(1, acc.calls(Protocol.FLAT));
    assertEquals(0, acc.calls(Protocol.VENDOR));
    assertEquals(2148, acc.bytes());
    assertEquals(3.5, acc.millis(), 1e-9);
    assertEquals(CommAccumulators.names().size(), CommAccumulators.names().stream().distinct().count());
    assertTrue(CommAccumulators.names().stream().allMatch(n -> n.startsWith("sparkcomms: ")), CommAccumulators.names().toString());
    for (Protocol p : Protocol.values()) assertTrue(CommAccumulators.names().contains(CommAccumulators.protocolCallsName(p)));
    assertNotNull(CommAccumulators.registerIfEnabled(sc.sc()), "on by default");
    assertFalse(acc.toString().isEmpty());
  }
}
