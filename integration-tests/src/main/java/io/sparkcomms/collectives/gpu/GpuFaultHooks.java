package io.sparkcomms.collectives.gpu;

import io.sparkcomms.collectives.Communicator;

/**
 * The fault-injection harness's door to the GPU communicator's fault-injection hook, which is
 * package-private in sparkcomms-collectives so that no user of the product jars can reach it.
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
