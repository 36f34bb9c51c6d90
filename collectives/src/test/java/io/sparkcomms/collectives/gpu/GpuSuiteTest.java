package io.sparkcomms.collectives.gpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.sparkcomms.nativeapi.GpuLibrary;
import org.junit.jupiter.api.Test;

/**
 * The GPU suite under JUnit: skipped, with the loader's reason, where no GPU library or fewer than two
 * GPUs are usable (CI). On a GPU host run {@link GpuSuiteMain} directly (README: "Running on a GPU node").
 */
class GpuSuiteTest {
  static int gpus() {
    GpuLibrary.Status s = GpuLibrary.status();
    assumeTrue(s.available(), "GPU tests skipped: " + s.reason());
    int n = GpuLibrary.deviceCount();
    assumeTrue(n >= 2, "GPU tests skipped: need 2 GPUs, found " + n);
    return n;
  }

  @Test void twoGpusInOneProcess() throws Exception {
    gpus();
    assertEquals(true, GpuSuiteMain.threads(2, System.nanoTime()));
  }

  @Test void oneProcessPerGpu() throws Exception {
    gpus();
    assertEquals(true, GpuSuiteMain.processes(2, System.nanoTime()));
  }
}
