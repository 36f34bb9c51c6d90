package io.sparkcomms.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The Spark layer's packages depend on each other one way (package-info of io.sparkcomms.spark):
 * gpu, rendezvous and net on none of the others, plugin on gpu and rendezvous, the root package on
 * plugin, gpu, rendezvous and net, dataset on the root package and plugin. Checked on the imports of the main sources.
 */
class PackageLayoutTest {
  static final String BASE = "io.sparkcomms.spark";
  /** Package (relative to {@link #BASE}, "" for the root) to the packages it may import. */
  static final Map<String, Set<String>> ALLOWED = Map.of(
      "gpu", Set.of(),
      "rendezvous", Set.of(),
      "net", Set.of(),
      "plugin", Set.of("gpu", "rendezvous"),
      "", Set.of("plugin", "gpu", "rendezvous", "net"),
      "dataset", Set.of("", "plugin"));
  static final Pattern IMPORT = Pattern.compile("^import\\s+(?:static\\s+)?io\\.sparkcomms\\.spark((?:\\.[a-z]\\w*)*)\\.[A-Z]",
      Pattern.MULTILINE);

  @Test void packagesDependOneWay() throws IOException {
    Path src = ConfigurationReference.ROOT.resolve("spark-plugin/src/main/java/io/sparkcomms/spark");
    List<String> violations = new ArrayList<>();
    int files = 0;
    try (Stream<Path> s = Files.walk(src)) {
      for (Path p : (Iterable<Path>) s.filter(f -> f.toString().endsWith(".java"))::iterator) {
        files++;
        String pkg = src.relativize(p.getParent()).toString().replace('/', '.');
        assertTrue(ALLOWED.containsKey(pkg), "a package the layout does not know: " + BASE + "." + pkg);
        Matcher m = IMPORT.matcher(Files.readString(p));
        while (m.find()) {
          String used = m.group(1).isEmpty() ? "" : m.group(1).substring(1);
          if (!used.equals(pkg) && !ALLOWED.get(pkg).contains(used)) {
            violations.add(src.relativize(p) + " imports from " + BASE + (used.isEmpty() ? "" : "." + used));
          }
        }
      }
    }
    assertTrue(files > 30, "scanned only " + files + " files");
    assertEquals(List.of(), violations);
  }
}
