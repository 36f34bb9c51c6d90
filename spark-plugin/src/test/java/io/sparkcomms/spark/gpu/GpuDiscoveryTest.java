package io.sparkcomms.spark.gpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Java discovery ({@link GpuInventory}, which {@link io.sparkcomms.spark.GpuDiscoveryPlugin} reports) and
 * discover-gpus.sh against fixtures.
 */
class GpuDiscoveryTest {
  @TempDir static Path dir;
  static Fixtures fx;

  @BeforeAll static void setUp() { fx = Fixtures.copyTo(dir); }

  private Map<String, String> amdSmi() { return Fixtures.with(fx.bareEnv(), "SPARKCOMMS_AMD_SMI", fx.tool("amd-smi").toString()); }

  private Map<String, String> rocmSmiAfterBrokenAmdSmi() {
    return Fixtures.with(fx.bareEnv(), "SPARKCOMMS_AMD_SMI", fx.tool("amd-smi-broken").toString(),
        "SPARKCOMMS_ROCM_SMI", fx.tool("rocm-smi").toString());
  }

  private Map<String, String> kfdOnly() {
    return Fixtures.with(fx.bareEnv(), "SPARKCOMMS_SYSFS_ROOT", fx.sysfs("sysfs-mi300").toString());
  }

  private Map<String, String> nvidia() {
    return Fixtures.with(fx.bareEnv(), "SPARKCOMMS_NVIDIA_SMI", fx.tool("nvidia-smi").toString(),
        "SPARKCOMMS_SYSFS_ROOT", fx.sysfs("sysfs-nvidia").toString());
  }

  private static String json(int n) {
    return "{\"name\":\"gpu\",\"addresses\":["
        + java.util.stream.IntStream.range(0, n).mapToObj(i -> "\"" + i + "\"").collect(Collectors.joining(",")) + "]}";
  }

  /** Java and the script agree and find {@code n} GPUs. */
  private void assertBoth(Map<String, String> env, int n) {
    assertEquals(n, GpuInventory.deviceAddresses(new GpuTools(env)).size(), "Java discovery with " + env);
    assertEquals(json(n), fx.runScript(env), "discover-gpus.sh with " + env);
  }

  @Test void amdSmiListsEveryGpuWithItsPciAddress() {
    GpuInventory inv = GpuInventory.discover(new GpuTools(amdSmi()));
    assertEquals(GpuInventory.Vendor.AMD, inv.vendor());
    assertEquals("amd-smi", inv.source());
    assertEquals(List.of(new GpuInventory.Gpu(0, "0000:0c:00.0"), new GpuInventory.Gpu(1, "0000:22:00.0"),
        new GpuInventory.Gpu(2, "0000:38:00.0"), new GpuInventory.Gpu(3, "0000:5c:00.0")), inv.physical());
    assertBoth(amdSmi(), 4);
  }

  @Test void rocmSmiIsTheFallbackWhenAmdSmiFails() {
    GpuInventory inv = GpuInventory.discover(new GpuTools(rocmSmiAfterBrokenAmdSmi()));
    assertEquals("rocm-smi", inv.source());
    assertEquals("0000:5c:00.0", inv.physical().get(3).pciBusId());
    assertBoth(rocmSmiAfterBrokenAmdSmi(), 4);
  }

  @Test void kfdSysfsIsTheLastAmdFallback() {
    GpuInventory inv = GpuInventory.discover(new GpuTools(kfdOnly()));
    assertEquals(GpuInventory.Vendor.AMD, inv.vendor());
    assertTrue(inv.source().startsWith("kfd sysfs"), inv.source());
    assertEquals(List.of("0000:0c:00.0", "0000:22:00.0", "0000:38:00.0", "0000:5c:00.0"),
        inv.physical().stream().map(GpuInventory.Gpu::pciBusId).collect(Collectors.toList()));
    assertBoth(kfdOnly(), 4);
  }

  @Test void nvidiaSmiWhenThereIsNoAmdGpu() {
    GpuInventory inv = GpuInventory.discover(new GpuTools(nvidia()));
    assertEquals(GpuInventory.Vendor.NVIDIA, inv.vendor());
    assertEquals(List.of(new GpuInventory.Gpu(0, "0000:17:00.0"), new GpuInventory.Gpu(1, "0000:65:00.0")), inv.physical());
    assertBoth(nvidia(), 2);
  }

  @Test void noGpuPrintsAnEmptyList() {
    assertBoth(fx.bareEnv(), 0);
    assertEquals("{\"name\":\"accel\",\"addresses\":[]}", fx.runScript(fx.bareEnv(), "accel"));
  }

  @Test void visibilityVariablesRestrictAndRenumber() {
    assertBoth(Fixtures.with(amdSmi(), "HIP_VISIBLE_DEVICES", "2,3"), 2);
    assertBoth(Fixtures.with(amdSmi(), "ROCR_VISIBLE_DEVICES", "1,2,3", "HIP_VISIBLE_DEVICES", "0,2"), 2);
    assertBoth(Fixtures.with(amdSmi(), "ROCR_VISIBLE_DEVICES", "3", "HIP_VISIBLE_DEVICES", "1"), 0);
    assertBoth(Fixtures.with(amdSmi(), "CUDA_VISIBLE_DEVICES", "1"), 1);        // HIP honors CUDA_VISIBLE_DEVICES
    assertBoth(Fixtures.with(amdSmi(), "HIP_VISIBLE_DEVICES", "0,1,7,2"), 2);   // stops at the first invalid entry
    assertBoth(Fixtures.with(amdSmi(), "HIP_VISIBLE_DEVICES", "1,1,2"), 1);     // and at a repeated one
    assertBoth(Fixtures.with(amdSmi(), "HIP_VISIBLE_DEVICES", ""), 0);          // empty hides all
    assertBoth(Fixtures.with(kfdOnly(), "ROCR_VISIBLE_DEVICES", "GPU-9eff74a1,GPU-6aff74a1"), 2);
    assertBoth(Fixtures.with(nvidia(), "CUDA_VISIBLE_DEVICES", "1"), 1);
    assertBoth(Fixtures.with(nvidia(), "CUDA_VISIBLE_DEVICES", "-1"), 0);
    assertBoth(Fixtures.with(nvidia(), "HIP_VISIBLE_DEVICES", "0"), 2);         // NVIDIA ignores HIP's variable
  }

  @Test void visibleOrdinalsMapToPhysicalGpus() {
    Map<String, String> env = Fixtures.with(amdSmi(), "ROCR_VISIBLE_DEVICES", "1,2,3", "HIP_VISIBLE_DEVICES", "2,0");
    List<GpuInventory.Gpu> visible = GpuInventory.discover(new GpuTools(env)).visible(env);
    assertEquals(List.of(3, 1), visible.stream().map(GpuInventory.Gpu::index).collect(Collectors.toList()));
  }

  @Test void pciAddressesAreNormalizedToSysfsForm() {
    assertEquals("0000:17:00.0", GpuInventory.normalizeBdf("00000000:17:00.0"));
    assertEquals("0000:0c:00.0", GpuInventory.normalizeBdf("0000:0C:00.0"));
    assertEquals("0000:0c:00.0", GpuInventory.normalizeBdf("0c:00.0"));
  }

  @Test void theStandaloneCopyOfTheScriptIsIdentical() throws Exception {
    Path bin = Path.of(System.getProperty("user.dir"), "bin", "discover-gpus.sh");
    assertEquals(Files.readString(fx.discoveryScript()), Files.readString(bin),
        "spark-plugin/bin/discover-gpus.sh must resolve to src/main/resources/io/sparkcomms/spark/gpu/discover-gpus.sh (a symlink)");
    assertTrue(Files.isExecutable(bin));
  }
}
