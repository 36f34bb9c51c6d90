package io.sparkcomms.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.ReduceOp;
import java.util.List;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaSparkContext;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Without {@code spark.plugins}, BarrierComms falls back to BarrierTaskContext.allGather (slower, still correct). */
class BarrierCommsFallbackTest {
  @Test @Timeout(120) void withoutThePluginTheBarrierRendezvousIsUsed() {
    try (JavaSparkContext sc = new JavaSparkContext(new SparkConf().setMaster("local[2]")
        .setAppName("sparkcomms-no-plugin").set("spark.ui.enabled", "false"))) {
      List<String> out = BarrierJobs.collect(sc.parallelize(List.of(0, 1), 2), String.class, it -> {
        Communicator comm = BarrierComms.get();
        double[] v = {it.next() + 1};
        comm.allReduce(HostTensor.of(v), ReduceOp.SUM);
        return List.of(v[0] + " " + BarrierComms.rendezvousOfCurrentTask().orElseThrow()).iterator();
      });
      assertEquals(2, out.size());
      for (String s : out) {
        assertTrue(s.startsWith("3.0 Spark barrier stage"), s);
        assertFalse(s.contains("plugin RPC"), s);
      }
    }
  }
}
