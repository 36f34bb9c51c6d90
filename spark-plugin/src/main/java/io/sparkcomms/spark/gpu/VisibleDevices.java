package io.sparkcomms.spark.gpu;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The GPU runtimes' device-visibility variables, applied the way the runtimes do: entries are
 * taken in order and the list stops at the first invalid or repeated entry; an empty value hides
 * every device. AMD: {@code ROCR_VISIBLE_DEVICES} selects among the physical GPUs, then
 * {@code HIP_VISIBLE_DEVICES} (or, if unset, {@code CUDA_VISIBLE_DEVICES}, which HIP honors too)
 * among those. NVIDIA: {@code CUDA_VISIBLE_DEVICES}. Non-numeric entries (UUIDs) are kept as
 * devices of unknown index. Stateless.
 */
final class VisibleDevices {
  private VisibleDevices() {}

  /** The devices a process with {@code env} sees, in ordinal order. */
  static List<GpuInventory.Gpu> apply(GpuInventory.Vendor vendor, List<GpuInventory.Gpu> physical, Map<String, String> env) {
    if (vendor == GpuInventory.Vendor.AMD) {
      List<GpuInventory.Gpu> rocr = filter(physical, env.get("ROCR_VISIBLE_DEVICES"));
      String hip = env.containsKey("HIP_VISIBLE_DEVICES") ? env.get("HIP_VISIBLE_DEVICES") : env.get("CUDA_VISIBLE_DEVICES");
      return filter(rocr, hip);
    }
    return filter(physical, env.get("CUDA_VISIBLE_DEVICES"));
  }

  /** {@code devices} restricted by one visibility value ({@code null}: unrestricted). */
  static List<GpuInventory.Gpu> filter(List<GpuInventory.Gpu> devices, String spec) {
    if (spec == null) return devices;
    List<GpuInventory.Gpu> out = new ArrayList<>();
    Set<String> seen = new HashSet<>();
    for (String raw : spec.split(",", -1)) {
      String e = raw.trim();
      if (e.isEmpty() || !seen.add(e)) break;
      if (e.chars().allMatch(Character::isDigit)) {
        int i = parse(e);
        if (i < 0 || i >= devices.size()) break;
        out.add(devices.get(i));
      } else if (e.startsWith("-")) {
        break;
      } else {
        out.add(new GpuInventory.Gpu(-1, null));
      }
    }
    return out;
  }

  private static int parse(String digits) {
    try {
      return Integer.parseInt(digits);
    } catch (NumberFormatException e) {
      return -1;
    }
  }
}
