package io.sparkcomms.integration;

import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.URISyntaxException;
import java.net.URL;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;
import java.util.stream.Stream;
import java.util.zip.ZipFile;
import org.junit.jupiter.api.Test;

/**
 * The product artifacts (sparkcomms-native, -collectives, -spark) hold no benchmark, harness or example
 * class. Each artifact is found through one of its classes on the test class path: its jar after
 * {@code package} (as in {@code mvn verify}), its classes folder before.
 */
class ProductJarsTest {
  /** A class of each product artifact. */
  private static final Map<String, String> PRODUCTS = Map.of(
      "sparkcomms-native", "io/sparkcomms/nativeapi/SparkCommsNative.class",
      "sparkcomms-collectives", "io/sparkcomms/collectives/Communicator.class",
      "sparkcomms-spark_2.13", "io/sparkcomms/spark/SparkCommsPlugin.class");

  /** A class of each tool artifact: none of their classes may appear in a product. */
  private static final Map<String, String> TOOLS = Map.of(
      "sparkcomms-benchmarks", "io/sparkcomms/benchmarks/BenchMain.class",
      "sparkcomms-integration-tests", "io/sparkcomms/collectives/gpu/GpuSuiteMain.class",
      "sparkcomms-collectives tests", "io/sparkcomms/collectives/CollectiveChecker.class");

  /** Packages that hold tools only (examples included, which are not on this class path). */
  private static final List<String> TOOL_PACKAGES = List.of(
      "io/sparkcomms/benchmarks/", "io/sparkcomms/examples/", "io/sparkcomms/collectives/bench/",
      "io/sparkcomms/collectives/reliability/");

  /** The jar or classes folder that {@code resource} is loaded from. */
  private static Path rootOf(String resource) throws URISyntaxException {
    URL u = ProductJarsTest.class.getClassLoader().getResource(resource);
    assertNotNull(u, resource + " is not on the test class path");
    String s = u.toString();
    if (s.startsWith("jar:")) return Paths.get(new java.net.URI(s.substring(4, s.indexOf("!/"))));
    Path p = Paths.get(u.toURI());
    for (int i = resource.split("/").length; i > 0; i--) p = p.getParent();
    return p;
  }

  /** Every .class entry of a jar or classes folder, as a path with '/'. */
  private static TreeSet<String> classes(Path root) throws IOException {
    TreeSet<String> out = new TreeSet<>();
    if (Files.isRegularFile(root)) {
      try (ZipFile z = new ZipFile(root.toFile())) {
        z.stream().map(e -> e.getName()).filter(n -> n.endsWith(".class")).forEach(out::add);
      }
    } else {
      try (Stream<Path> s = Files.walk(root)) {
        s.filter(p -> p.toString().endsWith(".class")).forEach(p -> out.add(root.relativize(p).toString().replace('\\', '/')));
      }
    }
    return out;
  }

  @Test
  void productArtifactsHoldNoToolClasses() throws Exception {
    Map<String, Path> toolRoots = new LinkedHashMap<>();
    TreeSet<String> toolClasses = new TreeSet<>();
    for (Map.Entry<String, String> t : TOOLS.entrySet()) {
      Path root = rootOf(t.getValue());
      toolRoots.put(t.getKey(), root);
      TreeSet<String> c = classes(root);
      assertTrue(c.contains(t.getValue()), t.getKey() + " at " + root + " lacks " + t.getValue());
      toolClasses.addAll(c);
    }
    for (Map.Entry<String, String> p : PRODUCTS.entrySet()) {
      Path root = rootOf(p.getValue());
      for (Map.Entry<String, Path> t : toolRoots.entrySet()) {
        assertNotEquals(t.getValue(), root, p.getKey() + " and " + t.getKey() + " load from the same place");
      }
      TreeSet<String> c = classes(root);
      assertTrue(c.contains(p.getValue()), p.getKey() + " at " + root + " lacks " + p.getValue());
      List<String> bad = new ArrayList<>();
      for (String name : c) {
        if (toolClasses.contains(name) || TOOL_PACKAGES.stream().anyMatch(name::startsWith)) bad.add(name);
      }
      assertTrue(bad.isEmpty(), p.getKey() + " (" + root + ") holds tool classes: " + bad);
    }
  }
}
