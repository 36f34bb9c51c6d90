package io.sparkcomms.collectives.reliability;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.Algorithm;
import io.sparkcomms.collectives.CommAbortedException;
import io.sparkcomms.collectives.CommException;
import io.sparkcomms.collectives.CommMismatchException;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.RankGroup;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.Tensor;
import io.sparkcomms.collectives.host.HostCommunicator;
import io.sparkcomms.collectives.rendezvous.InJvmRendezvous;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.IntFunction;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The bad-input matrix over the public API, on 3 ranks. The documented outcomes:
 * <ul>
 *   <li>ranks whose arguments are each valid but disagree (count, dtype, op, PREMUL factor, root,
 *       collective, algorithm): {@link CommMismatchException} on every rank;</li>
 *   <li>invalid arguments on one rank (null, dtype in != out, buffers too small, count not divisible,
 *       root out of range, op null or undefined for the dtype, a non-host tensor):
 *       {@link IllegalArgumentException} on that rank, {@link CommMismatchException} ("rank r rejected
 *       its arguments") on the others;</li>
 *   <li>after either, the communicator stays usable;</li>
 *   <li>empty (count 0) calls succeed; larger-than-needed outputs get the result in their prefix and the
 *       rest untouched; direct buffers at odd addresses work;</li>
 *   <li>a closed communicator: {@link IllegalStateException} from every call, sync and async.</li>
 * </ul>
 * Every case is run synchronously and through the async API ({@code ...Async().waitFor()}).
 */
class BadInputMatrixTest {
  static final int N = 3;
  private static RankGroup g;

  @BeforeAll static void start() {
    g = new RankGroup(N, CommOptions.builder().backend(CommOptions.Backend.HOST).stagingBytes(64 << 10)
        .timeout(Duration.ofSeconds(20)).build());
  }

  @AfterAll static void stop() { g.close(); }

  enum Kind { ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL, BROADCAST }

  /** One rank's arguments: tensors are built from dtype and count unless given. */
  record Args(Kind kind, DataType dt, int count, ReduceOp op, int root, Tensor in, Tensor out) {
    static Args of(Kind k) { return new Args(k, DataType.FLOAT32, 12, ReduceOp.SUM, 0, null, null); }
    Args dt(DataType d) { return new Args(kind, d, count, op, root, in, out); }
    Args count(int c) { return new Args(kind, dt, c, op, root, in, out); }
    Args op(ReduceOp o) { return new Args(kind, dt, count, o, root, in, out); }
    Args root(int r) { return new Args(kind, dt, count, op, r, in, out); }
    Args in(Tensor t) { return new Args(kind, dt, count, op, root, t, out); }
    Args out(Tensor t) { return new Args(kind, dt, count, op, root, in, t); }
    int inCount() { return kind == Kind.REDUCE_SCATTER || kind == Kind.ALL_TO_ALL ? N * count : count; }
    int outCount() { return kind == Kind.ALL_GATHER || kind == Kind.ALL_TO_ALL ? N * count : count; }
    Tensor inT() { return in != null ? in : HostTensor.allocate(dt, inCount()); }
    Tensor outT() { return out != null ? out : HostTensor.allocate(dt, outCount()); }
  }

  static final Tensor NULL = new HostTensorPlaceholder();

  /** Marks "pass null" (a record component of null means "build the default tensor"). */
  private static final class HostTensorPlaceholder implements Tensor {
    @Override public DataType dtype() { return DataType.FLOAT32; }
    @Override public long count() { return 0; }
    @Override public boolean isDevice() { return false; }
  }

  /** A tensor type the host backend does not know. */
  static final class ForeignTensor implements Tensor {
    final int n;
    ForeignTensor(int n) { this.n = n; }
    @Override public DataType dtype() { return DataType.FLOAT32; }
    @Override public long count() { return n; }
    @Override public boolean isDevice() { return false; }
  }

  static void invoke(Communicator c, Args a, boolean async) {
    Tensor in = a.in == NULL ? null : a.inT();
    Tensor out = a.out == NULL ? null : a.outT();
    switch (a.kind) {
      case ALL_REDUCE:
        if (async) c.allReduceAsync(in, out, a.op).waitFor(); else c.allReduce(in, out, a.op);
        break;
      case ALL_GATHER:
        if (async) c.allGatherAsync(in, out).waitFor(); else c.allGather(in, out);
        break;
      case REDUCE_SCATTER:
        if (async) c.reduceScatterAsync(in, out, a.op).waitFor(); else c.reduceScatter(in, out, a.op);
        break;
      case ALL_TO_ALL:
        if (async) c.allToAllAsync(in, out).waitFor(); else c.allToAll(in, out);
        break;
      case BROADCAST:
        if (async) c.broadcastAsync(in, out, a.root).waitFor(); else c.broadcast(in, out, a.root);
        break;
      default:
        throw new AssertionError(a.kind);
    }
  }

  static boolean reduces(Kind k) { return k == Kind.ALL_REDUCE || k == Kind.REDUCE_SCATTER; }

  /** Runs {@code f} on every rank; every rank must raise; returns the exceptions by rank. */
  static List<Object> everyRankRaises(IntFunction<Object> f, String what) {
    List<Object> res = g.runCatching(f);
    for (int r = 0; r < N; r++) assertInstanceOf(RuntimeException.class, res.get(r), what + ": rank " + r + " did not raise");
    return res;
  }

  static void stillWorks(String after) {
    List<Object> sums = g.run(r -> {
      double[] x = {r + 1, 10 * (r + 1)};
      g.comm(r).allReduce(HostTensor.of(x), ReduceOp.SUM);
      return x[0] + "," + x[1];
    });
    sums.forEach(s -> assertEquals("6.0,60.0", s, "communicator unusable after " + after));
    for (int r = 0; r < N; r++) assertFalse(g.comm(r).isAborted(), after);
  }

  // ------------------------------------------------------------------ allToAllV

  /** One rank's allToAllV arguments; the others pass valid ones (2 elements for every peer). */
  enum VProblem { NULL_SEND_COUNTS, NULL_RECV_COUNTS, INT32_COUNTS, SHORT_COUNTS, READ_ONLY_RECV_COUNTS,
    DTYPE_IN_OUT, NULL_OUTPUT, ONLY_SEND_OFFSETS, FOREIGN_COUNTS }

  static void invokeV(Communicator c, VProblem p, boolean async) {
    Tensor in = HostTensor.allocate(DataType.FLOAT32, 2 * N);
    Tensor out = HostTensor.allocate(DataType.FLOAT32, 2 * N);
    Tensor sc = HostTensor.of(new long[] {2, 2, 2});
    Tensor rc = HostTensor.of(new long[N]);
    Tensor so = null, ro = null;
    if (p != null) {
      switch (p) {
        case NULL_SEND_COUNTS: sc = null; break;
        case NULL_RECV_COUNTS: rc = null; break;
        case INT32_COUNTS: sc = HostTensor.of(new int[] {2, 2, 2}); break;
        case SHORT_COUNTS: sc = HostTensor.of(new long[] {2, 2}); break;
        case READ_ONLY_RECV_COUNTS:
          rc = HostTensor.wrap(ByteBuffer.allocateDirect(8 * N).order(ByteOrder.nativeOrder()).asReadOnlyBuffer(), DataType.INT64);
          break;
        case DTYPE_IN_OUT: out = HostTensor.allocate(DataType.FLOAT64, 2 * N); break;
        case NULL_OUTPUT: out = null; break;
        case ONLY_SEND_OFFSETS: so = HostTensor.of(new long[] {0, 2, 4}); break;
        case FOREIGN_COUNTS: sc = new ForeignTensor(N); break;
        default: throw new AssertionError(p);
      }
    }
    if (so != null || ro != null) {
      if (async) c.allToAllVAsync(in, sc, so, out, rc, ro).waitFor(); else c.allToAllV(in, sc, so, out, rc, ro);
    } else {
      if (async) c.allToAllVAsync(in, sc, out, rc).waitFor(); else c.allToAllV(in, sc, out, rc);
    }
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(VProblem.class)
  void allToAllVInvalidArgumentsOnOneRank(VProblem p) {
    for (boolean async : new boolean[] {false, true}) {
      String what = "allToAllV " + p + (async ? " async" : "");
      List<Object> res = g.runCatching(r -> {
        invokeV(g.comm(r), r == 1 ? p : null, async);
        return null;
      });
      assertInstanceOf(IllegalArgumentException.class, res.get(1), what + " rank 1: " + res.get(1));
      for (int r : new int[] {0, 2}) {
        assertInstanceOf(CommMismatchException.class, res.get(r), what + " rank " + r + ": " + res.get(r));
        assertTrue(((Exception) res.get(r)).getMessage().contains("rank 1 rejected its arguments"), what);
      }
      stillWorks(what);
    }
  }

  // ------------------------------------------------------------------ ranks disagree

  enum Mismatch { COUNT, DTYPE, OP, PREMUL_FACTOR, ROOT, COLLECTIVE }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Kind.class)
  void disagreeingRanksGetCommMismatchEverywhere(Kind kind) {
    for (boolean async : new boolean[] {false, true}) {
      for (Mismatch m : Mismatch.values()) {
        Args base = Args.of(kind);
        Args odd;
        switch (m) {
          case COUNT: odd = base.count(13); break;
          case DTYPE: odd = base.dt(DataType.FLOAT64); break;
          case OP:
            if (!reduces(kind)) continue;
            odd = base.op(ReduceOp.MAX);
            break;
          case PREMUL_FACTOR:
            if (!reduces(kind)) continue;
            base = base.op(ReduceOp.premulSum(0.5));
            odd = base.op(ReduceOp.premulSum(0.25));
            break;
          case ROOT:
            if (kind != Kind.BROADCAST) continue;
            odd = base.root(2);
            break;
          case COLLECTIVE:
            odd = Args.of(kind == Kind.ALL_REDUCE ? Kind.BROADCAST : Kind.ALL_REDUCE);
            break;
          default:
            throw new AssertionError(m);
        }
        final Args b = base, o = odd;
        String what = kind + " " + m + (async ? " async" : "");
        List<Object> res = everyRankRaises(r -> {
          invoke(g.comm(r), r == 1 ? o : b, async);
          return null;
        }, what);
        for (int r = 0; r < N; r++) assertInstanceOf(CommMismatchException.class, res.get(r), what + " rank " + r);
        assertTrue(((Exception) res.get(0)).getMessage().contains("disagree"), ((Exception) res.get(0)).getMessage());
        stillWorks(what);
      }
      // a rank calling barrier() instead
      String what = kind + " vs barrier" + (async ? " async" : "");
      List<Object> res = everyRankRaises(r -> {
        if (r == 2) {
          if (async) g.comm(r).barrierAsync().waitFor(); else g.comm(r).barrier();
        } else {
          invoke(g.comm(r), Args.of(kind), async);
        }
        return null;
      }, what);
      res.forEach(e -> assertInstanceOf(CommMismatchException.class, e, what));
      stillWorks(what);
    }
  }

  @Test
  void ranksWithDifferentAlgorithmOptionsGetCommMismatchEverywhere() throws Exception {
    Algorithm[] algos = {Algorithm.FLAT, Algorithm.TREE, Algorithm.FLAT};
    InJvmRendezvous.Group grp = InJvmRendezvous.group(N);
    List<Communicator> cs = new ArrayList<>();
    for (Object o : RankGroup.runCatching(N, 60, rank -> HostCommunicator.create(grp.member(rank), CommOptions.builder()
        .backend(CommOptions.Backend.HOST).stagingBytes(64 << 10).algorithm(algos[rank]).timeout(Duration.ofSeconds(20)).build()))) {
      cs.add(assertInstanceOf(Communicator.class, o));
    }
    try {
      List<Object> res = RankGroup.runCatching(N, 60, rank -> {
        cs.get(rank).allReduce(HostTensor.of(new float[8]), ReduceOp.SUM);
        return "returned";
      });
      for (Object o : res) {
        assertInstanceOf(CommMismatchException.class, o);
        assertTrue(((Exception) o).getMessage().contains("algo="), ((Exception) o).getMessage());
      }
    } finally {
      cs.forEach(Communicator::close);
    }
  }

  // ------------------------------------------------------------------ invalid arguments on one rank

  /** Invalid variants of {@code kind}'s arguments, with a word the message must contain. */
  static List<Object[]> invalid(Kind kind) {
    Args a = Args.of(kind);
    List<Object[]> v = new ArrayList<>();
    v.add(new Object[] {"null input", a.in(NULL), "null"});
    v.add(new Object[] {"null output", a.out(NULL), "null"});
    v.add(new Object[] {"both null", a.in(NULL).out(NULL), "null"});
    v.add(new Object[] {"input FLOAT32, output FLOAT64", a.out(HostTensor.allocate(DataType.FLOAT64, a.outCount())), "dtype"});
    v.add(new Object[] {"foreign tensor type", a.in(new ForeignTensor(a.inCount())).out(new ForeignTensor(a.outCount())), "HostTensor"});
    v.add(new Object[] {"array tensor and wrong-dtype buffer", a.out(HostTensor.wrap(ByteBuffer.allocateDirect(4 * a.outCount()), DataType.INT32)), "dtype"});
    switch (kind) {
      case ALL_REDUCE:
      case BROADCAST:
        v.add(new Object[] {"output too small", a.out(HostTensor.allocate(DataType.FLOAT32, a.count - 1)), "output"});
        break;
      case ALL_GATHER:
        v.add(new Object[] {"output too small", a.out(HostTensor.allocate(DataType.FLOAT32, N * a.count - 1)), "output"});
        break;
      case REDUCE_SCATTER:
        v.add(new Object[] {"input too small", a.in(HostTensor.allocate(DataType.FLOAT32, N * a.count - 1)), "input"});
        break;
      case ALL_TO_ALL:
        v.add(new Object[] {"input count not a multiple of size", a.in(HostTensor.allocate(DataType.FLOAT32, N * a.count + 1))
            .out(HostTensor.allocate(DataType.FLOAT32, N * a.count + 1)), "multiple"});
        v.add(new Object[] {"output too small", a.out(HostTensor.allocate(DataType.FLOAT32, N * a.count - 1)), "output"});
        break;
      default:
        break;
    }
    if (reduces(kind)) {
      v.add(new Object[] {"null op", a.op(null), "op"});
      v.add(new Object[] {"PREMUL_SUM on INT32", a.dt(DataType.INT32).op(ReduceOp.premulSum(2)), "PREMUL_SUM"});
    }
    if (kind == Kind.BROADCAST) {
      v.add(new Object[] {"root -1", a.root(-1), "root"});
      v.add(new Object[] {"root = size", a.root(N), "root"});
    }
    return v;
  }

  @ParameterizedTest(name = "{0}")
  @EnumSource(Kind.class)
  void invalidArgumentsOnOneRankRaiseOnEveryRank(Kind kind) {
    for (boolean async : new boolean[] {false, true}) {
      for (Object[] c : invalid(kind)) {
        String what = kind + " " + c[0] + (async ? " async" : "");
        Args bad = (Args) c[1];
        List<Object> res = everyRankRaises(r -> {
          invoke(g.comm(r), r == 1 ? bad : Args.of(kind), async);
          return null;
        }, what);
        assertInstanceOf(IllegalArgumentException.class, res.get(1), what);
        assertTrue(((Exception) res.get(1)).getMessage().contains((String) c[2]), what + ": " + ((Exception) res.get(1)).getMessage());
        for (int r : new int[] {0, 2}) {
          assertInstanceOf(CommMismatchException.class, res.get(r), what + " rank " + r);
          assertTrue(((Exception) res.get(r)).getMessage().contains("rank 1 rejected"), ((Exception) res.get(r)).getMessage());
        }
        stillWorks(what);
      }
      // the same invalid arguments on every rank: IllegalArgumentException everywhere
      String what = kind + " null input on every rank" + (async ? " async" : "");
      List<Object> res = everyRankRaises(r -> {
        invoke(g.comm(r), Args.of(kind).in(NULL), async);
        return null;
      }, what);
      res.forEach(e -> assertInstanceOf(IllegalArgumentException.class, e, what));
      stillWorks(what);
    }
  }

  // ------------------------------------------------------------------ valid edge cases

  @ParameterizedTest(name = "{0}")
  @EnumSource(Kind.class)
  void emptyCallsSucceedOnEveryRank(Kind kind) {
    for (boolean async : new boolean[] {false, true}) {
      for (DataType dt : DataType.values()) {
        List<Object> res = g.runCatching(r -> {
          invoke(g.comm(r), Args.of(kind).dt(dt).count(0), async);
          return "ok";
        });
        res.forEach(o -> assertEquals("ok", o, kind + " count 0 " + dt));
      }
    }
    g.run(r -> {
      g.comm(r).barrier();
      g.comm(r).barrierAsync().waitFor();
      return null;
    });
    stillWorks(kind + " count 0");
  }

  /**
   * Output longer than needed: the result fills its prefix, the rest keeps its (poison) values. For
   * reduceScatter the output defines the count, so there the input is the longer one (its tail ignored).
   */
  @ParameterizedTest(name = "{0}")
  @EnumSource(Kind.class)
  void largerOutputsGetTheResultInTheirPrefixAndKeepTheRest(Kind kind) {
    int c = 1000, extra = 37;
    List<Object> res = g.run(r -> {
      Args a = Args.of(kind).count(c);
      float[] in = new float[a.inCount() + (kind == Kind.REDUCE_SCATTER ? extra : 0)];
      for (int i = 0; i < in.length; i++) in[i] = r * 100_000 + i;
      float[] out = new float[a.outCount() + (kind == Kind.REDUCE_SCATTER ? 0 : extra)];
      java.util.Arrays.fill(out, -7f);
      invoke(g.comm(r), a.in(HostTensor.of(in)).out(HostTensor.of(out)), false);
      for (int i = 0; i < out.length; i++) {
        float want = i >= a.outCount() ? -7f : expected(kind, r, i, c);
        if (out[i] != want) return "element " + i + ": " + out[i] + " != " + want;
      }
      return "ok";
    });
    res.forEach(o -> assertEquals("ok", o, kind.toString()));
  }

  /** Element i of rank r's output when rank p's input element j is p*100000 + j (SUM, root 0). */
  static float expected(Kind kind, int r, int i, int c) {
    switch (kind) {
      case ALL_REDUCE: return (0 + 1 + 2) * 100_000 + N * i;
      case BROADCAST: return i;
      case ALL_GATHER: return (i / c) * 100_000 + i % c;
      case REDUCE_SCATTER: return (0 + 1 + 2) * 100_000 + N * (r * c + i);
      case ALL_TO_ALL: return (i / c) * 100_000 + r * c + i % c;
      default: throw new AssertionError(kind);
    }
  }

  /** Direct buffers starting at odd addresses (misaligned for the dtype), mixed with arrays on other ranks. */
  @ParameterizedTest(name = "{0}")
  @EnumSource(Kind.class)
  void misalignedDirectBuffersWork(Kind kind) {
    int c = 20_000; // more than one 64 KB chunk
    List<Object> res = g.run(r -> {
      Args a = Args.of(kind).count(c);
      Tensor in;
      Tensor out;
      ByteBuffer ob = null;
      float[] oa = null;
      if (r == 1) {
        in = HostTensor.of(inputs(r, a.inCount()));
        oa = new float[a.outCount()];
        out = HostTensor.of(oa);
      } else {
        ByteBuffer ib = ByteBuffer.allocateDirect(4 * a.inCount() + 8).order(ByteOrder.nativeOrder());
        ib.position(1 + r);
        ByteBuffer iv = ib.slice().order(ByteOrder.nativeOrder());
        float[] x = inputs(r, a.inCount());
        for (int i = 0; i < x.length; i++) iv.putFloat(4 * i, x[i]);
        in = HostTensor.wrap(iv.limit(4 * a.inCount()), DataType.FLOAT32);
        ByteBuffer o = ByteBuffer.allocateDirect(4 * a.outCount() + 8);
        o.position(3);
        ob = o.slice().order(ByteOrder.nativeOrder()).limit(4 * a.outCount());
        out = HostTensor.wrap(ob, DataType.FLOAT32);
      }
      invoke(g.comm(r), a.in(in).out(out), false);
      for (int i = 0; i < a.outCount(); i++) {
        float got = ob != null ? ob.getFloat(4 * i) : oa[i];
        if (got != expected(kind, r, i, c)) return "rank " + r + " element " + i + ": " + got;
      }
      return "ok";
    });
    res.forEach(o -> assertEquals("ok", o, kind.toString()));
  }

  static float[] inputs(int r, int n) {
    float[] x = new float[n];
    for (int i = 0; i < n; i++) x[i] = r * 100_000 + i;
    return x;
  }

  // ------------------------------------------------------------------ a read-only output

  @Test
  void aReadOnlyOutputBufferFailsEveryRankWithoutAHang() {
    try (RankGroup h = new RankGroup(N, CommOptions.builder().backend(CommOptions.Backend.HOST).stagingBytes(64 << 10)
        .timeout(Duration.ofSeconds(20)).build())) {
      List<Object> res = h.runCatching(r -> {
        Tensor out = r == 1 ? HostTensor.wrap(ByteBuffer.allocateDirect(64).asReadOnlyBuffer(), DataType.FLOAT32)
            : HostTensor.of(new float[16]);
        h.comm(r).allReduce(HostTensor.of(new float[16]), out, ReduceOp.SUM);
        return "returned";
      });
      // (every rank returned: no hang) rank 1's output is read-only: an argument error there, reported to the others at the first
      // barrier; the communicator stays usable
      assertInstanceOf(IllegalArgumentException.class, res.get(1));
      assertTrue(((Exception) res.get(1)).getMessage().contains("read-only"), ((Exception) res.get(1)).getMessage());
      for (int r : new int[] {0, 2}) assertInstanceOf(CommMismatchException.class, res.get(r), "rank " + r);
      h.run(r -> {
        h.comm(r).barrier();
        return null;
      });
    }
  }

  // ------------------------------------------------------------------ closed communicator

  @Test
  void everyCallOnAClosedCommunicatorIsAnIllegalStateException() {
    RankGroup h = new RankGroup(2, CommOptions.builder().backend(CommOptions.Backend.HOST).stagingBytes(64 << 10).build());
    h.close();
    Communicator c = h.comm(0);
    HostTensor t = HostTensor.of(new float[4]);
    HostTensor t2 = HostTensor.of(new float[8]);
    List<Runnable> calls = List.of(
        () -> c.allReduce(t, ReduceOp.SUM), () -> c.allReduceAsync(t, t, ReduceOp.SUM),
        () -> c.allGather(t, t2), () -> c.allGatherAsync(t, t2),
        () -> c.reduceScatter(t2, t, ReduceOp.SUM), () -> c.reduceScatterAsync(t2, t, ReduceOp.SUM),
        () -> c.allToAll(t, t), () -> c.allToAllAsync(t, t),
        () -> c.broadcast(t, 0), () -> c.broadcastAsync(t, t, 0),
        c::barrier, c::barrierAsync,
        () -> c.allReduce(null, null, null)); // closed is reported before argument problems
    for (Runnable call : calls) {
      IllegalStateException e = assertThrows(IllegalStateException.class, call::run);
      assertTrue(e.getMessage().contains("closed"), e.getMessage());
    }
    c.close(); // idempotent
    c.abort("after close"); // harmless
    assertEquals(0, c.stats().totalCalls());
  }
}
