package io.sparkcomms.collectives.gpu;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.sparkcomms.nativeapi.GpuLibrary;
import org.junit.jupiter.api.Test;

/** {@link LpCodecCheckMain} under JUnit: skipped, with the loader's reason, without a usable GPU (CI). */
class LpCodecCheckTest {
  @Test void gpuCodecMatchesJavaOracleBitForBit() {
    GpuLibrary.Status s = GpuLibrary.status();
    assumeTrue(s.available(), "GPU tests skipped: " + s.reason());
    assumeTrue(GpuLibrary.deviceCount() >= 1, "GPU tests skipped: no GPU");
    assertTrue(LpCodecCheckMain.run(System.nanoTime()));
  }
}
