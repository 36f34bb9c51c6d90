package io.sparkcomms.spark.gpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@link NumaAffinity} against the fixture sysfs trees and a fake taskset. */
class NumaAffinityTest {
  @TempDir static Path dir;
  static Fixtures fx;

  @BeforeAll static void setUp() { fx = Fixtures.copyTo(dir); }

  @Test void bindsToTheCpusOfTheGpusNumaNode() throws Exception {
    Path log = dir.resolve("taskset.log");
    Map<String, String> env = Fixtures.with(fx.bareEnv(), "SPARKCOMMS_AMD_SMI", fx.tool("amd-smi").toString(),
        "SPARKCOMMS_SYSFS_ROOT", fx.sysfs("sysfs-mi300").toString(), "SPARKCOMMS_TASKSET", fx.tool("taskset").toString(),
        "FAKE_TASKSET_LOG", log.toString(), "HIP_VISIBLE_DEVICES", "2");
    String done = new NumaAffinity(new GpuTools(env)).apply(0, 4242);
    assertTrue(done.startsWith("NUMA affinity: bound process 4242"), done);
    assertTrue(done.contains("CPUs 48-95,144-191 of NUMA node 1"), done);
    assertTrue(done.contains("0000:38:00.0"), done);
    assertEquals("-a -p -c 48-95,144-191 4242", Files.readString(log).trim());
  }

  @Test void saysWhyWhenNothingCanBeDone() {
    Map<String, String> nvidia = Fixtures.with(fx.bareEnv(), "SPARKCOMMS_NVIDIA_SMI", fx.tool("nvidia-smi").toString(),
        "SPARKCOMMS_SYSFS_ROOT", fx.sysfs("sysfs-nvidia").toString());
    NumaAffinity numa = new NumaAffinity(new GpuTools(nvidia));
    assertTrue(numa.apply(1, 1).contains("has no NUMA node"), numa.apply(1, 1));
    String noTaskset = numa.apply(0, 1);
    assertTrue(noTaskset.contains("taskset not found") && noTaskset.contains("NUMA node 0, CPUs 0-15"), noTaskset);
    String outOfRange = numa.apply(5, 1);
    assertTrue(outOfRange.contains("not among the 2 GPUs"), outOfRange);
    String noGpu = new NumaAffinity(new GpuTools(fx.bareEnv())).apply(0, 1);
    assertFalse(noGpu.startsWith("NUMA affinity: bound"), noGpu);
  }
}
