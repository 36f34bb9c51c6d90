package io.sparkcomms.examples.gpu;

import io.sparkcomms.collectives.Algorithm;
import io.sparkcomms.collectives.CallOptions;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.Comms;
import io.sparkcomms.collectives.gpu.GpuCommunicator;
import io.sparkcomms.collectives.math.Activation;
import io.sparkcomms.collectives.math.DeviceMath;
import io.sparkcomms.collectives.math.Matrix;
import io.sparkcomms.collectives.math.Timeline;
import io.sparkcomms.collectives.rendezvous.FileRendezvous;
import io.sparkcomms.nativeapi.GpuLibrary;
import io.sparkcomms.spark.dataset.DenseClassifier;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;

/**
 * Where a device-resident training step's time goes, side by side: the same {@link DenseClassifier}
 * step with its gradients allReduced in place on the device (sparkcomms' own algorithms, then NCCL /
 * RCCL when the vendor library is loaded, which needs a GPU per rank), and with the gradients staged
 * through host arrays (what a job with host-side gradients pays). Per mode and model: the median of
 * each phase over the timed steps, from rank 0, as a table and a CSV.
 *
 * <pre>java -cp ... io.sparkcomms.examples.gpu.DeviceTrainingBench processes N [--steps 200] [--csv FILE]</pre>
 */
public final class DeviceTrainingBench {
  /** Models: a small one (latency) and one with a 6 MB gradient (bandwidth). */
  static final int[][] MODELS = {{32, 64, 64, 1}, {512, 1024, 1024, 1}};
  static final int BATCH = 64;
  static final int WARMUP = 20;

  public static void main(String[] args) throws Exception {
    System.out.println(GpuLibrary.status());
    System.out.println(DeviceMath.status());
    if (!DeviceMath.status().available()) System.exit(2);
    int steps = 200;
    String csv = null;
    for (int i = 0; i < args.length - 1; i++) {
      if (args[i].equals("--steps")) steps = Integer.parseInt(args[i + 1]);
      if (args[i].equals("--csv")) csv = args[i + 1];
    }
    if (args.length >= 4 && args[0].equals("rank")) {
      System.exit(rank(Integer.parseInt(args[1]), Paths.get(args[2]), Integer.parseInt(args[3]), steps, csv) ? 0 : 1);
    }
    int n = args.length >= 2 && args[0].equals("processes") ? Integer.parseInt(args[1]) : 2;
    List<String> extra = new ArrayList<>(List.of("--steps", "" + steps));
    if (csv != null) extra.addAll(List.of("--csv", csv));
    boolean ok = RankProcesses.run(DeviceTrainingBench.class, n, extra);
    System.exit(ok ? 0 : 1);
  }

  static boolean rank(int n, Path dir, int rank, int steps, String csv) throws Exception {
    int gpus = Math.max(1, GpuLibrary.deviceCount());
    boolean vendor = CommOptions.fromEnvironment().vendor() && n <= gpus;
    CommOptions o = CommOptions.fromEnvironment().toBuilder().backend(CommOptions.Backend.GPU).vendor(vendor)
        .timeout(Duration.ofSeconds(120)).build();
    StringBuilder out = new StringBuilder("model,parameters,mode,ranks,step_ms,compute_ms,collective_ms,transfer_ms\n");
    if (rank == 0) {
      System.out.printf("%d ranks on %d GPU(s)%s; batch %d rows per rank; medians of %d steps after %d%n", n, Math.min(n, gpus),
          n > gpus ? " (ranks share GPUs: time-sliced, not a measurement of speed)" : "", BATCH, steps, WARMUP);
      System.out.printf("%-18s %10s  %-26s %9s %9s %11s %9s%n", "model", "params", "mode", "step ms", "compute", "collective", "transfer");
    }
    try (Communicator c = Comms.create(new FileRendezvous(Files.createDirectories(dir.resolve("bench")), rank, n), o, rank % gpus);
         DeviceMath m = DeviceMath.on((GpuCommunicator) c); Timeline tl = m.timeline(4)) {
      for (int[] widths : MODELS) {
        List<Object[]> modes = new ArrayList<>();
        modes.add(new Object[] {"device, sparkcomms", c, DenseClassifier.GradientPath.IN_PLACE});
        if (((GpuCommunicator) c).vendorLoaded()) {
          modes.add(new Object[] {"device, NCCL/RCCL", c.withOptions(CallOptions.algorithm(Algorithm.VENDOR)), DenseClassifier.GradientPath.IN_PLACE});
        }
        modes.add(new Object[] {"host-staged, sparkcomms", c, DenseClassifier.GradientPath.HOST_STAGED});
        Random r = new Random(3 + rank);
        float[] x = new float[BATCH * widths[0]], y = new float[BATCH];
        for (int i = 0; i < x.length; i++) x[i] = r.nextFloat() * 2 - 1;
        for (int i = 0; i < y.length; i++) y[i] = r.nextBoolean() ? 1 : 0;
        Matrix mx = m.upload(x, BATCH, widths[0]), my = m.upload(y, BATCH, 1);
        for (Object[] mode : modes) {
          DenseClassifier model = new DenseClassifier(m, widths, Activation.RELU, DenseClassifier.randomParameters(widths, 5), BATCH);
          double[][] t = new double[4][steps];
          for (int s = 0; s < WARMUP + steps; s++) {
            long t0 = System.nanoTime();
            DenseClassifier.StepTimes st = model.timedStep((Communicator) mode[1], mx, my, 0.01f, 0.9f,
                (DenseClassifier.GradientPath) mode[2], tl);
            double total = (System.nanoTime() - t0) / 1e6;
            if (s >= WARMUP) {
              t[0][s - WARMUP] = total;
              t[1][s - WARMUP] = st.computeMs();
              t[2][s - WARMUP] = st.collectiveMs();
              t[3][s - WARMUP] = st.transferMs();
            }
          }
          double[] med = new double[4];
          for (int k = 0; k < 4; k++) {
            Arrays.sort(t[k]);
            med[k] = t[k][steps / 2];
          }
          int params = DenseClassifier.parameterCount(widths);
          if (rank == 0) {
            System.out.printf("%-18s %10d  %-26s %9.3f %9.3f %11.3f %9.3f%n", Arrays.toString(widths), params, mode[0], med[0], med[1],
                med[2], med[3]);
          }
          out.append(String.format("%s,%d,%s,%d,%.4f,%.4f,%.4f,%.4f%n", Arrays.toString(widths).replace(", ", "-"), params, mode[0], n,
              med[0], med[1], med[2], med[3]));
        }
      }
    }
    if (rank == 0 && csv != null) Files.writeString(Paths.get(csv), out.toString());
    return true;
  }
}
