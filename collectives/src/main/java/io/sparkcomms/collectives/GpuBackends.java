package io.sparkcomms.collectives;

import io.sparkcomms.collectives.rendezvous.Rendezvous;

/** Finds the GPU backend. Until a GPU library loads, says clearly why it is unavailable. */
final class GpuBackends {
  private GpuBackends() {}

  static boolean available() { return false; }

  static String unavailableReason() {
    return "GPU backend unavailable: the native sparkcomms library is not part of this build";
  }

  static Communicator create(Rendezvous rv, CommOptions o, int device) {
    throw new CommException(unavailableReason());
  }
}
