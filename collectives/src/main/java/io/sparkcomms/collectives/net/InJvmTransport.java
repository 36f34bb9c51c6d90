package io.sparkcomms.collectives.net;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A {@link Transport} between threads of one JVM (tests and single-process simulations): a message
 * is copied and delivered on the sender's thread, so messages to one address keep their order.
 */
public final class InJvmTransport extends Transport {
  private static final Map<String, InJvmTransport> BY_ADDRESS = new ConcurrentHashMap<>();
  private static final AtomicInteger NEXT = new AtomicInteger();
  private final String address = "jvm:" + NEXT.incrementAndGet();

  public InJvmTransport() { BY_ADDRESS.put(address, this); }

  @Override public String address() { return address; }

  @Override protected void send(String to, ByteBuffer message) throws IOException {
    InJvmTransport t = BY_ADDRESS.get(to);
    if (t == null) throw new IOException("no in-JVM transport at " + to);
    ByteBuffer copy = ByteBuffer.allocate(message.remaining());
    copy.put(message.duplicate()).flip();
    t.deliver(copy);
  }

  @Override public void close() { BY_ADDRESS.remove(address, this); }
}
