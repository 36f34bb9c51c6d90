package io.sparkcomms.collectives.hier;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.CollectiveChecker;
import io.sparkcomms.collectives.CommAbortedException;
import io.sparkcomms.collectives.CommCapacityException;
import io.sparkcomms.collectives.CommException;
import io.sparkcomms.collectives.CommMismatchException;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.Comms;
import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.RankGroup;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.net.InJvmTransport;
import io.sparkcomms.collectives.rendezvous.InJvmRendezvous;
import java.time.Duration;
import java.util.EnumSet;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Ranks as threads of one JVM on simulated nodes (each rank its own in-JVM transport): every
 * collective against a float64 reference, outputs poisoned, on even, uneven and interleaved nodes,
 * small counts and one count past the sharding threshold; disagreement and abort across nodes.
 */
class HierarchicalCommunicatorTest {
  private static final CommOptions OPTS = CommOptions.builder().timeout(Duration.ofSeconds(60)).build();

  /** What a rank runs on its communicator. */
  interface RankBody {
    Object run(int rank, Communicator comm);
  }

  /** Builds the communicators of ranks on {@code nodes[r]} and runs {@code body} on each; results by rank (a value or what it threw). */
  static List<Object> onNodes(String[] nodes, CommOptions o, RankBody body) throws Exception {
    int n = nodes.length;
    InJvmRendezvous.Group g = InJvmRendezvous.group(n);
    InJvmTransport[] t = new InJvmTransport[n];
    for (int r = 0; r < n; r++) t[r] = new InJvmTransport();
    Communicator[] comms = new Communicator[n];
    try {
      return RankGroup.runCatching(n, 600, r -> {
        comms[r] = Comms.createAcrossNodes(g.member(r), nodes[r], t[r], o);
        return body.run(r, comms[r]);
      });
    } finally {
      for (Communicator c : comms) if (c != null) c.close();
      for (InJvmTransport x : t) x.close();
    }
  }

  private static void assertAllNull(List<Object> results) {
    for (int r = 0; r < results.size(); r++) {
      Object x = results.get(r);
      if (x instanceof Throwable e) throw new AssertionError("rank " + r + " failed: " + e, e);
      if (x != null) throw new AssertionError("rank " + r + ": " + x);
    }
  }

  /** Layouts: 2 x 2, 2 x 3, 3 + 1, and interleaved nodes (partition order differs from node order). */
  @ParameterizedTest
  @ValueSource(strings = {"a,a,b,b", "a,a,a,b,b,b", "a,a,a,b", "a,b,a,b"})
  void everyCollectiveMatchesTheReference(String layout) throws Exception {
    String[] nodes = layout.split(",");
    int[] counts = {1, 7, 1023};
    List<Object> res = onNodes(nodes, OPTS, (r, c) -> {
      CollectiveChecker k = new CollectiveChecker(c, 42 + nodes.length);
      for (int count : counts) {
        for (DataType dt : DataType.values()) {
          for (ReduceOp op : ReduceOp.examples()) {
            if (!op.supports(dt)) continue;
            k.allReduce(dt, op, count, count == 7, CollectiveChecker.Shape.UNIFORM);
            k.reduceScatter(dt, op, count, CollectiveChecker.Shape.UNIFORM);
          }
          k.allGather(dt, count, CollectiveChecker.Shape.UNIFORM);
          k.allToAll(dt, count, CollectiveChecker.Shape.UNIFORM);
          for (int root = 0; root < nodes.length; root += Math.max(1, nodes.length - 1)) k.broadcast(dt, count, root, count == 7);
        }
      }
      k.runRootedAndV(counts, new int[] {1, 7, 1023}, EnumSet.of(Collective.REDUCE, Collective.GATHER, Collective.SCATTER,
          Collective.ALL_GATHER_V, Collective.REDUCE_SCATTER_V));
      k.runPointToPoint(counts);
      c.barrier();
      return k.failures().isEmpty() ? null : String.join("\n", k.failures());
    });
    assertAllNull(res);
  }

  /** 1M+3 elements: past the sharding threshold on even nodes (the shard rails), the leader path on uneven ones. */
  @ParameterizedTest
  @ValueSource(strings = {"a,a,b,b", "a,a,a,b"})
  void largeCountsMatchTheReference(String layout) throws Exception {
    String[] nodes = layout.split(",");
    int count = 1_000_003;
    List<Object> res = onNodes(nodes, OPTS, (r, c) -> {
      CollectiveChecker k = new CollectiveChecker(c, 7);
      k.allReduce(DataType.FLOAT32, ReduceOp.SUM, count, false, CollectiveChecker.Shape.NORMAL);
      k.allReduce(DataType.FLOAT64, ReduceOp.AVG, count, true, CollectiveChecker.Shape.UNIFORM);
      k.allReduce(DataType.BFLOAT16, ReduceOp.MAX, count, false, CollectiveChecker.Shape.UNIFORM);
      k.allGather(DataType.FLOAT32, count, CollectiveChecker.Shape.UNIFORM);
      k.broadcast(DataType.INT64, count, nodes.length - 1, false);
      return k.failures().isEmpty() ? null : String.join("\n", k.failures());
    });
    assertAllNull(res);
  }

  /** Low precision on: FP8 with per-block scales on the cross-node leg, within the LP bound of the reference, both paths. */
  @ParameterizedTest
  @ValueSource(strings = {"a,a,b,b", "a,a,a,b"})
  void lowPrecisionAllReduceCrossesNodesAsFp8(String layout) throws Exception {
    String[] nodes = layout.split(",");
    CommOptions lp = OPTS.toBuilder().lowPrecision(true).lpMinBytes(1).build();
    List<Object> res = onNodes(nodes, lp, (r, c) -> {
      CollectiveChecker k = new CollectiveChecker(c, 99);
      for (int count : new int[] {7, 1023, 300_001}) {
        for (ReduceOp op : new ReduceOp[] {ReduceOp.SUM, ReduceOp.AVG}) {
          io.sparkcomms.collectives.Protocol p = k.allReduce(DataType.FLOAT32, op, count, false, CollectiveChecker.Shape.NORMAL);
          if (p != io.sparkcomms.collectives.Protocol.LP) return "rank " + r + ": allReduce ran " + p + ", not LP";
        }
        k.allReduce(DataType.BFLOAT16, ReduceOp.SUM, count, true, CollectiveChecker.Shape.UNIFORM);
      }
      return k.failures().isEmpty() ? null : String.join("\n", k.failures());
    });
    assertAllNull(res);
  }

  @Test
  void allToAllVMovesEveryBlockAndAgreesOnSizes() throws Exception {
    String[] nodes = {"a", "a", "a", "b"};
    long[][] sc = allToAllVCounts(nodes.length);
    assertAllNull(onNodes(nodes, OPTS, (r, c) -> allToAllVChecks(r, c, sc)));
  }

  /** Random per-pair counts (0..49) of {@link #allToAllVChecks}, the same on every rank. */
  static long[][] allToAllVCounts(int n) {
    long[][] sc = new long[n][n];
    Random rnd = new Random(5);
    for (int i = 0; i < n; i++) for (int j = 0; j < n; j++) sc[i][j] = rnd.nextInt(50);
    return sc;
  }

  /**
   * Rank {@code r}'s allToAllV checks at 4 ranks (also run by the GPU composition's check program):
   * every block where it belongs and nothing past them; a receiver whose output is too small, a
   * sender's count far past its input and overlapping given offsets each raise
   * {@link CommCapacityException} on every rank, outputs untouched, the communicator usable after.
   * Returns null, or what went wrong.
   */
  static String allToAllVChecks(int r, Communicator c, long[][] sc) {
    int n = c.size();
    long total = 0;
    for (int j = 0; j < n; j++) total += sc[r][j];
    double[] in = new double[(int) total];
    for (int k = 0; k < in.length; k++) in[k] = r * 1e6 + k;
    long recvTotal = 0;
    for (int i = 0; i < n; i++) recvTotal += sc[i][r];
    double[] out = new double[(int) recvTotal + 3];
    java.util.Arrays.fill(out, Double.NaN);
    long[] rc = new long[n];
    c.allToAllV(HostTensor.of(in), HostTensor.of(sc[r].clone()), HostTensor.of(out), HostTensor.of(rc));
    int at = 0;
    for (int i = 0; i < n; i++) {
      if (rc[i] != sc[i][r]) return "rank " + r + " recvCounts[" + i + "] " + rc[i];
      long off = 0;
      for (int j = 0; j < r; j++) off += sc[i][j];
      for (int k = 0; k < sc[i][r]; k++) if (out[at++] != i * 1e6 + off + k) return "rank " + r + " element " + (at - 1);
    }
    for (int k = at; k < out.length; k++) if (!Double.isNaN(out[k])) return "rank " + r + " wrote past its blocks";
    // a receiver whose output is too small: every rank raises, no output written, and the next call works
    double[] small = new double[1];
    small[0] = Double.NaN;
    try {
      c.allToAllV(HostTensor.of(in), HostTensor.of(sc[r].clone()), HostTensor.of(r == 3 ? small : out), HostTensor.of(rc));
      return "rank " + r + ": no CommCapacityException";
    } catch (CommCapacityException e) {
      if (r == 3 && !Double.isNaN(small[0])) return "rank 3's output was written";
    }
    // a sender whose count runs far past its input: every rank raises, and the communicator stays usable
    long[] huge = sc[r].clone();
    if (r == 2) huge[0] = Long.MAX_VALUE / 4;
    try {
      c.allToAllV(HostTensor.of(in), HostTensor.of(huge), HostTensor.of(out), HostTensor.of(rc));
      return "rank " + r + ": no CommCapacityException for a count past the input";
    } catch (CommCapacityException e) {
      // expected on every rank
    }
    // given offsets whose blocks would overlap on rank 0: every rank raises, rank 0's output untouched
    long[] sendOffs = new long[n];
    for (int j = 1; j < n; j++) sendOffs[j] = sendOffs[j - 1] + sc[r][j - 1];
    long[] recvOffs = new long[n];
    double[] slotOut = new double[(int) recvTotal + 3];
    java.util.Arrays.fill(slotOut, Double.NaN);
    if (r == 0) {
      recvOffs[1] = Math.max(0, sc[0][0] - 1);  // rank 1's block starts inside rank 0's
      for (int i = 2; i < n; i++) recvOffs[i] = recvOffs[i - 1] + sc[i - 1][0] + 1;
    } else {
      for (int i = 1; i < n; i++) recvOffs[i] = recvOffs[i - 1] + sc[i - 1][r];
    }
    try {
      c.allToAllV(HostTensor.of(in), HostTensor.of(sc[r].clone()), HostTensor.of(sendOffs), HostTensor.of(slotOut),
          HostTensor.of(rc), HostTensor.of(recvOffs));
      if (sc[0][0] > 1 && sc[1][0] > 0) return "rank " + r + ": no CommCapacityException for overlapping blocks";
    } catch (CommCapacityException e) {
      if (r == 0 && !Double.isNaN(slotOut[0])) return "rank 0's output was written";
    }
    c.barrier();
    return null;
  }

  @Test
  void ranksThatDisagreeFailOnEveryNodeAndTheCommunicatorStaysUsable() throws Exception {
    String[] nodes = {"a", "a", "b", "b"};
    List<Object> res = onNodes(nodes, OPTS, (r, c) -> {
      // rank 3 (node b, not its leader) asks for another count: caught in node b, reported to node a
      float[] x = new float[r == 3 ? 11 : 10];
      try {
        c.allReduce(HostTensor.of(x), ReduceOp.SUM);
        return "rank " + r + ": no error for a count mismatch";
      } catch (CommMismatchException e) {
        // expected on every rank
      }
      // the leaders disagree (node a calls allGather, node b broadcast): every rank raises
      try {
        float[] one = new float[2], all = new float[8];
        if (r < 2) c.allGather(HostTensor.of(one), HostTensor.of(all));
        else c.broadcast(HostTensor.of(one), 0);
        return "rank " + r + ": no error for different collectives";
      } catch (CommMismatchException e) {
        // expected
      }
      // a refused argument on one rank (read-only output) fails every rank
      try {
        java.nio.ByteBuffer ro = java.nio.ByteBuffer.allocateDirect(40).asReadOnlyBuffer();
        float[] in = new float[10];
        c.allReduce(HostTensor.of(in), r == 1 ? HostTensor.wrap(ro, DataType.FLOAT32) : HostTensor.of(new float[10]), ReduceOp.SUM);
        return "rank " + r + ": no error for a refused argument";
      } catch (CommMismatchException | IllegalArgumentException e) {
        if (r == 1 && !(e instanceof IllegalArgumentException)) return "rank 1 raised " + e;
      }
      // point-to-point across nodes: ranks 1 (node a) and 2 (node b) both send; then a count mismatch
      if (r == 1 || r == 2) {
        int peer = 3 - r;
        try {
          c.send(HostTensor.of(new float[4]), peer);
          return "rank " + r + ": no error when both ranks send";
        } catch (CommMismatchException e) {
          // expected on both
        }
        try {
          if (r == 1) c.send(HostTensor.of(new float[4]), peer);
          else c.recv(HostTensor.of(new float[5]), peer);
          return "rank " + r + ": no error for a recv of another count";
        } catch (CommMismatchException e) {
          // expected on both
        }
        float[] got = new float[3];
        if (r == 1) c.send(HostTensor.of(new float[] {1, 2, 3}), peer);
        else c.recv(HostTensor.of(got), peer);
        if (r == 2 && got[2] != 3) return "rank 2 received " + java.util.Arrays.toString(got);
      }
      double[] v = {r + 1};
      c.allReduce(HostTensor.of(v), ReduceOp.SUM);
      return v[0] == 10 ? null : "rank " + r + " got " + v[0] + " after the mismatches";
    });
    assertAllNull(res);
  }

  @Test
  void anAbortOnOneNodeFailsEveryRankOnBoth() throws Exception {
    String[] nodes = {"a", "a", "b", "b"};
    long t0 = System.nanoTime();
    List<Object> res = onNodes(nodes, OPTS.toBuilder().timeout(Duration.ofSeconds(30)).build(), (r, c) -> {
      c.barrier();
      if (r == 3) {
        c.abort("rank 3 gives up");
        return new CommAbortedException("aborted itself");
      }
      try {
        for (int i = 0; i < 1000; i++) c.allReduce(HostTensor.of(new double[4]), ReduceOp.SUM);
        return "rank " + r + " did not fail";
      } catch (CommException e) {
        return e;
      }
    });
    double s = (System.nanoTime() - t0) / 1e9;
    for (Object x : res) assertInstanceOf(CommException.class, x, String.valueOf(x));
    assertTrue(s < 30, "took " + s + " s: an abort must not wait for the timeout");
  }

  /** A node whose ranks cannot share memory: every rank becomes a node of its own, and the results are still right. */
  @Test
  void aNodeThatCannotShareMemoryFallsBackToOneRankPerNode() throws Exception {
    String[] nodes = {"a", "a", "b", "b"};
    int n = nodes.length;
    InJvmRendezvous.Group g = InJvmRendezvous.group(n);
    List<Object> res = RankGroup.runCatching(n, 600, r -> {
      InJvmTransport t = new InJvmTransport();
      try (Communicator c = HierarchicalComms.create(g.member(r), nodes[r], t, OPTS, (rv, o) -> {
        if (nodes[r].equals("b") && rv.size() > 1) throw new io.sparkcomms.collectives.CommException("no shared /dev/shm here");
        return io.sparkcomms.collectives.host.HostCommunicator.create(rv, o);
      })) {
        NodeLayout l = ((HierarchicalCommunicator) c).layout();
        if (l.nodeCount() != n) return "rank " + r + ": " + l;
        CollectiveChecker k = new CollectiveChecker(c, 3);
        k.allReduce(DataType.FLOAT32, ReduceOp.SUM, 1023, false, CollectiveChecker.Shape.UNIFORM);
        k.allGather(DataType.FLOAT64, 7, CollectiveChecker.Shape.UNIFORM);
        return k.failures().isEmpty() ? null : String.join("\n", k.failures());
      } finally {
        t.close();
      }
    });
    assertAllNull(res);
  }

  /** Ranks of one process share one transport (several barrier tasks in one executor): frames reach their own rank. */
  @Test
  void ranksOfOneProcessShareATransport() throws Exception {
    String[] nodes = {"a", "a", "b", "b"};
    InJvmRendezvous.Group g = InJvmRendezvous.group(4);
    InJvmTransport a = new InJvmTransport(), b = new InJvmTransport();
    try {
      List<Object> res = RankGroup.runCatching(4, 600, r -> {
        try (Communicator c = Comms.createAcrossNodes(g.member(r), nodes[r], r < 2 ? a : b, OPTS)) {
          CollectiveChecker k = new CollectiveChecker(c, 5);
          k.allReduce(DataType.FLOAT64, ReduceOp.SUM, 1023, false, CollectiveChecker.Shape.UNIFORM);
          k.allToAll(DataType.INT32, 7, CollectiveChecker.Shape.UNIFORM);
          k.runPointToPoint(new int[] {7});
          return k.failures().isEmpty() ? null : String.join("\n", k.failures());
        }
      });
      assertAllNull(res);
    } finally {
      a.close();
      b.close();
    }
  }

  /**
   * With a device ordinal: AUTO builds the GPU composition only where the GPU library is usable, else
   * the host composition; a forced GPU backend without it fails on every rank with the loader's reason.
   */
  @Test
  void theBackendAcrossNodesFollowsTheGpuLibrary() throws Exception {
    String[] nodes = {"a", "b"};
    // where a GPU is usable, integration-tests' CrossNodeGpuTest checks the GPU composition (ranks as processes)
    org.junit.jupiter.api.Assumptions.assumeFalse(io.sparkcomms.nativeapi.GpuLibrary.available(), "a GPU library is usable here");
    InJvmRendezvous.Group g = InJvmRendezvous.group(2);
    InJvmTransport[] t = {new InJvmTransport(), new InJvmTransport()};
    try {
      List<Object> res = RankGroup.runCatching(2, 600, r -> {
        try (Communicator c = Comms.createAcrossNodes(g.member(r), nodes[r], t[r], OPTS, 0)) {
          return c.backendName();
        }
      });
      assertEquals(List.of("host+net", "host+net"), res);
      {
        CommOptions forced = OPTS.toBuilder().backend(CommOptions.Backend.GPU).build();
        InJvmRendezvous.Group g2 = InJvmRendezvous.group(2);
        List<Object> refused = RankGroup.runCatching(2, 600, r -> Comms.createAcrossNodes(g2.member(r), nodes[r], t[r], forced, 0));
        for (Object x : refused) {
          assertTrue(x instanceof io.sparkcomms.collectives.CommException, "refused on every rank: " + x);
          assertTrue(((Throwable) x).getMessage().contains("GPU"), ((Throwable) x).getMessage());
        }
      }
    } finally {
      for (InJvmTransport x : t) x.close();
    }
  }

  @Test
  void ranksOnOneNodeGetThePlainHostBackend() throws Exception {
    List<Object> res = onNodes(new String[] {"a", "a"}, OPTS, (r, c) -> c.backendName());
    assertEquals(List.of("host", "host"), res);
  }

}
