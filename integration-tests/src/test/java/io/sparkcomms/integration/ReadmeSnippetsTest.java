package io.sparkcomms.integration;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringReader;
import java.io.StringWriter;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import javax.tools.Diagnostic;
import javax.tools.DiagnosticCollector;
import javax.tools.JavaCompiler;
import javax.tools.JavaFileObject;
import javax.tools.StandardJavaFileManager;
import javax.tools.ToolProvider;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.SparkSession;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import scala.jdk.javaapi.CollectionConverters;
import scala.tools.nsc.Global;
import scala.tools.nsc.Settings;
import scala.tools.nsc.reporters.ConsoleReporter;

/**
 * The code in the top-level README.md compiles as written: every fenced {@code java} or
 * {@code scala} block that follows a {@code <!-- checked: Name -->} line is a complete source file
 * whose top-level class or object is {@code Name}. Java blocks are compiled with
 * {@link javax.tools.JavaCompiler}, Scala blocks with {@code scala.tools.nsc}, both against this
 * module's test class path (the product modules and Spark). The examples are also run: the in-JVM
 * one (two ranks as threads) with what it prints checked, the two barrier-stage ones on Spark in
 * local mode with the plugin, with their results checked.
 */
class ReadmeSnippetsTest {
  /** The README example that runs without Spark (two ranks as threads of this JVM). */
  static final String IN_JVM = "InJvmAllReduce";
  /** What it prints, one line per rank (in either order). */
  static final List<String> IN_JVM_OUTPUT = List.of("rank 0: [3.0, 30.0]", "rank 1: [3.0, 30.0]");
  /** The barrier-stage examples: {@code totals(rdd)} of 1..4 in 2 partitions is 10 on both ranks. */
  static final String SPARK_JAVA = "BarrierAllReduce";
  static final String SPARK_SCALA = "BarrierAllReduceScala";

  private static final Pattern MARKER = Pattern.compile("^<!-- checked: ([A-Za-z_][A-Za-z0-9_]*) -->\\s*$");
  private static final Pattern FENCE = Pattern.compile("^```(java|scala)\\s*$");

  record Snippet(String name, String lang, int line, String code) {
    String fileName() { return name + (lang.equals("java") ? ".java" : ".scala"); }
  }

  private static List<Snippet> snippets;

  @BeforeAll
  static void readReadme() throws IOException {
    snippets = parse(Files.readAllLines(readme(), StandardCharsets.UTF_8));
  }

  /** The repository's README.md: up from the working directory (the module folder under Maven). */
  static Path readme() {
    for (Path d = Paths.get("").toAbsolutePath(); d != null; d = d.getParent()) {
      if (Files.isRegularFile(d.resolve("README.md")) && Files.isDirectory(d.resolve("integration-tests"))) {
        return d.resolve("README.md");
      }
    }
    throw new IllegalStateException("no README.md next to integration-tests/ above " + Paths.get("").toAbsolutePath());
  }

  /** Every marked block; a marker that no fenced java/scala block follows at once is an error. */
  static List<Snippet> parse(List<String> lines) {
    List<Snippet> out = new ArrayList<>();
    for (int i = 0; i < lines.size(); i++) {
      Matcher m = MARKER.matcher(lines.get(i));
      if (!m.matches()) continue;
      int open = i + 1;
      Matcher f = open < lines.size() ? FENCE.matcher(lines.get(open)) : null;
      if (f == null || !f.matches()) {
        throw new IllegalStateException("README.md:" + (i + 1) + ": '" + lines.get(i)
            + "' must be followed at once by a ```java or ```scala line");
      }
      StringBuilder code = new StringBuilder();
      int j = open + 1;
      for (; j < lines.size() && !lines.get(j).startsWith("```"); j++) code.append(lines.get(j)).append('\n');
      if (j == lines.size()) throw new IllegalStateException("README.md:" + (open + 1) + ": the block is never closed");
      out.add(new Snippet(m.group(1), f.group(1), open + 2, code.toString()));
      i = j;
    }
    return out;
  }

  static String classPath() {
    String cp = System.getProperty("surefire.test.class.path");
    return cp != null && !cp.isBlank() ? cp : System.getProperty("java.class.path");
  }

  /** Compiles {@code s} into {@code out}; returns the compiler's errors (empty when it compiled). */
  static String compile(Snippet s, Path out) throws IOException {
    Path src = out.resolve("src");
    Files.createDirectories(src);
    Path file = src.resolve(s.fileName());
    Files.writeString(file, s.code(), StandardCharsets.UTF_8);
    return s.lang().equals("java") ? compileJava(file, out) : compileScala(file, out);
  }

  static String compileJava(Path file, Path out) throws IOException {
    JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
    DiagnosticCollector<JavaFileObject> diags = new DiagnosticCollector<>();
    try (StandardJavaFileManager fm = javac.getStandardFileManager(diags, Locale.ROOT, StandardCharsets.UTF_8)) {
      List<String> options = List.of("-classpath", classPath(), "-d", out.toString(), "-proc:none", "-Xlint:none");
      boolean ok = javac.getTask(null, fm, diags, options, null, fm.getJavaFileObjects(file.toFile())).call();
      String errors = diags.getDiagnostics().stream().filter(d -> d.getKind() == Diagnostic.Kind.ERROR)
          .map(d -> "line " + d.getLineNumber() + ": " + d.getMessage(Locale.ROOT)).collect(Collectors.joining("\n"));
      return ok ? "" : errors.isEmpty() ? "javac failed" : errors;
    }
  }

  static String compileScala(Path file, Path out) {
    Settings settings = new Settings();
    settings.processArguments(CollectionConverters.asScala(List.of(
        "-usejavacp:false", "-classpath", classPath(), "-d", out.toString(), "-nowarn")).toList(), true);
    StringWriter text = new StringWriter();
    ConsoleReporter reporter = new ConsoleReporter(settings, new BufferedReader(new StringReader("")), new PrintWriter(text));
    Global global = new Global(settings, reporter);
    Global.Run run = global.new Run();
    run.compile(CollectionConverters.asScala(List.of(file.toString())).toList());
    reporter.flush();
    return reporter.hasErrors() ? text.toString().trim() : "";
  }

  @Test
  void theReadmeHasCheckedJavaAndScalaSnippets() {
    List<String> names = snippets.stream().map(Snippet::name).toList();
    for (String n : List.of(IN_JVM, SPARK_JAVA, SPARK_SCALA)) {
      assertTrue(names.contains(n), "README.md has no <!-- checked: " + n + " --> block; found " + names);
    }
    assertTrue(snippets.stream().anyMatch(s -> s.lang().equals("java")), "no checked java block in README.md");
    assertTrue(snippets.stream().anyMatch(s -> s.lang().equals("scala")), "no checked scala block in README.md");
    assertEquals(names.size(), names.stream().distinct().count(), "two checked blocks share a name: " + names);
    for (Snippet s : snippets) {
      Pattern decl = Pattern.compile("(class|object|interface|record)\\s+" + s.name() + "\\b");
      assertTrue(decl.matcher(s.code()).find(), "README.md:" + s.line() + ": the block marked " + s.name()
          + " does not declare " + s.name());
    }
  }

  @Test
  void everyCheckedSnippetCompiles(@TempDir Path tmp) throws IOException {
    List<String> failures = new ArrayList<>();
    for (Snippet s : snippets) {
      String errors = compile(s, Files.createDirectories(tmp.resolve(s.name())));
      if (!errors.isEmpty()) {
        failures.add("README.md:" + s.line() + " (" + s.lang() + " block " + s.name() + ") does not compile:\n" + errors);
      }
    }
    if (!failures.isEmpty()) fail(String.join("\n\n", failures));
  }

  @Test
  void theInJvmExampleRunsAndPrintsTheSum(@TempDir Path tmp) throws Exception {
    Snippet s = snippet(IN_JVM);
    String errors = compile(s, tmp);
    assertEquals("", errors, "the in-JVM example does not compile");
    ByteArrayOutputStream printed = new ByteArrayOutputStream();
    PrintStream saved = System.out;
    try (URLClassLoader loader = new URLClassLoader(new URL[] {tmp.toUri().toURL()}, getClass().getClassLoader())) {
      Method main = loader.loadClass(IN_JVM).getMethod("main", String[].class);
      System.setOut(new PrintStream(printed, true, StandardCharsets.UTF_8));
      try {
        main.invoke(null, (Object) new String[0]);
      } catch (InvocationTargetException e) {
        throw new AssertionError("the in-JVM example threw " + e.getCause(), e.getCause());
      } finally {
        System.setOut(saved);
      }
    }
    String out = printed.toString(StandardCharsets.UTF_8);
    saved.print(out);
    List<String> lines = out.lines().map(String::trim).filter(l -> l.startsWith("rank ")).sorted().toList();
    assertEquals(IN_JVM_OUTPUT, lines, "what the in-JVM example printed:\n" + out);
  }

  @Test
  void theBarrierStageExamplesRunOnSpark(@TempDir Path tmp) throws Exception {
    Snippet javaBlock = snippet(SPARK_JAVA);
    Snippet scalaBlock = snippet(SPARK_SCALA);
    Path javaOut = Files.createDirectories(tmp.resolve("java"));
    Path scalaOut = Files.createDirectories(tmp.resolve("scala"));
    assertEquals("", compile(javaBlock, javaOut), "the Java barrier example does not compile");
    assertEquals("", compile(scalaBlock, scalaOut), "the Scala barrier example does not compile");
    Thread self = Thread.currentThread();
    ClassLoader saved = self.getContextClassLoader();
    try (URLClassLoader loader = new URLClassLoader(new URL[] {javaOut.toUri().toURL(), scalaOut.toUri().toURL()},
        getClass().getClassLoader())) {
      self.setContextClassLoader(loader);                          // local mode: the executor loads the tasks' classes here
      SparkSession spark = SparkSession.builder()
          .master("local[2]").appName("readme-snippets")
          .config("spark.plugins", "io.sparkcomms.spark.SparkCommsPlugin")
          .config("spark.ui.enabled", "false").config("spark.sparkcomms.timeout", "60s")
          .getOrCreate();
      try {
        JavaRDD<Integer> data = JavaSparkContext.fromSparkContext(spark.sparkContext()).parallelize(List.of(1, 2, 3, 4), 2);
        Object fromJava = loader.loadClass(SPARK_JAVA).getMethod("totals", JavaRDD.class).invoke(null, data);
        assertEquals(List.of(10.0, 10.0), fromJava, SPARK_JAVA + ".totals");
        Object fromScala = loader.loadClass(SPARK_SCALA).getMethod("totals", RDD.class).invoke(null, data.rdd());
        assertEquals(List.of(10.0, 10.0), Arrays.stream((double[]) fromScala).boxed().toList(), SPARK_SCALA + ".totals");
      } finally {
        spark.stop();
      }
    } finally {
      self.setContextClassLoader(saved);
    }
  }

  private static Snippet snippet(String name) {
    return snippets.stream().filter(x -> x.name().equals(name)).findFirst()
        .orElseThrow(() -> new AssertionError("README.md has no <!-- checked: " + name + " --> block"));
  }

  /** The check is not vacuous: a snippet that calls a method the API lacks is reported, in both languages. */
  @Test
  void aSnippetThatNoLongerMatchesTheApiFails(@TempDir Path tmp) throws IOException {
    for (String name : List.of(IN_JVM, SPARK_SCALA)) {
      Snippet s = snippet(name);
      Snippet broken = new Snippet(s.name(), s.lang(), s.line(), s.code().replace("allReduce(", "allReduceRenamed("));
      String errors = compile(broken, Files.createDirectories(tmp.resolve(s.name())));
      assertFalse(errors.isEmpty(), s.lang() + " block " + s.name() + " still compiled with allReduce renamed");
      assertTrue(errors.contains("allReduceRenamed"), "the error does not name the missing method:\n" + errors);
    }
  }
}
