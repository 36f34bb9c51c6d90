package io.sparkcomms.collectives.hier;

import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.CollectiveChecker;
import io.sparkcomms.collectives.CommMismatchException;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.Comms;
import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.gpu.DeviceBuffer;
import io.sparkcomms.collectives.gpu.DeviceTensor;
import io.sparkcomms.collectives.rendezvous.FileRendezvous;
import io.sparkcomms.nativeapi.GpuLibrary;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The GPU composition across nodes, checked on one machine: rank processes grouped into simulated
 * nodes, each node's ranks on a GPU communicator, the vendor library (NCCL / RCCL) between the nodes
 * forced onto its network transport (every process names a host of its own: NCCL_HOSTID; no peer
 * access or shared memory between its ranks: NCCL_P2P_DISABLE, NCCL_SHM_DISABLE; sockets on
 * loopback), the agreements over {@link LoopbackTransport}. Ranks may share a GPU (r % GPUs).
 *
 * <pre>
 *   java -cp ... io.sparkcomms.collectives.hier.CrossNodeGpuMain check 2x2      # nodes of 2 and 2 ranks (also 3+1, 2x1, 2x3)
 *   java -cp ... io.sparkcomms.collectives.hier.CrossNodeGpuMain kill 2x2       # rank 1 (node 0) exits mid-allReduce
 * </pre>
 * check: every collective, send/recv and batches on host and device tensors against the float64
 * reference (counts 1, 7, 1023 and 1M+3; outputs poisoned), allToAllV with its size verdicts (4 ranks)
 * and device-resident counts, a count mismatch across nodes failing on every rank; then, on a second
 * communicator with low precision on, FP8 allReduces within the LP bound.
 * kill: the other ranks must fail within the timeout (20 s) of their call.
 */
public final class CrossNodeGpuMain {
  private static final Duration TIMEOUT = Duration.ofSeconds(20);

  private CrossNodeGpuMain() {}

  public static void main(String[] args) throws Exception {
    String mode = args[0];
    int[] sizes = parse(args[1]);
    if (mode.equals("check") || mode.equals("kill")) {
      boolean ok = launch(mode, args[1], sizes);
      System.out.println((ok ? "PASS " : "FAIL ") + mode + " " + args[1]);
      System.exit(ok ? 0 : 1);
    }
    int rank = Integer.parseInt(args[2]);
    Path dir = Paths.get(args[3]);
    boolean ok = mode.equals("rank-check") ? check(sizes, rank, dir) : kill(sizes, rank, dir);
    System.exit(ok ? 0 : 1);
  }

  /** "2x2" -> {2, 2}; "3+1" -> {3, 1}. */
  static int[] parse(String s) {
    if (s.contains("x")) {
      String[] p = s.split("x");
      int[] r = new int[Integer.parseInt(p[0])];
      java.util.Arrays.fill(r, Integer.parseInt(p[1]));
      return r;
    }
    return java.util.Arrays.stream(s.split("\\+")).mapToInt(Integer::parseInt).toArray();
  }

  static String nodeOf(int[] sizes, int rank) {
    for (int i = 0, first = 0; i < sizes.length; first += sizes[i++]) if (rank < first + sizes[i]) return "n" + i;
    throw new IllegalArgumentException("rank " + rank);
  }

  static boolean launch(String mode, String layout, int[] sizes) throws Exception {
    int n = java.util.Arrays.stream(sizes).sum();
    Path dir = FileRendezvous.createDirectory();
    String java = Paths.get(System.getProperty("java.home"), "bin", "java").toString();
    List<Process> ps = new ArrayList<>();
    for (int r = 0; r < n; r++) {
      ProcessBuilder pb = new ProcessBuilder(java, "-Xmx2g", "-cp", System.getProperty("java.class.path"), CrossNodeGpuMain.class.getName(),
          "rank-" + mode, layout, "" + r, dir.toString()).inheritIO();
      Map<String, String> env = pb.environment();
      env.put("NCCL_HOSTID", "sparkcomms-check-" + r);  // a host of its own: the network transport, no duplicate-GPU refusal
      env.put("NCCL_P2P_DISABLE", "1");
      env.put("NCCL_SHM_DISABLE", "1");
      env.putIfAbsent("NCCL_SOCKET_IFNAME", "lo");
      env.put("NCCL_NVLS_ENABLE", "0");
      env.put("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1");
      env.put("NVSHMEM_DISABLE_NVLS", "1");
      ps.add(pb.start());
    }
    boolean ok = true;
    for (int r = 0; r < n; r++) {
      Process p = ps.get(r);
      if (!p.waitFor(1200, TimeUnit.SECONDS)) {
        p.destroyForcibly();
        System.out.println("rank " + r + " did not end within 1200 s");
        ok = false;
        continue;
      }
      boolean victim = mode.equals("kill") && r == 1;
      if (victim ? p.exitValue() == 0 : p.exitValue() != 0) ok = false;
    }
    return ok;
  }

  private static Communicator create(int[] sizes, int rank, Path dir, LoopbackTransport t) throws Exception {
    int n = java.util.Arrays.stream(sizes).sum();
    int device = rank % GpuLibrary.deviceCount();
    CommOptions o = CommOptions.builder().backend(CommOptions.Backend.GPU).timeout(TIMEOUT).build();
    FileRendezvous rv = new FileRendezvous(Files.createDirectories(dir.resolve("world")), rank, n);
    return Comms.createAcrossNodes(rv, nodeOf(sizes, rank), t, o, device);
  }

  static boolean check(int[] sizes, int rank, Path dir) throws Exception {
    List<String> failures = new ArrayList<>();
    long t0 = System.nanoTime();
    try (LoopbackTransport t = new LoopbackTransport(); Communicator c = create(sizes, rank, dir, t)) {
      if (!c.backendName().equals("gpu+net")) failures.add("backend " + c.backendName());
      System.out.println("rank " + rank + ": " + c + " built in " + (System.nanoTime() - t0) / 1_000_000 + " ms");
      CollectiveChecker k = new CollectiveChecker(c, 4321);
      int[] small = {1, 7, 1023};
      for (int count : small) {
        for (DataType dt : DataType.values()) {
          for (ReduceOp op : ReduceOp.examples()) {
            if (!op.supports(dt)) continue;
            k.allReduce(dt, op, count, false, CollectiveChecker.Shape.UNIFORM);
            k.reduceScatter(dt, op, count, CollectiveChecker.Shape.UNIFORM);
          }
          k.allGather(dt, count, CollectiveChecker.Shape.UNIFORM);
          k.allToAll(dt, count, CollectiveChecker.Shape.UNIFORM);
          k.broadcast(dt, count, count % c.size(), false);
        }
      }
      k.runRootedAndV(small, small, EnumSet.of(Collective.REDUCE, Collective.GATHER, Collective.SCATTER,
          Collective.ALL_GATHER_V, Collective.REDUCE_SCATTER_V));
      int big = 1_000_003;
      for (DataType dt : DataType.values()) {
        for (ReduceOp op : new ReduceOp[] {ReduceOp.SUM, ReduceOp.AVG, ReduceOp.MAX}) {
          if (op.supports(dt)) k.allReduce(dt, op, big, op == ReduceOp.AVG, CollectiveChecker.Shape.UNIFORM);
        }
      }
      k.allReduce(DataType.FLOAT32, ReduceOp.premulSum(0.5), big, false, CollectiveChecker.Shape.NORMAL);
      k.allGather(DataType.FLOAT32, big, CollectiveChecker.Shape.UNIFORM);
      k.broadcast(DataType.FLOAT64, big, c.size() - 1, false);
      k.reduceScatter(DataType.FLOAT32, ReduceOp.SUM, big / c.size(), CollectiveChecker.Shape.UNIFORM);
      k.runPointToPoint(new int[] {1, 1023, 70_001});
      failures.addAll(k.failures());
      int checked = k.checkedCalls();
      if (c.size() == 4) {
        String a2av = HierarchicalCommunicatorTest.allToAllVChecks(rank, c, HierarchicalCommunicatorTest.allToAllVCounts(4));
        if (a2av != null) failures.add(a2av);
      }
      failures.addAll(deviceAllToAllV(c, rank));
      failures.addAll(deviceTensors(c, rank));
      failures.addAll(mismatch(c, rank));
      c.barrier();
      System.out.println("rank " + rank + ": " + checked + " calls checked against the reference, then the device-tensor, "
          + "allToAllV and mismatch checks, in " + (System.nanoTime() - t0) / 1_000_000_000 + " s, "
          + failures.size() + " failures" + (failures.isEmpty() ? "" : ":\n  " + String.join("\n  ", failures)));
    } catch (RuntimeException e) {
      failures.add("raised " + e);
      e.printStackTrace(System.out);
    }
    failures.addAll(lowPrecision(sizes, rank, dir));
    return failures.isEmpty();
  }

  /** Low precision on: allReduce's cross-node leg as FP8, within the LP bound of the reference, on both allReduce paths. */
  static List<String> lowPrecision(int[] sizes, int rank, Path dir) {
    List<String> f = new ArrayList<>();
    CommOptions o = CommOptions.builder().backend(CommOptions.Backend.GPU).timeout(TIMEOUT).lowPrecision(true).lpMinBytes(1).build();
    int n = java.util.Arrays.stream(sizes).sum();
    try (LoopbackTransport t = new LoopbackTransport();
         Communicator c = Comms.createAcrossNodes(new FileRendezvous(Files.createDirectories(dir.resolve("world-lp")), rank, n),
             nodeOf(sizes, rank), t, o, rank % GpuLibrary.deviceCount())) {
      CollectiveChecker k = new CollectiveChecker(c, 99);
      for (int count : new int[] {7, 1023, 300_001}) {
        for (ReduceOp op : new ReduceOp[] {ReduceOp.SUM, ReduceOp.AVG}) {
          io.sparkcomms.collectives.Protocol p = k.allReduce(DataType.FLOAT32, op, count, false, CollectiveChecker.Shape.NORMAL);
          if (p != io.sparkcomms.collectives.Protocol.LP) f.add("LP allReduce of " + count + " ran " + p);
        }
        k.allReduce(DataType.BFLOAT16, ReduceOp.SUM, count, true, CollectiveChecker.Shape.UNIFORM);
      }
      f.addAll(k.failures());
      System.out.println("rank " + rank + ": low precision: " + k.checkedCalls() + " calls checked against the LP bound, " + f.size() + " failures"
          + (f.isEmpty() ? "" : ":\n  " + String.join("\n  ", f)));
    } catch (Exception e) {
      f.add("low precision: raised " + e);
      e.printStackTrace(System.out);
    }
    return f;
  }

  /** allReduce SUM and AVG of device tensors, in and out of place, both allReduce paths; integer-valued inputs: exact. */
  static List<String> deviceTensors(Communicator c, int rank) {
    List<String> f = new ArrayList<>();
    int n = c.size();
    int dev = rank % GpuLibrary.deviceCount();
    for (int count : new int[] {5, 300_001}) {
      float[] x = new float[count];
      for (int i = 0; i < count; i++) x[i] = (rank + 1) * (i % 13);
      try (DeviceBuffer in = DeviceBuffer.allocate(DataType.FLOAT32, count, dev); DeviceBuffer out = DeviceBuffer.allocate(DataType.FLOAT32, count, dev)) {
        DeviceTensor din = in.view(), dout = out.view();
        din.copyFrom(HostTensor.of(x));
        dout.fillBytes(0xff);
        c.allReduce(din, dout, ReduceOp.SUM);
        float[] got = new float[count];
        dout.copyTo(HostTensor.of(got));
        double s = n * (n + 1) / 2.0;
        for (int i = 0; i < count; i++) {
          if (got[i] != (float) (s * (i % 13))) {
            f.add("device allReduce SUM of " + count + ": element " + i + " is " + got[i] + ", expected " + s * (i % 13));
            break;
          }
        }
        c.allReduce(din, ReduceOp.AVG);  // in place
        din.copyTo(HostTensor.of(got));
        for (int i = 0; i < count; i++) {
          float want = (float) (s * (i % 13) / n);
          if (Math.abs(got[i] - want) > 1e-5 * Math.max(1, Math.abs(want))) {
            f.add("device allReduce AVG of " + count + " in place: element " + i + " is " + got[i] + ", expected " + want);
            break;
          }
        }
      }
    }
    return f;
  }

  /** allToAllV of device tensors with device-resident counts: rank r sends j + 1 elements (r * 1000 + j) to rank j. */
  static List<String> deviceAllToAllV(Communicator c, int rank) {
    List<String> f = new ArrayList<>();
    int n = c.size();
    int dev = rank % GpuLibrary.deviceCount();
    long total = 0;
    for (int j = 0; j < n; j++) total += j + 1;
    float[] x = new float[(int) total];
    long[] sc = new long[n];
    for (int j = 0, at = 0; j < n; j++) {
      sc[j] = j + 1;
      for (int k = 0; k <= j; k++) x[at++] = rank * 1000 + j;
    }
    try (DeviceBuffer in = DeviceBuffer.allocate(DataType.FLOAT32, total, dev);
         DeviceBuffer out = DeviceBuffer.allocate(DataType.FLOAT32, (long) n * (rank + 1) + 2, dev);
         DeviceBuffer sCounts = DeviceBuffer.allocate(DataType.INT64, n, dev);
         DeviceBuffer rCounts = DeviceBuffer.allocate(DataType.INT64, n, dev)) {
      in.view().copyFrom(HostTensor.of(x));
      sCounts.view().copyFrom(HostTensor.of(sc));
      out.view().fillBytes(0xff);
      c.allToAllV(in.view(), sCounts.view(), out.view(), rCounts.view());
      long[] rc = new long[n];
      rCounts.view().copyTo(HostTensor.of(rc));
      float[] got = new float[(int) out.count()];
      out.view().copyTo(HostTensor.of(got));
      for (int i = 0, at = 0; i < n; i++) {
        if (rc[i] != rank + 1) f.add("device allToAllV: recvCounts[" + i + "] = " + rc[i] + ", expected " + (rank + 1));
        for (int k = 0; k <= rank; k++, at++) {
          if (got[at] != i * 1000 + rank) {
            f.add("device allToAllV: element " + at + " is " + got[at] + ", expected " + (i * 1000 + rank));
            return f;
          }
        }
      }
      for (int k = n * (rank + 1); k < got.length; k++) if (!Float.isNaN(got[k])) f.add("device allToAllV wrote past its blocks");
    }
    return f;
  }

  /** A count that differs on rank 0 fails on every rank, and the next call is right. */
  static List<String> mismatch(Communicator c, int rank) {
    List<String> f = new ArrayList<>();
    try {
      c.allReduce(HostTensor.of(new float[rank == 0 ? 8 : 7]), ReduceOp.SUM);
      f.add("a count that differs on rank 0 did not raise");
    } catch (CommMismatchException e) {
      // expected on every rank
    }
    float[] v = {rank + 1f};
    c.allReduce(HostTensor.of(v), ReduceOp.SUM);
    int n = c.size();
    if (v[0] != n * (n + 1) / 2f) f.add("allReduce after the mismatch: " + v[0]);
    return f;
  }

  /** Rank 1 exits 2 s into a loop of allReduces; every other rank must fail within the timeout of its call. */
  static boolean kill(int[] sizes, int rank, Path dir) throws Exception {
    LoopbackTransport t = new LoopbackTransport();
    Communicator c = create(sizes, rank, dir, t);
    float[] x = new float[1 << 20];
    java.util.Arrays.fill(x, rank + 1);
    if (rank == 1) {
      Thread h = new Thread(() -> {
        try {
          Thread.sleep(2000);
        } catch (InterruptedException ignored) {
          // exit anyway
        }
        System.out.println("rank 1: exits now (halt)");
        Runtime.getRuntime().halt(3);
      });
      h.setDaemon(true);
      h.start();
    }
    long end = System.nanoTime() + 60_000_000_000L;
    int calls = 0;
    while (System.nanoTime() < end) {
      long s = System.nanoTime();
      try {
        c.allReduce(HostTensor.of(x), ReduceOp.SUM);
        calls++;
      } catch (RuntimeException e) {
        double took = (System.nanoTime() - s) / 1e9;
        boolean inTime = took <= TIMEOUT.toSeconds() + 5;
        System.out.println("rank " + rank + ": call " + calls + " failed " + String.format("%.2f", took) + " s after it began"
            + (inTime ? " (within the timeout)" : " (LATE)") + ": " + e);
        try {
          c.close();
        } catch (RuntimeException ignored) {
          // closing an aborted communicator
        }
        return inTime && rank != 1;
      }
    }
    System.out.println("rank " + rank + ": no failure in 60 s after " + calls + " calls");
    return false;
  }
}
