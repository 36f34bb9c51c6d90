package io.sparkcomms.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.spark.dataset.BarrierDatasets;
import io.sparkcomms.spark.dataset.BarrierOptions;
import java.util.List;
import java.util.Map;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaSparkContext;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** {@code spark.sparkcomms.accumulators.enabled=false}: {@code BarrierDatasets} registers no accumulator. */
class CommAccumulatorsOffLocalTest {
  static JavaSparkContext sc;

  @BeforeAll static void start() {
    sc = new JavaSparkContext(new SparkConf()
        .setMaster("local[4]")
        .setAppName("sparkcomms-accumulators-off")
        .set("spark.plugins", SparkCommsPlugin.class.getName())
        .set("spark.ui.enabled", "false")
        .set("spark.sparkcomms.timeout", "20s")
        .set("spark.sparkcomms.accumulators.enabled", "false"));
  }

  @AfterAll static void stop() {
    if (sc != null) sc.stop();
  }

  @Test void noStageShowsThemAndTheJobStillRuns() throws Exception {
    assertNull(CommAccumulators.registerIfEnabled(sc.sc()));
    StageAccumulables ui = StageAccumulables.listen(sc.sc());
    List<Double> out = BarrierDatasets.mapPartitions(sc.parallelize(List.of(1, 2, 3, 4), 4), (comm, rows) -> {
      double[] s = {rows.next()};
      for (int i = 0; i < 3; i++) comm.allReduce(HostTensor.of(new double[] {1, 2}), ReduceOp.SUM);
      comm.allReduce(HostTensor.of(s), ReduceOp.SUM);
      return List.of(s[0]).iterator();
    }, BarrierOptions.defaults()).collect();
    ui.drain();
    assertEquals(List.of(10.0, 10.0, 10.0, 10.0), out);
    assertEquals(List.of(), ui.stages(), "no stage has a sparkcomms accumulator");
    assertEquals(4, ui.tasks().size(), "the listener saw the tasks");
    assertEquals(0, ui.tasks().stream().filter(t -> !t.isEmpty()).count(), "no task updated one: " + ui.tasks());
    assertEquals(Map.of(), ui.perStageCounts());
  }
}
