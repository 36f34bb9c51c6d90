package io.sparkcomms.examples.gpu;

import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.Comms;
import io.sparkcomms.collectives.gpu.GpuCommunicator;
import io.sparkcomms.collectives.math.Activation;
import io.sparkcomms.collectives.math.DeviceMath;
import io.sparkcomms.collectives.math.HostMath;
import io.sparkcomms.collectives.rendezvous.FileRendezvous;
import io.sparkcomms.spark.dataset.DenseClassifierRun;
import io.sparkcomms.examples.models.MlpModel;
import io.sparkcomms.nativeapi.GpuLibrary;
import io.sparkcomms.spark.dataset.DenseLayer;
import io.sparkcomms.spark.dataset.DenseClassifierTrainer;
import io.sparkcomms.spark.dataset.DenseShards;
import io.sparkcomms.spark.dataset.DenseTrainingResult;
import io.sparkcomms.spark.dataset.LabeledVector;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

/**
 * The device-resident jobs on a GPU host, without Spark: N rank processes (rank r on GPU r % GPUs,
 * so 2..8 ranks also share one GPU), each checking
 * <ol>
 *   <li>the device math against a float64 reference (every operation, every transpose, outputs
 *       poisoned first);</li>
 *   <li>data-parallel training on the GPU (weights, activations and gradients on the device, the
 *       gradients allReduced there) against the CPU run of the same code (host math, host
 *       backend): the loss of every step and the final parameters agree within float tolerance, and
 *       every step's only host transfer is its 4-byte loss, no collective staged through the host;</li>
 *   <li>tensor-parallel inference on the GPU against single-rank inference, for a model ending in a
 *       row-split layer and one ending in a column-split layer.</li>
 * </ol>
 * <pre>java -cp ... io.sparkcomms.examples.gpu.DeviceJobsCheck processes N</pre>
 * Prints PASS / FAIL lines and the step times; exit code 0 only if all passed.
 */
public final class DeviceJobsCheck {
  static final int[] WIDTHS = {32, 64, 64, 1};
  static final int ROWS = 512;
  static final int BATCH = 32;
  /** Training steps at least (more epochs when the partitions are small): enough for the loss to fall. */
  static final int MIN_STEPS = 48;

  public static void main(String[] args) throws Exception {
    System.out.println(GpuLibrary.status());
    System.out.println(DeviceMath.status());
    if (!DeviceMath.status().available()) System.exit(2);
    if (args.length >= 4 && args[0].equals("rank")) {
      System.exit(rank(Integer.parseInt(args[1]), Paths.get(args[2]), Integer.parseInt(args[3])) ? 0 : 1);
    }
    int n = args.length >= 2 && args[0].equals("processes") ? Integer.parseInt(args[1]) : 2;
    boolean ok = RankProcesses.run(DeviceJobsCheck.class, n, List.of());
    System.out.println(ok ? "PASS device jobs at " + n + " ranks" : "FAIL device jobs at " + n + " ranks");
    System.exit(ok ? 0 : 1);
  }

  static boolean rank(int n, Path dir, int rank) throws Exception {
    int device = rank % Math.max(1, GpuLibrary.deviceCount());
    List<String> fails = new ArrayList<>();
    CommOptions gpu = CommOptions.fromEnvironment().toBuilder().backend(CommOptions.Backend.GPU).vendor(false)
        .timeout(Duration.ofSeconds(120)).build();
    CommOptions host = CommOptions.fromEnvironment().toBuilder().backend(CommOptions.Backend.HOST)
        .timeout(Duration.ofSeconds(120)).build();
    try (DeviceMath m = DeviceMath.open(device, 0)) {
      fails.addAll(MathCheck.run(m, 7 + rank));
    }
    report(rank, "device math against float64", fails.isEmpty(), String.join("; ", fails));

    float[][] all = DenseClassifierRun.syntheticRows(ROWS, WIDTHS[0], 99);
    int mine = 0;
    for (int i = rank; i < ROWS; i += n) mine++;
    float[] x = new float[mine * WIDTHS[0]], y = new float[mine];
    for (int i = rank, k = 0; i < ROWS; i += n, k++) {
      System.arraycopy(all[i], 0, x, k * WIDTHS[0], WIDTHS[0]);
      y[k] = all[i][WIDTHS[0]];
    }
    int largest = (ROWS + n - 1) / n;
    int steps = (largest + BATCH - 1) / BATCH;   // the same on every rank, as DenseClassifierTrainer agrees it
    int epochs = Math.max(6, (MIN_STEPS + steps - 1) / steps);
    DenseClassifierRun job = new DenseClassifierRun(WIDTHS, Activation.RELU, BATCH, epochs, 0.2f, 0.9f, 5);
    DenseClassifierRun.Result onGpu, onCpu;
    long staged;
    try (Communicator c = Comms.create(new FileRendezvous(Files.createDirectories(dir.resolve("gpu-train")), rank, n), gpu, device);
         DeviceMath m = DeviceMath.on((GpuCommunicator) c)) {
      onGpu = job.run(c, m, x, y, mine, steps, rank);
      staged = ((GpuCommunicator) c).hostStagedCalls();
    }
    try (Communicator c = Comms.create(new FileRendezvous(Files.createDirectories(dir.resolve("host-train")), rank, n), host)) {
      onCpu = job.run(c, new HostMath(), x, y, mine, steps, rank);
    }
    double lossErr = 0, paramErr = 0, paramMax = 0;
    for (int i = 0; i < onGpu.steps(); i++) lossErr = Math.max(lossErr, Math.abs(onGpu.stepLosses()[i] - onCpu.stepLosses()[i]));
    for (int i = 0; i < onGpu.params().length; i++) {
      paramErr = Math.max(paramErr, Math.abs(onGpu.params()[i] - onCpu.params()[i]));
      paramMax = Math.max(paramMax, Math.abs(onCpu.params()[i]));
    }
    float first = 0, last = 0;                   // mean batch loss of the first and of the last epoch
    for (int k = 0; k < steps; k++) {
      first += onCpu.stepLosses()[k] / steps;
      last += onCpu.stepLosses()[onCpu.steps() - steps + k] / steps;
    }
    System.out.printf("rank %d: training %d steps; mean loss of the first and last epoch %.4f -> %.4f (CPU run), GPU - CPU: loss %.2e, parameters %.2e (largest %.3f);"
        + " GPU %.1f us/step, CPU %.1f us/step; worst step's transfers: %s; collectives staged through the host: %d%n", rank,
        onGpu.steps(), first, last, lossErr, paramErr, paramMax, onGpu.stepNanos() / 1e3 / onGpu.steps(),
        onCpu.stepNanos() / 1e3 / onCpu.steps(), onGpu.worstStep(), staged);
    report(rank, "training loss curve and parameters, GPU vs CPU", lossErr <= 2e-4 && paramErr <= 1e-3 * Math.max(1, paramMax) && last < first,
        "loss err " + lossErr + ", param err " + paramErr);
    report(rank, "training step transfers: the loss only", onGpu.oneScalarPerStep() && staged == 0,
        onGpu.worstStep() + ", staged " + staged);
    // the same through the Dataset helper's per-rank entry (what DenseClassifierTrainer.fit runs in each task)
    try (Communicator c = Comms.create(new FileRendezvous(Files.createDirectories(dir.resolve("gpu-trainer")), rank, n), gpu, device)) {
      List<LabeledVector> rows = new ArrayList<>();
      for (int k2 = 0; k2 < mine; k2++) rows.add(new LabeledVector(java.util.Arrays.copyOfRange(x, k2 * WIDTHS[0], (k2 + 1) * WIDTHS[0]), y[k2]));
      DenseTrainingResult t = DenseClassifierTrainer.trainPartition(c, rows.iterator(), job);
      double d = 0;
      for (int i = 0; i < t.params().length; i++) d = Math.max(d, Math.abs(t.params()[i] - onGpu.params()[i]));
      boolean same = d <= 1e-6 * Math.max(1, paramMax);
      System.out.printf("rank %d: DenseClassifierTrainer.trainPartition on the GPU: math %s, %s, staged %d, largest difference from the direct run %.2e%n",
          rank, t.math(), t.worstStepTransfers(), t.stagedCalls(), d);
      report(rank, "the Dataset helper's GPU training: device math, the loss only per step, equal parameters",
          t.backend().equals("gpu") && t.math().startsWith("device") && t.lossOnlyPerStep() && t.stagedCalls() == 0 && same,
          t.math() + ", " + t.worstStepTransfers() + ", staged " + t.stagedCalls());
    }
    boolean inferOk = true;
    int[][] models = {{48, 96, 96, 10}, {48, 80, 12}};
    int k = 0;
    for (int[] widths : models) {
      MlpModel model = MlpModel.random(17 + k, DenseLayer.Activation.IDENTITY, widths);
      try (Communicator c = Comms.create(new FileRendezvous(Files.createDirectories(dir.resolve("gpu-infer-" + k++)), rank, n), gpu, device);
           DeviceMath m = DeviceMath.on((GpuCommunicator) c)) {
        double[] err = inferCheck(c, m, model, 37 + rank * 5, 16, rank);
        System.out.printf("rank %d: tensor-parallel inference %s over %d ranks: max |GPU - single-rank| %.2e (largest output %.3f)%n",
            rank, java.util.Arrays.toString(widths), n, err[0], err[1]);
        inferOk &= err[0] <= 1e-4 * Math.max(1, err[1]);
      }
    }
    report(rank, "tensor-parallel inference vs single-rank", inferOk, "");
    return FAILED.isEmpty();
  }

  /** Max |split - single-rank| and the largest output, over {@code rows} seeded rows of this rank. */
  static double[] inferCheck(Communicator c, io.sparkcomms.collectives.math.DenseMath m, MlpModel model, int rows, int batch, int rank) {
    int in = model.inputs(), out = model.outputs();
    long[] steps = {(rows + batch - 1) / batch};
    c.allReduce(io.sparkcomms.collectives.HostTensor.of(steps), io.sparkcomms.collectives.ReduceOp.MAX);
    DenseShards shards = new DenseShards(m, model.layers(), c.rank(), c.size(), batch);
    Random r = new Random(1000 + rank);
    float[][] xs = new float[rows][in];
    for (float[] v : xs) for (int j = 0; j < in; j++) v[j] = r.nextFloat() * 2 - 1;
    double err = 0, big = 0;
    for (int s = 0; s < steps[0]; s++) {
      float[] local = new float[batch * in];
      int valid = Math.max(0, Math.min(batch, rows - s * batch));
      for (int i = 0; i < valid; i++) System.arraycopy(xs[s * batch + i], 0, local, i * in, in);
      float[] ys = shards.step(c, local);
      for (int i = 0; i < valid; i++) {
        float[] ref = model.forward(xs[s * batch + i]);
        for (int o = 0; o < out; o++) {
          err = Math.max(err, Math.abs(ref[o] - ys[(rank * batch + i) * out + o]));
          big = Math.max(big, Math.abs(ref[o]));
        }
      }
    }
    return new double[] {err, big};
  }

  private static final List<String> FAILED = new ArrayList<>();

  static void report(int rank, String what, boolean ok, String detail) {
    System.out.println((ok ? "PASS" : "FAIL") + " rank " + rank + ": " + what + (ok || detail.isEmpty() ? "" : " (" + detail + ")"));
    if (!ok) FAILED.add(what);
  }
}
