package io.sparkcomms.collectives;

import java.util.Objects;

/**
 * A reduction operator, as in torchcomms / NCCL: SUM, AVG, MIN, MAX, PRODUCT and PREMUL_SUM(factor),
 * which multiplies every input by {@code factor} before summing.
 */
public final class ReduceOp {
  /** The operator kinds; the ordinal-independent code is the C ABI value. */
  public enum Kind {
    SUM(0), AVG(1), MIN(2), MAX(3), PRODUCT(4), PREMUL_SUM(5);
    private final int code;
    Kind(int code) { this.code = code; }
    public int code() { return code; }
  }

  public static final ReduceOp SUM = new ReduceOp(Kind.SUM, 1.0);
  public static final ReduceOp AVG = new ReduceOp(Kind.AVG, 1.0);
  public static final ReduceOp MIN = new ReduceOp(Kind.MIN, 1.0);
  public static final ReduceOp MAX = new ReduceOp(Kind.MAX, 1.0);
  public static final ReduceOp PRODUCT = new ReduceOp(Kind.PRODUCT, 1.0);

  private final Kind kind;
  private final double factor;

  private ReduceOp(Kind kind, double factor) {
    this.kind = kind;
    this.factor = factor;
  }

  /** SUM of {@code factor * x} over ranks. Only for floating dtypes. */
  public static ReduceOp premulSum(double factor) {
    if (!Double.isFinite(factor)) {
      throw new IllegalArgumentException("PREMUL_SUM factor must be finite, got " + factor);
    }
    return new ReduceOp(Kind.PREMUL_SUM, factor);
  }

  /** The operators without parameters plus PREMUL_SUM(0.5), for tests and sweeps. */
  public static ReduceOp[] examples() {
    return new ReduceOp[] {SUM, AVG, MIN, MAX, PRODUCT, premulSum(0.5)};
  }

  public static ReduceOp parse(String s) {
    String u = s.trim().toUpperCase();
    if (u.startsWith("PREMUL_SUM")) {
      int open = u.indexOf('(');
      double f = open < 0 ? 1.0 : Double.parseDouble(u.substring(open + 1, u.indexOf(')')));
      return premulSum(f);
    }
    switch (u) {
      case "SUM": return SUM;
      case "AVG": return AVG;
      case "MIN": return MIN;
      case "MAX": return MAX;
      case "PRODUCT": case "PROD": return PRODUCT;
      default: throw new IllegalArgumentException("unknown reduce op '" + s
          + "' (SUM, AVG, MIN, MAX, PRODUCT, PREMUL_SUM(f))");
    }
  }

  public Kind kind() { return kind; }

  /** The PREMUL_SUM factor; 1.0 for the other operators. */
  public double factor() { return factor; }

  /** Whether this operator is defined for {@code dtype}. PREMUL_SUM needs a floating type. */
  public boolean supports(DataType dtype) {
    return kind != Kind.PREMUL_SUM || dtype.isFloating();
  }

  @Override public boolean equals(Object o) {
    return o instanceof ReduceOp r && r.kind == kind && Double.compare(r.factor, factor) == 0;
  }

  @Override public int hashCode() { return Objects.hash(kind, factor); }

  @Override public String toString() {
    return kind == Kind.PREMUL_SUM ? "PREMUL_SUM(" + factor + ")" : kind.name();
  }
}
