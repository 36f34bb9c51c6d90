package io.sparkcomms.spark.gpu;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

/**
 * Access to the machine for GPU discovery and NUMA affinity: vendor tools and sysfs, both
 * redirectable through the environment so tests run against recorded outputs and fixture trees.
 *
 * <ul>
 *   <li>{@code SPARKCOMMS_SYSFS_ROOT}: prefix of every sysfs path (default: none, i.e. {@code /sys}).</li>
 *   <li>{@code SPARKCOMMS_AMD_SMI}, {@code SPARKCOMMS_ROCM_SMI}, {@code SPARKCOMMS_NVIDIA_SMI},
 *       {@code SPARKCOMMS_TASKSET}: the tool to run; when set (even to a missing path) the PATH is not
 *       searched for that tool.</li>
 * </ul>
 *
 * <p>Stateless apart from the environment it was created with; cheap to create.
 */
final class GpuTools {
  static final String AMD_SMI = "amd-smi";
  static final String ROCM_SMI = "rocm-smi";
  static final String NVIDIA_SMI = "nvidia-smi";
  static final String TASKSET = "taskset";
  private static final long TOOL_TIMEOUT_SECONDS = 20;

  private final Map<String, String> env;

  GpuTools(Map<String, String> env) { this.env = env; }

  static GpuTools fromSystem() { return new GpuTools(System.getenv()); }

  Map<String, String> env() { return env; }

  /** {@code rel} (such as {@code sys/bus/pci/devices}) under the sysfs root. */
  Path sysfs(String rel) {
    String root = env.getOrDefault("SPARKCOMMS_SYSFS_ROOT", "");
    return Paths.get(root.isEmpty() ? "/" : root).resolve(rel);
  }

  /** The executable for {@code name}: its override variable if set, else the first on PATH. */
  Optional<Path> tool(String name) {
    String override = env.get("SPARKCOMMS_" + name.toUpperCase().replace('-', '_'));
    if (override != null) {
      Path p = Paths.get(override);
      return Files.isExecutable(p) ? Optional.of(p) : Optional.empty();
    }
    String path = env.getOrDefault("PATH", "/usr/bin:/bin:/usr/sbin:/sbin");
    for (String dir : path.split(":")) {
      if (dir.isEmpty()) continue;
      Path p = Paths.get(dir, name);
      if (Files.isExecutable(p) && !Files.isDirectory(p)) return Optional.of(p);
    }
    return Optional.empty();
  }

  /**
   * Runs {@code tool args}; its stdout lines if it exits 0 within the time limit, else empty. Output
   * goes through a temp file, so a tool that hangs (a wedged driver) cannot block the caller.
   */
  Optional<List<String>> run(Path tool, String... args) {
    List<String> cmd = new ArrayList<>();
    cmd.add(tool.toString());
    cmd.addAll(Arrays.asList(args));
    Path out = null;
    try {
      out = Files.createTempFile("sparkcomms-tool", ".out");
      ProcessBuilder pb = new ProcessBuilder(cmd).redirectOutput(out.toFile())
          .redirectError(ProcessBuilder.Redirect.DISCARD).redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")));
      pb.environment().putAll(env);
      Process p = pb.start();
      if (!p.waitFor(TOOL_TIMEOUT_SECONDS, TimeUnit.SECONDS)) {
        p.destroyForcibly();
        return Optional.empty();
      }
      if (p.exitValue() != 0) return Optional.empty();
      return Optional.of(Arrays.asList(Files.readString(out, StandardCharsets.UTF_8).split("\\R")));
    } catch (IOException e) {
      return Optional.empty();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return Optional.empty();
    } finally {
      if (out != null) out.toFile().delete();
    }
  }

  /** The trimmed first line of a file, or empty if it cannot be read. */
  static Optional<String> readFirstLine(Path file) {
    try {
      List<String> lines = Files.readAllLines(file, StandardCharsets.UTF_8);
      return lines.isEmpty() ? Optional.of("") : Optional.of(lines.get(0).trim());
    } catch (IOException e) {
      return Optional.empty();
    }
  }
}
