package io.sparkcomms.spark.gpu;

import java.nio.file.Path;
import java.util.List;
import java.util.Optional;

/**
 * Binds a process to the CPUs of its GPU's NUMA node: the GPU's PCI address from
 * {@link GpuInventory}, then {@code /sys/bus/pci/devices/<bdf>/numa_node} and {@code local_cpulist},
 * applied to every thread of the process with {@code taskset -a -p -c}. Threads created later inherit
 * the mask. Stateless; the executor plugin calls {@link #bindProcess} once in {@code init} when
 * {@code spark.sparkcomms.numaAffinity} is true and logs the returned sentence.
 */
public final class NumaAffinity {
  private final GpuTools tools;

  NumaAffinity(GpuTools tools) { this.tools = tools; }

  /** Binds process {@code pid} near device {@code ordinal} with the machine's tools; returns what was done, or why nothing was. */
  public static String bindProcess(int ordinal, long pid) { return new NumaAffinity(GpuTools.fromSystem()).apply(ordinal, pid); }

  /** Binds {@code pid} near device {@code ordinal}; returns what was done, or why nothing was. */
  String apply(int ordinal, long pid) {
    GpuInventory inv = GpuInventory.discover(tools);
    List<GpuInventory.Gpu> visible = inv.visible(tools.env());
    if (ordinal < 0 || ordinal >= visible.size()) {
      return "NUMA affinity not applied: GPU ordinal " + ordinal + " is not among the " + visible.size()
          + " GPUs found (" + inv.source() + ")";
    }
    String bdf = visible.get(ordinal).pciBusId();
    if (bdf == null) {
      return "NUMA affinity not applied: the PCI address of GPU " + ordinal + " is unknown (" + inv.source() + ")";
    }
    Path dev = tools.sysfs("sys/bus/pci/devices").resolve(bdf);
    Optional<String> node = GpuTools.readFirstLine(dev.resolve("numa_node"));
    Optional<String> cpus = GpuTools.readFirstLine(dev.resolve("local_cpulist"));
    if (node.isEmpty() || cpus.isEmpty() || cpus.get().isEmpty()) {
      return "NUMA affinity not applied: cannot read numa_node / local_cpulist of " + dev;
    }
    if (node.get().equals("-1")) {
      return "NUMA affinity not applied: GPU " + ordinal + " (" + bdf + ") has no NUMA node (single-node machine)";
    }
    Optional<Path> taskset = tools.tool(GpuTools.TASKSET);
    if (taskset.isEmpty()) {
      return "NUMA affinity not applied: taskset not found (GPU " + ordinal + " at " + bdf + " is on NUMA node "
          + node.get() + ", CPUs " + cpus.get() + ")";
    }
    Optional<List<String>> out = tools.run(taskset.get(), "-a", "-p", "-c", cpus.get(), Long.toString(pid));
    if (out.isEmpty()) {
      return "NUMA affinity not applied: " + taskset.get() + " -a -p -c " + cpus.get() + " " + pid + " failed";
    }
    return "NUMA affinity: bound process " + pid + " (all threads) to CPUs " + cpus.get() + " of NUMA node "
        + node.get() + ", local to GPU " + ordinal + " at " + bdf;
  }
}
