package io.sparkcomms.collectives.math;

/** The argument checks every {@link DenseMath} makes before it runs anything (one place for both). */
final class Shapes {
  private Shapes() {}

  static <M extends Matrix> M own(DenseMath math, Class<M> type, Matrix m, String what) {
    if (m == null) throw new IllegalArgumentException(what + " is null");
    if (!type.isInstance(m) || m.owner != math) {
      throw new IllegalArgumentException(what + " is a matrix of another DenseMath (" + m.owner.description()
          + "); this one is " + math.description() + ": matrices cannot be mixed across maths");
    }
    return type.cast(m);
  }

  static void disjoint(Matrix out, Matrix in, String op) {
    if (out.overlaps(in)) throw new IllegalArgumentException(op + ": the output overlaps an input");
  }

  static void gemm(Matrix a, boolean ta, Matrix b, boolean tb, Matrix c) {
    disjoint(c, a, "gemm");
    disjoint(c, b, "gemm");
    int m = ta ? a.cols : a.rows, k = ta ? a.rows : a.cols;
    int kb = tb ? b.cols : b.rows, n = tb ? b.rows : b.cols;
    if (k != kb || c.rows != m || c.cols != n) {
      throw new IllegalArgumentException("gemm shapes do not fit: op(a) " + m + " x " + k + ", op(b) " + kb + " x " + n
          + ", c " + c.rows + " x " + c.cols);
    }
  }

  static void sameCount(Matrix x, Matrix y, String op) {
    if (x.count() != y.count()) {
      throw new IllegalArgumentException(op + ": " + x.rows + " x " + x.cols + " and " + y.rows + " x " + y.cols
          + " have different element counts");
    }
    intCount(x, op);
  }

  static int intCount(Matrix x, String op) {
    if (x.count() > Integer.MAX_VALUE) throw new IllegalArgumentException(op + ": " + x.count() + " elements exceed 2^31 - 1");
    return (int) x.count();
  }

  static void bias(Matrix y, Matrix bias) {
    if (bias != null && (bias.count() != y.cols)) {
      throw new IllegalArgumentException("bias has " + bias.count() + " elements, the matrix " + y.cols + " columns");
    }
    intCount(y, "biasActivation");
  }

  static void columnSums(Matrix x, Matrix out) {
    if (out.count() != x.cols) throw new IllegalArgumentException("columnSums: out has " + out.count() + " elements, x " + x.cols + " columns");
  }

  static void crossEntropy(Matrix logits, Matrix labels, Matrix grad, Matrix loss) {
    sameCount(logits, labels, "sigmoidCrossEntropy");
    sameCount(logits, grad, "sigmoidCrossEntropy");
    if (logits.count() == 0) throw new IllegalArgumentException("sigmoidCrossEntropy of no elements");
    if (loss.count() != 1) throw new IllegalArgumentException("sigmoidCrossEntropy: loss must be 1 x 1, got " + loss.rows + " x " + loss.cols);
  }

  static void data(float[] data, int rows, int cols) {
    if (data == null) throw new IllegalArgumentException("data is null");
    if (rows < 0 || cols < 0 || data.length != (long) rows * cols) {
      throw new IllegalArgumentException("data has " + data.length + " elements, the matrix " + rows + " x " + cols);
    }
  }
}
