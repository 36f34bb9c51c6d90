package io.sparkcomms.spark.dataset;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.spark.SparkCommsPlugin;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.ml.linalg.Vector;
import org.apache.spark.ml.linalg.VectorUDT;
import org.apache.spark.ml.linalg.Vectors;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The Dataset helpers in {@code local[4]} (four task threads, host backend), against plain Java. */
class DatasetHelpersLocalTest {
  static SparkSession spark;
  static JavaSparkContext sc;
  @TempDir Path tmp;

  @BeforeAll static void start() {
    spark = SparkSession.builder().master("local[4,4]").appName("sparkcomms-dataset-local")
        .config("spark.plugins", SparkCommsPlugin.class.getName())
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sparkcomms.timeout", "30s")
        .config("spark.sparkcomms.stagingBytes", "1M")
        .getOrCreate();
    sc = JavaSparkContext.fromSparkContext(spark.sparkContext());
  }

  @AfterAll static void stop() {
    if (spark != null) spark.stop();
  }

  // ------------------------------------------------------------------ mapPartitions

  @Test void mapPartitionsHandsEveryPartitionTheCommunicator() {
    Dataset<Long> numbers = spark.range(0, 100).as(Encoders.LONG()).repartition(4);
    Dataset<String> out = BarrierDatasets.mapPartitions(numbers, (comm, rows) -> {
      double[] s = {0, 0};
      rows.forEachRemaining(x -> { s[0] += x; s[1]++; });
      comm.allReduce(HostTensor.of(s), ReduceOp.SUM);
      return List.of(comm.rank() + "/" + comm.size() + " " + s[0] + " " + s[1]).iterator();
    }, Encoders.STRING());
    List<String> got = new ArrayList<>(out.collectAsList());
    got.sort(null);
    assertEquals(List.of("0/4 4950.0 100.0", "1/4 4950.0 100.0", "2/4 4950.0 100.0", "3/4 4950.0 100.0"), got);
  }

  @Test void retriableMapPartitionsSurvivesAFailedAttempt() {
    Dataset<Integer> data = spark.createDataset(List.of(1, 2, 3, 4, 5, 6, 7, 8), Encoders.INT()).repartition(4);
    Dataset<Integer> out = BarrierDatasets.mapPartitions(data, (comm, rows) -> {
      if (TaskContext.get().stageAttemptNumber() == 0 && comm.rank() == 1) throw new IllegalStateException("rank 1 dies once");
      int[] s = {0};
      rows.forEachRemaining(x -> s[0] += x);
      comm.allReduce(HostTensor.of(s), ReduceOp.SUM);
      return List.of(s[0] * 10 + comm.rank()).iterator();
    }, Encoders.INT(), BarrierOptions.defaults().retriable(true));
    List<Integer> got = new ArrayList<>(out.collectAsList());
    got.sort(null);
    assertEquals(List.of(360, 361, 362, 363), got);
  }

  @Test void ranksCoalesceOrRepartition() {
    JavaRDD<Integer> six = sc.parallelize(List.of(1, 2, 3, 4, 5, 6), 6);
    assertEquals(4, BarrierDatasets.withRanks(six, 0).getNumPartitions(), "more partitions than slots: repartitioned");
    assertEquals(2, BarrierDatasets.withRanks(six, 2).getNumPartitions());
    assertEquals(3, BarrierDatasets.withRanks(sc.parallelize(List.of(1, 2), 1), 3).getNumPartitions());
    List<Integer> sizes = BarrierDatasets.mapPartitions(six, (comm, rows) -> {
      int[] n = {0};
      rows.forEachRemaining(x -> n[0]++);
      return List.of(comm.size() * 100 + n[0]).iterator();
    }, BarrierOptions.defaults()).collect();
    assertEquals(4, sizes.size());
    assertEquals(6, sizes.stream().mapToInt(x -> x % 100).sum());
  }

  // ------------------------------------------------------------------ vector columns

  static final StructType FLOATS = new StructType().add("id", DataTypes.IntegerType)
      .add("v", DataTypes.createArrayType(DataTypes.FloatType, false), true);

  @Test void sumAndMeanOfFloatAndDoubleArrays() {
    Random r = new Random(7);
    int d = 13;
    List<Row> rows = new ArrayList<>();
    List<Row> drows = new ArrayList<>();
    double[] ref = new double[d];
    long count = 0;
    for (int i = 0; i < 203; i++) {
      if (i % 17 == 5) {                                    // null vectors are skipped
        rows.add(RowFactory.create(i, null));
        drows.add(RowFactory.create(i, null));
        continue;
      }
      float[] v = new float[d];
      double[] dv = new double[d];
      for (int j = 0; j < d; j++) {
        v[j] = (float) r.nextGaussian();
        dv[j] = v[j];
        ref[j] += v[j];
      }
      count++;
      rows.add(RowFactory.create(i, v));
      drows.add(RowFactory.create(i, dv));
    }
    Dataset<Row> f = spark.createDataFrame(rows, FLOATS).repartition(4);
    VectorColumns.Summary s = VectorColumns.summary(f, "v", BarrierOptions.defaults());
    assertEquals(count, s.count());
    assertArrayEquals(ref, s.sum(), 1e-9);
    double[] mean = s.mean();
    for (int j = 0; j < d; j++) assertEquals(ref[j] / count, mean[j], 1e-12);

    StructType dschema = new StructType().add("id", DataTypes.IntegerType)
        .add("v", DataTypes.createArrayType(DataTypes.DoubleType, true), true);
    Dataset<Row> dd = spark.createDataFrame(drows, dschema).repartition(3);
    assertArrayEquals(ref, VectorColumns.sum(dd, "v"), 1e-9);
  }

  @Test void sumOfMlVectorsDenseAndSparse() {
    int d = 9;
    List<Row> rows = new ArrayList<>();
    double[] ref = new double[d];
    for (int i = 0; i < 50; i++) {
      Vector v;
      if (i % 2 == 0) {
        double[] a = new double[d];
        for (int j = 0; j < d; j++) a[j] = i + j * 0.5;
        v = Vectors.dense(a);
      } else {
        v = Vectors.sparse(d, new int[] {1, 2 + i % (d - 2)}, new double[] {2.0, i});
      }
      double[] a = v.toArray();
      for (int j = 0; j < d; j++) ref[j] += a[j];
      rows.add(RowFactory.create(v));
    }
    Dataset<Row> df = spark.createDataFrame(rows, new StructType().add("features", new VectorUDT())).repartition(4);
    double[] mean = VectorColumns.mean(df, "features");
    for (int j = 0; j < d; j++) assertEquals(ref[j] / 50, mean[j], 1e-12, "mean " + j);
  }

  @Test void emptyPartitionsAndEmptyColumns() {
    List<Row> rows = List.of(RowFactory.create(1, new float[] {1, 2}), RowFactory.create(2, new float[] {3, 4}));
    Dataset<Row> two = spark.createDataFrame(rows, FLOATS).repartition(4);   // at least two partitions are empty
    assertArrayEquals(new double[] {4, 6}, VectorColumns.sum(two, "v"), 0);
    VectorColumns.Summary none = VectorColumns.summary(two.filter("id > 5"), "v", BarrierOptions.defaults().ranks(4));
    assertEquals(0, none.count());
    assertEquals(0, none.dimension());
  }

  @Test void mismatchedSizesAndWrongTypesAreClearErrors() {
    List<Row> rows = List.of(RowFactory.create(1, new float[] {1, 2}), RowFactory.create(2, new float[] {3, 4, 5}));
    Dataset<Row> bad = spark.createDataFrame(rows, FLOATS).repartition(1);
    Exception e = assertThrows(Exception.class, () -> VectorColumns.sum(bad, "v"));
    assertTrue(String.valueOf(e.getMessage()).contains("different sizes"), e.getMessage());
    Dataset<Row> badAcross = spark.createDataFrame(rows, FLOATS).repartition(2, new org.apache.spark.sql.Column("id"));
    Exception e2 = assertThrows(Exception.class, () -> VectorColumns.sum(badAcross, "v"));
    assertTrue(String.valueOf(e2.getMessage()).contains("different sizes"), e2.getMessage());
    IllegalArgumentException e3 = assertThrows(IllegalArgumentException.class,
        () -> VectorColumns.sum(spark.createDataFrame(rows, FLOATS), "id"));
    assertTrue(e3.getMessage().contains("expected array<float>, array<double> or an ML/MLlib Vector"), e3.getMessage());
  }

  // ------------------------------------------------------------------ trainer

  static List<List<LabeledVector>> split(List<LabeledVector> all, int parts) {
    List<List<LabeledVector>> out = new ArrayList<>();
    int n = all.size();
    for (int p = 0; p < parts; p++) out.add(all.subList(p * n / parts, (p + 1) * n / parts));
    return out;
  }

  @Test void fullBatchTrainingMatchesPlainJava() {
    List<LabeledVector> data = Reference.logisticData(400, 6, 11);
    float[] init = new float[7];
    TrainingResult r = new DataParallelTrainer<>(new Reference.LogisticGradient())
        .initialParams(init).epochs(15).learningRate(0.5)
        .fit(sc.parallelize(data, 4));
    double[] losses = new double[15];
    float[] ref = Reference.fullBatchGd(split(data, 4), init, 15, 0.5, losses);
    assertArrayEquals(ref, r.params(), 1e-4f);
    assertArrayEquals(losses, r.lossPerEpoch(), 1e-5);
    assertEquals(4, r.ranks());
    assertEquals(0, r.resumedFromEpoch());
    assertTrue(r.lossPerEpoch()[14] < r.lossPerEpoch()[0] * 0.7, Arrays.toString(r.lossPerEpoch()));
    assertTrue(Reference.accuracy(r.params(), data) > 0.85);
  }

  @Test void denseClassifierTrainerMatchesTheSameRanksOutsideSpark() throws Exception {
    List<LabeledVector> data = Reference.logisticData(400, 6, 11);
    DenseClassifierTrainer t = new DenseClassifierTrainer(6, 8).epochs(8).batchSize(16).learningRate(0.2).momentum(0.5).seed(3);
    DenseTrainingResult r = t.fit(sc.parallelize(data, 4));
    assertEquals("host", r.backend());
    assertEquals("host", r.math());
    assertTrue(r.lossOnlyPerStep(), r.worstStepTransfers());
    assertEquals(7, r.stepsPerEpoch());                                    // ceil(100 / 16)
    double[] loss = r.lossPerEpoch();
    assertTrue(loss[7] < 0.7 * loss[0], Arrays.toString(loss));
    // the same four ranks as threads with host communicators, on the same partitions
    List<List<LabeledVector>> parts = split(data, 4);
    DenseTrainingResult direct = onHostRanks(4, (c, rank) -> DenseClassifierTrainer.trainPartition(c, parts.get(rank).iterator(), t.run()))
        .get(0);
    assertArrayEquals(direct.params(), r.params(), 0f);
    assertArrayEquals(direct.stepLosses(), r.stepLosses(), 0f);
  }

  /** {@code body} on {@code n} ranks as threads of this JVM, each with a host communicator; their results by rank. */
  static <T> List<T> onHostRanks(int n, java.util.function.BiFunction<io.sparkcomms.collectives.Communicator, Integer, T> body)
      throws Exception {
    io.sparkcomms.collectives.rendezvous.InJvmRendezvous.Group g = io.sparkcomms.collectives.rendezvous.InJvmRendezvous.group(n);
    java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(n);
    try {
      List<java.util.concurrent.Future<T>> fs = new ArrayList<>();
      for (int q = 0; q < n; q++) {
        int rank = q;
        fs.add(pool.submit(() -> {
          try (io.sparkcomms.collectives.Communicator c = io.sparkcomms.collectives.Comms.create(g.member(rank),
              io.sparkcomms.collectives.CommOptions.defaults().toBuilder().backend(io.sparkcomms.collectives.CommOptions.Backend.HOST).build())) {
            return body.apply(c, rank);
          }
        }));
      }
      List<T> out = new ArrayList<>();
      for (java.util.concurrent.Future<T> f : fs) out.add(f.get(120, java.util.concurrent.TimeUnit.SECONDS));
      return out;
    } finally {
      pool.shutdownNow();
    }
  }

  @Test void denseClassifierTrainerRefusesARowOfAnotherWidthOnEveryRank() throws Exception {
    List<LabeledVector> data = new ArrayList<>(Reference.logisticData(40, 6, 2));
    data.set(25, new LabeledVector(new float[5], 1));                   // row 5 of partition 2 (rows 20..29)
    Exception e = assertThrows(Exception.class, () -> new DenseClassifierTrainer(6, 4).epochs(1).fit(sc.parallelize(data, 4)));
    assertTrue(String.valueOf(e.getMessage()).contains("has 5 features, the model takes 6")
        || String.valueOf(e.getMessage()).contains("rank 2 cannot train on its partition"), e.getMessage());
    // every rank, directly: rank 2 names the row, the others name rank 2
    List<List<LabeledVector>> parts = split(data, 4);
    List<String> messages = onHostRanks(4, (c, rank) -> {
      try {
        DenseClassifierTrainer.trainPartition(c, parts.get(rank).iterator(), new DenseClassifierTrainer(6, 4).epochs(1).run());
        return "no error";
      } catch (IllegalArgumentException ex) {
        return ex.getMessage();
      }
    });
    for (int q = 0; q < 4; q++) {
      String m = messages.get(q);
      assertTrue(q == 2 ? m.contains("row 5 of partition 2 has 5 features, the model takes 6") : m.contains("rank 2 cannot train"),
          "rank " + q + ": " + m);
    }
  }

  @Test void checkpointedRunResumesToTheSameParameters() {
    List<LabeledVector> data = Reference.logisticData(320, 5, 3);
    JavaRDD<LabeledVector> rdd = sc.parallelize(data, 4).cache();
    String one = tmp.resolve("one").toUri().toString();
    String two = tmp.resolve("two").toUri().toString();
    DataParallelTrainer<LabeledVector> t = new DataParallelTrainer<>(new Reference.LogisticGradient(1e-3))
        .initialParams(new float[6]).learningRate(0.1).momentum(0.9).batchSize(16).seed(5).keepCheckpoints(2);
    TrainingResult straight = t.checkpointDir(one).epochs(6).fit(rdd);
    TrainingResult first = t.checkpointDir(two).epochs(3).fit(rdd);
    assertEquals(List.of(2, 3), Checkpoints.list(two, sc.hadoopConfiguration()));
    TrainingResult resumed = t.checkpointDir(two).epochs(6).fit(rdd);
    assertEquals(3, resumed.resumedFromEpoch());
    assertArrayEquals(straight.params(), resumed.params(), 0f);
    assertArrayEquals(straight.lossPerEpoch(), resumed.lossPerEpoch(), 0);
    assertArrayEquals(Arrays.copyOf(straight.lossPerEpoch(), 3), first.lossPerEpoch(), 0);
    assertEquals(List.of(5, 6), Checkpoints.list(two, sc.hadoopConfiguration()));
    Checkpoints.State st = Checkpoints.latest(two, sc.hadoopConfiguration()).orElseThrow();
    assertEquals(6, st.epochsDone());
    assertArrayEquals(straight.params(), st.params(), 0f);
    // 20 steps per epoch (80 rows per rank, batches of 16... ceil(80/16) = 5) x 3 epochs of allReduce in the resumed run
    assertTrue(resumed.callsByProtocol().values().stream().mapToLong(Long::longValue).sum() >= 15, resumed.toString());
    // Already done: nothing to train, same result.
    TrainingResult again = t.checkpointDir(two).epochs(6).fit(rdd);
    assertEquals(6, again.resumedFromEpoch());
    assertArrayEquals(straight.params(), again.params(), 0f);
  }

  @Test void lowPrecisionGradientsTrainToo() {
    List<LabeledVector> data = Reference.logisticData(400, 6, 11);
    DataParallelTrainer<LabeledVector> t = new DataParallelTrainer<>(new Reference.LogisticGradient())
        .initialParams(new float[7]).epochs(15).learningRate(0.5);
    TrainingResult fp32 = t.comm(CommSettings.fromSparkConf().lowPrecision(false)).fit(sc.parallelize(data, 4));
    TrainingResult lp = t.comm(CommSettings.fromSparkConf().lowPrecision(true, 0)).fit(sc.parallelize(data, 4));
    assertTrue(lp.callsByProtocol().getOrDefault("LP", 0L) >= 15, lp.toString());
    assertEquals(0L, fp32.callsByProtocol().getOrDefault("LP", 0L), fp32.toString());
    double a = fp32.lossPerEpoch()[14];
    double b = lp.lossPerEpoch()[14];
    assertTrue(Math.abs(a - b) < 0.02 * a + 1e-3, "fp32 " + a + " lp " + b);
  }

  @Test void trainsFromADatasetWithAVectorColumn() {
    List<LabeledVector> data = Reference.logisticData(200, 4, 21);
    List<Row> rows = new ArrayList<>();
    for (LabeledVector v : data) {
      double[] x = new double[v.features().length];
      for (int j = 0; j < x.length; j++) x[j] = v.features()[j];
      rows.add(RowFactory.create(Vectors.dense(x), (double) v.label()));
    }
    Dataset<Row> df = spark.createDataFrame(rows, new StructType().add("features", new VectorUDT())
        .add("label", DataTypes.DoubleType)).repartition(1);
    TrainingResult r = new DataParallelTrainer<>(new Reference.LogisticGradient())
        .initialParams(new float[5]).epochs(10).learningRate(0.5)
        .barrierOptions(BarrierOptions.defaults().ranks(2).retriable(true))
        .fit(LabeledVector.fromDataset(df, "features", "label"));
    assertEquals(2, r.ranks());
    assertEquals(10, r.lossPerEpoch().length);
    assertTrue(Reference.accuracy(r.params(), data) > 0.85);
  }

  // ------------------------------------------------------------------ tensor-parallel inference

  static Dataset<Row> inferenceData(int rows, int d, int partitions) {
    Random r = new Random(99);
    List<Row> list = new ArrayList<>();
    for (int i = 0; i < rows; i++) {
      float[] x = new float[d];
      for (int j = 0; j < d; j++) x[j] = (float) r.nextGaussian();
      list.add(RowFactory.create(i, x));
    }
    StructType schema = new StructType().add("id", DataTypes.IntegerType)
        .add("features", DataTypes.createArrayType(DataTypes.FloatType, false));
    return spark.createDataFrame(sc.parallelize(list, partitions), schema);
  }

  static void checkAgainstSingleRank(Reference.Net model, Dataset<Row> in, Dataset<Row> out) {
    List<Row> src = in.collectAsList();
    List<Row> got = out.collectAsList();
    assertEquals(src.size(), got.size());
    assertEquals(List.of("id", "features", "y"), Arrays.asList(out.columns()));
    for (int i = 0; i < got.size(); i++) {
      Row row = got.get(i);
      assertEquals(src.get(i).getInt(0), row.getInt(0), "order and partitions are kept");
      List<Object> feats = row.getList(1);
      float[] x = new float[feats.size()];
      for (int j = 0; j < x.length; j++) x[j] = (Float) feats.get(j);
      float[] ref = model.forward(x);
      List<Object> y = row.getList(2);
      assertEquals(ref.length, y.size());
      for (int j = 0; j < ref.length; j++) {
        assertEquals(ref[j], (Float) y.get(j), 1e-4 * (1 + Math.abs(ref[j])), "row " + i + " output " + j);
      }
    }
  }

  @Test void tensorParallelInferenceMatchesSingleRank() {
    Reference.Net model = Reference.randomNet(42, DenseLayer.Activation.IDENTITY, 12, 33, 17, 5);
    Dataset<Row> data = inferenceData(103, 12, 4).cache();
    for (TensorParallelInference.Split s : TensorParallelInference.Split.values()) {
      Dataset<Row> out = new TensorParallelInference(model).featuresCol("features").outputCol("y")
          .batchSize(8).split(s).transform(data);
      checkAgainstSingleRank(model, data, out);
    }
    // A single layer split by columns, three ranks, retriable, batch larger than any partition.
    Reference.Net linear = Reference.randomNet(1, DenseLayer.Activation.SIGMOID, 12, 4);
    Dataset<Row> data3 = inferenceData(40, 12, 3);
    checkAgainstSingleRank(linear, data3, new TensorParallelInference(linear).outputCol("y").batchSize(64)
        .split(TensorParallelInference.Split.COLUMNS).barrierOptions(BarrierOptions.defaults().retriable(true))
        .transform(data3));
  }

  /** Children that {@link TensorParallelInference#group} made in this JVM's tasks (local[4]: all of them). */
  static final java.util.Queue<io.sparkcomms.collectives.Communicator> GROUPS = new java.util.concurrent.ConcurrentLinkedQueue<>();

  @Test void tensorParallelGroupsOfTwoMatchSingleRank() {
    Reference.Net model = Reference.randomNet(5, DenseLayer.Activation.IDENTITY, 12, 33, 17, 5);
    Dataset<Row> data = inferenceData(103, 12, 4).cache();
    for (TensorParallelInference.Split s : TensorParallelInference.Split.values()) {
      checkAgainstSingleRank(model, data, new TensorParallelInference(model).outputCol("y").batchSize(8).split(s)
          .groupSize(2).transform(data));
    }
    // groups of one rank each; then 5 rows over 4 partitions in groups of two and of the whole stage
    checkAgainstSingleRank(model, data, new TensorParallelInference(model).outputCol("y").batchSize(16).groupSize(1).transform(data));
    Dataset<Row> few = inferenceData(5, 12, 4);
    checkAgainstSingleRank(model, few, new TensorParallelInference(model).outputCol("y").batchSize(2).groupSize(2).transform(few));
    checkAgainstSingleRank(model, few, new TensorParallelInference(model).outputCol("y").batchSize(2).groupSize(4).transform(few));

    // the groups are ranks {0, 1} and {2, 3}, each a child of two ranks, closed when the task ends
    GROUPS.clear();
    List<String> groups = BarrierDatasets.mapPartitions(sc.parallelize(List.of(0, 1, 2, 3), 4), (comm, rows) -> {
      io.sparkcomms.collectives.Communicator g = TensorParallelInference.group(comm, 2);
      GROUPS.add(g);
      long[] members = new long[g.size()];
      g.allGather(HostTensor.of(new long[] {comm.rank()}), HostTensor.of(members));
      return List.of(comm.rank() + ": " + g.rank() + "/" + g.size() + " " + Arrays.toString(members)).iterator();
    }, BarrierOptions.defaults()).collect();
    assertEquals(List.of("0: 0/2 [0, 1]", "1: 1/2 [0, 1]", "2: 0/2 [2, 3]", "3: 1/2 [2, 3]"), groups);
    assertEquals(4, GROUPS.size());
    for (io.sparkcomms.collectives.Communicator g : GROUPS) assertThrows(IllegalStateException.class, g::barrier, "closed with its task");
    data.unpersist();
  }

  @Test void aGroupSizeThatDoesNotDivideTheStageFails() {
    Reference.Net model = Reference.randomNet(5, DenseLayer.Activation.IDENTITY, 12, 6, 3);
    Dataset<Row> data = inferenceData(20, 12, 4);
    for (int g : new int[] {3, 8}) {
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
          () -> new TensorParallelInference(model).groupSize(g).transform(data));
      assertTrue(e.getMessage().contains("groupSize " + g + " does not divide the 4 tasks of the barrier stage"), e.getMessage());
    }
    IllegalArgumentException ranks = assertThrows(IllegalArgumentException.class, () -> new TensorParallelInference(model)
        .groupSize(2).barrierOptions(BarrierOptions.defaults().ranks(3)).transform(data));
    assertTrue(ranks.getMessage().contains("groupSize 2 does not divide the 3 tasks"), ranks.getMessage());
    assertThrows(IllegalArgumentException.class, () -> new TensorParallelInference(model).groupSize(0));
    // in the tasks: each fails before any collective (the stage's 30 s timeout would say "timed out")
    Exception inTasks = assertThrows(Exception.class, () -> BarrierDatasets.mapPartitions(sc.parallelize(List.of(0, 1, 2, 3), 4),
        (comm, rows) -> List.of(TensorParallelInference.group(comm, 3).size()).iterator(), BarrierOptions.defaults()).collect());
    assertTrue(String.valueOf(inTasks.getMessage()).contains("groupSize 3 does not divide the 4 tasks"), inTasks.getMessage());
    // a bad row in one rank of a group fails its group's ranks at once, not after a timeout
    List<Row> rows = new ArrayList<>(data.collectAsList());
    rows.set(17, RowFactory.create(17, new float[3]));
    Dataset<Row> bad = spark.createDataFrame(sc.parallelize(rows, 4), data.schema());
    Exception badRow = assertThrows(Exception.class,
        () -> new TensorParallelInference(model).groupSize(2).transform(bad).collectAsList());
    String m = String.valueOf(badRow.getMessage());
    assertTrue(m.contains("has 3 features, the model takes 12") || m.contains("has a row whose features do not fit the model"), m);
    assertTrue(!m.contains("timed out"), m);
  }

  @Test void layersMustChainAndAreCopied() {
    DenseLayer a = new DenseLayer(3, 2, new float[6], new float[2], DenseLayer.Activation.RELU);
    DenseLayer b = new DenseLayer(3, 1, new float[3], new float[1], DenseLayer.Activation.IDENTITY);
    IllegalArgumentException chain = assertThrows(IllegalArgumentException.class, () -> new TensorParallelInference(() -> List.of(a, b)));
    assertTrue(chain.getMessage().contains("layer 1 takes 3 inputs, layer 0 gives 2"), chain.getMessage());
    assertThrows(IllegalArgumentException.class, () -> new TensorParallelInference(List::of));
    IllegalArgumentException shape = assertThrows(IllegalArgumentException.class,
        () -> new DenseLayer(3, 2, new float[5], new float[2], DenseLayer.Activation.RELU));
    assertTrue(shape.getMessage().contains("expected out*in = 2*3"), shape.getMessage());
    float[] w = {1, 2, 3};
    DenseLayer c = new DenseLayer(3, 1, w, new float[1], DenseLayer.Activation.IDENTITY);
    w[0] = 9;
    c.weights()[1] = 9;
    assertArrayEquals(new float[] {1, 2, 3}, c.weights(), 0f, "the layer keeps its own copy");
  }

  @Test void eachRankHoldsOnlyItsShard() {
    Reference.Net model = Reference.randomNet(3, DenseLayer.Activation.IDENTITY, 64, 128, 10);
    long total = 0;
    for (int r = 0; r < 4; r++) {
      total += new DenseShards(new io.sparkcomms.collectives.math.HostMath(), model.layers(), r, 4, 8).shardParameters();
    }
    // weights split four ways (128 / 4: no padding); only the COLUMNS layer's bias (10) is held by every rank
    assertEquals(model.parameterCount() + 3 * 10, total);
    long rows = 0;
    for (int r = 0; r < 4; r++) rows += new TensorParallelInference.Sharded(model.layers(), TensorParallelInference.Split.ROWS, r, 4).shardParameters();
    assertEquals(model.parameterCount(), rows, "ROWS: every weight and bias on exactly one rank");
  }
}
