package io.sparkcomms.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.File;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.jar.Attributes;
import java.util.jar.JarEntry;
import java.util.jar.JarFile;
import java.util.jar.JarOutputStream;
import java.util.jar.Manifest;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The plugin as users deploy it (README, "Spark"): {@code org.apache.spark.deploy.SparkSubmit} with
 * {@code --conf spark.plugins=io.sparkcomms.spark.SparkCommsPlugin} and our jars in {@code --jars},
 * in a child JVM (SparkSubmit calls System.exit) whose classpath is Spark alone: this test's
 * classpath without any entry holding {@code io/sparkcomms} classes and without JavaCPP, so the
 * driver loads the plugin from {@code --jars} and the executors (local-cluster: two executor JVMs)
 * fetch the jars from the driver. The application ({@link io.sparkcomms.spark.submit.SubmitAllReduceJob})
 * is its own jar, with a barrier stage that allReduces and prints its results.
 *
 * <p>The plugin jar is built here from {@code target/classes} with java.util.jar rather than by a
 * failsafe integration-test phase: the surefire {@code test} phase runs before {@code package}, and
 * a failsafe binding would add a second plugin, a second JVM configuration and a test that
 * {@code mvn test} silently skips, for the same jar bytes (a jar of the compiled classes and
 * resources). Jars of the other modules are used as they are on the classpath (reactor or local
 * repository); a module that is only a classes directory (a reactor {@code test} run) is packed too.
 */
class SparkSubmitPluginTest {
  @TempDir Path dir;

  /** Two executors without GPUs: the executor plugin starts, communicators meet over its RPC channel. */
  @Test @Timeout(600) void sparkSubmitLoadsThePluginFromJarsAndAllReduces() throws Exception {
    submit("local-cluster[2,1,1024]", List.of(), "has no 'gpu' resource; collectives use the host backend");
  }

  /**
   * Four executors on two simulated nodes (the node names setting): the job's communicator shares
   * memory inside each node and crosses nodes over Spark's network library, as on a real cluster.
   */
  @Test @Timeout(600) void sparkSubmitAcrossTwoNodes() throws Exception {
    submitRanks("local-cluster[4,1,1024]", List.of("spark.sparkcomms.node.names=0=n0,1=n0,2=n1,3=n1"),
        "has no 'gpu' resource; collectives use the host backend", 4, "host+net");
  }

  /**
   * One worker with two (fake) GPUs, an executor on each: the executor plugin also claims its GPU
   * with the driver at start (an RPC answered with a reply object) and loads the native library
   * (JavaCPP from --jars) for the device binder.
   */
  @Test @Timeout(600) void sparkSubmitWithGpuExecutorsClaimsEachGpu() throws Exception {
    submit("local-cluster[1,2,1024]", twoFakeGpus(dir),
        "owns ExecutorGpu{gpu ");
  }

  /** One worker with two fake GPUs (a discovery script in {@code dir}), one GPU per executor and task. */
  static List<String> twoFakeGpus(Path dir) throws Exception {
    Path discovery = dir.resolve("two-gpus.sh");
    Files.writeString(discovery, "#!/usr/bin/env bash\necho '{\"name\":\"gpu\",\"addresses\":[\"0\",\"1\"]}'\n");
    assertTrue(discovery.toFile().setExecutable(true));
    return List.of(
        "spark.worker.resource.gpu.amount=2", "spark.worker.resource.gpu.discoveryScript=" + discovery,
        "spark.executor.cores=1", "spark.executor.resource.gpu.amount=1", "spark.task.resource.gpu.amount=1");
  }

  private void submit(String master, List<String> extraConf, String executorPluginLine) throws Exception {
    submitRanks(master, extraConf, executorPluginLine, 2, "host");
  }

  private void submitRanks(String master, List<String> extraConf, String executorPluginLine, int ranks, String backend) throws Exception {
    Path jarsDir = Files.createDirectories(dir.resolve("jars"));

    // Split the test classpath: Spark and its dependencies stay; our modules and JavaCPP go to --jars.
    List<Path> userJars = new ArrayList<>();
    for (String entry : System.getProperty("java.class.path").split(File.pathSeparator)) {
      if (entry.isEmpty()) continue;
      Path p = Path.of(entry);
      boolean ours = holdsSparkcommsClasses(p);
      if (Files.isDirectory(p) && ours) {
        if (!p.getFileName().toString().equals("test-classes")) userJars.add(jarOf(p, jarsDir.resolve(moduleJarName(p))));
      } else if (ours || isJavaCpp(p)) {
        userJars.add(p);
      }
    }
    Set<String> jarNames = userJars.stream().map(j -> j.getFileName().toString()).collect(Collectors.toSet());
    assertTrue(jarNames.stream().anyMatch(n -> n.startsWith("sparkcomms-spark")), "plugin jar in --jars: " + jarNames);
    assertTrue(jarNames.stream().anyMatch(n -> n.startsWith("sparkcomms-collectives")), "collectives jar in --jars: " + jarNames);
    assertTrue(jarNames.stream().anyMatch(n -> n.startsWith("sparkcomms-native")), "native jar in --jars: " + jarNames);
    submitAndCheck(dir, master, extraConf, executorPluginLine, userJars,
        "sparkcomms-spark[^/]*\\.jar", "sparkcomms-collectives[^/]*\\.jar", ranks, backend);
  }

  /**
   * The test classpath without our classes and without JavaCPP: Spark and its dependencies, as a
   * Spark installation's jars/ would hold them.
   */
  static List<String> sparkOnlyClasspath() {
    List<String> sparkOnly = new ArrayList<>();
    for (String entry : System.getProperty("java.class.path").split(File.pathSeparator)) {
      if (entry.isEmpty()) continue;
      Path p = Path.of(entry);
      if (!holdsSparkcommsClasses(p) && !isJavaCpp(p)) sparkOnly.add(entry);
    }
    return sparkOnly;
  }

  private static boolean isJavaCpp(Path p) {
    return p.getFileName() != null && p.getFileName().toString().startsWith("javacpp-");
  }

  /**
   * Runs {@link io.sparkcomms.spark.submit.SubmitAllReduceJob} through SparkSubmit on {@code master}
   * with {@code --jars userJars} and Spark alone on the driver's and executors' classpath, and checks
   * its results and logs. {@code pluginJar} and {@code collectivesJar}: regular expressions for the
   * file names of the jars that the plugin classes and the collectives classes are to be loaded from.
   */
  static void submitAndCheck(Path dir, String master, List<String> extraConf, String executorPluginLine,
      List<Path> userJars, String pluginJar, String collectivesJar) throws Exception {
    submitAndCheck(dir, master, extraConf, executorPluginLine, userJars, pluginJar, collectivesJar, 2, "host");
  }

  /** {@link #submitAndCheck} with {@code ranks} executors, whose communicators report {@code backend}. */
  static void submitAndCheck(Path dir, String master, List<String> extraConf, String executorPluginLine,
      List<Path> userJars, String pluginJar, String collectivesJar, int ranks, String backend) throws Exception {
    Path home = Files.createDirectories(dir.resolve("spark-home"));
    List<String> sparkOnly = sparkOnlyClasspath();
    for (String e : sparkOnly) assertFalse(holdsSparkcommsClasses(Path.of(e)), "left on the child classpath: " + e);
    String childCp = String.join(File.pathSeparator, sparkOnly);
    Path pluginJarPath = userJars.stream().filter(j -> j.getFileName().toString().matches(pluginJar)).findFirst()
        .orElseThrow(() -> new AssertionError("no jar named " + pluginJar + " in --jars: " + userJars));

    // The application jar: only the io.sparkcomms.spark.submit package of the test classes.
    Path testClasses = Path.of(io.sparkcomms.spark.submit.SubmitAllReduceJob.class.getProtectionDomain()
        .getCodeSource().getLocation().toURI());
    Path appJar = jarOf(testClasses, dir.resolve("submit-app.jar"), "io/sparkcomms/spark/submit/");

    // Executor logs: local-cluster workers keep theirs in a temporary work directory deleted at exit,
    // so the executors log (INFO, our own config, not the test's) into one file here, one line per event.
    Path executorLog = dir.resolve("executors.log");
    Path log4j = dir.resolve("executor-log4j2.properties");
    Files.writeString(log4j, String.join("\n",
        "rootLogger.level = info",
        "rootLogger.appenderRef.file.ref = file",
        "appender.file.type = File",
        "appender.file.name = file",
        "appender.file.append = true",
        "appender.file.fileName = " + executorLog,
        "appender.file.layout.type = PatternLayout",
        "appender.file.layout.pattern = pid=%pid %p %c{1}: %m%n%ex", ""));
    String jvmArgs = System.getProperty("sc.test.jvmArgs", "").trim();
    List<String> cmd = new ArrayList<>();
    cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    if (!jvmArgs.isEmpty()) cmd.addAll(Arrays.asList(jvmArgs.split("\\s+")));
    cmd.addAll(List.of("-Xmx768m", "-Dspark.testing=true", "-Dspark.test.home=" + home, "-cp", childCp,
        "org.apache.spark.deploy.SparkSubmit",
        "--master", master, "--deploy-mode", "client", "--name", "sparkcomms-spark-submit",
        "--conf", "spark.plugins=io.sparkcomms.spark.SparkCommsPlugin",
        // ANCHORS.md, Spark lessons: local-cluster without a Spark distribution
        "--conf", "spark.testing=true", "--conf", "spark.test.home=" + home,
        "--conf", "spark.cores.max=" + ranks, "--conf", "spark.scheduler.minRegisteredResourcesRatio=1.0",
        // Spark itself for the executors, as a distribution's jars/ would be; our classes come from --jars
        "--conf", "spark.executor.extraClassPath=" + childCp,
        "--conf", "spark.executor.extraJavaOptions=" + jvmArgs + " -Dlog4j2.configurationFile=" + log4j,
        "--conf", "spark.executor.memory=512m", "--conf", "spark.ui.enabled=false",
        "--conf", "spark.sparkcomms.timeout=60s", "--conf", "spark.sparkcomms.stagingBytes=1M",
        "--jars", userJars.stream().map(Path::toString).collect(Collectors.joining(",")),
        "--class", "io.sparkcomms.spark.submit.SubmitAllReduceJob", appJar.toString(), Integer.toString(ranks)));
    for (String kv : extraConf) cmd.addAll(cmd.indexOf("--jars"), List.of("--conf", kv));
    Path stdout = dir.resolve("submit.out");
    Path stderr = dir.resolve("submit.err");
    ProcessBuilder pb = new ProcessBuilder(cmd).redirectOutput(stdout.toFile()).redirectError(stderr.toFile());
    pb.environment().put("SPARK_TESTING", "1");
    pb.environment().putIfAbsent("SPARK_SCALA_VERSION", "2.13");
    Process proc = pb.start();
    try {
      if (!proc.waitFor(540, TimeUnit.SECONDS)) fail("spark-submit did not exit within 540 s (a hang guard); stderr:\n" + tail(stderr));
    } finally {
      proc.descendants().forEach(ProcessHandle::destroyForcibly);
      proc.destroyForcibly();
    }
    String out = Files.readString(stdout);
    String err = Files.readString(stderr);
    System.out.println("spark-submit stdout:\n" + out);
    String executors = Files.exists(executorLog) ? Files.readString(executorLog) : "";
    assertEquals(0, proc.exitValue(), "spark-submit exit status; stdout:\n" + out + "\nstderr tail:\n" + tail(stderr)
        + "\nexecutor log tail:\n" + lastLines(executors, 80));

    // The driver loaded the plugin class from the jar given in --jars and ran the driver plugin.
    String driverLine = out.lines().filter(l -> l.startsWith("SUBMIT-DRIVER ")).findFirst().orElse("");
    assertTrue(driverLine.matches(".*/" + pluginJar),
        "driver: SparkCommsPlugin loaded from --jars: " + driverLine);
    assertTrue(err.contains("sparkcomms: driver plugin ready"), "driver log shows the driver plugin's init");

    // Results: two ranks in two executor JVMs, correct sums, our classes from the fetched jars.
    List<String> results = out.lines().filter(l -> l.startsWith("SUBMIT-RESULT ")).map(l -> l.substring(14))
        .collect(Collectors.toList());
    assertEquals(ranks, results.size(), "one result line per rank: " + out);
    Set<String> pids = new HashSet<>();
    double first = ranks * (ranks - 1) / 2.0, last = first + ranks / 2.0;  // sums of p and of p + 0.5
    for (int r = 0; r < ranks; r++) {
      String line = results.get(r);
      assertTrue(line.startsWith(r + "/" + ranks + " " + first + " " + last + " "), "rank " + r + " allReduce result: " + line);
      assertTrue(line.contains(" backend=" + backend + " "), line);
      String from = field(line, "BarrierComms-from=");
      assertTrue(from.matches(".*/" + pluginJar) && !from.startsWith(pluginJarPath.getParent().toUri().toString()),
          "executor: BarrierComms from the jar the executor fetched, not from target/classes or the driver's copy: " + from);
      assertTrue(field(line, "Communicator-from=").matches(".*/" + collectivesJar), line);
      pids.add(field(line, "pid="));
    }
    assertEquals(ranks, pids.size(), "one executor process per rank: " + results);
    if (extraConf.stream().anyMatch(kv -> kv.startsWith("spark.worker.resource.gpu"))) {
      Set<String> gpus = results.stream().map(l -> field(l, "gpu=")).collect(Collectors.toSet());
      assertEquals(Set.of("0", "1"), gpus, "each executor's task holds its own GPU: " + results);
      for (String g : gpus) {
        assertTrue(err.lines().anyMatch(l -> l.contains("sparkcomms: executor") && l.endsWith(" claimed gpu " + g)),
            "driver log: GPU " + g + " claimed through the plugin RPC");
      }
    }
    assertFalse(pids.contains(Long.toString(proc.pid())), "tasks ran in executor JVMs, not the driver: " + results);

    // Each executor's log: the executor plugin started, and the communicator met over its RPC channel.
    for (String pid : pids) {
      List<String> mine = executors.lines().filter(l -> l.startsWith("pid=" + pid + " ")).collect(Collectors.toList());
      assertTrue(mine.stream().anyMatch(l -> l.contains(executorPluginLine)),
          "executor " + pid + " logged SparkCommsExecutorPlugin.init:\n" + lastLines(executors, 60));
      assertTrue(mine.stream().anyMatch(l -> l.contains("communicator rank") && l.contains("plugin RPC rendezvous")),
          "executor " + pid + " built its communicator over the plugin's RPC channel:\n" + lastLines(executors, 60));
    }
  }

  private static String field(String line, String key) {
    int i = line.indexOf(key);
    if (i < 0) return "";
    int end = line.indexOf(' ', i);
    return line.substring(i + key.length(), end < 0 ? line.length() : end);
  }

  /** Whether a classpath entry (directory or jar) holds classes of package io.sparkcomms. */
  static boolean holdsSparkcommsClasses(Path p) {
    if (Files.isDirectory(p)) return Files.isDirectory(p.resolve("io/sparkcomms"));
    if (!Files.isRegularFile(p) || !p.toString().endsWith(".jar")) return false;
    try (JarFile jar = new JarFile(p.toFile())) {
      return jar.stream().anyMatch(e -> e.getName().startsWith("io/sparkcomms/"));
    } catch (IOException e) {
      return false;
    }
  }

  /** {@code sparkcomms-spark.jar} for {@code .../spark-plugin/target/classes}, and so on. */
  private static String moduleJarName(Path classesDir) {
    String module = classesDir.getParent().getParent().getFileName().toString();
    return "sparkcomms-" + (module.equals("spark-plugin") ? "spark" : module) + ".jar";
  }

  /** A jar of the files under {@code dir} (those under {@code prefix} when given), with a manifest. */
  static Path jarOf(Path dir, Path jar, String... prefix) throws IOException {
    Manifest mf = new Manifest();
    mf.getMainAttributes().put(Attributes.Name.MANIFEST_VERSION, "1.0");
    try (OutputStream os = Files.newOutputStream(jar); JarOutputStream out = new JarOutputStream(os, mf);
         Stream<Path> files = Files.walk(dir)) {
      for (Path f : (Iterable<Path>) files.sorted()::iterator) {
        String name = dir.relativize(f).toString().replace(File.separatorChar, '/');
        if (name.isEmpty() || name.equals("META-INF/MANIFEST.MF")) continue;
        if (Files.isDirectory(f)) name += "/";
        if (name.equals("META-INF/")) continue;                  // written with the manifest
        if (prefix.length > 0 && !name.startsWith(prefix[0]) && !prefix[0].startsWith(name)) continue;
        out.putNextEntry(new JarEntry(name));
        if (!Files.isDirectory(f)) Files.copy(f, out);
        out.closeEntry();
      }
    }
    return jar;
  }

  private static String tail(Path f) throws IOException {
    return Files.exists(f) ? lastLines(Files.readString(f), 60) : "(none)";
  }

  private static String lastLines(String s, int n) {
    List<String> lines = s.lines().collect(Collectors.toList());
    return String.join("\n", lines.subList(Math.max(0, lines.size() - n), lines.size()));
  }
}
