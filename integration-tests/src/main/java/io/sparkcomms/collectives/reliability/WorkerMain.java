package io.sparkcomms.collectives.reliability;

import io.sparkcomms.collectives.Algorithm;
import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.CollectiveChecker;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.Comms;
import io.sparkcomms.collectives.host.HostCommunicator;
import io.sparkcomms.collectives.rendezvous.FileRendezvous;
import io.sparkcomms.collectives.rendezvous.Rendezvous;
import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.SplittableRandom;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.locks.LockSupport;

/**
 * A long-lived rank process for fault-injection trials: JVM start-up is paid once, and every trial
 * builds a fresh communicator from a fresh rendezvous directory. Commands on stdin, one per line:
 *
 * <pre>
 * RUN id dir rank size KIND ALGO seed timeoutMs stagingBytes maxElems calls
 *     KIND: ALL_REDUCE ALL_GATHER REDUCE_SCATTER ALL_TO_ALL ALL_TO_ALL_V BROADCAST BARRIER; calls &lt; 0: until failure
 * CLOSE id   (read while a RUN is going on) the running trial {@code id} closes its communicator before
 *            its next call and stops calling: a rank that detaches while its peers still call
 * CORRUPT id peer value atCall delayMicros
 *            (sent before or during RUN id) when trial {@code id} is about to make call {@code atCall}, a
 *            helper thread of this process sleeps {@code delayMicros}, then overwrites with {@code value} the
 *            barrier flag that rank {@code peer} reads for this rank's arrivals (host: the segment's slot
 *            where this rank signals {@code peer}, by reflection, see {@link Internals}; GPU: every block's
 *            flag word of this rank in {@code peer}'s signal buffer, {@code sc_debug_corrupt_flag}), while
 *            the RUN thread keeps calling; the RUN waits for the helper before it ends (prints DONE / FAIL)
 *            or closes, so the write always lands before this rank's communicator is closed
 * WARM       GPU backend: load the library and create a context on every GPU now (pre-started spares
 *            pay the CUDA start-up before they are needed); host backend: nothing
 * RES id     GPU backend: print what this process still holds (see RES below); host backend: nothing
 * EXIT
 * </pre>
 *
 * Events on stdout: {@code READY pid}, {@code SEG id path} (the segment rank 0 published),
 * {@code CREATED id ok prevclose ms} (ms: how long this process's previous communicator close took, -1 if none), {@code STREAM id first-call} (right before the first collective),
 * {@code CALL id i} (right before checked call i, from 0 on: its inputs, the collective, its check; flushed
 * before the call starts, so a parent that read it knows this rank had entered call i), {@code WRONG id detail},
 * {@code CLOSING id calls at NANOS} and {@code CLOSED id calls} (around the close a CLOSE asked for;
 * NANOS: System.nanoTime just before the close),
 * {@code CORRUPTED id ok at nanos calls i peer p value v} (the helper's write; nanos: System.nanoTime()
 * right before it, i: the RUN's call index then) or {@code CORRUPTED id failed: ...},
 * {@code ALGOS id calls FLAT=n LP=n ...} (calls completed, by protocol), {@code DONE id calls},
 * {@code FAIL id Exception message}; GPU backend, at the start of every RUN and for RES:
 * {@code RES id comms ipcMappings allocations} (sc_live_resources: what the process still holds, e.g.
 * from the trial before; all three must be 0), and {@code WARM ms}. RUN, WARM, RES and EXIT run in
 * order on the main thread; CLOSE and CORRUPT are recorded by the stdin reader and acted on by the RUN.
 * The process exits when its parent dies or stdin closes, so a crashed runner leaves no workers.
 */
public final class WorkerMain {
  private WorkerMain() {}

  private static PrintStream out;

  /** System property selecting the workers' backend: host (default) or gpu (device = rank % GPUs). */
  public static final String BACKEND_PROPERTY = "sparkcomms.fi.backend";
  private static final boolean GPU = "gpu".equals(System.getProperty(BACKEND_PROPERTY));
  /** System property: "false" builds GPU communicators without the vendor (NCCL/RCCL) communicator. */
  public static final String VENDOR_PROPERTY = "sparkcomms.fi.vendor";
  private static final boolean VENDOR = !"false".equals(System.getProperty(VENDOR_PROPERTY));
  /**
   * System property: host backend, the directory for the segments ({@link Internals#createHost}) instead
   * of the default (/dev/shm); a test that owns the directory knows every file in it is its own.
   */
  public static final String SEGMENT_DIR_PROPERTY = "sparkcomms.fi.segmentDir";
  private static final String SEGMENT_DIR = System.getProperty(SEGMENT_DIR_PROPERTY);

  public static void main(String[] args) throws Exception {
    out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
    startOrphanWatchdog();
    out.println("READY " + ProcessHandle.current().pid());
    BlockingQueue<String> commands = new LinkedBlockingQueue<>();
    Thread reader = new Thread(() -> {
      try (BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
        for (String line; (line = in.readLine()) != null; ) {
          String l = line.trim();
          if (l.startsWith("CLOSE ")) closeRequest = l.substring(6).trim();
          else if (l.startsWith("CORRUPT ")) corruptRequest = Corrupt.parse(l);
          else commands.add(l);
        }
      } catch (java.io.IOException e) {
        // stdin gone: exit below
      }
      commands.add("EXIT");
    }, "stdin-reader");
    reader.setDaemon(true);
    reader.start();
    while (true) {
      String[] a = commands.take().split(" ");
      if (a[0].equals("EXIT")) break;
      if (a[0].equals("RUN")) run(a);
      else if (a[0].equals("WARM")) warm();
      else if (a[0].equals("RES") && a.length > 1 && GPU) printResources(a[1]);
    }
    System.exit(0);
  }

  /** The trial id whose communicator is to be closed before its next call (CLOSE id). */
  private static volatile String closeRequest;

  /** A CORRUPT request: see the class comment. */
  private record Corrupt(String id, int peer, long value, long atCall, long delayMicros) {
    static Corrupt parse(String line) {
      String[] w = line.trim().split(" +");
      return new Corrupt(w[1], Integer.parseInt(w[2]), Long.parseLong(w[3]), Long.parseLong(w[4]), Long.parseLong(w[5]));
    }
  }

  /** The latest CORRUPT request (for the trial it names). */
  private static volatile Corrupt corruptRequest;
  /** The RUN's current call index (read by the corrupting helper for its CORRUPTED line). */
  private static volatile long callIndex;
  /** Guards {@link #live}: the helper writes only while holding it and while {@code live} is its communicator. */
  private static final java.util.concurrent.locks.ReentrantLock COMM_LOCK = new java.util.concurrent.locks.ReentrantLock();
  /** The running trial's communicator, until it is about to be closed. Written under {@link #COMM_LOCK}. */
  private static volatile Communicator live;

  /** GPU backend: loads the library and creates a context on every device (a spare then starts trials sooner). */
  private static void warm() {
    if (!GPU) return;
    long t0 = System.nanoTime();
    try {
      int n = gpuCount();
      for (int d = 0; d < n; d++) {
        io.sparkcomms.collectives.gpu.DeviceBuffer.allocate(io.sparkcomms.collectives.DataType.INT64, 32, d).close();
      }
      out.println("WARM " + (System.nanoTime() - t0) / 1_000_000);
    } catch (Throwable t) {
      out.println("WARM failed: " + String.valueOf(t.getMessage()).replace('\n', ' '));
    }
  }

  /** GPU backend: what this process still holds (communicators, peer IPC mappings, device allocations). */
  private static void printResources(String id) {
    long[] res = new long[3];
    io.sparkcomms.nativeapi.GpuLibrary.require();
    io.sparkcomms.nativeapi.SparkCommsNative.sc_live_resources(res);
    out.println("RES " + id + " " + res[0] + " " + res[1] + " " + res[2]);
  }

  /** Halts when the parent process is gone (a worker blocked in a trial does not read stdin). */
  static void startOrphanWatchdog() {
    ProcessHandle parent = ProcessHandle.current().parent().orElse(null);
    if (parent == null) return;
    Thread t = new Thread(() -> {
      while (parent.isAlive()) {
        try {
          Thread.sleep(500);
        } catch (InterruptedException e) {
          return;
        }
      }
      Runtime.getRuntime().halt(9);
    }, "orphan-watchdog");
    t.setDaemon(true);
    t.start();
  }

  private static void run(String[] a) {
    String id = a[1];
    int rank = Integer.parseInt(a[3]);
    int size = Integer.parseInt(a[4]);
    Collective kind = Collective.valueOf(a[5]);
    Algorithm algo = Algorithm.valueOf(a[6]);
    long seed = Long.parseLong(a[7]);
    Duration timeout = Duration.ofMillis(Long.parseLong(a[8]));
    long staging = Long.parseLong(a[9]);
    int maxElems = Integer.parseInt(a[10]);
    long calls = Long.parseLong(a[11]);
    Communicator c = null;
    Thread corrupter = null;
    long i = 0;
    long runStart = System.nanoTime();
    Recording rv = null;
    if (GPU) printResources(id);  // what this process still holds from earlier trials: must be nothing
    try {
      // The vendor library needs a GPU per rank: off when the trial's ranks share GPUs.
      CommOptions o = CommOptions.builder().backend(GPU ? CommOptions.Backend.GPU : CommOptions.Backend.HOST).algorithm(algo)
          .stagingBytes(staging).timeout(timeout).vendor(VENDOR && (!GPU || size <= gpuCount())).build();
      rv = new Recording(new FileRendezvous(Paths.get(a[2]), rank, size), id);
      // Host: the backend directly (Comms.create would first agree on settings across ranks, and a
      // lone rank 0 would then never create its segment, which the stale-segment tests need).
      c = GPU ? Comms.create(rv, o, rank % gpuCount())
          : SEGMENT_DIR == null ? HostCommunicator.create(rv, o) : Internals.createHost(rv, o, Paths.get(SEGMENT_DIR));
      COMM_LOCK.lock();
      try {
        live = c;
      } finally {
        COMM_LOCK.unlock();
      }
      out.println("CREATED " + id + " ok prevclose " + lastCloseMs);
      CollectiveChecker ck = new CollectiveChecker(c, seed);
      SplittableRandom rnd = new SplittableRandom(seed);
      boolean lp = algo == Algorithm.LP;
      int reported = 0;
      for (; calls < 0 || i < calls; i++) {
        if (id.equals(closeRequest)) {  // detach while the peers still call
          awaitCorrupter(corrupter, id);
          out.println("CLOSING " + id + " " + i + " at " + System.nanoTime());  // the fault's moment, on this clock
          Communicator closing = c;
          c = null;
          retireAndClose(closing);
          out.println("CLOSED " + id + " " + i);
          algos(id, closing);
          out.println("DONE " + id + " " + i + " closed");
          return;
        }
        callIndex = i;
        Corrupt cr = corruptRequest;
        if (corrupter == null && cr != null && cr.id().equals(id) && i >= cr.atCall()) corrupter = startCorrupter(cr, c, rank);
        if (i == 0) out.println("STREAM " + id + " first-call");  // entering the first collective
        out.println("CALL " + id + " " + i);  // written before call i starts: a reader that has it knows this rank reached call i
        String what = CallMix.call(ck, c, kind, lp, rnd, maxElems);
        if (ck.failures().size() > reported) {
          out.println("WRONG " + id + " call " + i + " " + what + ": " + ck.failures().get(reported));
          reported = ck.failures().size();
        }
      }
      awaitCorrupter(corrupter, id);
      algos(id, c);
      out.println("DONE " + id + " " + i);
    } catch (Throwable t) {
      awaitCorrupter(corrupter, id);
      if (c != null) algos(id, c);
      String m = String.valueOf(t.getMessage()).replace('\n', ' ');
      // where a slow set-up spent its time: from RUN to the first rendezvous round, and the previous close
      String timing = " [worker: first rendezvous round " + (rv == null || rv.firstEntry == 0 ? "not reached"
          : "entered " + (rv.firstEntry - runStart) / 1_000_000 + " ms after RUN") + "; this process's previous close took "
          + (lastCloseMs < 0 ? "-" : lastCloseMs + " ms") + "]";
      out.println("FAIL " + id + " " + t.getClass().getSimpleName() + " after " + i + " calls: " + m + timing);
    } finally {
      if (c != null) retireAndClose(c);
    }
  }

  /** Ends the helper's access to {@code c} ({@link #retire}), then closes it, timed ({@link #lastCloseMs}). */
  private static void retireAndClose(Communicator c) {
    retire(c);
    long t0 = System.nanoTime();
    c.close();
    lastCloseMs = (System.nanoTime() - t0) / 1_000_000;
  }

  /** How long this process's latest communicator close took (ms; -1 before the first). */
  private static long lastCloseMs = -1;

  /** Ends the corrupting helper's access to {@code c}: after this it writes nothing (it would print "skipped"). */
  private static void retire(Communicator c) {
    boolean locked = false;
    try {
      // bounded: a helper stuck inside its write (awaitCorrupter gave up on it) must not hang the worker
      locked = COMM_LOCK.tryLock(5, java.util.concurrent.TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    try {
      if (live == c) live = null;
      if (!locked) out.println("NOTE retire without the lock: the corrupting helper still holds it");
    } finally {
      if (locked) COMM_LOCK.unlock();
    }
  }

  /**
   * CORRUPT: a helper thread overwrites the flag while this thread keeps calling (the write lands at any
   * point of a call: before, during or after this rank's arrival, while the peer waits or not).
   */
  private static Thread startCorrupter(Corrupt cr, Communicator c, int rank) {
    Thread t = new Thread(() -> {
      LockSupport.parkNanos(cr.delayMicros() * 1_000L);
      COMM_LOCK.lock();
      try {
        if (live != c) {
          out.println("CORRUPTED " + cr.id() + " failed: skipped, the communicator was already being closed");
          return;
        }
        long calls = callIndex;
        long t0 = System.nanoTime();
        try {
          if (GPU) {
            io.sparkcomms.collectives.gpu.GpuFaultHooks.corruptFlag(c, cr.peer(), cr.value());
          } else {
            // the slot rank `peer` reads for this rank's arrivals (ShmSignals.await); a plain aligned 8-byte store
            Internals.ctrl(c).duplicate().order(ByteOrder.nativeOrder()).putLong(Internals.slot(cr.peer(), rank), cr.value());
          }
          out.println("CORRUPTED " + cr.id() + " ok at " + t0 + " calls " + calls + " peer " + cr.peer() + " value " + cr.value());
        } catch (Throwable e) {
          out.println("CORRUPTED " + cr.id() + " failed: " + String.valueOf(e).replace('\n', ' '));
        }
      } finally {
        COMM_LOCK.unlock();
      }
    }, "corrupter");
    t.setDaemon(true);
    t.start();
    return t;
  }

  /** Waits (bounded) for the corrupting helper, so that its line comes before this trial's DONE / FAIL. */
  private static void awaitCorrupter(Thread t, String id) {
    if (t == null) return;
    try {
      t.join(30_000);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    if (t.isAlive()) out.println("CORRUPTED " + id + " failed: the write did not return within 30 s");
  }

  /** Calls that completed on {@code c}, by the protocol that ran: shows e.g. that an LP row really ran LP. */
  private static void algos(String id, Communicator c) {
    StringBuilder b = new StringBuilder("ALGOS " + id + " calls");
    c.stats().callsByProtocol().forEach((a, n) -> b.append(' ').append(a).append('=').append(n));
    out.println(b);
  }

  private static int gpuCount() { return Math.max(1, io.sparkcomms.nativeapi.GpuLibrary.deviceCount()); }

  /** Reports the segment path that rank 0 publishes in the first rendezvous round. */
  private static final class Recording implements Rendezvous {
    private final Rendezvous in;
    private final String id;
    private boolean reported;
    /** System.nanoTime() when the first round began (0: not yet). */
    volatile long firstEntry;

    Recording(Rendezvous in, String id) {
      this.in = in;
      this.id = id;
    }

    @Override public int rank() { return in.rank(); }
    @Override public int size() { return in.size(); }
    @Override public String describe() { return in.describe(); }

    @Override public byte[][] allGather(byte[] mine, Duration timeout) {
      if (firstEntry == 0) firstEntry = System.nanoTime();
      if (!reported && in.rank() == 0) report(mine);
      byte[][] all = in.allGather(mine, timeout);
      if (!reported && in.rank() != 0) report(all[0]);
      return all;
    }

    /** Prints rank 0's segment path from the first exchange that carries it. */
    private void report(byte[] rank0) {
      String s = new String(rank0, StandardCharsets.UTF_8);
      int ok = s.indexOf("\nOK ");
      if (ok >= 0) {
        out.println("SEG " + id + " " + s.substring(ok + 4).trim());
        reported = true;
      }
    }
  }
}
