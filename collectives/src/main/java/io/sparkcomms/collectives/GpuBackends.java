package io.sparkcomms.collectives;

import io.sparkcomms.collectives.gpu.GpuCommunicator;
import io.sparkcomms.collectives.rendezvous.Rendezvous;
import io.sparkcomms.nativeapi.GpuLibrary;

/** Finds the GPU backend; when no GPU library loads, says exactly why. */
final class GpuBackends {
  private GpuBackends() {}

  static boolean available() { return GpuLibrary.available(); }

  static Communicator create(Rendezvous rv, CommOptions o, int device) {
    if (!GpuLibrary.available()) throw new CommException(GpuLibrary.status().reason());
    if (device < 0) throw new IllegalArgumentException("the GPU backend needs a device ordinal: use Comms.create(rendezvous, options, device)");
    return GpuCommunicator.create(rv, o, device);
  }
}
