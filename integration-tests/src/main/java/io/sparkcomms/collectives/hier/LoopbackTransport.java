package io.sparkcomms.collectives.hier;

import io.sparkcomms.collectives.net.Transport;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A {@link Transport} between processes of one machine over loopback TCP, for the check programs
 * that run rank processes without Spark (the product's transport is Spark's network library, in the
 * plugin). Length-prefixed messages, one connection per peer, one reader thread per inbound
 * connection; a message longer than {@link #MAX_MESSAGE} closes the connection.
 */
public final class LoopbackTransport extends Transport {
  static final int MAX_MESSAGE = 256 << 20;
  private final ServerSocket server;
  private final Map<String, DataOutputStream> out = new ConcurrentHashMap<>();
  private volatile boolean closed;

  public LoopbackTransport() throws IOException {
    server = new ServerSocket(0, 64, InetAddress.getLoopbackAddress());
    Thread t = new Thread(this::accept, "loopback-transport-accept");
    t.setDaemon(true);
    t.start();
  }

  private void accept() {
    while (!closed) {
      try {
        Socket s = server.accept();
        s.setTcpNoDelay(true);
        Thread r = new Thread(() -> read(s), "loopback-transport-read");
        r.setDaemon(true);
        r.start();
      } catch (IOException e) {
        if (!closed) System.err.println("loopback transport: accept: " + e);
        return;
      }
    }
  }

  private void read(Socket s) {
    try (DataInputStream in = new DataInputStream(new java.io.BufferedInputStream(s.getInputStream()))) {
      for (;;) {
        int len = in.readInt();
        if (len < 0 || len > MAX_MESSAGE) return;
        byte[] b = new byte[len];
        in.readFully(b);
        deliver(ByteBuffer.wrap(b));
      }
    } catch (IOException e) {
      // the peer closed or is gone: the mesh's bounded waits report it
    }
  }

  @Override public String address() { return "127.0.0.1:" + server.getLocalPort(); }

  @Override protected void send(String address, ByteBuffer message) throws IOException {
    DataOutputStream o = out.get(address);
    if (o == null) {
      int colon = address.lastIndexOf(':');
      Socket s = new Socket(InetAddress.getLoopbackAddress(), Integer.parseInt(address.substring(colon + 1)));
      s.setTcpNoDelay(true);
      DataOutputStream fresh = new DataOutputStream(new java.io.BufferedOutputStream(s.getOutputStream()));
      o = out.putIfAbsent(address, fresh);
      if (o == null) o = fresh;
      else s.close();
    }
    byte[] b = new byte[message.remaining()];
    message.get(b);
    synchronized (o) {
      o.writeInt(b.length);
      o.write(b);
      o.flush();
    }
  }

  @Override public void close() {
    closed = true;
    try {
      server.close();
    } catch (IOException ignored) {
      // closing
    }
    for (DataOutputStream o : out.values()) {
      try {
        o.close();
      } catch (IOException ignored) {
        // closing
      }
    }
  }
}
