package io.sparkcomms.integration;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The scripts of bin/ as a user runs them: {@code -h} exits 0 and names the script, its options and
 * their defaults; a usage error is one line on standard error and exit status 2. Cases that start a
 * JVM need the jars of {@code mvn package} (present in {@code mvn verify}, where the examples and
 * benchmarks modules are packaged before this one) and are skipped without them. Every run gets its
 * own TMPDIR, so what it leaves behind is its own.
 */
class ScriptsTest {
  private static final Path ROOT = findRoot();

  @TempDir Path tmp;

  private record Run(int rc, String out, String err) {
    String all() { return "exit " + rc + "\nstdout:\n" + out + "\nstderr:\n" + err; }
  }

  private static Path findRoot() {
    Path p = Paths.get("").toAbsolutePath();
    while (p != null && !Files.isRegularFile(p.resolve("bin/sparkcomms-demo"))) p = p.getParent();
    if (p == null) throw new IllegalStateException("bin/sparkcomms-demo not found above " + Paths.get("").toAbsolutePath());
    return p;
  }

  private Run run(String script, String... args) throws IOException, InterruptedException {
    List<String> cmd = new ArrayList<>(List.of("bash", ROOT.resolve("bin").resolve(script).toString()));
    cmd.addAll(List.of(args));
    ProcessBuilder pb = new ProcessBuilder(cmd).directory(tmp.toFile());
    pb.environment().put("TMPDIR", tmp.toString());
    Path out = Files.createTempFile(tmp, "out", ".txt"), err = Files.createTempFile(tmp, "err", ".txt");
    pb.redirectOutput(out.toFile()).redirectError(err.toFile());
    Process p = pb.start();
    // a hang guard: SparkSubmit's JVM start alone took minutes on a loaded two-core machine
    if (!p.waitFor(600, TimeUnit.SECONDS)) {
      p.destroyForcibly().waitFor();
      throw new AssertionError(String.join(" ", cmd) + " did not finish within 600 s");
    }
    Run r = new Run(p.exitValue(), Files.readString(out, StandardCharsets.UTF_8), Files.readString(err, StandardCharsets.UTF_8));
    Files.delete(out);
    Files.delete(err);
    return r;
  }

  /** Whether a module's jar and its target/lib exist (the script's own check, without its version). */
  private static boolean built(String module, String libModule) throws IOException {
    Path target = ROOT.resolve(module).resolve("target");
    if (!Files.isDirectory(ROOT.resolve(libModule).resolve("target/lib")) || !Files.isDirectory(target)) return false;
    try (Stream<Path> s = Files.list(target)) {
      return s.map(f -> f.getFileName().toString())
          .anyMatch(n -> n.startsWith("sparkcomms-" + module) && n.endsWith(".jar") && !n.contains("-sources") && !n.contains("-javadoc"));
    }
  }

  private static void assertHelp(Run r, String script, String... mustContain) {
    assertEquals(0, r.rc, r.all());
    assertTrue(r.out.startsWith(script + ":") || r.out.startsWith("usage: " + script), r.all());
    for (String s : mustContain) assertTrue(r.out.contains(s), "missing '" + s + "'\n" + r.all());
    assertFalse(r.out.contains("Exception"), r.all());
  }

  private static void assertUsageError(Run r, String prefix, String message) {
    assertEquals(2, r.rc, r.all());
    assertTrue(r.err.startsWith(prefix) && r.err.contains(message), r.all());
    assertEquals(1, r.err.strip().lines().count(), "one line expected\n" + r.all());
    assertFalse(r.err.contains("Exception") || r.out.contains("demo OK"), r.all());
  }

  @Test
  void demoHelpNeedsNoBuildAndNamesNoClass() throws Exception {
    for (String h : new String[] {"-h", "--help"}) {
      Run r = run("sparkcomms-demo", h);
      assertHelp(r, "sparkcomms-demo", "--ranks N", "(default 4)", "--count ELEMENTS", "(default 1048576)", "Exit status");
      assertFalse(r.out.contains("io.sparkcomms") || r.out.contains("HostAllReduceDemo"), r.all());
    }
  }

  @Test
  void demoRejectsBadRankCounts() throws Exception {
    assumeTrue(built("examples", "collectives"), "examples jar or collectives/target/lib not built");
    assertUsageError(run("sparkcomms-demo", "--ranks", "0"), "sparkcomms-demo: ", "--ranks must be in 1..64, got 0");
    assertUsageError(run("sparkcomms-demo", "--ranks", "four"), "sparkcomms-demo: ", "--ranks needs a whole number, got 'four'");
    assertUsageError(run("sparkcomms-demo", "--count"), "sparkcomms-demo: ", "--count needs a value");
    assertUsageError(run("sparkcomms-demo", "--bogus"), "sparkcomms-demo: ", "unknown option --bogus");
  }

  @Test
  void exampleHelpIsTheWholeHeader() throws Exception {
    Run r = run("sparkcomms-example", "-h");
    assertHelp(r, "sparkcomms-example", "train", "infer", "infer-groups", "infer-pipeline", "vector-sum", "--master URL", "local-cluster[2,1,1024]",
        "as is, with our jars shipped to the executors through --jars.", "Exit status");
    assertUsageError(run("sparkcomms-example", "bogus"), "sparkcomms-example: ", "unknown example 'bogus'");
  }

  @Test
  void exampleHelpThroughSparkSubmitLeavesNoSparkHome() throws Exception {
    assumeTrue(built("examples", "examples"), "examples jar or examples/target/lib not built");
    Run r = run("sparkcomms-example", "vector-sum", "-h");
    assertHelp(r, "bin/sparkcomms-example vector-sum", "--iters 3", "local-cluster[4,1,1024]");
    // after the script's progress line and SparkSubmit's start, before any SparkSession
    Run bad = run("sparkcomms-example", "vector-sum", "--iters", "0");
    assertEquals(2, bad.rc, bad.all());
    assertTrue(bad.err.contains("sparkcomms-example: --iters must be at least 1, got 0"), bad.all());
    assertFalse(bad.err.contains("Exception") || bad.err.contains("SparkContext: Running Spark"), bad.all());
    try (Stream<Path> s = Files.list(tmp)) {
      List<String> left = s.map(f -> f.getFileName().toString()).filter(n -> n.startsWith("sparkcomms-spark-home")).toList();
      assertTrue(left.isEmpty(), "left behind in TMPDIR: " + left);
    }
  }

  @Test
  void inferGroupsHelpAndUsageErrorsThroughSparkSubmit() throws Exception {
    assumeTrue(built("examples", "examples"), "examples jar or examples/target/lib not built");
    Run r = run("sparkcomms-example", "infer-groups", "-h");
    assertHelp(r, "bin/sparkcomms-example infer-groups", "local-cluster[4,1,1024]", "--group 2", "--chunk 500", "--rows 4000");
    for (String[] bad : new String[][] {{"--group", "0"}, {"--ranks", "4", "--group", "3"}}) {
      List<String> args = new ArrayList<>(List.of("infer-groups"));
      args.addAll(List.of(bad));
      Run e = run("sparkcomms-example", args.toArray(String[]::new));
      assertEquals(2, e.rc, e.all());
      String want = bad.length == 2 ? "sparkcomms-example: --group must be at least 1, got 0" : "sparkcomms-example: --group 3 does not divide --ranks 4";
      assertTrue(e.err.contains(want), e.all());
      assertFalse(e.err.contains("Exception") || e.err.contains("SparkContext: Running Spark"), e.all());
    }
  }

  @Test
  void benchHelpAndUsageErrors() throws Exception {
    assertHelp(run("sparkcomms-bench", "--spark", "-h"), "sparkcomms-bench", "--spark", "(default 8K)", "SPARKCOMMS_SUBMIT_OPTS");
    assumeTrue(built("benchmarks", "benchmarks"), "benchmarks jar or benchmarks/target/lib not built");
    assertHelp(run("sparkcomms-bench", "-h"), "sparkcomms-bench", "--ranks N", "(default 2)", "Exit status");
    assertUsageError(run("sparkcomms-bench", "--bogus"), "sparkcomms-bench: ", "unknown option --bogus");
  }
}
