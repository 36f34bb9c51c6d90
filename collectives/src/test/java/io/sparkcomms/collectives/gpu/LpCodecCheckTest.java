package io.sparkcomms.collectives.gpu;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.sparkcomms.nativeapi.GpuLibrary;
import io.sparkcomms.nativeapi.SparkCommsNative;
import org.junit.jupiter.api.Test;

/** {@link LpCodecCheckMain} under JUnit: skipped, with the loader's reason, without a usable GPU (CI). */
class LpCodecCheckTest {
  @Test void gpuCodecMatchesJavaOracleBitForBit() {
    GpuLibrary.Status s = GpuLibrary.status();
    assumeTrue(s.available(), "GPU tests skipped: " + s.reason());
    int[] n = new int[1];
    SparkCommsNative.sc_device_count(n);
    assumeTrue(n[0] >= 1, "GPU tests skipped: no GPU");
    assertTrue(LpCodecCheckMain.run(System.nanoTime()));
  }
}
