package io.sparkcomms.collectives;

import io.sparkcomms.collectives.host.HostCommunicator;
import io.sparkcomms.collectives.rendezvous.Rendezvous;

/**
 * Entry point: creates a communicator over a {@link Rendezvous}. Collective: every rank calls it.
 *
 * <pre>{@code
 * try (Communicator comm = Comms.create(rendezvous, CommOptions.fromEnvironment())) {
 *   comm.allReduce(HostTensor.of(gradients), ReduceOp.AVG);
 * }
 * }</pre>
 */
public final class Comms {
  private Comms() {}

  /** Backend from {@code options.backend()}; AUTO is the host backend for host tensors. */
  public static Communicator create(Rendezvous rendezvous, CommOptions options) {
    switch (options.backend()) {
      case GPU:
        return GpuBackends.create(rendezvous, options, -1);
      case HOST:
      case AUTO:
      default:
        return HostCommunicator.create(rendezvous, options);
    }
  }

  /**
   * A communicator for {@code device}: the GPU backend when it is available (AUTO or GPU), else the
   * host backend under AUTO. With backend GPU and no usable GPU library, the error says why.
   */
  public static Communicator create(Rendezvous rendezvous, CommOptions options, int device) {
    if (options.backend() == CommOptions.Backend.HOST) return HostCommunicator.create(rendezvous, options);
    if (options.backend() == CommOptions.Backend.GPU || GpuBackends.available()) {
      return GpuBackends.create(rendezvous, options, device);
    }
    return HostCommunicator.create(rendezvous, options);
  }
}
