package io.sparkcomms.spark.dataset;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.spark.SparkCommsPlugin;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.ml.linalg.VectorUDT;
import org.apache.spark.ml.linalg.Vectors;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Every helper with real executor JVMs ({@code local-cluster[2,1,1024]}, two executors, each rank in
 * its own process), set up as {@code LocalClusterTest} is (ANCHORS.md, Spark lessons).
 */
class DatasetHelpersLocalClusterTest {
  @TempDir Path dir;

  @Test @Timeout(600) void helpersAcrossTwoExecutorProcesses() throws Exception {
    Path home = Path.of(System.getProperty("sc.test.home", dir.resolve("spark-home").toString()));
    Files.createDirectories(home);
    System.setProperty("spark.testing", "true");
    System.setProperty("spark.test.home", home.toString());
    String classpath = System.getProperty("java.class.path");
    SparkSession spark = SparkSession.builder().master("local-cluster[2,1,1024]").appName("sparkcomms-dataset-cluster")
        .config("spark.plugins", SparkCommsPlugin.class.getName())
        .config("spark.testing", "true")
        .config("spark.test.home", home.toString())
        .config("spark.cores.max", "2")
        .config("spark.scheduler.minRegisteredResourcesRatio", "1.0")
        .config("spark.executor.extraClassPath", classpath)
        .config("spark.driver.extraClassPath", classpath)
        .config("spark.executor.extraJavaOptions", System.getProperty("sc.test.jvmArgs", ""))
        .config("spark.executor.memory", "512m")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sparkcomms.timeout", "60s")
        .config("spark.sparkcomms.stagingBytes", "1M")
        .getOrCreate();
    try {
      JavaSparkContext sc = JavaSparkContext.fromSparkContext(spark.sparkContext());

      // (a) mapPartitions: the ranks are two executor processes.
      Dataset<Long> pids = BarrierDatasets.mapPartitions(spark.range(0, 10).as(Encoders.LONG()).repartition(2),
          (comm, rows) -> {
            long[] pid = {ProcessHandle.current().pid()};
            long[] all = new long[comm.size()];
            comm.allGather(io.sparkcomms.collectives.HostTensor.of(pid), io.sparkcomms.collectives.HostTensor.of(all));
            return List.of(all[0] * 10_000_000L + all[1]).iterator();
          }, Encoders.LONG());
      List<Long> got = pids.collectAsList();
      assertEquals(2, got.size());
      assertEquals(got.get(0), got.get(1));
      long a = got.get(0) / 10_000_000L;
      long b = got.get(0) % 10_000_000L;
      assertTrue(a != b && a != ProcessHandle.current().pid() && b != ProcessHandle.current().pid(), got.toString());

      // (b) vector column sum (ML vectors, 100k dimensions: the tree algorithm) vs plain Java.
      int d = 100_000;
      List<Row> rows = new ArrayList<>();
      double[] ref = new double[d];
      Random r = new Random(5);
      for (int i = 0; i < 6; i++) {
        double[] x = new double[d];
        for (int j = 0; j < d; j++) {
          x[j] = r.nextInt(1000) / 8.0;
          ref[j] += x[j];
        }
        rows.add(RowFactory.create(Vectors.dense(x)));
      }
      Dataset<Row> vecs = spark.createDataFrame(rows, new StructType().add("v", new VectorUDT())).repartition(2);
      assertArrayEquals(ref, VectorColumns.sum(vecs, "v"), 0);

      // (c) trainer with checkpoints on file:// and a resumed run, vs plain Java full-batch descent.
      List<LabeledVector> data = Reference.logisticData(300, 5, 8);
      JavaRDD<LabeledVector> rdd = sc.parallelize(data, 2);
      String ck = dir.resolve("ckpt").toUri().toString();
      DataParallelTrainer<LabeledVector> t = new DataParallelTrainer<>(new Reference.LogisticGradient())
          .initialParams(new float[6]).learningRate(0.5).checkpointDir(ck);
      TrainingResult first = t.epochs(4).fit(rdd);
      TrainingResult resumed = t.epochs(8).fit(rdd);
      assertEquals(4, resumed.resumedFromEpoch());
      assertEquals(2, resumed.ranks());
      double[] losses = new double[8];
      float[] refParams = Reference.fullBatchGd(DatasetHelpersLocalTest.split(data, 2), new float[6], 8, 0.5, losses);
      assertArrayEquals(refParams, resumed.params(), 1e-4f);
      assertArrayEquals(losses, resumed.lossPerEpoch(), 1e-5);
      assertArrayEquals(Arrays.copyOf(losses, 4), first.lossPerEpoch(), 1e-5);
      assertEquals(List.of(7, 8), Checkpoints.list(ck, sc.hadoopConfiguration()));

      // (d) tensor-parallel inference vs single-rank inference.
      Reference.Net model = Reference.randomNet(9, DenseLayer.Activation.TANH, 16, 40, 24, 3);
      List<Row> in = new ArrayList<>();
      for (int i = 0; i < 77; i++) {
        float[] x = new float[16];
        for (int j = 0; j < 16; j++) x[j] = (float) r.nextGaussian();
        in.add(RowFactory.create(i, x));
      }
      StructType schema = new StructType().add("id", "int")
          .add("features", org.apache.spark.sql.types.DataTypes.createArrayType(org.apache.spark.sql.types.DataTypes.FloatType, false));
      Dataset<Row> inputs = spark.createDataFrame(sc.parallelize(in, 2), schema);
      List<Row> out = new TensorParallelInference(model).outputCol("y").batchSize(10).transform(inputs).collectAsList();
      assertEquals(77, out.size());
      for (int i = 0; i < 77; i++) {
        Row row = out.get(i);
        assertEquals(i, row.getInt(0));
        float[] x = (float[]) in.get(i).get(1);
        float[] refY = model.forward(x);
        List<Object> y = row.getList(2);
        for (int j = 0; j < refY.length; j++) assertEquals(refY[j], (Float) y.get(j), 1e-4, "row " + i);
      }
    } finally {
      spark.stop();
    }
  }
}
