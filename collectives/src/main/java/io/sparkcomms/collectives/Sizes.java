package io.sparkcomms.collectives;

import java.util.Locale;

/** Parses and prints byte sizes such as {@code 8K}, {@code 64M}, {@code 1G} (binary multiples). */
public final class Sizes {
  private Sizes() {}

  public static long parseBytes(String s) {
    String t = s.trim().toUpperCase(Locale.ROOT);
    if (t.endsWith("IB")) t = t.substring(0, t.length() - 2);
    else if (t.endsWith("B") && t.length() > 1 && !Character.isDigit(t.charAt(t.length() - 2))) t = t.substring(0, t.length() - 1);
    else if (t.endsWith("B")) t = t.substring(0, t.length() - 1);
    long mult = 1;
    if (!t.isEmpty()) {
      switch (t.charAt(t.length() - 1)) {
        case 'K': mult = 1L << 10; break;
        case 'M': mult = 1L << 20; break;
        case 'G': mult = 1L << 30; break;
        case 'T': mult = 1L << 40; break;
        default: mult = 1;
      }
      if (mult != 1) t = t.substring(0, t.length() - 1);
    }
    try {
      long v = Long.parseLong(t.trim());
      if (v < 0) throw new IllegalArgumentException("negative size '" + s + "'");
      return Math.multiplyExact(v, mult);
    } catch (NumberFormatException | ArithmeticException e) {
      throw new IllegalArgumentException("not a byte size: '" + s + "' (examples: 4096, 8K, 64M, 1G)");
    }
  }

  public static String format(long bytes) {
    if (bytes >= (1L << 30) && bytes % (1L << 30) == 0) return (bytes >> 30) + "G";
    if (bytes >= (1L << 20) && bytes % (1L << 20) == 0) return (bytes >> 20) + "M";
    if (bytes >= (1L << 10) && bytes % (1L << 10) == 0) return (bytes >> 10) + "K";
    return Long.toString(bytes);
  }
}
