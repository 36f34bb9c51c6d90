package io.sparkcomms.collectives;

import java.util.OptionalLong;

/**
 * Parses and prints sizes such as {@code 4096}, {@code 8K}, {@code 64M}, {@code 1G}: byte sizes and
 * element counts of settings.
 *
 * <p>The grammar, shared with the native library and tested on the case table
 * {@code native/src/test/resources/setting-values.tsv}: decimal digits with an optional single
 * {@code K}, {@code M} or {@code G} suffix (either case, powers of 1024), surrounding blanks ignored.
 * Everything else is rejected: signs, {@code KB}/{@code KiB}, {@code T}, decimals, hex, blanks inside,
 * and values above {@link Long#MAX_VALUE}.
 */
public final class Sizes {
  private Sizes() {}

  private static final String ACCEPTED = "digits with an optional K, M or G suffix (powers of 1024), e.g. 4096, 256K, 4M, 1G";

  /** Parses a size; throws {@link IllegalArgumentException} unless {@code s} follows the grammar (blank included). */
  public static long parseBytes(String s) {
    String t = s.strip();
    long mult = 1;
    if (!t.isEmpty()) {
      switch (t.charAt(t.length() - 1)) {
        case 'K': case 'k': mult = 1L << 10; break;
        case 'M': case 'm': mult = 1L << 20; break;
        case 'G': case 'g': mult = 1L << 30; break;
        default: break;
      }
      if (mult != 1) t = t.substring(0, t.length() - 1);
    }
    if (t.isEmpty()) throw notASize(s);
    long v = 0;
    for (int i = 0; i < t.length(); i++) {
      char c = t.charAt(i);
      if (c < '0' || c > '9') throw notASize(s);
      try {
        v = Math.addExact(Math.multiplyExact(v, 10), c - '0');
      } catch (ArithmeticException e) {
        throw notASize(s);
      }
    }
    try {
      return Math.multiplyExact(v, mult);
    } catch (ArithmeticException e) {
      throw notASize(s);
    }
  }

  /**
   * The value of the size setting {@code name}: empty when {@code value} is null or blank (not set:
   * the default applies), else {@link #parseBytes}. A malformed value is an
   * {@link IllegalArgumentException} whose message starts with {@code name=value}.
   */
  public static OptionalLong parse(String name, String value) {
    if (value == null || value.isBlank()) return OptionalLong.empty();
    try {
      return OptionalLong.of(parseBytes(value));
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(name + "=" + value + ": " + e.getMessage(), e);
    }
  }

  public static String format(long bytes) {
    if (bytes >= (1L << 30) && bytes % (1L << 30) == 0) return (bytes >> 30) + "G";
    if (bytes >= (1L << 20) && bytes % (1L << 20) == 0) return (bytes >> 20) + "M";
    if (bytes >= (1L << 10) && bytes % (1L << 10) == 0) return (bytes >> 10) + "K";
    return Long.toString(bytes);
  }

  private static IllegalArgumentException notASize(String s) {
    return new IllegalArgumentException("not a size: '" + s + "' (expected " + ACCEPTED + ", at most " + Long.MAX_VALUE + ")");
  }
}
