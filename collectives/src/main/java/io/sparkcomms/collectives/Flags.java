package io.sparkcomms.collectives;

import java.util.Locale;
import java.util.Optional;

/**
 * Parses on/off settings. The grammar, shared with the native library and tested on the case table
 * {@code native/src/test/resources/setting-values.tsv}: {@code 1}, {@code true}, {@code on} or
 * {@code 0}, {@code false}, {@code off}, in any case, surrounding blanks ignored; a blank value is
 * not set. Anything else ({@code yes}, {@code 2}, {@code 01}, ...) is rejected.
 */
public final class Flags {
  private Flags() {}

  private static final String ACCEPTED = "0, 1, true, false, on, off (any case)";

  /**
   * The value of the flag setting {@code name}: empty when {@code value} is null or blank (not set:
   * the default applies). Anything outside the grammar is an {@link IllegalArgumentException} whose
   * message starts with {@code name=value} and lists the accepted values.
   */
  public static Optional<Boolean> parse(String name, String value) {
    if (value == null || value.isBlank()) return Optional.empty();
    switch (value.strip().toLowerCase(Locale.ROOT)) {
      case "1": case "true": case "on": return Optional.of(true);
      case "0": case "false": case "off": return Optional.of(false);
      default: throw new IllegalArgumentException(name + "=" + value + ": expected one of " + ACCEPTED + ", or blank for the default");
    }
  }
}
