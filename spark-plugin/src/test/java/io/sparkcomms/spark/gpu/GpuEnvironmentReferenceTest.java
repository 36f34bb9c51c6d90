package io.sparkcomms.spark.gpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.spark.ConfigurationReference;
import io.sparkcomms.spark.ConfigurationReference.RecordingEnv;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The "GPU discovery" rows of docs/configuration.md's environment table are exactly the variables
 * discovery, visibility and NUMA affinity look up, over environments that take every path: each
 * tool found through its override or through PATH, AMD and NVIDIA GPUs, visibility set and unset.
 */
class GpuEnvironmentReferenceTest {
  @TempDir static Path dir;
  static Fixtures fx;

  @BeforeAll static void setUp() { fx = Fixtures.copyTo(dir); }

  /** Discovery, the visible GPUs and NUMA affinity for GPU 0 with {@code env}; the variables they looked up. */
  static Set<String> reads(Map<String, String> values) {
    RecordingEnv env = new RecordingEnv(values, true);   // iterated only to hand the environment to the tools
    GpuTools tools = new GpuTools(env);
    GpuInventory.discover(tools).visible(env);
    GpuInventory.deviceAddresses(tools);
    new NumaAffinity(tools).apply(0, 4242);
    return env.read();
  }

  @Test void theGpuDiscoveryRowsAreWhatDiscoveryReads() throws Exception {
    Path log = dir.resolve("taskset.log");
    Path emptyPath = Files.createDirectories(dir.resolve("empty-path"));
    Set<String> read = new TreeSet<>();
    read.addAll(reads(fx.bareEnv()));
    read.addAll(reads(Fixtures.with(fx.bareEnv(), "SPARKCOMMS_AMD_SMI", fx.tool("amd-smi").toString(),
        "SPARKCOMMS_SYSFS_ROOT", fx.sysfs("sysfs-mi300").toString(), "SPARKCOMMS_TASKSET", fx.tool("taskset").toString(),
        "FAKE_TASKSET_LOG", log.toString())));
    read.addAll(reads(Fixtures.with(fx.bareEnv(), "SPARKCOMMS_AMD_SMI", fx.tool("amd-smi").toString(),
        "HIP_VISIBLE_DEVICES", "1")));
    read.addAll(reads(Fixtures.with(fx.bareEnv(), "SPARKCOMMS_NVIDIA_SMI", fx.tool("nvidia-smi").toString(),
        "SPARKCOMMS_SYSFS_ROOT", fx.sysfs("sysfs-nvidia").toString(), "CUDA_VISIBLE_DEVICES", "0")));
    read.addAll(reads(Map.of("PATH", emptyPath.toString())));   // every tool searched on PATH
    assertTrue(Files.readString(log).contains("-a -p -c"), "the scenarios reach taskset");
    assertEquals(read, ConfigurationReference.namesReadBy(
        ConfigurationReference.environmentTable(ConfigurationReference.read()), "GPU discovery"),
        "GPU discovery looks these up (left); docs/configuration.md lists (right)");
  }
}
