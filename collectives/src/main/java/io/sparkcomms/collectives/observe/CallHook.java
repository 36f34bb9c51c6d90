package io.sparkcomms.collectives.observe;

/**
 * Callbacks around every collective call of a communicator (torchcomms' pre and post hooks),
 * registered with {@link io.sparkcomms.collectives.Communicator#addHook}. Both methods default to
 * doing nothing, so a hook implements the one it needs.
 *
 * <p>Where they run: for a synchronous call, both on the calling thread, {@link #preCall} just before
 * the backend starts the call (after earlier async calls finished) and {@link #postCall} just after
 * it returned or raised. For an {@code ...Async} call, {@link #preCall} runs on the calling thread
 * when the call is submitted, and {@link #postCall} when the call's work completes: on the host
 * backend on the communicator's async thread right after the call ran; on the GPU backend on the
 * thread that first sees the returned {@link io.sparkcomms.collectives.Work} complete (its
 * {@code isCompleted()} returning true, or {@code waitFor} returning or raising), so an async GPU call
 * whose Work is never asked gets no post callback. Hooks run in the order they were added.
 *
 * <p>A hook that throws does not affect the call or the other hooks: the exception is logged (at
 * WARNING, once per hook) and the call goes on; a {@link VirtualMachineError} propagates. Hooks run
 * inline, so a slow hook slows every call of the communicator; they must not call the communicator.
 * Calls made through {@code GpuCommunicator.allReduceOnStream} (the stream-ordered entry point) are
 * not seen by hooks.
 */
public interface CallHook {
  /** Before the call: what is about to run. */
  default void preCall(CallInfo call) {}

  /** After the call: what ran, how long it took, and its failure (null on success). */
  default void postCall(CallResult result) {}
}
