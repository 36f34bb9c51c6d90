package io.sparkcomms.collectives.net;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Messages between the processes of a job that may run on different nodes: the cross-node leg of a
 * {@link io.sparkcomms.collectives.hier.HierarchicalCommunicator}. An implementation moves opaque
 * byte messages ({@link #send}) and hands every inbound one to {@link #deliver}; framing,
 * validation, ordering by call and timeouts are {@link Mesh}'s. Messages to one address arrive in
 * the order they were sent. One transport serves every communicator of a process: inbound messages
 * are routed by the world id and receiver rank in their header ({@link Mesh#HEADER_BYTES}).
 *
 * <p>Implementations: {@link InJvmTransport} (threads of one JVM) and, in the Spark plugin, one over
 * Spark's own network library (authenticated and encrypted with the application's settings).
 */
public abstract class Transport implements AutoCloseable {
  /** Attached meshes by (world id, rank): several ranks of one communicator may share a process. */
  private final Map<Key, Mesh> meshes = new ConcurrentHashMap<>();

  private record Key(long worldId, int rank) {}
  private final AtomicLong dropped = new AtomicLong();

  /** Where peers reach this process, published through the rendezvous (for example {@code host:port}). */
  public abstract String address();

  /**
   * Sends one message to the process at {@code address}; raises when it cannot be handed to the
   * network (a peer that is gone may also be noticed only by the receiver's timeout).
   */
  protected abstract void send(String address, ByteBuffer message) throws IOException;

  /**
   * Hands an inbound message to the communicator it names (any thread, one message at a time per
   * sender). A message too short for a header or naming no communicator of this process is dropped
   * and counted ({@link #droppedMessages}); the mesh validates the rest.
   */
  protected final void deliver(ByteBuffer message) {
    Mesh m = message.remaining() >= Mesh.HEADER_BYTES ? meshes.get(new Key(Mesh.worldIdOf(message), Mesh.receiverOf(message))) : null;
    if (m == null) {
      dropped.incrementAndGet();
      return;
    }
    m.deliver(message);
  }

  /** Inbound messages dropped because they named no communicator of this process or were malformed. */
  public final long droppedMessages() { return dropped.get(); }

  final void attach(Mesh m) {
    if (meshes.putIfAbsent(new Key(m.worldId(), m.rank()), m) != null) {
      throw new IllegalStateException("rank " + m.rank() + " of world " + Long.toHexString(m.worldId()) + " is already attached to this transport");
    }
  }

  final void detach(Mesh m) { meshes.remove(new Key(m.worldId(), m.rank()), m); }

  final void countDropped() { dropped.incrementAndGet(); }

  /** Stops the transport (an implementation's server and connections). */
  @Override public void close() {}
}
