package io.sparkcomms.collectives.math;

/**
 * {@link DenseMath} in the JVM: direct host buffers, plain loops (sums in index order in float32;
 * the cross-entropy's mean loss in float64), no native code. The reference the device math is checked against, and the path of machines
 * without a GPU.
 */
public final class HostMath implements DenseMath {
  private Transfers transfers = Transfers.NONE;

  @Override public String description() { return "host"; }

  @Override public boolean isDevice() { return false; }

  @Override public Matrix zeros(int rows, int cols) { return HostMatrix.allocate(this, rows, cols); }

  @Override public Matrix upload(float[] data, int rows, int cols) {
    Shapes.data(data, rows, cols);
    HostMatrix m = HostMatrix.allocate(this, rows, cols);
    upload(data, m);
    return m;
  }

  @Override public synchronized void upload(float[] data, Matrix m) {
    HostMatrix h = Shapes.own(this, HostMatrix.class, m, "matrix");
    Shapes.data(data, h.rows, h.cols);
    for (int i = 0; i < data.length; i++) h.set(i, data[i]);
    transfers = transfers.plusUpload(4L * data.length);
  }

  @Override public synchronized float[] download(Matrix m) {
    HostMatrix h = Shapes.own(this, HostMatrix.class, m, "matrix");
    float[] out = new float[Shapes.intCount(h, "download")];
    for (int i = 0; i < out.length; i++) out[i] = h.get(i);
    transfers = transfers.plusDownload(4L * out.length);
    return out;
  }

  @Override public void copy(Matrix src, Matrix dst) {
    HostMatrix s = Shapes.own(this, HostMatrix.class, src, "src"), d = Shapes.own(this, HostMatrix.class, dst, "dst");
    Shapes.sameCount(s, d, "copy");
    Shapes.disjoint(d, s, "copy");
    for (long i = 0; i < s.count(); i++) d.set(i, s.get(i));
  }

  @Override public void zero(Matrix m) {
    HostMatrix h = Shapes.own(this, HostMatrix.class, m, "matrix");
    for (long i = 0; i < h.count(); i++) h.set(i, 0f);
  }

  @Override public void gemm(float alpha, Matrix a, boolean transA, Matrix b, boolean transB, float beta, Matrix c) {
    HostMatrix x = Shapes.own(this, HostMatrix.class, a, "a"), y = Shapes.own(this, HostMatrix.class, b, "b"), z = Shapes.own(this, HostMatrix.class, c, "c");
    Shapes.gemm(x, transA, y, transB, z);
    int m = z.rows, n = z.cols, k = transA ? x.rows : x.cols;
    float[] av = dense(x), bv = dense(y);
    for (int i = 0; i < m; i++) {
      for (int j = 0; j < n; j++) {
        float s = 0;
        for (int p = 0; p < k; p++) {
          float ai = transA ? av[p * x.cols + i] : av[i * x.cols + p];
          float bj = transB ? bv[j * y.cols + p] : bv[p * y.cols + j];
          s += ai * bj;
        }
        long at = (long) i * n + j;
        z.set(at, beta == 0 ? alpha * s : alpha * s + beta * z.get(at));
      }
    }
  }

  private static float[] dense(HostMatrix h) {
    float[] v = new float[(int) h.count()];
    for (int i = 0; i < v.length; i++) v[i] = h.get(i);
    return v;
  }

  @Override public void axpy(float alpha, Matrix x, Matrix y) {
    HostMatrix s = Shapes.own(this, HostMatrix.class, x, "x"), d = Shapes.own(this, HostMatrix.class, y, "y");
    Shapes.sameCount(s, d, "axpy");
    for (long i = 0; i < s.count(); i++) d.set(i, d.get(i) + alpha * s.get(i));
  }

  @Override public void scale(float alpha, Matrix x) {
    HostMatrix h = Shapes.own(this, HostMatrix.class, x, "x");
    for (long i = 0; i < h.count(); i++) h.set(i, alpha * h.get(i));
  }

  @Override public void biasActivation(Matrix y, Matrix bias, Activation act) {
    HostMatrix h = Shapes.own(this, HostMatrix.class, y, "y");
    HostMatrix b = bias == null ? null : Shapes.own(this, HostMatrix.class, bias, "bias");
    Shapes.bias(h, b);
    for (int r = 0; r < h.rows; r++) {
      for (int c = 0; c < h.cols; c++) {
        long i = (long) r * h.cols + c;
        float v = h.get(i);
        if (b != null) v += b.get(c);
        h.set(i, act.apply(v));
      }
    }
  }

  @Override public void activationBackward(Matrix grad, Matrix out, Activation act) {
    HostMatrix g = Shapes.own(this, HostMatrix.class, grad, "grad"), o = Shapes.own(this, HostMatrix.class, out, "out");
    Shapes.sameCount(g, o, "activationBackward");
    for (long i = 0; i < g.count(); i++) g.set(i, g.get(i) * act.derivativeAtOutput(o.get(i)));
  }

  @Override public void columnSums(Matrix x, float alpha, Matrix out) {
    HostMatrix h = Shapes.own(this, HostMatrix.class, x, "x"), o = Shapes.own(this, HostMatrix.class, out, "out");
    Shapes.columnSums(h, o);
    for (int c = 0; c < h.cols; c++) {
      float s = 0;
      for (int r = 0; r < h.rows; r++) s += h.get((long) r * h.cols + c);
      o.set(c, alpha * s);
    }
  }

  @Override public void sigmoidCrossEntropy(Matrix logits, Matrix labels, Matrix grad, Matrix loss) {
    HostMatrix z = Shapes.own(this, HostMatrix.class, logits, "logits"), y = Shapes.own(this, HostMatrix.class, labels, "labels");
    HostMatrix g = Shapes.own(this, HostMatrix.class, grad, "grad"), l = Shapes.own(this, HostMatrix.class, loss, "loss");
    Shapes.crossEntropy(z, y, g, l);
    int n = (int) z.count();
    float invN = 1f / n;
    double s = 0;
    for (int i = 0; i < n; i++) {
      float zi = z.get(i), yi = y.get(i);
      float e = (float) Math.exp(-Math.abs(zi));
      float p = zi >= 0 ? 1 / (1 + e) : e / (1 + e);
      g.set(i, (p - yi) * invN);
      s += Math.max(zi, 0f) - zi * yi + (float) Math.log1p(e);
    }
    l.set(0, (float) (s * invN));
  }

  @Override public Timeline timeline(int points) {
    long[] at = new long[points];
    return new Timeline() {
      @Override public void mark(int i) { at[i] = System.nanoTime(); }
      @Override public double millis(int from, int to) { return (at[to] - at[from]) / 1e6; }
      @Override public void close() {}
    };
  }

  @Override public void synchronize() {}

  @Override public synchronized Transfers transfers() { return transfers; }

  @Override public void close() {}
}
