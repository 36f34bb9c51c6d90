package io.sparkcomms.collectives.gpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.sparkcomms.nativeapi.GpuLibrary;
import org.junit.jupiter.api.Test;

/**
 * The GPU suite under JUnit: skipped, with the loader's reason, where no GPU library or too few GPUs
 * are usable (CI). On a GPU host run {@link GpuSuiteMain} directly (dev/gpu-host/gpu-checks tests).
 */
class GpuSuiteTest {
  static int gpus(int need) {
    GpuLibrary.Status s = GpuLibrary.status();
    assumeTrue(s.available(), "GPU tests skipped: " + s.reason());
    int n = GpuLibrary.deviceCount();
    assumeTrue(n >= need, "GPU tests skipped: need " + need + " GPU(s), found " + n);
    return n;
  }

  @Test void twoGpusInOneProcess() throws Exception {
    gpus(2);
    assertEquals(true, GpuSuiteMain.threads(2, System.nanoTime()));
  }

  @Test void oneProcessPerGpu() throws Exception {
    gpus(2);
    assertEquals(true, GpuSuiteMain.processes(2, System.nanoTime()));
  }

  /** One process more than GPUs: the last rank shares GPU 0 with rank 0 (no vendor library then). */
  @Test void processesShareAGpu() throws Exception {
    int n = gpus(1);
    assertEquals(true, GpuSuiteMain.processes(n + 1, System.nanoTime()));
  }
}
