package io.sparkcomms.collectives.hier;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.sparkcomms.nativeapi.GpuLibrary;
import org.junit.jupiter.api.Test;

/**
 * The GPU composition across simulated nodes ({@link CrossNodeGpuMain}) under JUnit: skipped, with
 * the loader's reason, where no GPU library is usable (CI). Ranks are processes; they may share one GPU.
 */
class CrossNodeGpuTest {
  private static void gpu() {
    GpuLibrary.Status s = GpuLibrary.status();
    assumeTrue(s.available(), "GPU tests skipped: " + s.reason());
  }

  @Test void everyCollectiveOnTwoNodesOfTwoRanks() throws Exception {
    gpu();
    assertTrue(CrossNodeGpuMain.launch("check", "2x2", CrossNodeGpuMain.parse("2x2")));
  }

  @Test void everyCollectiveOnUnevenNodes() throws Exception {
    gpu();
    assertTrue(CrossNodeGpuMain.launch("check", "3+1", CrossNodeGpuMain.parse("3+1")));
  }

  @Test void aRankThatExitsFailsEveryOtherWithinTheTimeout() throws Exception {
    gpu();
    assertTrue(CrossNodeGpuMain.launch("kill", "2x2", CrossNodeGpuMain.parse("2x2")));
  }
}
