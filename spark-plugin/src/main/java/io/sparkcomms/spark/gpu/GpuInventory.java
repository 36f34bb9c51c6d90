package io.sparkcomms.spark.gpu;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * The GPUs of this machine, found the way {@code discover-gpus.sh} finds them: AMD through
 * {@code amd-smi list}, else {@code rocm-smi --showbus}, else the KFD sysfs topology (nodes with
 * {@code simd_count > 0}); if no AMD GPU is found, NVIDIA through {@code nvidia-smi}. Each GPU has
 * its physical index and, where known, its PCI address ({@code dddd:bb:dd.f}, lower case).
 *
 * <p>An immutable snapshot; {@link #discover} runs the tools once.
 */
public final class GpuInventory {
  enum Vendor { AMD, NVIDIA, NONE }

  /** A GPU: its physical index (-1 when only a UUID names it) and PCI address (or null). */
  record Gpu(int index, String pciBusId) {}

  private static final Pattern AMD_SMI_GPU = Pattern.compile("^\\s*GPU:\\s*(\\d+)\\s*$");
  private static final Pattern AMD_SMI_BDF = Pattern.compile("^\\s*BDF:\\s*(\\S+)\\s*$");
  private static final Pattern ROCM_SMI_BUS = Pattern.compile("^\\s*GPU\\[(\\d+)\\].*PCI Bus:\\s*(\\S+)\\s*$");
  private static final Pattern ROCM_SMI_ANY = Pattern.compile("^\\s*GPU\\[(\\d+)\\].*$");
  private static final Pattern NVIDIA_LINE = Pattern.compile("^\\s*(\\d+)\\s*(?:,\\s*(\\S+))?\\s*$");

  private final Vendor vendor;
  private final String source;
  private final List<Gpu> physical;

  GpuInventory(Vendor vendor, String source, List<Gpu> physical) {
    this.vendor = vendor;
    this.source = source;
    this.physical = List.copyOf(physical);
  }

  /**
   * The Spark resource addresses of the GPUs this process sees, with the machine's tools and the
   * process environment: what {@code discover-gpus.sh} prints and
   * {@link io.sparkcomms.spark.GpuDiscoveryPlugin} reports.
   */
  public static List<String> deviceAddresses() { return deviceAddresses(GpuTools.fromSystem()); }

  /** {@link #deviceAddresses()} with these tools and environment. */
  static List<String> deviceAddresses(GpuTools tools) { return discover(tools).addresses(tools.env()); }

  static GpuInventory discover(GpuTools tools) {
    Optional<GpuInventory> amd = fromAmdSmi(tools).or(() -> fromRocmSmi(tools)).or(() -> fromKfd(tools));
    if (amd.isPresent()) return amd.get();
    return fromNvidiaSmi(tools).orElse(new GpuInventory(Vendor.NONE, "none", List.of()));
  }

  Vendor vendor() { return vendor; }

  /** Which tool or sysfs tree the GPUs came from, for logs. */
  String source() { return source; }

  List<Gpu> physical() { return physical; }

  /** The GPUs a process with {@code env} sees, in device-ordinal order. */
  List<Gpu> visible(Map<String, String> env) { return VisibleDevices.apply(vendor, physical, env); }

  /** Spark resource addresses: the device ordinals {@code 0..n-1} of the visible GPUs. */
  List<String> addresses(Map<String, String> env) {
    List<String> out = new ArrayList<>();
    for (int i = 0; i < visible(env).size(); i++) out.add(Integer.toString(i));
    return out;
  }

  // ------------------------------------------------------------------ sources

  static Optional<GpuInventory> fromAmdSmi(GpuTools tools) {
    return tools.tool(GpuTools.AMD_SMI).flatMap(t -> tools.run(t, "list")).flatMap(lines -> {
      List<Gpu> gpus = new ArrayList<>();
      int index = -1;
      String bdf = null;
      for (String line : lines) {
        Matcher g = AMD_SMI_GPU.matcher(line);
        Matcher b = AMD_SMI_BDF.matcher(line);
        if (g.matches()) {
          if (index >= 0) gpus.add(new Gpu(index, bdf));
          index = Integer.parseInt(g.group(1));
          bdf = null;
        } else if (b.matches() && index >= 0) {
          bdf = normalizeBdf(b.group(1));
        }
      }
      if (index >= 0) gpus.add(new Gpu(index, bdf));
      return nonEmpty(Vendor.AMD, GpuTools.AMD_SMI, gpus);
    });
  }

  static Optional<GpuInventory> fromRocmSmi(GpuTools tools) {
    return tools.tool(GpuTools.ROCM_SMI).flatMap(t -> tools.run(t, "--showbus")).flatMap(lines -> {
      Map<Integer, String> bus = new HashMap<>();
      for (String line : lines) {
        Matcher m = ROCM_SMI_BUS.matcher(line);
        Matcher any = ROCM_SMI_ANY.matcher(line);
        if (m.matches()) bus.put(Integer.parseInt(m.group(1)), normalizeBdf(m.group(2)));
        else if (any.matches()) bus.putIfAbsent(Integer.parseInt(any.group(1)), null);
      }
      List<Gpu> gpus = new ArrayList<>();
      bus.keySet().stream().sorted().forEach(i -> gpus.add(new Gpu(i, bus.get(i))));
      return nonEmpty(Vendor.AMD, GpuTools.ROCM_SMI, gpus);
    });
  }

  static Optional<GpuInventory> fromKfd(GpuTools tools) {
    Path nodes = tools.sysfs("sys/class/kfd/kfd/topology/nodes");
    if (!Files.isDirectory(nodes)) return Optional.empty();
    List<Gpu> gpus = new ArrayList<>();
    try (Stream<Path> s = Files.list(nodes)) {
      List<Path> sorted = s.filter(p -> p.getFileName().toString().matches("\\d+"))
          .sorted(Comparator.comparingInt(p -> Integer.parseInt(p.getFileName().toString()))).toList();
      for (Path node : sorted) {
        Map<String, Long> props = kfdProperties(node.resolve("properties"));
        if (props.getOrDefault("simd_count", 0L) <= 0) continue;
        String bdf = null;
        if (props.containsKey("location_id")) {
          long loc = props.get("location_id");
          bdf = String.format(Locale.ROOT, "%04x:%02x:%02x.%x",
              props.getOrDefault("domain", 0L), (loc >> 8) & 0xff, (loc >> 3) & 0x1f, loc & 0x7);
        }
        gpus.add(new Gpu(gpus.size(), bdf));
      }
    } catch (IOException e) {
      return Optional.empty();
    }
    return nonEmpty(Vendor.AMD, "kfd sysfs " + nodes, gpus);
  }

  static Optional<GpuInventory> fromNvidiaSmi(GpuTools tools) {
    return tools.tool(GpuTools.NVIDIA_SMI)
        .flatMap(t -> tools.run(t, "--query-gpu=index,pci.bus_id", "--format=csv,noheader"))
        .flatMap(lines -> {
          List<Gpu> gpus = new ArrayList<>();
          for (String line : lines) {
            Matcher m = NVIDIA_LINE.matcher(line);
            if (m.matches()) gpus.add(new Gpu(Integer.parseInt(m.group(1)), m.group(2) == null ? null : normalizeBdf(m.group(2))));
          }
          return nonEmpty(Vendor.NVIDIA, GpuTools.NVIDIA_SMI, gpus);
        });
  }

  /** {@code 00000000:17:00.0} or {@code 0000:0C:00.0} to sysfs form {@code 0000:17:00.0}. */
  static String normalizeBdf(String s) {
    String t = s.trim().toLowerCase(Locale.ROOT);
    int colon = t.indexOf(':');
    if (colon < 0 || t.indexOf(':', colon + 1) < 0) return "0000:" + t;
    String domain = t.substring(0, colon);
    if (domain.length() > 4) domain = domain.substring(domain.length() - 4);
    while (domain.length() < 4) domain = "0" + domain;
    return domain + t.substring(colon);
  }

  private static Map<String, Long> kfdProperties(Path file) {
    Map<String, Long> props = new HashMap<>();
    try {
      for (String line : Files.readAllLines(file)) {
        String[] kv = line.trim().split("\\s+");
        if (kv.length == 2) {
          try {
            props.put(kv[0], Long.parseLong(kv[1]));
          } catch (NumberFormatException ignored) {
            // not a numeric property
          }
        }
      }
    } catch (IOException ignored) {
      // unreadable node: no properties
    }
    return props;
  }

  private static Optional<GpuInventory> nonEmpty(Vendor v, String source, List<Gpu> gpus) {
    return gpus.isEmpty() ? Optional.empty() : Optional.of(new GpuInventory(v, source, gpus));
  }
}
