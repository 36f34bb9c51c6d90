package io.sparkcomms.collectives.gpu;

import io.sparkcomms.collectives.Communicator;

/**
 * Test-only door to the GPU communicator's fault-injection hook, which is package-private in the
 * main sources so that nothing outside the tests can reach it.
 */
public final class GpuFaultHooks {
  private GpuFaultHooks() {}

  /**
   * Overwrites the barrier flags that rank {@code peer} reads for {@code c}'s arrivals with
   * {@code value} (see {@code GpuCommunicator.debugCorruptFlag}). {@code c} must be a GPU
   * communicator, open, and stay open until this returns.
   */
  public static void corruptFlag(Communicator c, int peer, long value) {
    ((GpuCommunicator) c).debugCorruptFlag(peer, value);
  }
}
