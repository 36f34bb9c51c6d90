package io.sparkcomms.collectives.rendezvous;

import java.time.Duration;

/**
 * How the ranks of a communicator find each other: an all-gather of small byte blobs (segment names,
 * process ids, IPC handles). Implementations: {@link InJvmRendezvous} (threads of one JVM),
 * {@link FileRendezvous} (processes sharing a private directory), and Spark's barrier task context in
 * the plugin module.
 */
public interface Rendezvous extends AutoCloseable {
  int rank();

  int size();

  /**
   * Returns every rank's blob, indexed by rank ({@code result[rank()]} is {@code mine}). Every rank
   * must call it the same number of times. Raises {@link RendezvousException} when not all ranks
   * arrive within {@code timeout}.
   */
  byte[][] allGather(byte[] mine, Duration timeout);

  /** A short description for error messages (e.g. the directory or the Spark stage). */
  default String describe() { return getClass().getSimpleName(); }

  @Override
  default void close() {}
}
