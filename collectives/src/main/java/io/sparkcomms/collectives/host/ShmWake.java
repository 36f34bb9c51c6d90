package io.sparkcomms.collectives.host;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.security.MessageDigest;
import java.util.Iterator;

/**
 * The wake channel of a host communicator: one loopback TCP connection between every two ranks, over
 * which a rank that arrives at a barrier wakes a peer that sleeps in it ({@link ShmSignals}). Java
 * has no futex on shared memory; a blocking read on a socket is how a process sleeps until another
 * one wakes it, and the kernel runs the woken reader promptly (wake-up preemption), which a timed
 * sleep does not: with a CPU hog on every core, a rank that parks for fixed periods waits whole
 * scheduler slices for its peer (milliseconds per call, bench/README.md).
 *
 * <p>The bytes carry no meaning: a wake byte only makes the sleeper re-read the shared flags, so a
 * spurious or forged byte costs one check and nothing else. A connection is accepted only from a peer
 * that proves it mapped the segment: its first 20 bytes are the segment's random token (written by
 * rank 0 into the 0600 segment file) and its rank, a higher rank than the acceptor's, once each.
 *
 * <p>Threads: the owning rank's thread sleeps ({@link #await}); any thread may {@link #wake} a peer or
 * {@link #interrupt} the sleeper (an abort). {@link #close} ends it all.
 */
final class ShmWake implements AutoCloseable {
  static final int TOKEN_BYTES = 16;
  private static final int HELLO_BYTES = TOKEN_BYTES + 4;

  private final int rank;
  private final ServerSocketChannel listener;
  private final SocketChannel[] peers;
  private Selector selector;
  private final ByteBuffer sink = ByteBuffer.allocate(64);
  private volatile boolean closed;

  private ShmWake(int rank, int ranks, ServerSocketChannel listener) {
    this.rank = rank;
    this.listener = listener;
    this.peers = new SocketChannel[ranks];
  }

  /** Listens on an ephemeral loopback port. */
  static ShmWake listen(int rank, int ranks) throws IOException {
    ServerSocketChannel l = ServerSocketChannel.open();
    try {
      l.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), ranks);
      l.configureBlocking(false);
      return new ShmWake(rank, ranks, l);
    } catch (IOException | RuntimeException e) {
      l.close();
      throw e;
    }
  }

  int port() { return ((InetSocketAddress) listenerAddress()).getPort(); }

  private java.net.SocketAddress listenerAddress() {
    try {
      return listener.getLocalAddress();
    } catch (IOException e) {
      throw new IllegalStateException("wake channel listener has no address", e);
    }
  }

  /**
   * Connects to every lower rank's port ({@code ports[p]}, each in 1..65535) and accepts one connection
   * from every higher rank carrying {@code token}, until {@code deadlineNanos} (System.nanoTime()).
   * Raises IOException with the reason on failure or timeout; the listener is closed either way.
   */
  void connect(int[] ports, byte[] token, long deadlineNanos) throws IOException {
    int n = peers.length;
    try (Selector s = Selector.open()) {
      for (int p = 0; p < rank; p++) {
        if (ports[p] < 1 || ports[p] > 65535) throw new IOException("rank " + p + " published wake port " + ports[p]);
        SocketChannel c = SocketChannel.open();
        peers[p] = c;
        c.configureBlocking(false);
        c.setOption(StandardSocketOptions.TCP_NODELAY, true);
        if (!c.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(), ports[p]))) {
          c.register(s, SelectionKey.OP_CONNECT, p);
        } else {
          hello(c, token);
        }
      }
      int pendingConnects = s.keys().size();
      int toAccept = n - 1 - rank;
      java.util.Map<SocketChannel, ByteBuffer> reading = new java.util.HashMap<>();
      if (toAccept > 0) listener.register(s, SelectionKey.OP_ACCEPT);
      while (pendingConnects > 0 || toAccept > 0) {
        long left = deadlineNanos - System.nanoTime();
        if (left <= 0) {
          throw new IOException("wake channel: timed out connecting the ranks (" + pendingConnects + " connections to lower ranks and "
              + toAccept + " from higher ranks missing)");
        }
        s.select(Math.max(1, left / 1_000_000));
        Iterator<SelectionKey> it = s.selectedKeys().iterator();
        while (it.hasNext()) {
          SelectionKey k = it.next();
          it.remove();
          if (!k.isValid()) continue;
          if (k.isAcceptable()) {
            SocketChannel c = listener.accept();
            if (c == null) continue;
            c.configureBlocking(false);
            c.setOption(StandardSocketOptions.TCP_NODELAY, true);
            reading.put(c, ByteBuffer.allocate(HELLO_BYTES));
            c.register(s, SelectionKey.OP_READ);
          } else if (k.isConnectable()) {
            SocketChannel c = (SocketChannel) k.channel();
            c.finishConnect();
            k.cancel();
            hello(c, token);
            pendingConnects--;
          } else if (k.isReadable()) {
            SocketChannel c = (SocketChannel) k.channel();
            ByteBuffer b = reading.get(c);
            int got = c.read(b);
            if (got < 0 || b.hasRemaining()) {
              if (got < 0) {  // closed before its hello: not a peer
                k.cancel();
                reading.remove(c);
                c.close();
              }
              continue;
            }
            k.cancel();
            reading.remove(c);
            b.flip();
            byte[] t = new byte[TOKEN_BYTES];
            b.get(t);
            int from = b.getInt();
            if (!MessageDigest.isEqual(t, token) || from <= rank || from >= n || peers[from] != null) {
              c.close();  // not a peer of this communicator, or a rank heard from already
              continue;
            }
            peers[from] = c;
            toAccept--;
          }
        }
      }
      for (SocketChannel c : reading.keySet()) c.close();
      s.selectNow();  // flush the cancelled keys so the channels can join the sleeper's selector
    } catch (IOException | RuntimeException e) {
      close();
      throw e;
    } finally {
      listener.close();
    }
    selector = Selector.open();
    for (int p = 0; p < n; p++) {
      if (p != rank) peers[p].register(selector, SelectionKey.OP_READ, p);
    }
  }

  private void hello(SocketChannel c, byte[] token) throws IOException {
    ByteBuffer b = ByteBuffer.allocate(HELLO_BYTES).put(token).putInt(rank).flip();
    long until = System.nanoTime() + 1_000_000_000L;
    while (b.hasRemaining()) {  // 20 bytes into an empty socket buffer: one write
      c.write(b);
      if (b.hasRemaining() && System.nanoTime() > until) throw new IOException("wake channel: cannot write to a peer");
    }
  }

  /** Wakes {@code peer} if it sleeps (one byte; a full socket buffer already holds a wake). Never blocks. */
  void wake(int peer) {
    SocketChannel c = peers[peer];
    if (c == null || closed) return;
    try {
      c.write(ByteBuffer.wrap(WAKE));
    } catch (IOException | RuntimeException e) {
      // the peer closed its end: it no longer sleeps, and the shared flags say why
    }
  }

  private static final byte[] WAKE = {1};

  /** Wakes every peer. */
  void wakeAll() {
    for (int p = 0; p < peers.length; p++) {
      if (p != rank) wake(p);
    }
  }

  /** Ends a sleep in progress on this rank at once (another thread of this process aborts). */
  void interrupt() {
    Selector s = selector;
    if (s != null && !closed) s.wakeup();
  }

  /**
   * Sleeps until a peer wakes this rank, {@link #interrupt}, or {@code nanos} pass (at least 1 ms, the
   * selector's unit); drains what the peers sent. Only the owning rank's thread calls it.
   */
  void await(long nanos) {
    if (closed) return;
    try {
      selector.select(Math.max(1, nanos / 1_000_000));
      Iterator<SelectionKey> it = selector.selectedKeys().iterator();
      while (it.hasNext()) {
        SelectionKey k = it.next();
        it.remove();
        SocketChannel c = (SocketChannel) k.channel();
        int got;
        do {
          sink.clear();
          got = c.read(sink);
        } while (got > 0);
        if (got < 0) k.cancel();  // the peer closed its end; its shared detached flag says so
      }
    } catch (IOException | RuntimeException e) {
      // a closed channel or selector: the caller re-reads the shared flags and its deadline
    }
  }

  @Override public void close() {
    closed = true;
    try {
      listener.close();
    } catch (IOException e) {
      // nothing to free
    }
    for (SocketChannel c : peers) {
      if (c == null) continue;
      try {
        c.close();
      } catch (IOException e) {
        // closed
      }
    }
    Selector s = selector;
    if (s != null) {
      try {
        s.close();
      } catch (IOException e) {
        // closed
      }
    }
  }
}
