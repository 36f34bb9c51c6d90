package io.sparkcomms.collectives.observe;

/**
 * Removes what it was returned for (a hook: {@link io.sparkcomms.collectives.Communicator#addHook}),
 * as torchcomms' RemovableHandle. Removing twice does nothing; {@link #close()} removes, so the handle
 * works in try-with-resources.
 */
public interface RemovableHandle extends AutoCloseable {
  /** Removes the hook; calls that start afterwards do not see it. Idempotent. */
  void remove();

  /** Same as {@link #remove()}. */
  @Override
  default void close() { remove(); }
}
