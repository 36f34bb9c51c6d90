package io.sparkcomms.spark.plugin;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.spark.ConfigurationReference;
import io.sparkcomms.spark.ConfigurationReference.EnvVar;
import io.sparkcomms.spark.ConfigurationReference.RecordingEnv;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The environment table of docs/configuration.md against the code: the variables
 * {@code CommOptions.Builder.applyEnvironment} reads, the {@code getenv} calls of the Java layer, the
 * documented defaults, and the Spark keys named as the same setting. (GpuEnvironmentReferenceTest
 * checks the GPU discovery rows.)
 */
class EnvironmentReferenceTest {
  static final Set<String> READERS = Set.of("CommOptions", "GPU discovery", "GpuLibrary");
  /** Module source trees of the Java layer, relative to the repository root. */
  static final List<String> SOURCES = List.of("native/src/main/java", "collectives/src/main/java", "spark-plugin/src/main/java");
  /** {@code getenv("NAME")} and {@code getenv().get("NAME")}-style reads of one named variable. */
  static final Pattern GETENV = Pattern.compile(
      "getenv\\(\\s*\"([A-Za-z0-9_]+)\"\\s*\\)|getenv\\(\\)\\s*\\.\\s*(?:get|getOrDefault|containsKey)\\(\\s*\"([A-Za-z0-9_]+)\"");
  static final Pattern ENV_IN_DOC = Pattern.compile("Env: `([A-Z0-9_]+)`");

  static List<EnvVar> table() { return ConfigurationReference.environmentTable(ConfigurationReference.read()); }

  @Test void rowsAreUniqueAndNameTheirReader() {
    Set<String> seen = new TreeSet<>();
    for (EnvVar v : table()) {
      assertTrue(seen.add(v.name()), "listed twice: " + v.name());
      assertTrue(READERS.contains(v.readBy()), v.name() + ": 'Read by' is '" + v.readBy() + "', expected one of " + READERS);
      assertTrue(!v.meaning().isBlank() && !v.defaultCell().isBlank(), v.name() + " needs a default and a meaning");
    }
  }

  /** Exactly the variables applyEnvironment looks up are the CommOptions rows. */
  @Test void theCommOptionsRowsAreWhatApplyEnvironmentReads() {
    RecordingEnv env = new RecordingEnv(Map.of(), false);
    CommOptions.builder().applyEnvironment(env);
    assertEquals(env.read(), ConfigurationReference.namesReadBy(table(), "CommOptions"),
        "CommOptions.Builder.applyEnvironment reads these variables (left); docs/configuration.md lists (right)");
  }

  /** A documented literal default, set, leaves the options as the built-in defaults. */
  @Test void documentedDefaultsChangeNothing() {
    String defaults = CommOptions.defaults().toString();
    int checked = 0;
    for (EnvVar v : table()) {
      if (!v.readBy().equals("CommOptions") || !v.literalDefault()) continue;
      String got = CommOptions.builder().applyEnvironment(Map.of(v.name(), v.literal())).build().toString();
      assertEquals(defaults, got, v.name() + "=" + v.literal() + " (the documented default) changes the options");
      checked++;
    }
    assertTrue(checked >= 5, "only " + checked + " literal defaults checked");
  }

  /**
   * The Spark keys a row names as the same setting exist and say "Env: `NAME`" of that row, and every
   * key whose documentation names a variable is listed for it.
   */
  @Test void sparkKeysAndVariablesReferToEachOther() {
    List<EnvVar> table = table();
    Set<String> pairsInTable = new TreeSet<>();
    for (EnvVar v : table) {
      for (String key : v.sparkKeys()) {
        SparkCommsConf.Entry e = SparkCommsConf.find(key)
            .orElseThrow(() -> new AssertionError(v.name() + " names " + key + ", which is not a sparkcomms key"));
        assertTrue(e.doc().contains("Env: `" + v.name() + "`"), key + "'s documentation does not name " + v.name());
        pairsInTable.add(key + " " + v.name());
      }
    }
    Set<String> pairsInConf = new TreeSet<>();
    for (SparkCommsConf.Entry e : SparkCommsConf.entries()) {
      Matcher m = ENV_IN_DOC.matcher(e.doc());
      while (m.find()) pairsInConf.add(e.key() + " " + m.group(1));
    }
    assertEquals(pairsInConf, pairsInTable, "key/variable pairs: SparkCommsConf (left) vs the environment table (right)");
  }

  /** Every variable the Java layer reads by a literal name is listed; the GpuLibrary rows are those of native. */
  @Test void namedGetenvCallsAreListed() throws IOException {
    Set<String> listed = new TreeSet<>();
    for (EnvVar v : table()) listed.add(v.name());
    Set<String> nativeReads = new TreeSet<>();
    List<String> missing = new ArrayList<>();
    int files = 0;
    for (String dir : SOURCES) {
      Path root = ConfigurationReference.ROOT.resolve(dir);
      assertTrue(Files.isDirectory(root), "no source tree " + root);
      try (Stream<Path> s = Files.walk(root)) {
        for (Path p : (Iterable<Path>) s.filter(f -> f.toString().endsWith(".java"))::iterator) {
          files++;
          Matcher m = GETENV.matcher(Files.readString(p));
          while (m.find()) {
            String name = m.group(1) != null ? m.group(1) : m.group(2);
            if (dir.startsWith("native/")) nativeReads.add(name);
            if (!listed.contains(name)) missing.add(name + " (" + ConfigurationReference.ROOT.relativize(p) + ")");
          }
        }
      }
    }
    assertTrue(files > 50, "scanned only " + files + " source files");
    assertEquals(List.of(), missing, "read by the Java layer, missing from docs/configuration.md");
    assertEquals(nativeReads, ConfigurationReference.namesReadBy(table(), "GpuLibrary"),
        "read by the native module's Java code (left) vs the GpuLibrary rows (right)");
  }

  /** The section the GPU library's parameter table is generated into is there, once, in order. */
  @Test void theNativeParametersSectionIsMarked() {
    String text = ConfigurationReference.read();
    String filled = ConfigurationReference.withGenerated(text, "native parameters", "x\n");
    assertTrue(filled.contains("<!-- BEGIN GENERATED: native parameters -->\nx\n<!-- END GENERATED: native parameters -->"));
  }
}
