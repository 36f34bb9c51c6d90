package io.sparkcomms.collectives;

import io.sparkcomms.collectives.BatchSendRecv.Transfer;
import io.sparkcomms.collectives.rendezvous.FileRendezvous;
import io.sparkcomms.collectives.rendezvous.PairDirectory;
import io.sparkcomms.collectives.rendezvous.Rendezvous;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Function;

/**
 * send, recv and batches of them, over one channel per peer: a two-rank communicator of the parent's
 * backend and options (the pair's lower rank is its rank 0), built when the pair first needs it and
 * kept until the parent closes. A send is a broadcast from the sender on the channel, a recv the same
 * broadcast from the peer, so each transfer carries the channel's call check: a recv whose dtype or
 * count differs from the send, or two ranks that both send (or both receive), fail on both ranks with
 * {@link CommMismatchException}; a transfer whose partner never comes times out on the channel.
 *
 * <p>The channel is built without a collective of the parent: the two ranks meet in the pair's
 * directory ({@link PairDirectory}, known to the group only), the lower rank creating it and the
 * higher one waiting for it, both within the timeout; after the channel's first barrier neither reads
 * the directory again and the lower rank removes it. A channel that could not be built stays failed:
 * later transfers with that peer raise at once, on both ranks alike.
 *
 * <p>A batch on the host backend runs the transfers with each peer on a thread of its own, so a batch
 * never waits on another peer's transfers (the cycle of sends that deadlocks blocking calls cannot
 * form). On the GPU backend it builds the channels it lacks at once, then runs the peers one after the
 * other, in an order of the pairs that every rank shares, which cannot deadlock either: a process's
 * transfers on several streams at once are kernels that spin while they wait for their peers, and
 * such kernels of one process can wait on each other (a batch with 7 peers at 8 rank processes on one
 * H200 timed out when run concurrently, docs/architecture.md). Async transfers are calls of the
 * parent in its order, one after another, as every async call: an exchange is a batch. With one peer the order is fixed on both sides: first the transfers from the lower rank to the higher, then
 * the others, each direction in the order they were added; so both ranks run the i-th send of one
 * side against the i-th recv of the other.
 */
final class PointToPoint {
  private final int rank;
  private final int size;
  private final Duration timeout;
  private final PairDirectory pairs;
  private final Function<Rendezvous, AbstractCommunicator> create;
  /** Per peer: the channel (read without a lock by {@link #abort}; built and set under {@code locks[peer]}). */
  private final java.util.concurrent.atomic.AtomicReferenceArray<AbstractCommunicator> channels;
  /** Per peer: why its channel could not be built (under {@code locks[peer]}). */
  private final String[] failed;
  private final Object[] locks;
  private volatile boolean closed;
  /** Why the parent aborted (null: it did not): every later transfer raises it. */
  private volatile String aborted;
  private ExecutorService batchThreads;  // created on the first batch with two or more peers

  PointToPoint(int rank, int size, Duration timeout, PairDirectory pairs, Function<Rendezvous, AbstractCommunicator> create) {
    this.rank = rank;
    this.size = size;
    this.timeout = timeout;
    this.pairs = pairs;
    this.create = create;
    this.channels = new java.util.concurrent.atomic.AtomicReferenceArray<>(size);
    this.failed = new String[size];
    this.locks = new Object[size];
    for (int p = 0; p < size; p++) locks[p] = new Object();
  }

  /** Runs one transfer, its waits bounded by {@code t}; returns the channel's protocol. */
  Protocol run(Transfer op, Duration t) {
    return runWithPeer(op.peer(), List.of(op), t);
  }

  /**
   * Runs a batch (ops already checked: every peer valid); returns the protocol of a transfer that ran.
   * {@code concurrent}: each peer's transfers on a thread of their own; otherwise one peer after the
   * other, in the order of the pairs (lower rank, then higher) that every rank uses, which cannot
   * deadlock either (the smallest pair not done yet has both its ranks waiting in it).
   */
  Protocol runBatch(List<Transfer> ops, boolean concurrent, Duration t) {
    Map<Integer, List<Transfer>> byPeer = new java.util.TreeMap<>(
        java.util.Comparator.<Integer>comparingInt(p -> Math.min(rank, p)).thenComparingInt(p -> Math.max(rank, p)));
    for (Transfer op : ops) byPeer.computeIfAbsent(op.peer(), k -> new ArrayList<>()).add(op);
    if (byPeer.size() == 1) {
      Map.Entry<Integer, List<Transfer>> e = byPeer.entrySet().iterator().next();
      return runWithPeer(e.getKey(), ordered(e.getKey(), e.getValue()), t);
    }
    if (!concurrent) {
      // the channels first, all at once (host-side work: no kernel runs while a rank waits for its
      // peer there), so that no build waits for this rank's transfers with earlier pairs
      List<java.util.concurrent.Callable<Protocol>> builds = new ArrayList<>();
      for (int peer : byPeer.keySet()) {
        builds.add(() -> {
          channel(peer, t);
          return null;
        });
      }
      all(builds, t, byPeer.size());
      Protocol ran = null;
      for (Map.Entry<Integer, List<Transfer>> e : byPeer.entrySet()) ran = runWithPeer(e.getKey(), ordered(e.getKey(), e.getValue()), t);
      return ran;
    }
    List<java.util.concurrent.Callable<Protocol>> perPeer = new ArrayList<>();
    for (Map.Entry<Integer, List<Transfer>> e : byPeer.entrySet()) {
      List<Transfer> seq = ordered(e.getKey(), e.getValue());
      perPeer.add(() -> runWithPeer(e.getKey(), seq, t));
    }
    return all(perPeer, t, ops.size());
  }

  /**
   * Runs {@code tasks} on threads of their own and waits for all; raises the first failure (the others
   * suppressed into it). Returns a task's result. Every wait inside a task is bounded by {@code t}, so
   * the bound here ({@code t} per step plus slack) is a backstop; a task still running then is
   * interrupted, and the next transfer of its loop refuses to start.
   */
  private Protocol all(List<java.util.concurrent.Callable<Protocol>> tasks, Duration t, int steps) {
    ExecutorService threads = threads();
    List<Future<Protocol>> running = new ArrayList<>();
    for (java.util.concurrent.Callable<Protocol> task : tasks) running.add(threads.submit(task));
    Protocol ran = null;
    RuntimeException first = null;
    // every transfer's waits are bounded by the channel timeout (creation too): this bound is a backstop
    long deadline = System.nanoTime() + t.multipliedBy(2L * steps + 4).toNanos();
    for (Future<Protocol> f : running) {
      try {
        ran = f.get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
      } catch (ExecutionException e) {
        RuntimeException re = e.getCause() instanceof RuntimeException r ? r : new CommException("batch: " + e.getCause(), e.getCause());
        if (first == null) first = re;
        else first.addSuppressed(re);
      } catch (TimeoutException e) {
        f.cancel(true);
        RuntimeException re = new CommTimeoutException("batch: rank " + rank + "'s transfers did not finish within " + t.multipliedBy(2L * steps + 4));
        if (first == null) first = re;
        else first.addSuppressed(re);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new CommException("interrupted while waiting for a batch of sends and receives", e);
      }
    }
    if (first != null) throw first;
    return ran;
  }

  /** The transfers with {@code peer} in the order both ranks use: lower rank to higher first, each direction as added. */
  private List<Transfer> ordered(int peer, List<Transfer> ops) {
    boolean lower = rank < peer;
    List<Transfer> seq = new ArrayList<>(ops.size());
    for (Transfer op : ops) if (op.send() == lower) seq.add(op);   // from the lower rank to the higher
    for (Transfer op : ops) if (op.send() != lower) seq.add(op);
    return seq;
  }

  /** Runs {@code seq} in order on the channel to {@code peer}, every wait bounded by {@code t}. */
  private Protocol runWithPeer(int peer, List<Transfer> seq, Duration t) {
    AbstractCommunicator channel = channel(peer, t);
    Communicator ch = t.equals(timeout) ? channel : channel.withOptions(CallOptions.timeout(t));
    int me = rank < peer ? 0 : 1, them = 1 - me;
    Protocol ran = null;
    for (Transfer op : seq) {
      refuseIfAborted();
      if (Thread.currentThread().isInterrupted()) throw new CommException(context(op) + ": interrupted (the batch gave up)");
      try {
        ch.broadcast(op.tensor(), op.tensor(), op.send() ? me : them);
        ran = channel.lastProtocol();
      } catch (CommMismatchException e) {
        throw new CommMismatchException(context(op) + ": " + e.getMessage() + channelRanks(peer)
            + "; a send there is a broadcast from the sender: its partner must recv the same dtype and count", e);
      } catch (CommTimeoutException e) {
        throw new CommTimeoutException(context(op) + ": " + e.getMessage() + channelRanks(peer) + "; does rank " + peer + " make the matching "
            + (op.send() ? "recv" : "send") + "? A failed transfer leaves the channel to rank " + peer + " aborted", e);
      } catch (CommAbortedException e) {
        throw new CommAbortedException(context(op) + ": " + e.getMessage() + channelRanks(peer), e);
      } catch (CommException e) {
        throw new CommException(context(op) + ": " + e.getMessage() + channelRanks(peer), e);
      } catch (IllegalArgumentException e) {
        throw new IllegalArgumentException(context(op) + ": " + e.getMessage(), e);
      }
    }
    return ran;
  }

  /** The channel's rank numbers in the parent's, for its messages. */
  private String channelRanks(int peer) {
    return " (on the channel, rank 0 is rank " + Math.min(rank, peer) + " and rank 1 is rank " + Math.max(rank, peer) + ")";
  }

  /** Raises {@link CommAbortedException} with the reason once the parent aborted. */
  void refuseIfAborted() {
    String why = aborted;
    if (why != null) throw new CommAbortedException("rank " + rank + ": the communicator was aborted: " + why);
  }

  private String context(Transfer op) {
    return (op.send() ? "send to rank " : "recv from rank ") + op.peer() + " (rank " + rank + ", point-to-point channel of ranks "
        + Math.min(rank, op.peer()) + " and " + Math.max(rank, op.peer()) + ")";
  }

  /** The channel to {@code peer}, built on first use (the peer builds it at the same time). */
  private AbstractCommunicator channel(int peer, Duration t) {
    synchronized (locks[peer]) {
      if (closed) throw new IllegalStateException("communicator (rank " + rank + ") is closed");
      refuseIfAborted();
      AbstractCommunicator have = channels.get(peer);
      if (have != null) return have;
      if (failed[peer] != null) {
        throw new CommException("the point-to-point channel of ranks " + Math.min(rank, peer) + " and " + Math.max(rank, peer)
            + " could not be built earlier (" + failed[peer] + "); transfers with rank " + peer + " are refused");
      }
      try {
        AbstractCommunicator made = build(peer, t);
        channels.set(peer, made);
        if (aborted != null) made.abort(aborted);  // an abort that came while it was built
        refuseIfAborted();
        return made;
      } catch (RuntimeException e) {
        failed[peer] = e.getMessage();
        throw e;
      }
    }
  }

  /** Builds the channel to {@code peer}, every wait bounded by {@code t} (the channel keeps the parent's timeout for its calls). */
  private AbstractCommunicator build(int peer, Duration t) {
    int lo = Math.min(rank, peer), hi = Math.max(rank, peer);
    String pair = "the point-to-point channel of ranks " + lo + " and " + hi;
    long deadline = System.nanoTime() + t.toNanos();
    Path dir = null;
    AbstractCommunicator ch = null;
    try {
      if (rank == lo) {
        try {
          dir = pairs.create(lo, hi);
        } catch (IOException e) {
          throw new CommException("rank " + rank + " cannot build " + pair + ": " + e.getMessage(), e);
        }
      } else {
        awaitDirectory(lo, hi, deadline, pair, t);
      }
      ch = create.apply(bounded(new FileRendezvous(pairs.of(lo, hi), rank == lo ? 0 : 1, 2), t));
      (t.equals(timeout) ? ch : ch.withOptions(CallOptions.timeout(t))).barrier();  // after it neither rank reads the directory again
      AbstractCommunicator made = ch;
      ch = null;
      return made;
    } catch (io.sparkcomms.collectives.rendezvous.RendezvousException e) {
      throw new CommTimeoutException("rank " + rank + " could not build " + pair + ": " + e.getMessage()
          + " (does rank " + peer + " make the matching send or recv?)", e);
    } catch (IllegalArgumentException e) {
      // FileRendezvous refused the directory (not this user's, a link, writable by others)
      throw new CommException("rank " + rank + " cannot build " + pair + ": " + e.getMessage(), e);
    } finally {
      if (ch != null) ch.close();
      if (dir != null) remove(dir);
    }
  }

  /** {@code rv} whose rounds wait {@code t}: the building call's timeout (the communicator's, or the call's own). */
  private static Rendezvous bounded(Rendezvous rv, Duration t) {
    return new Rendezvous() {
      @Override public int rank() { return rv.rank(); }
      @Override public int size() { return rv.size(); }
      @Override public byte[][] allGather(byte[] mine, Duration timeout) { return rv.allGather(mine, t); }
      @Override public String describe() { return rv.describe(); }
      @Override public void close() { rv.close(); }
    };
  }

  /** The higher rank: waits until the lower one has created the pair's directory. */
  private void awaitDirectory(int lo, int hi, long deadline, String pair, Duration t) {
    long sleepMicros = 200;
    while (!pairs.exists(lo, hi)) {
      if (System.nanoTime() > deadline) {
        throw new CommTimeoutException("rank " + rank + " could not build " + pair + ": rank " + lo + " did not open it within "
            + t.toMillis() + " ms (does rank " + lo + " make the matching send or recv?)");
      }
      if (Thread.currentThread().isInterrupted()) throw new CommException("rank " + rank + " was interrupted while waiting for " + pair);
      refuseIfAborted();
      java.util.concurrent.locks.LockSupport.parkNanos(sleepMicros * 1000);
      sleepMicros = Math.min(sleepMicros * 2, 20_000);
    }
  }

  /** Removes the pair's directory; a second pass takes a file the peer wrote during the first. */
  private static void remove(Path dir) {
    IOException last = null;
    for (int pass = 0; pass < 2; pass++) {
      try (var s = Files.list(dir)) {
        for (Path f : (Iterable<Path>) s::iterator) Files.deleteIfExists(f);
        Files.deleteIfExists(dir);
        return;
      } catch (java.nio.file.NoSuchFileException e) {
        return;
      } catch (IOException e) {
        last = e;
      }
    }
    System.getLogger(PointToPoint.class.getName()).log(System.Logger.Level.WARNING, "could not remove " + dir + ": " + last);
  }

  private synchronized ExecutorService threads() {
    if (batchThreads == null) {
      batchThreads = Executors.newCachedThreadPool(r -> {
        Thread t = new Thread(r, "sparkcomms-p2p-rank-" + rank);
        t.setDaemon(true);
        return t;
      });
    }
    return batchThreads;
  }

  /** Aborts every channel (the parent aborted); later transfers raise. Never blocks. */
  void abort(String reason) {
    aborted = reason;
    for (int p = 0; p < size; p++) {
      AbstractCommunicator ch = channels.get(p);
      if (ch == null) continue;
      try {
        ch.abort(reason);
      } catch (RuntimeException e) {
        // a channel closed meanwhile has nothing left to stop
      }
    }
  }

  /** Closes every channel (the parent closed; no transfer runs). */
  void close() {
    closed = true;
    synchronized (this) {
      if (batchThreads != null) batchThreads.shutdownNow();
    }
    for (int p = 0; p < size; p++) {
      synchronized (locks[p]) {
        AbstractCommunicator ch = channels.getAndSet(p, null);
        if (ch != null) ch.close();
      }
    }
  }
}
