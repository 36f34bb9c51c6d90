package io.sparkcomms.collectives.gpu;

import io.sparkcomms.collectives.Algorithm;
import io.sparkcomms.collectives.CollectiveChecker;
import io.sparkcomms.collectives.CommMismatchException;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.rendezvous.FileRendezvous;
import io.sparkcomms.collectives.rendezvous.InJvmRendezvous;
import io.sparkcomms.collectives.host.AllToAllVHarness;
import io.sparkcomms.collectives.rendezvous.Rendezvous;
import io.sparkcomms.nativeapi.GpuLibrary;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

/**
 * The GPU test suite, runnable without Maven on a GPU host:
 * <pre>
 *   java -cp ... io.sparkcomms.collectives.gpu.GpuSuiteMain processes N   # N processes, rank r on GPU r % GPUs
 *   java -cp ... io.sparkcomms.collectives.gpu.GpuSuiteMain threads N     # N GPUs in one process
 * </pre>
 * With more processes than GPUs the ranks share GPUs and the vendor library is left out (NCCL/RCCL
 * need a GPU per rank), so 2..8 ranks also run on one GPU.
 * Every collective x op x dtype x algorithm (FLAT, TREE, VENDOR) against a float64 reference,
 * counts 1, 7, 1023, 1M+3 and one above the staging size, outputs poisoned first; then 1000
 * back-to-back mixed-size allReduces. Prints PASS or FAIL lines; exit code 0 only if all passed.
 */
public final class GpuSuiteMain {
  static final int[] COUNTS = {1, 7, 1023, (1 << 20) + 3, (3 << 20) + 5};

  /** reduce, gather, scatter, allGatherV and reduceScatterV. */
  static final java.util.Set<io.sparkcomms.collectives.Collective> ROOTED = java.util.EnumSet.of(
      io.sparkcomms.collectives.Collective.REDUCE, io.sparkcomms.collectives.Collective.GATHER,
      io.sparkcomms.collectives.Collective.SCATTER, io.sparkcomms.collectives.Collective.ALL_GATHER_V,
      io.sparkcomms.collectives.Collective.REDUCE_SCATTER_V);
  /** {@code -Dsparkcomms.suite=rooted}: only the calls of {@link #ROOTED} (device and host tensors) and their mismatch cases. */
  static final boolean ROOTED_ONLY = "rooted".equals(System.getProperty("sparkcomms.suite"));
  static final int[] ROOTED_COUNTS = {0, 1, 7, 1023, (1 << 20) + 3};
  /** {@code -Dsparkcomms.suite=p2p}: only send, recv and batches (device and host tensors) and their mismatch cases. */
  static final boolean P2P_ONLY = "p2p".equals(System.getProperty("sparkcomms.suite"));
  static final int[] P2P_COUNTS = {1, 7, 1023, (1 << 20) + 3};
  static final int[] ROOTED_V_COUNTS = {0, 1, 7, 1023, (1 << 18) + 3};

  /** The algorithms checked: VENDOR only with the vendor library (off with SPARKCOMMS_VENDOR=0). */
  static Algorithm[] algos(boolean vendor) {
    return vendor ? new Algorithm[] {Algorithm.FLAT, Algorithm.TREE, Algorithm.VENDOR} : new Algorithm[] {Algorithm.FLAT, Algorithm.TREE};
  }

  /** Whether {@code n} ranks use the vendor library: as the environment says, and only with a GPU per rank. */
  static boolean vendor(int n) {
    return CommOptions.fromEnvironment().vendor() && n <= GpuLibrary.deviceCount();
  }

  /** Rank {@code rank}'s GPU when ranks are processes: r % GPUs (GPUs are shared beyond one rank each). */
  static int device(int rank) {
    return rank % Math.max(1, GpuLibrary.deviceCount());
  }

  static CommOptions options(Algorithm a, boolean vendor) {
    return CommOptions.fromEnvironment().toBuilder().backend(CommOptions.Backend.GPU).algorithm(a).vendor(vendor)
        .stagingBytes(8 << 20).timeout(Duration.ofSeconds(60)).build();
  }

  public static void main(String[] args) throws Exception {
    GpuLibrary.Status st = GpuLibrary.status();
    System.out.println(st);
    if (!st.available()) {
      System.out.println("SKIP: " + st.reason());
      System.exit(2);
    }
    String mode = args[0];
    int n = Integer.parseInt(args[1]);
    if (mode.equals("rank")) {
      System.exit(rank(Paths.get(args[2]), Integer.parseInt(args[3]), n, Long.parseLong(args[4])) ? 0 : 1);
    }
    long seed = System.nanoTime();
    System.out.println("seed " + seed);
    boolean ok;
    if (mode.equals("threads")) ok = threads(n, seed);
    else ok = processes(n, seed);
    System.out.println(ok ? "PASS gpu suite (" + mode + ", " + n + " ranks)" : "FAIL gpu suite (" + mode + ", " + n + " ranks)");
    System.exit(ok ? 0 : 1);
  }

  /** One rank's whole suite over rendezvous factory {@code rv} (called once per algorithm of {@code algos}). */
  static List<String> suite(java.util.function.Supplier<Rendezvous> rv, int device, Algorithm[] algos, long seed) {
    Map<Algorithm, Communicator> comms = new EnumMap<>(Algorithm.class);
    boolean vendor = java.util.Arrays.asList(algos).contains(Algorithm.VENDOR);
    try {
      for (Algorithm a : algos) comms.put(a, new DeviceStagedCommunicator(GpuCommunicator.create(rv.get(), options(a, vendor), device)));
      List<String> fails = new ArrayList<>();
      if (P2P_ONLY) {
        CollectiveChecker dev = new CollectiveChecker(comms.get(Algorithm.FLAT), seed);
        dev.runPointToPoint(P2P_COUNTS);
        fails.addAll(dev.failures());
        CollectiveChecker host = new CollectiveChecker(((DeviceStagedCommunicator) comms.get(Algorithm.FLAT)).gpu(), seed + 1);
        host.runPointToPoint(new int[] {1, 1023, 70_001});
        fails.addAll(host.failures());
        fails.addAll(p2pMismatch(rv, device));
        fails.addAll(callTimeouts(rv, device));
        int rank = comms.get(Algorithm.FLAT).rank();
        System.out.println("rank " + rank + ": point-to-point on device tensors: " + dev.checkedCalls() + " checked, on host tensors: "
            + host.checkedCalls() + " checked; " + fails.size() + " failures" + (fails.isEmpty() ? "" : "\n  " + String.join("\n  ", fails)));
        return fails;
      }
      if (ROOTED_ONLY) {
        // device tensors (through the staging adapter), then host tensors on the GPU communicator itself
        CollectiveChecker dev = new CollectiveChecker(comms.get(Algorithm.FLAT), seed);
        dev.runRootedAndV(ROOTED_COUNTS, ROOTED_V_COUNTS, ROOTED);
        fails.addAll(dev.failures());
      } else {
        fails.addAll(CollectiveChecker.runMatrix(comms::get, seed, COUNTS, algos));
        fails.addAll(backToBack((DeviceStagedCommunicator) comms.get(Algorithm.FLAT), seed));
        fails.addAll(allToAllV(comms.get(Algorithm.FLAT), seed));
        fails.addAll(mismatch(rv, device));
      }
      CollectiveChecker host = new CollectiveChecker(((DeviceStagedCommunicator) comms.get(Algorithm.FLAT)).gpu(), seed + 1);
      host.runRootedAndV(new int[] {1, 1023, 70_001}, new int[] {1, 1023, 70_001}, ROOTED);
      fails.addAll(host.failures());
      System.out.println("rank " + comms.get(Algorithm.FLAT).rank() + ": rooted and per-rank-count calls on host tensors: "
          + host.checkedCalls() + " checked, " + host.failures().size() + " failures");
      CollectiveChecker p2pHost = new CollectiveChecker(((DeviceStagedCommunicator) comms.get(Algorithm.FLAT)).gpu(), seed + 2);
      p2pHost.runPointToPoint(new int[] {1, 1023, 70_001});
      fails.addAll(p2pHost.failures());
      fails.addAll(p2pMismatch(rv, device));
      fails.addAll(callTimeouts(rv, device));
      fails.addAll(composedMismatch(rv, device));
      fails.addAll(splits(((DeviceStagedCommunicator) comms.get(Algorithm.FLAT)).gpu()));
      int rank = comms.get(Algorithm.FLAT).rank();
      System.out.println("rank " + rank + " (device " + device + ") checked "
          + String.join("+", java.util.Arrays.stream(algos).map(Enum::name).toList()) + ": " + fails.size() + " failures"
          + (fails.isEmpty() ? "" : "\n  " + String.join("\n  ", fails)));
      return fails;
    } finally {
      comms.values().forEach(Communicator::close);
    }
  }

  /**
   * Ranks that disagree on the count (rank 1 asks for fewer elements), on a small call (one-shot) and
   * a large one (tree): every rank must raise {@link CommMismatchException}, and the communicator must
   * refuse the next call. A fresh communicator per case (a mismatch leaves it unusable).
   */
  static List<String> mismatch(java.util.function.Supplier<Rendezvous> rv, int device) {
    List<String> fails = new ArrayList<>();
    for (long[] counts : new long[][] {{1000, 10}, {4 << 20, 2 << 20}}) {
      CommOptions o = CommOptions.fromEnvironment().toBuilder().backend(CommOptions.Backend.GPU).vendor(false)
          .stagingBytes(8 << 20).timeout(Duration.ofSeconds(30)).build();
      try (GpuCommunicator g = GpuCommunicator.create(rv.get(), o, device);
           DeviceBuffer in = DeviceBuffer.allocate(DataType.FLOAT32, counts[0], device);
           DeviceBuffer out = DeviceBuffer.allocate(DataType.FLOAT32, counts[0], device)) {
        long count = g.rank() == 1 ? counts[1] : counts[0];
        String what = "allReduce " + counts[0] + " vs " + counts[1] + " floats";
        long t0 = System.nanoTime();
        try {
          g.allReduce(in.view(0, count), out.view(0, count), ReduceOp.SUM);
          g.synchronize();
          fails.add("mismatch: " + what + " returned on rank " + g.rank());
        } catch (CommMismatchException e) {
          System.out.println("rank " + g.rank() + ": " + what + ": CommMismatchException after "
              + (System.nanoTime() - t0) / 1_000_000 + " ms: " + e.getMessage());
        } catch (RuntimeException e) {
          fails.add("mismatch: " + what + " raised " + e + " on rank " + g.rank() + ", expected CommMismatchException");
        }
        try {
          g.allReduce(in.view(0, 16), out.view(0, 16), ReduceOp.SUM);
          g.synchronize();
          fails.add("mismatch: a call after " + what + " returned on rank " + g.rank());
        } catch (RuntimeException expected) {
          // the communicator is unusable after a mismatch
        }
      }
    }
    // Rank 1's output is one element short (its own argument error): it raises IllegalArgumentException,
    // and its peers, which make a valid call, raise CommMismatchException at once instead of timing out.
    CommOptions o = CommOptions.fromEnvironment().toBuilder().backend(CommOptions.Backend.GPU).vendor(false)
        .stagingBytes(8 << 20).timeout(Duration.ofSeconds(30)).build();
    try (GpuCommunicator g = GpuCommunicator.create(rv.get(), o, device);
         DeviceBuffer in = DeviceBuffer.allocate(DataType.FLOAT32, 1000, device);
         DeviceBuffer out = DeviceBuffer.allocate(DataType.FLOAT32, 1000, device)) {
      long t0 = System.nanoTime();
      try {
        g.allReduce(in.view(), out.view(0, g.rank() == 1 ? 999 : 1000), ReduceOp.SUM);
        g.synchronize();
        fails.add("refused arguments: the call returned on rank " + g.rank());
      } catch (IllegalArgumentException e) {
        if (g.rank() != 1) fails.add("refused arguments: rank " + g.rank() + " raised " + e);
      } catch (CommMismatchException e) {
        if (g.rank() == 1) fails.add("refused arguments: rank 1 raised " + e + ", expected IllegalArgumentException");
        else System.out.println("rank " + g.rank() + ": a peer's refused arguments: CommMismatchException after "
            + (System.nanoTime() - t0) / 1_000_000 + " ms: " + e.getMessage());
      } catch (RuntimeException e) {
        fails.add("refused arguments: rank " + g.rank() + " raised " + e);
      }
    }
    return fails;
  }

  /**
   * The composed calls' agreement step: ranks that name different roots (reduce) or different
   * per-rank counts (allGatherV) raise {@link CommMismatchException} on every rank, and the
   * communicator stays usable (the agreement allGather itself completed).
   */
  static List<String> composedMismatch(java.util.function.Supplier<Rendezvous> rv, int device) {
    List<String> fails = new ArrayList<>();
    CommOptions o = CommOptions.fromEnvironment().toBuilder().backend(CommOptions.Backend.GPU).vendor(false)
        .stagingBytes(8 << 20).timeout(Duration.ofSeconds(30)).build();
    try (GpuCommunicator g = GpuCommunicator.create(rv.get(), o, device)) {
      int n = g.size(), me = g.rank();
      try (DeviceBuffer in = DeviceBuffer.allocate(DataType.FLOAT32, 64, device);
           DeviceBuffer out = DeviceBuffer.allocate(DataType.FLOAT32, 64L * n, device)) {
        long[] counts = new long[n];
        java.util.Arrays.fill(counts, 5);
        if (me == 1) counts[0] = 4;
        Runnable[] calls = {
            () -> g.reduce(in.view(), out.view(0, 64), ReduceOp.SUM, me == 1 ? 1 : 0),
            () -> g.allGatherV(in.view(0, 5), out.view(0, 5L * n), counts),
            () -> g.gather(in.view(0, me == 1 ? 3 : 4), out.view(), 0)};
        String[] names = {"reduce with roots 0 and 1", "allGatherV with counts that differ on rank 1", "gather of 4 vs 3 elements"};
        for (int k = 0; k < calls.length; k++) {
          try {
            calls[k].run();
            fails.add("composed mismatch: " + names[k] + " returned on rank " + me);
          } catch (CommMismatchException e) {
            if (me == 0) System.out.println("rank 0: " + names[k] + ": CommMismatchException: " + e.getMessage());
          } catch (RuntimeException e) {
            fails.add("composed mismatch: " + names[k] + " raised " + e + " on rank " + me + ", expected CommMismatchException");
          }
        }
        float[] x = new float[64];
        java.util.Arrays.fill(x, me + 1);
        in.view().copyFrom(HostTensor.of(x));
        g.allReduce(in.view(), out.view(0, 64), ReduceOp.SUM);
        float[] y = new float[64];
        out.view(0, 64).copyTo(HostTensor.of(y));
        if (y[63] != n * (n + 1) / 2f) fails.add("composed mismatch: the allReduce after the mismatches gave " + y[63] + " on rank " + me);
      }
    } catch (RuntimeException e) {
      fails.add("composed mismatch: " + e);
    }
    // a composed call against a direct allGather of as many INT64 words as its agreement round: the
    // round's call header differs (sc_agree's tag), so both fail; the communicator is then unusable
    try (GpuCommunicator g = GpuCommunicator.create(rv.get(), o, device)) {
      int n = g.size(), me = g.rank(), words = GpuComposed.FIXED_WORDS + n;
      try {
        if (me == 1) g.allGather(HostTensor.of(new long[words]), HostTensor.of(new long[words * n]));
        else g.reduce(HostTensor.of(new float[16]), HostTensor.of(new float[16]), ReduceOp.SUM, 0);
        fails.add("composed mismatch: reduce against a direct allGather returned on rank " + me);
      } catch (CommMismatchException e) {
        if (me == 0) System.out.println("rank 0: reduce against a direct allGather: CommMismatchException: " + e.getMessage());
      } catch (RuntimeException e) {
        fails.add("composed mismatch: reduce against a direct allGather raised " + e + " on rank " + me);
      }
    } catch (RuntimeException e) {
      fails.add("composed mismatch (direct allGather): " + e);
    }
    return fails;
  }

  /**
   * Per-call timeouts on the GPU kernels (sc_comm_set_timeout): with a communicator timeout of 1 s, an
   * allReduce made with a 120 s call timeout outlasts rank 1 arriving 3 s late; with a communicator
   * timeout of 120 s, rank 0's allReduce with a 0.5 s call timeout fails with CommTimeoutException
   * naming 0.5 s while rank 1 is 3 s late (rank 1's late call then fails too, at once or at its own
   * timeout). A fresh communicator per case (a timeout leaves one unusable).
   */
  static List<String> callTimeouts(java.util.function.Supplier<Rendezvous> rv, int device) {
    List<String> fails = new ArrayList<>();
    for (int k = 0; k < 2; k++) {
      boolean longer = k == 0;
      CommOptions o = CommOptions.fromEnvironment().toBuilder().backend(CommOptions.Backend.GPU).vendor(false)
          .stagingBytes(8 << 20).timeout(Duration.ofSeconds(longer ? 1 : 120)).build();
      try (GpuCommunicator g = GpuCommunicator.create(rv.get(), o, device);
           DeviceBuffer buf = DeviceBuffer.allocate(DataType.FLOAT32, 1024, device)) {
        int me = g.rank(), n = g.size();
        Duration call = longer ? Duration.ofSeconds(120) : Duration.ofMillis(500);
        float[] x = new float[1024];
        java.util.Arrays.fill(x, me + 1);
        buf.view().copyFrom(HostTensor.of(x));
        if (me == 1) Thread.sleep(3000);
        try {
          g.withOptions(io.sparkcomms.collectives.CallOptions.timeout(call)).allReduce(buf.view(), ReduceOp.SUM);
          buf.view().copyTo(HostTensor.of(x));
          if (!longer && me == 0) fails.add("call timeout: rank 0's allReduce with a 0.5 s call timeout returned although rank 1 was 3 s late");
          if (longer && x[0] != n * (n + 1) / 2f) fails.add("call timeout: the allReduce gave " + x[0] + " on rank " + me);
        } catch (io.sparkcomms.collectives.CommTimeoutException e) {
          if (longer) fails.add("call timeout: a 120 s call timeout did not outlast a 3 s late peer on rank " + me + ": " + e.getMessage());
          else if (me == 0 && !e.getMessage().contains("0.5 s")) fails.add("call timeout: rank 0's timeout does not name 0.5 s: " + e.getMessage());
          else System.out.println("rank " + me + ": 0.5 s call timeout: " + e.getMessage());
        } catch (RuntimeException e) {
          if (longer || me == 0) fails.add("call timeout: rank " + me + " raised " + e);
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        fails.add("call timeout: interrupted");
      } catch (RuntimeException e) {
        fails.add("call timeout: " + e);
      }
    }
    return fails;
  }

  /**
   * Transfers that do not match, between ranks 0 and 1 (the others make none): a recv of another
   * count, then two senders, on fresh communicators (a mismatch leaves a GPU channel unusable): both
   * ranks raise {@link CommMismatchException}; the parent (whose own calls the channel's failure does
   * not touch) then passes a barrier and an allReduce on every rank.
   */
  static List<String> p2pMismatch(java.util.function.Supplier<Rendezvous> rv, int device) {
    List<String> fails = new ArrayList<>();
    CommOptions o = CommOptions.fromEnvironment().toBuilder().backend(CommOptions.Backend.GPU).vendor(false)
        .stagingBytes(8 << 20).timeout(Duration.ofSeconds(30)).build();
    String[] names = {"a recv of 8 floats against a send of 7", "two ranks that both send"};
    for (int k = 0; k < names.length; k++) {
      try (GpuCommunicator g = GpuCommunicator.create(rv.get(), o, device);
           DeviceBuffer buf = DeviceBuffer.allocate(DataType.FLOAT32, 8, device)) {
        int me = g.rank();
        if (me < 2) {
          try {
            if (k == 0) {
              if (me == 0) g.send(buf.view(0, 7), 1);
              else g.recv(buf.view(), 0);
            } else {
              g.send(buf.view(), 1 - me);
            }
            fails.add("p2p mismatch: " + names[k] + " returned on rank " + me);
          } catch (CommMismatchException e) {
            System.out.println("rank " + me + ": " + names[k] + ": CommMismatchException: " + e.getMessage());
          } catch (RuntimeException e) {
            fails.add("p2p mismatch: " + names[k] + " raised " + e + " on rank " + me + ", expected CommMismatchException");
          }
        }
        g.barrier();
        float[] x = {me + 1};
        g.allReduce(HostTensor.of(x), ReduceOp.SUM);
        int n = g.size();
        if (x[0] != n * (n + 1) / 2f) fails.add("p2p mismatch: the parent's allReduce after " + names[k] + " gave " + x[0] + " on rank " + me);
      } catch (RuntimeException e) {
        fails.add("p2p mismatch: " + names[k] + ": " + e);
      }
    }
    return fails;
  }

  /**
   * split on the GPU backend: pairs by color (a lone last rank when the size is odd), each child's
   * allReduce on device tensors between two allReduces of the parent, a nested split of each pair
   * into single ranks, and a rank list in reverse order; every sum checked exactly.
   */
  static List<String> splits(GpuCommunicator parent) {
    List<String> fails = new ArrayList<>();
    int n = parent.size(), me = parent.rank(), device = parent.device();
    try (DeviceBuffer buf = DeviceBuffer.allocate(DataType.FLOAT32, 1024, device)) {
      java.util.function.BiFunction<Communicator, Float, Float> sum = (c, v) -> {
        float[] x = new float[1024];
        java.util.Arrays.fill(x, v);
        buf.view().copyFrom(HostTensor.of(x));
        c.allReduce(buf.view(), ReduceOp.SUM);
        float[] y = new float[1024];
        buf.view().copyTo(HostTensor.of(y));
        return y[1023];
      };
      float all = n * (n + 1) / 2f;
      try (Communicator pair = parent.split(me / 2, me)) {
        int first = me / 2 * 2, members = Math.min(2, n - first);
        float want = members == 2 ? 2 * first + 3 : first + 1;
        if (sum.apply(parent, me + 1f) != all) fails.add("split: the parent's allReduce before the child's is wrong on rank " + me);
        float got = sum.apply(pair, me + 1f);
        if (got != want || pair.size() != members || pair.rank() != me - first) {
          fails.add("split: rank " + me + "'s pair gave " + got + " (size " + pair.size() + ", rank " + pair.rank() + "), expected " + want);
        }
        if (sum.apply(parent, me + 1f) != all) fails.add("split: the parent's allReduce after the child's is wrong on rank " + me);
        try (Communicator single = pair.split(pair.rank(), 0)) {
          if (single.size() != 1 || sum.apply(single, me + 1f) != me + 1f) fails.add("split: the nested single-rank child is wrong on rank " + me);
        }
      }
      int[] reversed = new int[n];
      for (int i = 0; i < n; i++) reversed[i] = n - 1 - i;
      try (Communicator rev = parent.split(reversed)) {
        if (rev.rank() != n - 1 - me || sum.apply(rev, me + 1f) != all) fails.add("split: the reversed list's child is wrong on rank " + me);
      }
    } catch (RuntimeException e) {
      fails.add("split: " + e + " on rank " + me);
    }
    System.out.println("rank " + me + ": split checks, " + fails.size() + " failures");
    return fails;
  }

  /**
   * allToAllV on the GPU kernel against the reference (AllToAllVHarness, shared with the host tests):
   * random skewed counts (zeros, one rank receiving everything, Zipf) x FLOAT32/INT64/BFLOAT16 x
   * packed/slots at three sizes (the C test covers several staging rounds), outputs poisoned with
   * guard regions; then an overflowing call on every layout, which must raise everywhere and write
   * nothing, and a valid call after it.
   */
  static List<String> allToAllV(Communicator c, long seed) {
    List<String> fails = new ArrayList<>();
    int n = c.size(), calls = 0;
    for (int maxTotal : new int[] {7, 40_000, 900_000}) {  // the float32 encoding needs index < 1M
      for (AllToAllVHarness.Scenario s : AllToAllVHarness.skewedMatrix(n, seed + maxTotal, maxTotal)) {
        fails.addAll(AllToAllVHarness.runAndCheck(c, s));
        calls++;
      }
    }
    long[][] counts = new long[n][n];
    for (int i = 0; i < n; i++) for (int j = 0; j < n; j++) counts[i][j] = 100 + 10 * i + j;
    for (boolean slots : new boolean[] {false, true}) {
      AllToAllVHarness.Scenario ok = slots ? AllToAllVHarness.slots("valid", DataType.FLOAT32, counts, 2, seed, true, false)
          : AllToAllVHarness.packed("valid", DataType.FLOAT32, counts, 2, seed, true, false);
      long[] out = ok.outCounts().clone();
      out[n - 1] -= slots ? 0 : 3;  // packed: the last rank's output is 3 elements short (plus up to 2 slack)
      long[][] ro = ok.recvOffsets();
      if (slots) {  // the last rank's slot for rank 0 loses room
        ro = java.util.Arrays.stream(ro).map(long[]::clone).toArray(long[][]::new);
        ro[n - 1][1] = ro[n - 1][0] + counts[0][n - 1] - 1;
        for (int q = 2; q < n; q++) ro[n - 1][q] = Math.max(ro[n - 1][q], ro[n - 1][1]);
      }
      AllToAllVHarness.Scenario bad = new AllToAllVHarness.Scenario("overflow", DataType.FLOAT32, ok.inCounts(), out, counts,
          ok.sendOffsets(), ro, true, false);
      if (bad.expected().ok()) fails.add("test bug: the overflow scenario is valid: " + bad);
      fails.addAll(AllToAllVHarness.runAndCheck(c, bad));
      fails.addAll(AllToAllVHarness.runAndCheck(c, ok));
      calls += 2;
    }
    System.out.println("rank " + c.rank() + ": " + calls + " allToAllV calls checked against the reference, " + fails.size() + " failures");
    return fails;
  }

  /**
   * 1000 back-to-back allReduces of mixed sizes, enqueued without waiting in windows of 50 (each with
   * its own input and poisoned output), then checked exactly: inputs are small integers, so every
   * sum is exact in float32.
   */
  static List<String> backToBack(DeviceStagedCommunicator staged, long seed) {
    GpuCommunicator g = staged.gpu();
    int n = g.size(), window = 50;
    int[] sizes = {1, 7, 256, 2048, 8192, 65_536, 262_147, 1 << 20};
    java.util.SplittableRandom rnd = new java.util.SplittableRandom(seed); // same on every rank
    List<String> fails = new ArrayList<>();
    List<DeviceBuffer> ins = new ArrayList<>(), outs = new ArrayList<>();
    try {
      for (int w = 0; w < 1000 / window; w++) {
        int[] count = new int[window];
        for (int k = 0; k < window; k++) {
          count[k] = sizes[rnd.nextInt(sizes.length)];
          float[] x = new float[count[k]];
          for (int i = 0; i < x.length; i++) x[i] = (g.rank() + 1) * ((i * 7 + w * window + k) % 13);
          DeviceBuffer in = DeviceBuffer.allocate(DataType.FLOAT32, count[k], g.device());
          in.view().copyFrom(HostTensor.of(x));
          DeviceBuffer out = DeviceBuffer.allocate(DataType.FLOAT32, count[k], g.device());
          out.view().fillBytes(0xFF);
          ins.add(in);
          outs.add(out);
        }
        for (int k = 0; k < window; k++) g.allReduceAsync(ins.get(k).view(), outs.get(k).view(), ReduceOp.SUM);
        g.synchronize();
        float tri = n * (n + 1) / 2f;
        for (int k = 0; k < window; k++) {
          float[] y = new float[count[k]];
          outs.get(k).view().copyTo(HostTensor.of(y));
          for (int i = 0; i < y.length; i++) {
            float want = tri * ((i * 7 + w * window + k) % 13);
            if (y[i] != want && fails.size() < 20) fails.add("back-to-back call " + (w * window + k) + " count " + count[k] + " element " + i + ": " + y[i] + " != " + want);
          }
        }
        ins.forEach(DeviceBuffer::close);
        outs.forEach(DeviceBuffer::close);
        ins.clear();
        outs.clear();
      }
    } finally {
      ins.forEach(DeviceBuffer::close);
      outs.forEach(DeviceBuffer::close);
    }
    System.out.println("rank " + g.rank() + ": 1000 back-to-back allReduces checked, " + fails.size() + " wrong" + " " + g.stats());
    return fails;
  }

  /** {@code n} ranks as threads of this process, rank r on GPU r: needs {@code n} GPUs. */
  static boolean threads(int n, long seed) throws Exception {
    int gpus = GpuLibrary.deviceCount();
    if (n > gpus) {
      System.out.println("FAIL threads mode needs a GPU per rank: " + n + " ranks, " + gpus + " GPUs (processes mode shares GPUs)");
      return false;
    }
    Algorithm[] algos = algos(vendor(n));
    ExecutorService pool = Executors.newFixedThreadPool(n);
    // one group per communicator the suite builds, in the order every rank builds them
    List<InJvmRendezvous.Group> groups = java.util.Collections.synchronizedList(new ArrayList<>());
    List<Future<List<String>>> fs = new ArrayList<>();
    for (int r = 0; r < n; r++) {
      final int rank = r;
      fs.add(pool.submit(() -> {
        int[] k = {0};
        return suite(() -> {
          synchronized (groups) {
            while (groups.size() <= k[0]) groups.add(InJvmRendezvous.group(n));
            return groups.get(k[0]++).member(rank);
          }
        }, rank, algos, seed);
      }));
    }
    boolean ok = true;
    for (int r = 0; r < n; r++) {
      List<String> f = fs.get(r).get(900, TimeUnit.SECONDS);
      System.out.println("rank " + r + ": " + f.size() + " failures");
      if (!f.isEmpty()) {
        ok = false;
        System.out.println("rank " + r + " failures:\n  " + String.join("\n  ", f));
      }
    }
    pool.shutdownNow();
    return ok;
  }

  /** One rank process of {@link #processes}: on GPU {@link #device}(rank); every rank derives the same algorithms. */
  static boolean rank(Path dir, int rank, int n, long seed) {
    Algorithm[] algos = algos(vendor(n));
    int[] k = {0};  // one directory per communicator the suite builds, in the order every rank builds them
    List<String> f = suite(() -> {
      try {
        return new FileRendezvous(Files.createDirectories(dir.resolve("comm-" + k[0]++)), rank, n);
      } catch (java.io.IOException e) {
        throw new java.io.UncheckedIOException(e);
      }
    }, device(rank), algos, seed);
    if (!f.isEmpty()) System.out.println("rank " + rank + " failures:\n  " + String.join("\n  ", f));
    return f.isEmpty();
  }

  /** {@code n} ranks as child processes, rank r on GPU r % GPUs. */
  static boolean processes(int n, long seed) throws Exception {
    int gpus = GpuLibrary.deviceCount();
    System.out.println(n + " rank processes on " + Math.min(n, gpus) + " of " + gpus + " GPU(s)"
        + (vendor(n) ? "" : ", without the vendor library" + (n > gpus ? " (ranks share GPUs)" : "")));
    Path dir = FileRendezvous.createDirectory();
    String java = Paths.get(System.getProperty("java.home"), "bin", "java").toString();
    List<Process> ps = new ArrayList<>();
    for (int r = 0; r < n; r++) {
      ProcessBuilder pb = new ProcessBuilder(java, "-Dsparkcomms.suite=" + System.getProperty("sparkcomms.suite", "all"),
          "-cp", System.getProperty("java.class.path"), GpuSuiteMain.class.getName(),
          "rank", "" + n, dir.toString(), "" + r, "" + seed).inheritIO();
      ps.add(pb.start());
    }
    boolean ok = true;
    for (Process p : ps) {
      if (!p.waitFor(900, TimeUnit.SECONDS)) {
        p.destroyForcibly();
        ok = false;
      } else if (p.exitValue() != 0) ok = false;
    }
    return ok;
  }
}
