package io.sparkcomms.examples.gpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;

import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.Comms;
import io.sparkcomms.collectives.math.Activation;
import io.sparkcomms.collectives.math.DenseMath;
import io.sparkcomms.collectives.math.DeviceMath;
import io.sparkcomms.collectives.math.HostMath;
import io.sparkcomms.collectives.math.Matrix;
import io.sparkcomms.collectives.rendezvous.InJvmRendezvous;
import io.sparkcomms.spark.dataset.DenseClassifierRun;
import io.sparkcomms.spark.dataset.DenseClassifier;
import io.sparkcomms.examples.models.MlpModel;
import io.sparkcomms.spark.dataset.DenseLayer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.BiFunction;
import org.junit.jupiter.api.Test;

/**
 * The device-resident jobs' code on its CPU path: the host math against float64, the training step's
 * gradient against finite differences, data-parallel steps against one rank on the union of their
 * batches, tensor-parallel inference against single-rank inference, and the device math's loader
 * saying why it is unavailable on a machine without a GPU.
 */
class DeviceResidentJobsTest {
  static final CommOptions HOST = CommOptions.defaults().toBuilder().backend(CommOptions.Backend.HOST)
      .timeout(Duration.ofSeconds(60)).build();

  @Test void hostMathMatchesFloat64() {
    assertEquals(List.of(), MathCheck.run(new HostMath(), 11));
  }

  @Test void deviceMathSaysWhyItIsUnavailable() {
    DeviceMath.Status s = DeviceMath.status();
    assumeFalse(s.available(), "a GPU with a BLAS library is present");
    assertTrue(s.reason().startsWith("device math unavailable: "), s.reason());
    assertTrue(s.reason().length() > "device math unavailable: ".length() + 10, s.reason());
    IllegalStateException e = assertThrows(IllegalStateException.class, () -> DeviceMath.open(0, 0));
    assertEquals(s.reason(), e.getMessage());
  }

  @Test void theLayerActivationsAreTheMathActivations() {
    DenseLayer.Activation[] layer = DenseLayer.Activation.values();
    assertEquals(Activation.values().length, layer.length);
    for (DenseLayer.Activation a : layer) {
      assertEquals(a.name(), a.math().name());
      for (float x : new float[] {-2.5f, -0f, 0f, 0.7f, 30f}) assertEquals(a.math().apply(x), a.apply(x), 0f);
    }
  }

  @Test void mathOfAHostCommunicatorIsHostMath() throws Exception {
    List<Boolean> device = onRanks(1, (c, r) -> DenseMath.forCommunicator(c).isDevice());
    assertEquals(List.of(false), device);
  }

  @Test void stepGradientMatchesFiniteDifferences() {
    int[] widths = {5, 7, 4, 1};
    Random r = new Random(3);
    int b = 9;
    float[] x = rand(r, b * widths[0]), y = labels(r, b);
    float[] p = DenseClassifier.randomParameters(widths, 4);
    for (int i = 0; i < p.length; i++) p[i] += (r.nextFloat() - 0.5f) * 0.2f;   // biases away from 0 too
    for (Activation act : new Activation[] {Activation.TANH, Activation.SIGMOID, Activation.RELU}) {
      HostMath m = new HostMath();
      DenseClassifier t = new DenseClassifier(m, widths, act, p, b);
      float loss = t.step(null, m.upload(x, b, widths[0]), m.upload(y, b, 1), 0f, 0f);
      assertEquals(lossOf(widths, act, p, x, y, b), loss, 1e-5, act.name());
      float[] g = m.download(t.gradients());
      for (int i = 0; i < p.length; i += 3) {
        double eps = 1e-3;
        double[] q = toDouble(p);
        q[i] += eps;
        double up = lossOf(widths, act, q, x, y, b);
        q[i] -= 2 * eps;
        double down = lossOf(widths, act, q, x, y, b);
        double num = (up - down) / (2 * eps);
        assertEquals(num, g[i], 2e-4 + 1e-2 * Math.abs(num), act + " parameter " + i);
      }
    }
  }

  @Test void dataParallelStepsEqualOneRankOnTheUnionOfTheBatches() throws Exception {
    int[] widths = {6, 8, 1};
    int b = 5, ranks = 3, steps = 4;
    Random r = new Random(8);
    float[][] xs = new float[ranks * steps][], ys = new float[ranks * steps][];
    for (int i = 0; i < xs.length; i++) {
      xs[i] = rand(r, b * widths[0]);
      ys[i] = labels(r, b);
    }
    float[] init = DenseClassifier.randomParameters(widths, 2);
    List<float[]> params = onRanks(ranks, (c, rank) -> {
      HostMath m = new HostMath();
      DenseClassifier t = new DenseClassifier(m, widths, Activation.TANH, init, b);
      for (int s = 0; s < steps; s++) {
        t.step(c, m.upload(xs[s * ranks + rank], b, widths[0]), m.upload(ys[s * ranks + rank], b, 1), 0.3f, 0.5f);
      }
      return t.parameters();
    });
    HostMath m = new HostMath();
    DenseClassifier one = new DenseClassifier(m, widths, Activation.TANH, init, ranks * b);
    for (int s = 0; s < steps; s++) {
      float[] x = new float[ranks * b * widths[0]], y = new float[ranks * b];
      for (int q = 0; q < ranks; q++) {
        System.arraycopy(xs[s * ranks + q], 0, x, q * b * widths[0], b * widths[0]);
        System.arraycopy(ys[s * ranks + q], 0, y, q * b, b);
      }
      one.step(null, m.upload(x, ranks * b, widths[0]), m.upload(y, ranks * b, 1), 0.3f, 0.5f);
    }
    float[] ref = one.parameters();
    for (float[] p : params) {
      for (int i = 0; i < ref.length; i++) assertEquals(ref[i], p[i], 1e-5, "parameter " + i);
    }
  }

  @Test void timedStepsOnEitherGradientPathMatchTheOverlappedStep() throws Exception {
    int[] widths = {6, 9, 1};
    int b = 7, steps = 3;
    Random r = new Random(21);
    float[][] xs = new float[2 * steps][], ys = new float[2 * steps][];
    for (int i = 0; i < xs.length; i++) {
      xs[i] = rand(r, b * widths[0]);
      ys[i] = labels(r, b);
    }
    float[] init = DenseClassifier.randomParameters(widths, 9);
    List<List<float[]>> out = onRanks(2, (c, rank) -> {
      List<float[]> params = new ArrayList<>();
      for (int mode = 0; mode < 3; mode++) {
        HostMath m = new HostMath();
        DenseClassifier t = new DenseClassifier(m, widths, Activation.SIGMOID, init, b);
        try (io.sparkcomms.collectives.math.Timeline tl = m.timeline(4)) {
          for (int s = 0; s < steps; s++) {
            Matrix x = m.upload(xs[2 * s + rank], b, widths[0]), y = m.upload(ys[2 * s + rank], b, 1);
            if (mode == 0) {
              t.step(c, x, y, 0.4f, 0.5f);
            } else {
              DenseClassifier.StepTimes st = t.timedStep(c, x, y, 0.4f, 0.5f,
                  mode == 1 ? DenseClassifier.GradientPath.IN_PLACE : DenseClassifier.GradientPath.HOST_STAGED, tl);
              assertTrue(st.computeMs() >= 0 && st.collectiveMs() >= 0 && st.transferMs() >= 0, st.toString());
            }
          }
        }
        params.add(t.parameters());
      }
      return params;
    });
    for (List<float[]> p : out) {
      for (int i = 0; i < p.get(0).length; i++) {
        assertEquals(p.get(0)[i], p.get(1)[i], 1e-6f, "in place, parameter " + i);
        assertEquals(p.get(0)[i], p.get(2)[i], 1e-6f, "host-staged, parameter " + i);
      }
    }
  }

  @Test void trainingLearnsAndEachStepMovesOnlyItsLoss() throws Exception {
    int[] widths = {DeviceJobsCheck.WIDTHS[0], 32, 1};
    float[][] all = DenseClassifierRun.syntheticRows(256, widths[0], 99);
    DenseClassifierRun job = new DenseClassifierRun(widths, Activation.RELU, 16, 4, 0.2f, 0.9f, 5);
    int ranks = 2;
    List<DenseClassifierRun.Result> out = onRanks(ranks, (c, rank) -> {
      int mine = 256 / ranks;
      float[] x = new float[mine * widths[0]], y = new float[mine];
      for (int i = rank, k = 0; i < 256; i += ranks, k++) {
        System.arraycopy(all[i], 0, x, k * widths[0], widths[0]);
        y[k] = all[i][widths[0]];
      }
      return job.run(c, new HostMath(), x, y, mine, mine / 16, rank);
    });
    for (DenseClassifierRun.Result res : out) {
      assertTrue(res.oneScalarPerStep(), res.worstStep().toString());
      float first = res.stepLosses()[0], last = res.stepLosses()[res.steps() - 1];
      assertTrue(last < 0.8 * first, "loss " + first + " -> " + last);
    }
    for (int i = 0; i < out.get(0).params().length; i++) assertEquals(out.get(0).params()[i], out.get(1).params()[i], 0f);
  }

  @Test void tensorParallelInferenceMatchesSingleRank() throws Exception {
    for (int[] widths : new int[][] {{10, 24, 24, 5}, {10, 17, 3}, {9, 4}}) {
      MlpModel model = MlpModel.random(5, DenseLayer.Activation.SIGMOID, widths);
      for (int ranks : new int[] {1, 2, 3, 4}) {                       // 4 > 3 outputs: a rank with an empty slice
        List<double[]> errs = onRanks(ranks, (c, rank) -> {
          HostMath m = new HostMath();
          return DeviceJobsCheck.inferCheck(c, m, model, 11 + 4 * rank, 4, rank);
        });
        for (double[] e : errs) assertTrue(e[0] <= 1e-5 * Math.max(1, e[1]), java.util.Arrays.toString(widths) + " at " + ranks + ": " + e[0]);
      }
    }
  }

  @Test void mismatchedShapesFailBeforeRunning() {
    HostMath m = new HostMath();
    Matrix a = m.zeros(2, 3);
    assertThrows(IllegalArgumentException.class, () -> m.axpy(1f, a, m.zeros(3, 3)));
    assertThrows(IllegalArgumentException.class, () -> m.biasActivation(a, m.zeros(1, 2), Activation.RELU));
    assertThrows(IllegalArgumentException.class, () -> a.view(4, 1, 3));
    assertThrows(IllegalArgumentException.class, () -> new DenseClassifier(m, new int[] {3, 2}, Activation.RELU, new float[8], 4));
    Matrix big = m.zeros(4, 4);
    m.copy(big.view(0, 2, 4), big.view(8, 2, 4));                   // disjoint views of one allocation
    HostMath other = new HostMath();
    IllegalArgumentException mixed = assertThrows(IllegalArgumentException.class, () -> m.axpy(1f, other.zeros(2, 3), a));
    assertTrue(mixed.getMessage().contains("another DenseMath"), mixed.getMessage());
    assertThrows(IllegalArgumentException.class, () -> m.copy(big.view(0, 2, 4), big.view(4, 2, 4)));   // elements 4..7 in both
    assertThrows(IllegalArgumentException.class, () -> m.gemm(1f, big.view(0, 2, 2), false, m.zeros(2, 2), false, 0f, big.view(2, 2, 2)));
  }

  // ------------------------------------------------------------------ helpers

  static <T> List<T> onRanks(int n, BiFunction<Communicator, Integer, T> body) throws Exception {
    InJvmRendezvous.Group g = InJvmRendezvous.group(n);
    ExecutorService pool = Executors.newFixedThreadPool(n);
    try {
      List<Future<T>> fs = new ArrayList<>();
      for (int r = 0; r < n; r++) {
        int rank = r;
        fs.add(pool.submit(() -> {
          try (Communicator c = Comms.create(g.member(rank), HOST)) {
            return body.apply(c, rank);
          }
        }));
      }
      List<T> out = new ArrayList<>();
      for (Future<T> f : fs) out.add(f.get(120, TimeUnit.SECONDS));
      return out;
    } finally {
      pool.shutdownNow();
    }
  }

  /** Mean binary cross-entropy of the network in float64. */
  static double lossOf(int[] widths, Activation act, double[] p, float[] x, float[] y, int rows) {
    double loss = 0;
    for (int r = 0; r < rows; r++) {
      double[] a = new double[widths[0]];
      for (int i = 0; i < a.length; i++) a[i] = x[r * widths[0] + i];
      int at = 0;
      for (int l = 0; l + 1 < widths.length; l++) {
        int in = widths[l], out = widths[l + 1];
        double[] z = new double[out];
        for (int o = 0; o < out; o++) {
          double s = p[at + out * in + o];
          for (int i = 0; i < in; i++) s += p[at + o * in + i] * a[i];
          z[o] = l + 2 == widths.length ? s : MathCheck.actRef(act, s);
        }
        at += out * in + out;
        a = z;
      }
      double zz = a[0];
      loss += Math.max(zz, 0) - zz * y[r] + Math.log1p(Math.exp(-Math.abs(zz)));
    }
    return loss / rows;
  }

  static double lossOf(int[] widths, Activation act, float[] p, float[] x, float[] y, int rows) {
    return lossOf(widths, act, toDouble(p), x, y, rows);
  }

  static double[] toDouble(float[] p) {
    double[] d = new double[p.length];
    for (int i = 0; i < p.length; i++) d[i] = p[i];
    return d;
  }

  static float[] rand(Random r, int n) {
    float[] v = new float[n];
    for (int i = 0; i < n; i++) v[i] = r.nextFloat() * 2 - 1;
    return v;
  }

  static float[] labels(Random r, int n) {
    float[] v = new float[n];
    for (int i = 0; i < n; i++) v[i] = r.nextBoolean() ? 1 : 0;
    return v;
  }
}
