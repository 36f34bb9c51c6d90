package io.sparkcomms.spark.gpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import org.apache.spark.resource.ResourceInformation;
import org.junit.jupiter.api.Test;

/** The driver's claim registry, the executor's watchdog, and resolving the executor's GPU. */
class GpuClaimTest {
  private static GpuClaimProtocol.Reply claim(GpuClaimRegistry r, String host, String gpu, String exec) {
    return r.claim(exec, new GpuClaimProtocol.Claim(host, "gpu", gpu));
  }

  @Test void aDuplicateClaimIsRejectedNamingHostGpuAndBothExecutors() {
    GpuClaimRegistry r = new GpuClaimRegistry();
    assertTrue(claim(r, "node1", "0", "1").granted());
    assertTrue(claim(r, "node1", "1", "2").granted());
    assertTrue(claim(r, "node2", "0", "3").granted());   // same address, other host: fine
    assertTrue(claim(r, "node1", "0", "1").granted());   // idempotent

    GpuClaimProtocol.Reply dup = claim(r, "node1", "0", "4");
    assertFalse(dup.granted());
    for (String s : List.of("node1", "address 0", "executor 1", "executor 4")) {
      assertTrue(dup.message().contains(s), "'" + s + "' missing from: " + dup.message());
    }
    // Both executors fail: the claimant now, the holder at its next check.
    assertFalse(r.check("1").granted());
    assertEquals(dup.message(), r.check("1").message());
    assertFalse(r.check("4").granted());
    assertTrue(r.check("2").granted());

    r.release("1");
    assertNull(r.holder("node1", "gpu", "0"));
    r.release("4");
    assertTrue(claim(r, "node1", "0", "5").granted());
  }

  /** A release ends the releasing executor's own claims only; another executor's stays, and still conflicts. */
  @Test void aReleaseEndsOnlyTheReleasersClaims() {
    GpuClaimRegistry r = new GpuClaimRegistry();
    assertTrue(claim(r, "node1", "0", "1").granted());
    r.release("2");
    assertEquals("1", r.holder("node1", "gpu", "0"));
    assertFalse(claim(r, "node1", "0", "2").granted(), "GPU 0 is still executor 1's");
  }

  @Test void anExecutorHoldsOneGpu() {
    GpuClaimRegistry r = new GpuClaimRegistry();
    assertTrue(claim(r, "node1", "0", "1").granted());
    GpuClaimProtocol.Reply second = claim(r, "node1", "1", "1");
    assertFalse(second.granted());
    assertTrue(second.message().contains("executor 1 claimed gpu address 1 on host node1 but holds gpu address 0 on host "
        + "node1 already"), second.message());
    assertNull(r.holder("node1", "gpu", "1"));
    assertTrue(r.check("1").granted(), "refusing the second claim does not stop the first");
  }

  @Test void theWatchdogReportsAConflictOnce() throws Exception {
    List<String> conflicts = new CopyOnWriteArrayList<>();
    int[] calls = {0};
    GpuClaimWatchdog w = new GpuClaimWatchdog(Duration.ofMillis(10), () -> {
      calls[0]++;
      if (calls[0] == 1) throw new IllegalStateException("driver busy");
      return calls[0] < 3 ? GpuClaimProtocol.Reply.ok() : GpuClaimProtocol.Reply.denied("conflict!");
    }, conflicts::add);
    for (int i = 0; i < 5; i++) w.checkOnce();
    w.close();
    assertEquals(List.of("conflict!"), conflicts);
  }

  @Test void anExecutorTakesExactlyOneOrdinalGpu() {
    assertTrue(ExecutorGpu.fromResources(Map.of(), "gpu", "h", "1").isEmpty());
    ExecutorGpu g = ExecutorGpu.fromResources(Map.of("gpu", new ResourceInformation("gpu", new String[] {"3"})), "gpu", "h", "1").get();
    assertEquals(3, g.ordinal());
    IllegalStateException two = assertThrows(IllegalStateException.class, () -> ExecutorGpu.fromResources(
        Map.of("gpu", new ResourceInformation("gpu", new String[] {"0", "1"})), "gpu", "node7", "9"));
    assertTrue(two.getMessage().contains("executor 9 on host node7 was given 2 'gpu' addresses [0, 1]"), two.getMessage());
    assertTrue(two.getMessage().contains("exactly one GPU per executor"), two.getMessage());
    IllegalStateException uuid = assertThrows(IllegalStateException.class, () -> ExecutorGpu.fromResources(
        Map.of("gpu", new ResourceInformation("gpu", new String[] {"GPU-1234"})), "gpu", "h", "1"));
    assertTrue(uuid.getMessage().contains("not a device ordinal"), uuid.getMessage());
  }

  /** META-INF/services names the binder under DeviceBinder's name, so ExecutorGpu.binder() finds it. */
  @Test void theNativeBinderIsRegisteredAsAService() {
    List<Class<?>> found = new java.util.ArrayList<>();
    java.util.ServiceLoader.load(DeviceBinder.class, ExecutorGpu.class.getClassLoader()).stream().forEach(p -> found.add(p.type()));
    assertEquals(List.of(NativeDeviceBinder.class), found);
  }

  @Test void aConflictedGpuRaisesItsMessage() {
    ExecutorGpu g = new ExecutorGpu("gpu", "0", 0, "h", "1");
    ExecutorGpu.install(g);
    try {
      assertEquals(0, ExecutorGpu.currentOrdinal());
      g.bindCurrentThread();
      assertEquals(0, ExecutorGpu.boundDevice().getAsInt());
      g.markConflicted("GPU conflict on host h");
      IllegalStateException e = assertThrows(IllegalStateException.class, ExecutorGpu::current);
      assertEquals("GPU conflict on host h", e.getMessage());
    } finally {
      ExecutorGpu.unbindCurrentThread();
      ExecutorGpu.uninstall(g);
    }
    assertTrue(ExecutorGpu.current().isEmpty());
  }
}
