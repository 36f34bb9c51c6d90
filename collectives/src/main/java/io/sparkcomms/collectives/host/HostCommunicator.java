package io.sparkcomms.collectives.host;

import io.sparkcomms.collectives.AbstractCommunicator;
import io.sparkcomms.collectives.CommAbortedException;
import io.sparkcomms.collectives.CommException;
import io.sparkcomms.collectives.CommMismatchException;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.Protocol;
import io.sparkcomms.collectives.algo.AlgorithmSelector;
import io.sparkcomms.collectives.algo.Thresholds;
import io.sparkcomms.collectives.liveness.PeerWatch;
import io.sparkcomms.collectives.liveness.ProcessId;
import io.sparkcomms.collectives.lp.BlockQuantizer;
import io.sparkcomms.collectives.plan.BackendOffer;
import io.sparkcomms.collectives.plan.PlannedCall;
import io.sparkcomms.collectives.rendezvous.PairDirectory;
import io.sparkcomms.collectives.rendezvous.Rendezvous;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.Paths;

/**
 * The host shared-memory backend: the DDA algorithms (flat one-shot, tree two-shot, direct-access
 * allGather / reduceScatter / allToAll / broadcast, {@link DdaCollectives}), their FP8 variants
 * ({@link LpCollectives}) and allToAllV ({@link HostAllToAllV}), over a segment in /dev/shm that the
 * ranks of one node map. Ranks may be processes or threads of one JVM. The protocol of each call is
 * {@link AlgorithmSelector}'s, with the host defaults of {@link Thresholds}.
 *
 * <p>Every call: stage this rank's input into its input area, publish a descriptor of the call
 * ({@link CallDescriptor}), pass the first barrier and compare all descriptors (mismatches raise on
 * every rank), then read peers' areas directly ({@link ShmContext}).
 */
public final class HostCommunicator extends AbstractCommunicator {
  private final ShmSegment seg;
  private final ShmSignals signals;
  private final DdaCollectives dda;
  private final LpCollectives lp;
  private final HostAllToAllV allToAllV;
  private volatile boolean aborted;

  /** Where this communicator's segment was made; its children's go there too. */
  private final Path segmentDir;
  private final ShmWake wake;  // null: waits park (one rank, or a rank could not open the channel)

  private HostCommunicator(int rank, int size, CommOptions o, ShmSegment seg, ProcessId[] watched, ShmWake wake, Path dir,
                           PairDirectory pairs) {
    super(rank, size, o, BackendOffer.HOST, pairs);
    this.segmentDir = dir;
    this.seg = seg;
    this.wake = wake;
    this.signals = new ShmSignals(seg, rank, o.timeout(), watched, wake);
    ShmContext x = new ShmContext(seg, signals, rank, size);
    HostReducer reducer = new HostReducer();
    this.dda = new DdaCollectives(x, reducer);
    this.lp = new LpCollectives(x, reducer, new BlockQuantizer(Thresholds.fp8Format(o), Thresholds.lpBlockSize(o)),
        Thresholds.lpOneShotMaxRanks(o));
    this.allToAllV = new HostAllToAllV(x);
  }

  /**
   * Creates the communicator of {@code rv.rank()} among {@code rv.size()} ranks. Collective: every
   * rank must call it. Rank 0 creates the segment; the others map it; rank 0 unlinks the file once
   * all have mapped it (or failed). Rendezvous rounds: the greetings (every rank's process, and
   * rank 0's segment path or its error), then every rank's mapping outcome; after it the ranks
   * connect their wake channels ({@link ShmWake}) directly. A rank that cannot is polled for by its
   * peers instead of waking them.
   */
  public static HostCommunicator create(Rendezvous rv, CommOptions o) {
    return create(rv, o, ShmFiles.baseDirectory());
  }

  /** {@link #create(Rendezvous, CommOptions)} with the segment in {@code dir} instead of /dev/shm. */
  static HostCommunicator create(Rendezvous rv, CommOptions o, Path dir) {
    int n = rv.size();
    int r = rv.rank();
    if (n > ShmSegment.MAX_RANKS) throw new IllegalArgumentException("host backend supports up to " + ShmSegment.MAX_RANKS + " ranks, got " + n);
    long s = Thresholds.stagingBytes(o);
    ProcessId me = ProcessId.current();
    ShmSegment seg = null;
    ShmWake wake = null;
    String err = null;
    if (r == 0) {
      try {
        seg = ShmSegment.create(dir, n, s);  // checks the staging size before any file exists
        if (n == 1) seg.unlink();  // no peer will map it
      } catch (RuntimeException e) {
        err = e.getMessage();
      }
    }
    try {
      // "pid start pid-namespace\n"; rank 0 adds its pair directory + "\n" + its segment path (or its
      // error, which may span lines: it comes last)
      String mine = me.pid() + " " + me.startMillis() + " " + me.pidNamespace() + "\n"
          + (r != 0 ? "" : PairDirectory.fresh(dir).encode() + "\n" + (seg != null ? "OK " + seg.path() : "ERR " + err));
      byte[][] all = rv.allGather(mine.getBytes(StandardCharsets.UTF_8), o.timeout());
      ProcessId[] ids = new ProcessId[n];
      String rank0 = null;
      PairDirectory pairs = null;
      for (int p = 0; p < n; p++) {
        String msg = new String(all[p], StandardCharsets.UTF_8);
        try {
          String[] parts = msg.split("\n", p == 0 ? 3 : 2);
          String[] id = parts[0].split(" ");
          if (id.length != 3) throw new IllegalArgumentException("process id");
          ids[p] = new ProcessId(Long.parseLong(id[0]), Long.parseLong(id[1]), Long.parseLong(id[2]));
          if (p == 0) {
            pairs = PairDirectory.decode(parts[1]);
            rank0 = parts[2];
            if (!rank0.startsWith("OK ") && !rank0.startsWith("ERR ")) throw new IllegalArgumentException("segment");
          }
        } catch (RuntimeException e) {
          throw new CommException("rank " + p + " sent an unreadable greeting (another sparkcomms version?): '"
              + msg.substring(0, Math.min(80, msg.length())) + "'");
        }
      }
      // every rank just answered, so each was alive a moment ago: judge now which peers this process
      // can watch (one that dies from here on is then noticed by the barriers' liveness check)
      ProcessId[] watched = PeerWatch.watchable(ids, r);
      if (rank0.startsWith("ERR ")) throw new CommException("rank 0 could not create the shared-memory segment: " + rank0.substring(4));
      if (r != 0) {
        try {
          // the path is untrusted: only a segment file of this user in this rank's own segment directory is mapped
          seg = ShmSegment.open(dir, Paths.get(rank0.substring(3)), n, s);
        } catch (RuntimeException e) {
          err = e.getMessage();
        }
      }
      if (seg != null && n > 1) {
        try {
          wake = ShmWake.listen(r, n);
          seg.publishWakePort(r, wake.port());
        } catch (IOException | RuntimeException e) {
          seg.publishWakePort(r, -1);
          warnNoWake(r, "cannot listen on loopback: " + e);
        }
      }
      byte[][] status = rv.allGather((err == null ? "OK" : "ERR " + err).getBytes(StandardCharsets.UTF_8), o.timeout());
      for (int p = 0; p < n; p++) {
        String st = new String(status[p], StandardCharsets.UTF_8);
        if (st.startsWith("ERR ")) throw new CommException("rank " + p + " could not map the shared-memory segment: " + st.substring(4));
        if (!st.equals("OK")) throw new CommException("rank " + p + " sent an unreadable mapping status: '" + st.substring(0, Math.min(80, st.length())) + "'");
      }
      if (wake != null) {
        // every rank published its port (or -1: none) before the round above
        ShmSegment s0 = seg;
        try {
          wake.connect(p -> s0.wakePort(p), seg.wakeToken(), System.nanoTime() + o.timeout().toNanos(),
              p -> watched[p] != null && PeerWatch.exited(watched[p]));
        } catch (ShmWake.PeerExited e) {
          throw new CommException("communicator creation failed on rank " + r + ": " + e.getMessage());
        } catch (IOException | RuntimeException e) {
          // a rank without a wake channel still works: its peers poll for it instead of sleeping
          seg.publishWakePort(r, -1);
          wake = null;
          warnNoWake(r, e.getMessage());
        }
      }
      return new HostCommunicator(r, n, o, seg, watched, wake, dir, pairs);
    } catch (RuntimeException e) {
      if (wake != null) wake.close();
      if (seg != null) seg.close();
      throw e;
    } finally {
      // Every rank has mapped the file (or failed): remove its name so nothing is left behind. The last
      // peer to map it has removed it already unless a peer failed.
      if (r == 0 && seg != null) seg.unlink();
    }
  }

  @Override protected void useCallTimeout(java.time.Duration t) { signals.useTimeout(t); }

  @Override protected HostCommunicator createChild(Rendezvous rv) { return create(rv, options, segmentDir); }

  /** The segment's file name (removed once every rank mapped it). */
  Path segmentPath() { return seg.path(); }

  @Override public String backendName() { return "host"; }

  @Override public void abort(String reason) {
    aborted = true;
    if (!isClosed()) seg.abort(rank, reason);
    abortChildren(reason);
    if (wake != null) {  // sleepers here and on the peers see the abort now, not at their next check
      wake.wakeAll();
      wake.interrupt();
    }
  }

  @Override public boolean isAborted() { return aborted || (!isClosed() && seg.isAborted()); }

  @Override protected String abortReason() { return isClosed() ? super.abortReason() : seg.abortReason(); }

  @Override protected void release() {
    seg.markDetached(rank); // peers still waiting for this rank fail now instead of at their timeout
    if (wake != null) {
      wake.wakeAll();
      wake.close();
    }
    seg.close();
  }

  // ------------------------------------------------------------------ dispatch

  @Override protected Protocol execute(PlannedCall plan) {
    if (aborted || seg.isAborted()) {
      aborted = true;
      throw new CommAbortedException("communicator aborted: " + seg.abortReason());
    }
    String name = plan.kind().apiName();
    if (plan.problem() == null) {
      String layout = HostAliasing.problem(plan, rank);
      if (layout != null) plan = plan.withProblem(layout);
    }
    try {
      // A call with a local problem tells its peers with the placeholder protocol FLAT; its tensors are unused.
      Protocol p = plan.problem() == null ? AlgorithmSelector.choose(plan, size, options) : Protocol.FLAT;
      HostTensor in = plan.problem() == null ? (HostTensor) plan.in() : null;
      HostTensor out = plan.problem() == null ? (HostTensor) plan.out() : null;
      HostCall c = new HostCall(plan, p, in, out);
      boolean fp8 = p == Protocol.LP;
      switch (plan.kind()) {
        case ALL_REDUCE:
          if (fp8) lp.allReduce(c);
          else if (p == Protocol.TREE) dda.treeAllReduce(c);
          else dda.flatAllReduce(c);
          break;
        case ALL_GATHER:
          if (fp8) lp.allGather(c); else dda.allGather(c);
          break;
        case REDUCE_SCATTER:
        case ALL_TO_ALL:
          if (fp8) lp.scatterLike(c); else dda.scatterLike(c);
          break;
        case ALL_TO_ALL_V:
          allToAllV.run(c);
          break;
        case BROADCAST:
          dda.broadcast(c);
          break;
        case BARRIER:
          dda.barrier(c);
          break;
        case REDUCE:
          dda.reduce(c);
          break;
        case GATHER:
          dda.gather(c);
          break;
        case SCATTER:
          dda.scatter(c);
          break;
        case ALL_GATHER_V:
          dda.allGatherV(c);
          break;
        case REDUCE_SCATTER_V:
          dda.reduceScatterV(c);
          break;
        default:
          throw new AssertionError(plan.kind());
      }
      return p;
    } catch (CommMismatchException e) {
      throw e; // every rank raised at the same call; the communicator stays usable
    } catch (IllegalArgumentException e) {
      if (plan.problem() != null) throw e; // this rank's own arguments, reported to every rank at the first barrier
      abort(name + " failed on rank " + rank + ": " + e);
      throw new CommException(name + " failed on rank " + rank + ": " + e, e);
    } catch (CommException e) {
      aborted = true;
      throw e;
    } catch (RuntimeException e) {
      abort(name + " failed on rank " + rank + ": " + e);
      throw new CommException(name + " failed on rank " + rank + ": " + e, e);
    } catch (Error e) {
      // e.g. the InternalError of a SIGBUS in a mapped buffer, or an OutOfMemoryError: peers must not wait
      // for this rank until their timeout, so abort first; the Error itself propagates unchanged
      try {
        abort(name + " failed on rank " + rank + ": " + e);
      } catch (Throwable t) {
        e.addSuppressed(t);
      }
      throw e;
    }
  }

  private static void warnNoWake(int rank, String why) {
    System.getLogger(HostCommunicator.class.getName()).log(System.Logger.Level.WARNING, "rank " + rank
        + ": no wake channel (" + why + "); its peers poll for its arrivals instead of sleeping until woken");
  }
}
