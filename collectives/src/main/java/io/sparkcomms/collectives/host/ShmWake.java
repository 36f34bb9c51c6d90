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
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;
import java.util.function.IntPredicate;
import java.util.function.IntUnaryOperator;

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
  /** How often {@link #connect} re-reads the peers' ports and checks that awaited peers still exist. */
  private static final long CHECK_MILLIS = 100;

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

  /** Why {@link #connect} stopped: a peer's process exited (the communicator cannot be built). */
  static final class PeerExited extends IOException {
    final int peer;

    PeerExited(int peer) {
      super("rank " + peer + " exited while the ranks connected their wake channels");
      this.peer = peer;
    }
  }

  /**
   * Connects to every lower rank's published port and accepts one connection carrying {@code token}
   * from every higher rank, until {@code deadlineNanos} (System.nanoTime()). {@code portOf(p)} is
   * rank p's published port, read again every {@link #CHECK_MILLIS}: 0 or less means p has no wake
   * channel, and then this rank neither connects to it nor waits for it. Every CHECK_MILLIS the peers
   * still awaited are checked with {@code gone}; an exited one raises {@link PeerExited}. Any other
   * failure, or the deadline, raises IOException with the reason. The listener is closed either way;
   * on failure every connection too.
   */
  void connect(IntUnaryOperator portOf, byte[] token, long deadlineNanos, IntPredicate gone) throws IOException {
    int n = peers.length;
    boolean[] awaited = new boolean[n];   // a connection from / to p is still missing
    try (Selector s = Selector.open()) {
      for (int p = 0; p < rank; p++) {
        int port = portOf.applyAsInt(p);
        if (port <= 0) continue;  // p has no wake channel
        if (port > 65535) throw new IOException("rank " + p + " published wake port " + port);
        SocketChannel c = SocketChannel.open();
        peers[p] = c;
        c.configureBlocking(false);
        c.setOption(StandardSocketOptions.TCP_NODELAY, true);
        if (c.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(), port))) {
          hello(c, token);
        } else {
          c.register(s, SelectionKey.OP_CONNECT, p);
          awaited[p] = true;
        }
      }
      for (int p = rank + 1; p < n; p++) awaited[p] = true;
      Map<SocketChannel, ByteBuffer> reading = new HashMap<>();
      if (rank < n - 1) listener.register(s, SelectionKey.OP_ACCEPT);
      long nextCheck = 0;
      for (;;) {
        long now = System.nanoTime();
        if (now - nextCheck >= 0) {
          nextCheck = now + CHECK_MILLIS * 1_000_000L;
          for (int p = rank + 1; p < n; p++) {
            if (awaited[p] && portOf.applyAsInt(p) < 0) awaited[p] = false;  // p gave up its wake channel
          }
          for (int p = 0; p < n; p++) {
            if (awaited[p] && gone.test(p)) throw new PeerExited(p);
          }
        }
        int missing = 0;
        for (boolean a : awaited) if (a) missing++;
        if (missing == 0) break;
        long left = deadlineNanos - now;
        if (left <= 0) throw new IOException("timed out connecting the wake channels (" + missing + " peers missing)");
        s.select(Math.max(1, Math.min(CHECK_MILLIS, left / 1_000_000)));
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
            int p = (Integer) k.attachment();
            c.finishConnect();
            k.cancel();
            hello(c, token);
            awaited[p] = false;
          } else if (k.isReadable()) {
            SocketChannel c = (SocketChannel) k.channel();
            ByteBuffer b = reading.get(c);
            int got = c.read(b);
            if (got < 0) {  // closed before its hello: not a peer
              k.cancel();
              reading.remove(c);
              c.close();
              continue;
            }
            if (b.hasRemaining()) continue;
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
            awaited[from] = false;
          }
        }
      }
      for (SocketChannel c : reading.keySet()) c.close();
    } catch (IOException | RuntimeException e) {
      close();
      throw e;
    } finally {
      listener.close();
    }
    selector = Selector.open();
    for (int p = 0; p < n; p++) {
      if (peers[p] != null) peers[p].register(selector, SelectionKey.OP_READ, p);
    }
  }

  /** Whether this rank can be woken by {@code peer} (their connection exists). */
  boolean connectedTo(int peer) { return peers[peer] != null && !closed; }

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
        do {  // a read that fills less than the sink emptied the socket; a byte left only wakes the next sleep early
          sink.clear();
          got = c.read(sink);
        } while (got == sink.capacity());
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
