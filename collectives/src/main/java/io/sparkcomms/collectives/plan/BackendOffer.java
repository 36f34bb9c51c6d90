package io.sparkcomms.collectives.plan;

/**
 * What a backend offers the shared planning step, fixed when the communicator is built.
 *
 * @param memory       where the tensors of a call may live
 * @param device       the device ordinal that device tensors must be on ({@link Memory#DEVICE}); -1 otherwise
 * @param vendor       whether {@code Algorithm.VENDOR} can run (the vendor library is initialized)
 * @param lowPrecision whether the FP8 (LP) protocols exist; without them an LP request falls through
 * @param enqueues     whether calls are naturally asynchronous (device streams): async calls are then
 *                     enqueued by the backend instead of run on a helper thread
 */
public record BackendOffer(Memory memory, int device, boolean vendor, boolean lowPrecision, boolean enqueues) {
  /** Where a backend's tensors live. */
  public enum Memory {
    /** Host tensors only ({@code HostTensor}). */
    HOST,
    /** Device tensors on {@link BackendOffer#device()}, or host tensors for every tensor of a call (staged). */
    DEVICE
  }

  /** The host shared-memory backend: host tensors, no vendor library, the Java FP8 codecs. */
  public static final BackendOffer HOST = new BackendOffer(Memory.HOST, -1, false, true, false);
}
