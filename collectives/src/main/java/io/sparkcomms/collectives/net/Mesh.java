package io.sparkcomms.collectives.net;

import io.sparkcomms.collectives.CommAbortedException;
import io.sparkcomms.collectives.CommException;
import io.sparkcomms.collectives.CommTimeoutException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.Map;
import java.util.function.Consumer;

/**
 * The ranks of one communicator over a {@link Transport}: framed messages on numbered channels,
 * taken in call order with a bounded wait, and an abort that reaches every rank.
 *
 * <p>Frame (big-endian): magic, world id (8 bytes, chosen by rank 0 at creation), receiver rank,
 * sender rank, channel, kind (data or abort), sequence number (the call it belongs to), payload
 * length, payload. The receiver rank lets several ranks of one process share a transport.
 * Every inbound frame is untrusted: a frame whose magic, sender, channel, kind or length is wrong is
 * dropped and counted; a sender that leaves more than {@link #MAX_QUEUED} frames or
 * {@link #MAX_QUEUED_BYTES} bytes unconsumed aborts the communicator (no memory grows without bound
 * on a peer's say-so). Frames from
 * one sender on one channel are taken in sequence order: an older frame (a failed call's notice on
 * a channel that call did not use) is discarded, a newer one means the sender skipped this call there,
 * which fails the call.
 */
public final class Mesh implements AutoCloseable {
  static final int MAGIC = 0x53434d31;  // "SCM1"
  /** Bytes before the payload. */
  public static final int HEADER_BYTES = 34;
  /** Unconsumed frames one sender may leave on one channel. */
  public static final int MAX_QUEUED = 65536;
  /** Unconsumed payload bytes one sender may leave, all channels together. */
  public static final long MAX_QUEUED_BYTES = 4L << 30;
  /** Longest abort reason carried. */
  static final int MAX_REASON_BYTES = 1024;
  static final byte DATA = 1, ABORT = 2;
  /** Channels: a node's rendezvous, the node leaders, the same-local-rank shard rails, every rank, point-to-point. */
  public static final byte RENDEZVOUS = 1, LEADERS = 2, SHARDS = 3, WORLD = 4, P2P = 5;
  private static final byte LAST_CHANNEL = P2P;

  private final Transport transport;
  private final long worldId;
  private final int rank;
  private final String[] addresses;
  private final Map<Integer, ArrayDeque<Frame>> inbox = new HashMap<>();
  /** Unconsumed payload bytes by sender (under the inbox lock). */
  private final long[] queuedBytes;
  private volatile String abortReason;
  private volatile Consumer<String> onAbort = r -> {};
  private volatile boolean closed;

  private record Frame(long seq, ByteBuffer payload) {}

  /** Rank {@code rank} of {@code addresses.length} ranks; attaches to {@code transport} under {@code worldId}. */
  public Mesh(Transport transport, long worldId, int rank, String[] addresses) {
    if (rank < 0 || rank >= addresses.length) throw new IllegalArgumentException("rank " + rank + " outside 0.." + (addresses.length - 1));
    this.transport = transport;
    this.worldId = worldId;
    this.rank = rank;
    this.addresses = addresses.clone();
    this.queuedBytes = new long[addresses.length];
    transport.attach(this);
  }

  public int rank() { return rank; }

  public int size() { return addresses.length; }

  public long worldId() { return worldId; }

  static long worldIdOf(ByteBuffer frame) { return frame.getLong(frame.position() + 4); }

  static int receiverOf(ByteBuffer frame) { return frame.getInt(frame.position() + 12); }

  /** Called with the reason when a peer aborts this communicator (from a transport thread). */
  public void onAbort(Consumer<String> listener) { this.onAbort = listener; }

  public boolean isAborted() { return abortReason != null; }

  public String abortReason() { return abortReason; }

  /** Sends {@code payload} (from its position) to rank {@code to} on {@code channel} as call {@code seq}. */
  public void send(int to, byte channel, long seq, ByteBuffer payload) {
    if (abortReason != null) throw new CommAbortedException("rank " + rank + ": communicator aborted: " + abortReason);
    try {
      if (payload.remaining() > Integer.MAX_VALUE - HEADER_BYTES) throw new IllegalArgumentException("a message of " + payload.remaining() + " bytes");
      transport.send(addresses[to], frame(to, DATA, channel, seq, payload));
    } catch (IOException | RuntimeException e) {
      String why = "rank " + rank + " could not send to rank " + to + " at " + addresses[to] + ": " + e;
      abort(why);
      throw new CommException(why, e);
    }
  }

  /**
   * The payload rank {@code from} sent on {@code channel} for call {@code seq}, waiting until
   * {@code deadlineNanos} ({@link System#nanoTime}). Raises {@link CommTimeoutException} naming the
   * late rank, {@link CommAbortedException} once any rank aborted.
   */
  public ByteBuffer take(int from, byte channel, long seq, long deadlineNanos) {
    int key = channel * addresses.length + from;
    synchronized (inbox) {
      while (true) {
        if (abortReason != null) throw new CommAbortedException("rank " + rank + ": communicator aborted: " + abortReason);
        ArrayDeque<Frame> q = inbox.get(key);
        while (q != null && !q.isEmpty() && q.peekFirst().seq() < seq) queuedBytes[from] -= q.pollFirst().payload().remaining();
        if (q != null && !q.isEmpty()) {
          Frame f = q.peekFirst();
          if (f.seq() > seq) {
            throw new CommException("rank " + rank + ": rank " + from + " sent call " + f.seq() + " on channel " + channel
                + " while this rank is at call " + seq + " (the ranks made different calls)");
          }
          q.pollFirst();
          queuedBytes[from] -= f.payload().remaining();
          return f.payload();
        }
        long left = deadlineNanos - System.nanoTime();
        if (left <= 0) {
          throw new CommTimeoutException("rank " + rank + ": rank " + from + " did not arrive at call " + seq + " (channel " + channel
              + ") within the timeout (it is late, died, or made a different call)");
        }
        try {
          inbox.wait(Math.max(1, Math.min(left / 1_000_000, 100)));
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new CommException("rank " + rank + ": interrupted while waiting for rank " + from);
        }
      }
    }
  }

  /** Aborts on this rank and tells every other rank (best effort: one that cannot be reached times out). */
  public void abort(String reason) {
    if (!markAborted(reason) || closed) return;
    notifyPeers(reason);
  }

  /** Records the first abort's reason and wakes every waiting take; whether this was the first. */
  private boolean markAborted(String reason) {
    synchronized (inbox) {
      boolean first = abortReason == null;
      if (first) abortReason = reason;
      inbox.notifyAll();
      return first;
    }
  }

  /**
   * Sends the abort to every other rank from a thread of its own: a rank on a node that is gone can
   * hold a connection attempt for the transport's connect timeout, which must not delay this rank's
   * error or the notices to the others.
   */
  private void notifyPeers(String reason) {
    byte[] why = reason.getBytes(StandardCharsets.UTF_8);
    ByteBuffer p = ByteBuffer.wrap(why, 0, Math.min(why.length, MAX_REASON_BYTES));
    for (int r = 0; r < addresses.length; r++) {
      if (r == rank) continue;
      int to = r;
      Thread t = new Thread(() -> {
        try {
          transport.send(addresses[to], frame(to, ABORT, WORLD, 0, p.duplicate()));
        } catch (IOException | RuntimeException e) {
          // unreachable: that rank's own waits time out
        }
      }, "sparkcomms-abort-notice-" + rank + "-to-" + to);
      t.setDaemon(true);
      t.start();
    }
  }

  /** One inbound frame of this world (from {@link Transport#deliver}). */
  void deliver(ByteBuffer m) {
    int at = m.position();
    int to = m.getInt(at + 12);
    int from = m.getInt(at + 16);
    byte channel = m.get(at + 20);
    byte kind = m.get(at + 21);
    long seq = m.getLong(at + 22);
    int len = m.getInt(at + 30);
    if (m.getInt(at) != MAGIC || to != rank || from < 0 || from >= addresses.length || from == rank || channel < 1 || channel > LAST_CHANNEL
        || (kind != DATA && kind != ABORT) || len < 0 || len != m.remaining() - HEADER_BYTES || seq < 0) {
      transport.countDropped();
      return;
    }
    ByteBuffer payload = m.duplicate();
    payload.position(at + HEADER_BYTES);
    payload = payload.slice();
    if (kind == ABORT) {
      byte[] why = new byte[Math.min(len, MAX_REASON_BYTES)];
      payload.get(why);
      String reason = "rank " + from + " aborted: " + new String(why, StandardCharsets.UTF_8);
      if (markAborted(reason)) onAbort.accept(reason);
      return;
    }
    String flood = null;
    synchronized (inbox) {
      ArrayDeque<Frame> q = inbox.computeIfAbsent(channel * addresses.length + from, k -> new ArrayDeque<>());
      if (q.size() >= MAX_QUEUED || queuedBytes[from] + len > MAX_QUEUED_BYTES) {
        flood = "rank " + from + " left more than " + MAX_QUEUED + " messages or " + MAX_QUEUED_BYTES + " bytes unconsumed";
      } else {
        q.addLast(new Frame(seq, payload));
        queuedBytes[from] += len;
      }
      inbox.notifyAll();
    }
    if (flood != null) {
      abort(flood);
      onAbort.accept(flood);
    }
  }

  private ByteBuffer frame(int to, byte kind, byte channel, long seq, ByteBuffer payload) {
    ByteBuffer f = ByteBuffer.allocate(HEADER_BYTES + payload.remaining());
    f.putInt(MAGIC).putLong(worldId).putInt(to).putInt(rank).put(channel).put(kind).putLong(seq).putInt(payload.remaining());
    f.put(payload.duplicate());
    return f.flip();
  }

  @Override public void close() {
    closed = true;
    transport.detach(this);
  }
}
