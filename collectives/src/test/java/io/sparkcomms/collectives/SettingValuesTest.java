package io.sparkcomms.collectives;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import org.junit.jupiter.api.Test;

/**
 * The Java side of the one grammar for setting values: every row of the case table that the native
 * parser is tested against, through {@link Sizes}, {@link Flags} and {@link CommOptions.Builder#applyEnvironment}.
 */
class SettingValuesTest {
  /** The case table, relative to this module's directory (where the tests run). */
  static final Path TABLE = Path.of(System.getProperty("user.dir"), "..", "native", "src", "test", "resources", "setting-values.tsv");

  /** One row: kind ("size" or "flag"), the value text (quotes removed), the expected result. */
  record Row(int line, String kind, String value, String expected) {
    @Override public String toString() { return "setting-values.tsv:" + line + " " + kind + " \"" + value + "\" -> " + expected; }
  }

  static List<Row> rows() throws IOException {
    assertTrue(Files.isRegularFile(TABLE), "case table missing: " + TABLE.normalize());
    List<Row> rows = new ArrayList<>();
    List<String> lines = Files.readAllLines(TABLE);
    for (int i = 0; i < lines.size(); i++) {
      String l = lines.get(i);
      if (l.isBlank() || l.startsWith("#")) continue;
      String[] f = l.split("\t", -1);
      assertEquals(3, f.length, "line " + (i + 1) + " does not have 3 tab-separated columns: " + l);
      assertTrue(f[1].length() >= 2 && f[1].startsWith("\"") && f[1].endsWith("\""), "line " + (i + 1) + ": value not quoted: " + l);
      rows.add(new Row(i + 1, f[0], f[1].substring(1, f[1].length() - 1), f[2]));
    }
    return rows;
  }

  @Test void tableCoversBothKindsAndAllOutcomes() throws IOException {
    List<Row> rows = rows();
    for (String kind : List.of("size", "flag")) {
      for (String outcome : List.of("DEFAULT", "ERROR")) {
        assertTrue(rows.stream().anyMatch(r -> r.kind().equals(kind) && r.expected().equals(outcome)), kind + " " + outcome);
      }
      assertTrue(rows.stream().anyMatch(r -> r.kind().equals(kind) && r.expected().matches("[0-9]+")), kind + " value");
    }
    assertTrue(rows.stream().allMatch(r -> r.kind().equals("size") || r.kind().equals("flag")),
        "unknown kind in " + rows);
  }

  @Test void sizes() throws IOException {
    for (Row r : rows()) {
      if (!r.kind().equals("size")) continue;
      switch (r.expected()) {
        case "DEFAULT":
          assertEquals(OptionalLong.empty(), Sizes.parse("SOME_SIZE", r.value()), r.toString());
          assertThrows(IllegalArgumentException.class, () -> Sizes.parseBytes(r.value()), r + ": blank is not a size");
          break;
        case "ERROR": {
          IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Sizes.parse("SOME_SIZE", r.value()), r.toString());
          assertTrue(e.getMessage().startsWith("SOME_SIZE="), r + ": " + e.getMessage());
          assertThrows(IllegalArgumentException.class, () -> Sizes.parseBytes(r.value()), r.toString());
          break;
        }
        default:
          long want = Long.parseLong(r.expected());
          assertEquals(OptionalLong.of(want), Sizes.parse("SOME_SIZE", r.value()), r.toString());
          assertEquals(want, Sizes.parseBytes(r.value()), r.toString());
      }
    }
  }

  @Test void flags() throws IOException {
    for (Row r : rows()) {
      if (!r.kind().equals("flag")) continue;
      switch (r.expected()) {
        case "DEFAULT":
          assertEquals(Optional.empty(), Flags.parse("SOME_FLAG", r.value()), r.toString());
          break;
        case "ERROR": {
          IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Flags.parse("SOME_FLAG", r.value()), r.toString());
          assertTrue(e.getMessage().startsWith("SOME_FLAG="), r + ": " + e.getMessage());
          assertTrue(e.getMessage().contains("0, 1, true, false, on, off"), r + ": accepted values not listed: " + e.getMessage());
          break;
        }
        case "0": case "1":
          assertEquals(Optional.of(r.expected().equals("1")), Flags.parse("SOME_FLAG", r.value()), r.toString());
          break;
        default:
          throw new AssertionError(r + ": a flag's expected result is 0, 1, DEFAULT or ERROR");
      }
    }
  }

  /** The environment variables of {@link CommOptions} follow the table too, and their errors name them. */
  @Test void environmentVariables() throws IOException {
    CommOptions defaults = CommOptions.defaults();
    for (Row r : rows()) {
      String name = r.kind().equals("size") ? "SPARKCOMMS_LP_MIN_BYTES" : "SPARKCOMMS_VENDOR";
      Map<String, String> env = Map.of(name, r.value());
      if (r.expected().equals("ERROR")) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
            () -> CommOptions.builder().applyEnvironment(env), r.toString());
        assertTrue(e.getMessage().contains(name), r + ": " + e.getMessage());
        continue;
      }
      if (r.kind().equals("size") && !r.expected().equals("DEFAULT")
          && Long.parseLong(r.expected()) > CommOptions.MAX_THRESHOLD_BYTES) {
        // well-formed, but above the thresholds' range (the native table's too): an error naming it
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
            () -> CommOptions.builder().applyEnvironment(env), r.toString());
        assertTrue(e.getMessage().contains(name) && e.getMessage().contains("2^48"), r + ": " + e.getMessage());
        continue;
      }
      CommOptions o = CommOptions.builder().applyEnvironment(env).build();
      if (r.kind().equals("size")) {
        long want = r.expected().equals("DEFAULT") ? defaults.lpMinBytes() : Long.parseLong(r.expected());
        assertEquals(want, o.lpMinBytes(), r.toString());
      } else {
        boolean want = r.expected().equals("DEFAULT") ? defaults.vendor() : r.expected().equals("1");
        assertEquals(want, o.vendor(), r.toString());
      }
    }
  }
}
