package io.sparkcomms.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import java.util.zip.ZipEntry;
import java.util.zip.ZipFile;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The one plugin jar, {@code spark-plugin/target/sparkcomms-spark_<scala binary>-<version>.jar}, as
 * {@code mvn package} builds it (maven-shade-plugin; failsafe runs this after {@code package}, its path
 * in the system property {@code sc.plugin.jar}): what it holds, and SparkSubmit with that jar alone in
 * {@code --jars}.
 */
class OnePluginJarIT {
  /** Top-level folders of the jar: ours, JavaCPP's and META-INF. */
  static final List<String> ALLOWED_PREFIXES = List.of("io/sparkcomms/", "org/bytedeco/javacpp/", "META-INF/");
  /** Packages a Spark installation provides; none of them may be in the jar. */
  static final List<String> PROVIDED_PREFIXES = List.of("org/apache/spark/", "scala/", "org/apache/hadoop/",
      "com/esotericsoftware/", "org/objenesis/", "org/slf4j/", "org/apache/logging/", "io/netty/", "com/fasterxml/",
      "org/json4s/", "com/google/", "org/apache/commons/", "org/apache/arrow/", "org/apache/parquet/", "breeze/", "org/glassfish/");

  @TempDir Path dir;

  static Path pluginJar() {
    String p = System.getProperty("sc.plugin.jar");
    assertNotNull(p, "sc.plugin.jar (set by the failsafe configuration of spark-plugin/pom.xml)");
    Path jar = Path.of(p);
    assertTrue(Files.isRegularFile(jar), "the plugin jar is built: " + jar);
    return jar;
  }

  /** The jars (not classes folders) on this test's classpath that hold {@code resource}, the plugin jar excepted. */
  static Path dependencyJarHolding(String resource) throws IOException {
    Path plugin = pluginJar().toAbsolutePath();
    for (String e : System.getProperty("java.class.path").split(File.pathSeparator)) {
      if (!e.endsWith(".jar")) continue;
      Path p = Path.of(e).toAbsolutePath();
      if (p.equals(plugin)) continue;
      try (ZipFile z = new ZipFile(p.toFile())) {
        if (z.getEntry(resource) != null) return p;
      }
    }
    throw new AssertionError("no jar on the test classpath holds " + resource);
  }

  /** Entry name to CRC-32 of every file entry (directories left out). */
  static Map<String, Long> entries(Path jar) throws IOException {
    Map<String, Long> out = new TreeMap<>();
    try (ZipFile z = new ZipFile(jar.toFile())) {
      z.stream().filter(e -> !e.isDirectory()).forEach(e -> out.put(e.getName(), e.getCrc()));
    }
    return out;
  }

  @Test void nameIsArtifactIdScalaBinaryAndVersion() {
    Path jar = pluginJar();
    assertEquals("sparkcomms-spark_" + System.getProperty("sc.scala.binary.version") + "-"
        + System.getProperty("sc.project.version") + ".jar", jar.getFileName().toString());
    assertEquals("target", jar.getParent().getFileName().toString());
    assertEquals("spark-plugin", jar.getParent().getParent().getFileName().toString());
  }

  @Test void holdsThePluginCollectivesNativeAndJavaCppAndNothingSparkProvides() throws IOException {
    Path jar = pluginJar();
    Map<String, Long> mine = entries(jar);

    List<String> foreign = mine.keySet().stream().filter(n -> ALLOWED_PREFIXES.stream().noneMatch(n::startsWith))
        .collect(Collectors.toList());
    assertEquals(List.of(), foreign, "entries outside io/sparkcomms, org/bytedeco/javacpp and META-INF");
    List<String> provided = mine.keySet().stream().filter(n -> PROVIDED_PREFIXES.stream().anyMatch(n::startsWith))
        .collect(Collectors.toList());
    assertEquals(List.of(), provided, "classes that Spark provides");
    assertFalse(mine.keySet().stream().anyMatch(n -> n.endsWith("module-info.class")), "no module descriptor");

    // Every class and library of the plugin (target/classes), collectives, native and JavaCPP, byte for byte.
    Path classes = jar.getParent().resolve("classes");
    List<String> ownMissing = new ArrayList<>();
    try (Stream<Path> s = Files.walk(classes)) {
      for (Path f : (Iterable<Path>) s.filter(Files::isRegularFile)::iterator) {
        String name = classes.relativize(f).toString().replace(File.separatorChar, '/');
        if (!mine.containsKey(name)) ownMissing.add(name);
      }
    }
    assertEquals(List.of(), ownMissing, "files of spark-plugin/target/classes missing from the jar");
    assertTrue(mine.containsKey("io/sparkcomms/spark/SparkCommsPlugin.class"));

    Map<String, Path> deps = Map.of(
        "sparkcomms-collectives", dependencyJarHolding("io/sparkcomms/collectives/Communicator.class"),
        "sparkcomms-native", dependencyJarHolding("io/sparkcomms/nativeapi/SparkCommsNative.class"),
        "javacpp", dependencyJarHolding("org/bytedeco/javacpp/Loader.class"));
    int libraries = 0;
    for (Map.Entry<String, Path> d : deps.entrySet()) {
      assertTrue(d.getValue().getFileName().toString().startsWith(d.getKey() + "-"), d.getKey() + ": " + d.getValue());
      List<String> missing = new ArrayList<>();
      for (Map.Entry<String, Long> e : entries(d.getValue()).entrySet()) {
        String n = e.getKey();
        if (n.startsWith("META-INF/") || n.endsWith("module-info.class")) continue;
        if (!e.getValue().equals(mine.get(n))) missing.add(n);
        if (n.endsWith(".so")) libraries++;
      }
      assertEquals(List.of(), missing, d.getKey() + " entries missing from the jar or with other bytes");
    }
    // The JNI library that JavaCPP built (with -Dsc.skipGpuBuild=true the GPU libraries are absent
    // from the native jar, and so from this one).
    TreeSet<String> jni = mine.keySet().stream()
        .filter(n -> n.startsWith("io/sparkcomms/nativeapi/linux-x86_64/") && n.endsWith(".so"))
        .collect(Collectors.toCollection(TreeSet::new));
    assertTrue(jni.stream().anyMatch(n -> n.contains("libjni")), "the JNI library: " + jni);
    assertTrue(libraries >= jni.size(), "native libraries " + jni + ", " + libraries + " from the dependencies");
    System.out.println("plugin jar " + jar.getFileName() + ": " + mine.size() + " files, " + Files.size(jar)
        + " bytes; native libraries " + jni);
  }

  /** Services of the plugin and of collectives, merged into one file each. */
  @Test void servicesAreMerged() throws IOException {
    try (ZipFile z = new ZipFile(pluginJar().toFile())) {
      List<String> services = z.stream().map(ZipEntry::getName)
          .filter(n -> n.startsWith("META-INF/services/") && !n.endsWith("/")).collect(Collectors.toList());
      assertFalse(services.isEmpty());
      for (String s : services) {
        List<String> expected = new ArrayList<>();
        Path own = pluginJar().getParent().resolve("classes").resolve(s);
        if (Files.exists(own)) expected.addAll(providers(Files.readString(own)));
        for (String res : List.of("io/sparkcomms/collectives/Communicator.class", "io/sparkcomms/nativeapi/SparkCommsNative.class")) {
          try (ZipFile d = new ZipFile(dependencyJarHolding(res).toFile())) {
            ZipEntry e = d.getEntry(s);
            if (e != null) expected.addAll(providers(read(d, e)));
          }
        }
        List<String> actual = providers(read(z, z.getEntry(s)));
        assertEquals(new TreeSet<>(expected), new TreeSet<>(actual), s);
        for (String cls : actual) {
          assertNotNull(z.getEntry(cls.replace('.', '/') + ".class"), s + " names " + cls + ", which the jar holds");
        }
      }
    }
  }

  /** The POM published with the jar: Spark dependencies only, all provided (what the jar holds is not listed). */
  @Test void publishedPomListsOnlyProvidedSpark() throws IOException {
    String pom = Files.readString(pluginJar().getParent().resolve("dependency-reduced-pom.xml"));
    assertTrue(pom.contains("<artifactId>sparkcomms-spark_" + System.getProperty("sc.scala.binary.version") + "</artifactId>"), pom);
    String deps = pom.substring(pom.indexOf("<dependencies>"), pom.indexOf("</dependencies>"));
    for (String dep : deps.split("<dependency>")) {
      if (!dep.contains("<artifactId>")) continue;
      // ours and JavaCPP are inside the jar: a consumer sees them only as test dependencies of the build (the test-jar)
      if (!dep.contains("<scope>test</scope>")) {
        assertFalse(dep.contains("sparkcomms-collectives") || dep.contains("sparkcomms-native") || dep.contains("javacpp"), dep);
      }
      assertTrue(dep.contains("<scope>provided</scope>") || dep.contains("<scope>test</scope>"), "provided or test: " + dep);
      assertTrue(dep.contains("<scope>test</scope>") || dep.contains("<groupId>org.apache.spark</groupId>"), dep);
    }
  }

  /** Host backend: two executors without GPUs, the plugin, collectives, native and JavaCPP all from the one jar. */
  @Test @Timeout(240) void sparkSubmitWithOnlyThePluginJarAllReduces() throws Exception {
    submitWithThePluginJar("local-cluster[2,1,1024]", List.of(), "has no 'gpu' resource; collectives use the host backend");
  }

  /** Two (fake) GPUs: the executors also load the JNI library (JavaCPP) from the one jar for the device binder. */
  @Test @Timeout(240) void sparkSubmitWithOnlyThePluginJarClaimsEachGpu() throws Exception {
    submitWithThePluginJar("local-cluster[1,2,1024]", SparkSubmitPluginTest.twoFakeGpus(dir),
        "owns ExecutorGpu{gpu ");
  }

  private void submitWithThePluginJar(String master, List<String> extraConf, String executorPluginLine) throws Exception {
    Path jar = pluginJar();
    // Spark alone on the child classpath: nothing of ours, no JavaCPP
    for (String e : SparkSubmitPluginTest.sparkOnlyClasspath()) {
      Path p = Path.of(e);
      if (!Files.isRegularFile(p)) continue;
      try (ZipFile z = new ZipFile(p.toFile())) {
        assertTrue(z.getEntry("org/bytedeco/javacpp/Loader.class") == null, "JavaCPP on the child classpath: " + e);
      }
    }
    String name = java.util.regex.Pattern.quote(jar.getFileName().toString());
    SparkSubmitPluginTest.submitAndCheck(dir, master, extraConf, executorPluginLine, List.of(jar), name, name);
  }

  private static String read(ZipFile z, ZipEntry e) throws IOException {
    try (InputStream in = z.getInputStream(e)) {
      return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    }
  }

  private static List<String> providers(String file) {
    return Arrays.stream(file.split("\n")).map(l -> l.replaceAll("#.*", "").trim()).filter(l -> !l.isEmpty())
        .collect(Collectors.toList());
  }
}
