package io.sparkcomms.spark.dataset;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.spark.SparkCommsPlugin;
import java.io.File;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.spark.SparkConf;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The trainer's checkpoints on a real HDFS: an in-process {@link MiniDFSCluster} (namenode + one
 * datanode, from hadoop-client-minicluster, the same Hadoop as Spark's hadoop-client-api), checkpoint
 * directories as {@code hdfs://host:port/...} URIs, {@code local[4,4]} (four ranks, retries allowed).
 * Mirrors {@code DatasetHelpersLocalTest.checkpointedRunResumesToTheSameParameters} (stop and resume
 * gives the uninterrupted run's parameters bit for bit) and adds a crash in the middle of an epoch:
 * the retried stage attempt resumes from the newest checkpoint on HDFS.
 */
class HdfsCheckpointTest {
  static final int EPOCHS = 6;
  @TempDir static Path tmp;
  static MiniDFSCluster hdfs;
  static String root;
  static JavaSparkContext sc;
  static JavaRDD<LabeledVector> rdd;
  static TrainingResult straight;

  @BeforeAll static void start() throws Exception {
    Configuration conf = new Configuration();
    // the Builder sets HDFS_MINIDFS_BASEDIR itself; Hadoop 3.3 refuses a conf that already has it
    hdfs = new MiniDFSCluster.Builder(conf, new File(tmp.resolve("dfs").toString())).numDataNodes(1).build();
    hdfs.waitActive();
    root = "hdfs://localhost:" + hdfs.getNameNodePort();
    sc = new JavaSparkContext(new SparkConf().setMaster("local[4,4]").setAppName("sparkcomms-hdfs-checkpoints")
        .set("spark.plugins", SparkCommsPlugin.class.getName())
        .set("spark.ui.enabled", "false")
        .set("spark.sparkcomms.timeout", "30s")
        .set("spark.sparkcomms.stagingBytes", "1M"));
    rdd = sc.parallelize(Reference.logisticData(320, 5, 3), 4).cache();
    straight = trainer(new Reference.LogisticGradient(1e-3)).checkpointDir(root + "/straight").epochs(EPOCHS).fit(rdd);
  }

  @AfterAll static void stop() {
    if (sc != null) sc.stop();
    if (hdfs != null) hdfs.shutdown();
  }

  /** The settings of DatasetHelpersLocalTest's checkpoint test: minibatches, momentum, a seed, keep 2. */
  static DataParallelTrainer<LabeledVector> trainer(GradientFunction<LabeledVector> g) {
    return new DataParallelTrainer<>(g).initialParams(new float[6]).learningRate(0.1).momentum(0.9).batchSize(16)
        .seed(5).keepCheckpoints(2);
  }

  /** The checkpoint files in {@code dir}, read through HDFS's own client (not through the trainer). */
  static List<String> filesOnHdfs(String dir) throws Exception {
    FileSystem fs = hdfs.getFileSystem();
    assertEquals("hdfs", fs.getUri().getScheme(), "the minicluster's file system is HDFS");
    List<String> names = new ArrayList<>();
    for (FileStatus f : fs.listStatus(new org.apache.hadoop.fs.Path(dir))) {
      assertTrue(f.getLen() > 0, "empty checkpoint file " + f.getPath());
      names.add(f.getPath().getName());
    }
    names.sort(null);
    return names;
  }

  @Test @Timeout(600) void stopAndResumeOnHdfsGivesTheUninterruptedParameters() throws Exception {
    String dir = root + "/stop-resume";
    DataParallelTrainer<LabeledVector> t = trainer(new Reference.LogisticGradient(1e-3)).checkpointDir(dir);
    TrainingResult first = t.epochs(3).fit(rdd);
    assertEquals(List.of(2, 3), Checkpoints.list(dir, sc.hadoopConfiguration()), "checkpoints after 3 epochs");
    assertEquals(List.of("ckpt-00000002.bin", "ckpt-00000003.bin"), filesOnHdfs("/stop-resume"),
        "the checkpoints are HDFS files, and no temporary file is left");

    TrainingResult resumed = t.epochs(EPOCHS).fit(rdd);
    assertEquals(3, resumed.resumedFromEpoch(), "the second run starts from the checkpoint of epoch 3: " + resumed);
    assertArrayEquals(straight.params(), resumed.params(), 0f, "resumed vs uninterrupted parameters");
    assertArrayEquals(straight.lossPerEpoch(), resumed.lossPerEpoch(), 0, "resumed vs uninterrupted losses");
    assertArrayEquals(Arrays.copyOf(straight.lossPerEpoch(), 3), first.lossPerEpoch(), 0, "first 3 epochs");
    assertEquals(List.of("ckpt-00000005.bin", "ckpt-00000006.bin"), filesOnHdfs("/stop-resume"));
    Checkpoints.State st = Checkpoints.latest(dir, sc.hadoopConfiguration()).orElseThrow();
    assertEquals(EPOCHS, st.epochsDone());
    assertArrayEquals(straight.params(), st.params(), 0f, "parameters in the last checkpoint");
    assertEquals(List.of(5, 6), Checkpoints.list(root + "/straight", sc.hadoopConfiguration()));
  }

  /**
   * Rank 1 throws in the middle of the fifth epoch of the first stage attempt (checkpoints of epochs
   * 3 and 4 are on HDFS by then); Spark relaunches the barrier stage and every rank starts again from
   * the newest checkpoint, which rank 0 reads from HDFS and broadcasts.
   */
  @Test @Timeout(600) void aCrashMidEpochResumesFromTheNewestHdfsCheckpoint() throws Exception {
    String dir = root + "/crash";
    TrainingResult r = trainer(new CrashingGradient(4)).checkpointDir(dir).epochs(EPOCHS).fit(rdd);
    assertEquals(4, r.resumedFromEpoch(), "the retried attempt starts from the checkpoint of epoch 4 (not from 0, "
        + "and the crashed epoch 5 was never saved): " + r);
    assertArrayEquals(straight.params(), r.params(), 0f, "crashed-and-resumed vs uninterrupted parameters");
    assertArrayEquals(straight.lossPerEpoch(), r.lossPerEpoch(), 0, "crashed-and-resumed vs uninterrupted losses");
    assertEquals(List.of("ckpt-00000005.bin", "ckpt-00000006.bin"), filesOnHdfs("/crash"));
  }

  /**
   * Logistic regression that throws on rank 1 in stage attempt 0 at the third step of epoch
   * {@code crashEpoch} (0-based; 5 steps per epoch: 80 rows per rank, batches of 16).
   */
  static final class CrashingGradient implements GradientFunction<LabeledVector> {
    private static final long serialVersionUID = 1L;
    private final Reference.LogisticGradient inner = new Reference.LogisticGradient(1e-3);
    private final int crashEpoch;
    private transient int calls;

    CrashingGradient(int crashEpoch) { this.crashEpoch = crashEpoch; }

    @Override public double compute(float[] params, List<LabeledVector> batch, float[] gradient) {
      TaskContext tc = TaskContext.get();
      if (tc.stageAttemptNumber() == 0 && tc.partitionId() == 1 && calls++ == crashEpoch * 5 + 2) {
        throw new IllegalStateException("simulated crash of rank 1 in epoch " + (crashEpoch + 1));
      }
      return inner.compute(params, batch, gradient);
    }
  }
}
