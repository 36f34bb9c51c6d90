package io.sparkcomms.collectives.math;

import io.sparkcomms.collectives.Tensor;

/**
 * A row-major float32 matrix in the memory of one {@link DenseMath}: a whole allocation, or a view
 * of contiguous elements of one ({@link #view}). The allocation is the math's: it is freed when the
 * math is closed, and a view is valid while its allocation is. {@link #tensor()} is the same memory
 * as a collective's tensor, so a communicator of the same place reduces it in place.
 */
public abstract sealed class Matrix permits HostMatrix, DeviceMatrix {
  final int rows;
  final int cols;
  final long offset;  // in elements, from the start of the allocation
  final DenseMath owner;

  Matrix(DenseMath owner, int rows, int cols, long offset) {
    if (rows < 0 || cols < 0) throw new IllegalArgumentException("matrix sizes must be >= 0, got " + rows + " x " + cols);
    this.rows = rows;
    this.cols = cols;
    this.offset = offset;
    this.owner = owner;
  }

  /** The allocation this matrix is a view of (identity: two matrices of one allocation share it). */
  abstract Object allocation();

  /** Whether this matrix and {@code o} share an element. */
  final boolean overlaps(Matrix o) {
    return allocation() == o.allocation() && count() > 0 && o.count() > 0
        && offset < o.offset + o.count() && o.offset < offset + count();
  }

  public int rows() { return rows; }

  public int cols() { return cols; }

  /** {@code rows * cols}. */
  public long count() { return (long) rows * cols; }

  /** Elements of the allocation this matrix is in. */
  abstract long capacity();

  /**
   * A {@code rows x cols} view of this matrix's memory from element {@code from} (row-major, so a
   * range of whole rows, or the same elements as another shape).
   *
   * @throws IllegalArgumentException when the range leaves this matrix
   */
  public final Matrix view(long from, int rows, int cols) {
    long n = (long) rows * cols;
    if (rows < 0 || cols < 0 || from < 0 || from > count() || n > count() - from) {
      throw new IllegalArgumentException("view of " + rows + " x " + cols + " from element " + from + " leaves the "
          + this.rows + " x " + this.cols + " matrix");
    }
    return viewAt(offset + from, rows, cols);
  }

  abstract Matrix viewAt(long offset, int rows, int cols);

  /** The same memory as a tensor of {@code count()} float32 elements (host or device). */
  public abstract Tensor tensor();

  @Override public String toString() {
    return getClass().getSimpleName() + "[" + rows + " x " + cols + (offset == 0 ? "" : " at +" + offset) + "]";
  }
}
