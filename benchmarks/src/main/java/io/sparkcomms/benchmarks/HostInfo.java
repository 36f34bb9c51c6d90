package io.sparkcomms.benchmarks;

import java.io.IOException;
import java.net.InetAddress;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.List;

/** What the header says about the machine: hostname, cores, CPU model, memory, Java, OS. */
final class HostInfo {
  private HostInfo() {}

  static String hostname() {
    try {
      String h = Files.readString(Paths.get("/proc/sys/kernel/hostname")).trim();
      if (!h.isEmpty()) return h;
    } catch (IOException | RuntimeException ignored) {
      // not Linux
    }
    try {
      return InetAddress.getLocalHost().getHostName();
    } catch (IOException e) {
      return "unknown-host";
    }
  }

  /** Cores usable by this process (as nproc). */
  static int cores() { return Runtime.getRuntime().availableProcessors(); }

  static String cpuModel() {
    String v = procField(Paths.get("/proc/cpuinfo"), "model name");
    return v != null ? v : System.getProperty("os.arch");
  }

  static String memory() {
    String v = procField(Paths.get("/proc/meminfo"), "MemTotal");
    if (v == null) return "unknown";
    try {
      long kb = Long.parseLong(v.replace("kB", "").trim());
      return String.format(java.util.Locale.ROOT, "%.1f GiB", kb / 1048576.0);
    } catch (NumberFormatException e) {
      return v;
    }
  }

  private static String procField(Path p, String key) {
    try {
      List<String> lines = Files.readAllLines(p);
      for (String l : lines) {
        int c = l.indexOf(':');
        if (c > 0 && l.substring(0, c).trim().equals(key)) return l.substring(c + 1).trim();
      }
    } catch (IOException | RuntimeException ignored) {
      // not Linux
    }
    return null;
  }

  /** The 1, 5 and 15 minute load averages (/proc/loadavg), or "unknown". */
  static String loadAverage() {
    try {
      String[] f = Files.readString(Paths.get("/proc/loadavg")).trim().split("\\s+");
      return f[0] + " " + f[1] + " " + f[2];
    } catch (IOException | RuntimeException e) {
      return "unknown";
    }
  }

  static String java() {
    return "Java " + System.getProperty("java.version") + " (" + System.getProperty("java.vm.name") + ")";
  }

  static String os() {
    return System.getProperty("os.name") + " " + System.getProperty("os.version") + " " + System.getProperty("os.arch");
  }
}
