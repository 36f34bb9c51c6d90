package io.sparkcomms.spark.gpu;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.HashMap;
import java.util.Map;
import java.util.stream.Stream;

/** Test fixtures (fake vendor tools, sysfs trees), copied to a temp dir so the tools are executable. */
public final class Fixtures {
  final Path root;

  private Fixtures(Path root) { this.root = root; }

  /** Copies {@code src/test/resources/fixtures} into {@code dir} and makes the tools executable. */
  public static Fixtures copyTo(Path dir) {
    try {
      Path src = Paths.get(Fixtures.class.getResource("/fixtures").toURI());
      try (Stream<Path> s = Files.walk(src)) {
        for (Path p : (Iterable<Path>) s::iterator) {
          Path dst = dir.resolve(src.relativize(p).toString());
          if (Files.isDirectory(p)) Files.createDirectories(dst);
          else Files.copy(p, dst, StandardCopyOption.REPLACE_EXISTING);
        }
      }
      try (Stream<Path> s = Files.list(dir.resolve("tools"))) {
        s.filter(p -> !p.toString().endsWith(".txt")).forEach(p -> p.toFile().setExecutable(true));
      }
      return new Fixtures(dir);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (URISyntaxException e) {
      throw new IllegalStateException(e);
    }
  }

  public Path tool(String name) { return root.resolve("tools").resolve(name); }

  public Path sysfs(String name) { return root.resolve(name); }

  /** An environment where every tool is missing and sysfs is empty; tests add what they need. */
  public Map<String, String> bareEnv() {
    Map<String, String> env = new HashMap<>();
    env.put("PATH", System.getenv().getOrDefault("PATH", "/usr/bin:/bin"));
    env.put("SPARKCOMMS_SYSFS_ROOT", root.resolve("no-sysfs").toString());
    env.put("SPARKCOMMS_AMD_SMI", root.resolve("missing/amd-smi").toString());
    env.put("SPARKCOMMS_ROCM_SMI", root.resolve("missing/rocm-smi").toString());
    env.put("SPARKCOMMS_NVIDIA_SMI", root.resolve("missing/nvidia-smi").toString());
    env.put("SPARKCOMMS_TASKSET", root.resolve("missing/taskset").toString());
    return env;
  }

  /** The discovery script from the main resources, copied next to the fixtures and executable. */
  public Path discoveryScript() {
    try {
      Path dst = root.resolve("discover-gpus.sh");
      try (var in = Fixtures.class.getResourceAsStream("/io/sparkcomms/spark/gpu/discover-gpus.sh")) {
        Files.copy(in, dst, StandardCopyOption.REPLACE_EXISTING);
      }
      dst.toFile().setExecutable(true);
      return dst;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** Runs the discovery script with exactly {@code env}; returns its stdout, trimmed. */
  public String runScript(Map<String, String> env, String... args) {
    try {
      var cmd = new java.util.ArrayList<String>();
      cmd.add("bash");
      cmd.add(discoveryScript().toString());
      cmd.addAll(java.util.Arrays.asList(args));
      ProcessBuilder pb = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT);
      pb.environment().clear();
      pb.environment().putAll(env);
      Process p = pb.start();
      String out = new String(p.getInputStream().readAllBytes()).trim();
      if (p.waitFor() != 0) throw new AssertionError("discover-gpus.sh exited " + p.exitValue() + ": " + out);
      return out;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (InterruptedException e) {
      throw new AssertionError(e);
    }
  }

  public static Map<String, String> with(Map<String, String> env, String... kv) {
    Map<String, String> m = new HashMap<>(env);
    for (int i = 0; i < kv.length; i += 2) m.put(kv[i], kv[i + 1]);
    return m;
  }
}
