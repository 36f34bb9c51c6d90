package io.sparkcomms.collectives;

/** Element types a collective can move. The code is the value used by the native C ABI. */
public enum DataType {
  FLOAT32(0, 4, true),
  BFLOAT16(1, 2, true),
  FLOAT16(2, 2, true),
  FLOAT64(3, 8, true),
  INT32(4, 4, false),
  INT64(5, 8, false);

  private final int code;
  private final int size;
  private final boolean floating;

  DataType(int code, int size, boolean floating) {
    this.code = code;
    this.size = size;
    this.floating = floating;
  }

  /** Code in the C ABI ({@code sparkcomms.h}). */
  public int code() { return code; }

  /** Bytes per element. */
  public int size() { return size; }

  public boolean isFloating() { return floating; }

  /** True for the 16-bit floating types that are accumulated in FP32 and rounded once. */
  public boolean isHalf() { return this == BFLOAT16 || this == FLOAT16; }
}
