package io.sparkcomms.spark.plugin;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import io.sparkcomms.spark.gpu.GpuClaimProtocol;
import io.sparkcomms.spark.gpu.GpuClaimRegistry;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol.Deposit;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol.Slot;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol.Status;
import io.sparkcomms.spark.rendezvous.RendezvousRegistry;
import java.util.List;
import java.util.Properties;
import org.apache.spark.rdd.DeterministicLevel;
import org.apache.spark.scheduler.SparkListenerExecutorRemoved;
import org.apache.spark.scheduler.SparkListenerStageCompleted;
import org.apache.spark.scheduler.SparkListenerStageSubmitted;
import org.apache.spark.scheduler.SparkListenerTaskStart;
import org.apache.spark.scheduler.StageInfo;
import org.apache.spark.scheduler.TaskInfo;
import org.apache.spark.scheduler.TaskLocality;
import org.apache.spark.storage.RDDInfo;
import org.apache.spark.storage.StorageLevel;
import org.junit.jupiter.api.Test;
import scala.Option;
import scala.jdk.javaapi.CollectionConverters;

/** The driver plugin's SparkListener, fed the events Spark posts for a barrier stage and a plain one. */
class DriverListenerTest {
  private static <T> scala.collection.immutable.Seq<T> seq(List<T> l) { return CollectionConverters.asScala(l).toList(); }

  private static StageInfo stage(int id, int attempt, boolean barrier) {
    RDDInfo parent = new RDDInfo(1, "parallelize", 2, StorageLevel.NONE(), false, seq(List.of()), "", Option.empty(),
        DeterministicLevel.DETERMINATE());
    RDDInfo rdd = new RDDInfo(2, "mapPartitions", 2, StorageLevel.NONE(), barrier, seq(List.of(1)), "", Option.empty(),
        DeterministicLevel.DETERMINATE());
    return new StageInfo(id, attempt, "stage", 2, seq(List.of(rdd, parent)), seq(List.of()), "", null, seq(List.of()),
        Option.empty(), 0, false, 0);
  }

  private static SparkListenerTaskStart task(int stage, int partition, String executor, long taskId) {
    return new SparkListenerTaskStart(stage, 0, new TaskInfo(taskId, partition, 0, partition, 0L, executor, "h",
        TaskLocality.PROCESS_LOCAL(), false));
  }

  private static Status deposit(RendezvousRegistry r, int stage, int rank, String executor, long taskId) {
    return r.deposit(executor, new Deposit(new Slot(stage, 0, 0, 0, rank, 2, taskId), new byte[] {1}, 1000)).status();
  }

  @Test void barrierTaskStartsAttributeRanksAndEndedStagesAreForgotten() {
    RendezvousRegistry r = new RendezvousRegistry();
    GpuClaimRegistry claims = new GpuClaimRegistry();
    SparkCommsDriverPlugin.DriverListener l = new SparkCommsDriverPlugin.DriverListener(claims, r);
    l.onStageSubmitted(new SparkListenerStageSubmitted(stage(4, 0, true), new Properties()));
    l.onStageSubmitted(new SparkListenerStageSubmitted(stage(5, 0, false), new Properties()));
    l.onTaskStart(task(4, 0, "1", 40));
    l.onTaskStart(task(4, 1, "2", 41));
    l.onTaskStart(task(5, 0, "1", 50));

    assertEquals(Status.PENDING, deposit(r, 4, 0, "1", 40));
    assertEquals(Status.FAILED, deposit(r, 4, 1, "1", 40), "partition 1 runs on executor 2 as task 41");
    assertEquals(Status.DONE, deposit(r, 4, 1, "2", 41));
    assertEquals(Status.UNVERIFIED, deposit(r, 5, 0, "1", 50), "tasks of a plain stage are not recorded");

    l.onStageCompleted(new SparkListenerStageCompleted(stage(4, 0, true)));
    assertEquals(0, r.groupCount());
    assertEquals(Status.FAILED, deposit(r, 4, 0, "1", 40), "the stage attempt has ended");

    claims.claim("3", new GpuClaimProtocol.Claim("h", "gpu", "0"));
    l.onExecutorRemoved(new SparkListenerExecutorRemoved(0L, "3", "lost"));
    assertNull(claims.holder("h", "gpu", "0"));
  }
}
