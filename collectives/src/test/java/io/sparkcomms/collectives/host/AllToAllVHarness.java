package io.sparkcomms.collectives.host;

import io.sparkcomms.collectives.AllToAllVReference;
import io.sparkcomms.collectives.CommCapacityException;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.Tensor;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;

/**
 * One allToAllV call checked on one rank against {@link AllToAllVReference}: inputs hold values that
 * encode (rank, index), the output and recvCounts are poisoned and sit between poisoned guard regions
 * (direct-buffer slices of a larger buffer), and the input must come back unchanged. Every rank builds
 * the same {@link Scenario} (deterministic), so threads and processes can use it alike.
 */
public final class AllToAllVHarness {
  static final int GUARD = 7;
  static final long RECV_POISON = -777;

  private AllToAllVHarness() {}

  /**
   * The global description of one call. {@code sendOffsets}/{@code recvOffsets} null: packed layout.
   * {@code bufferIn}: inputs are direct buffers (else arrays); {@code bufferCounts}: the count tensors too.
   */
  public record Scenario(String name, DataType dtype, long[] inCounts, long[] outCounts, long[][] counts,
                  long[][] sendOffsets, long[][] recvOffsets, boolean bufferIn, boolean bufferCounts) {
    int n() { return counts.length; }
    boolean offsets() { return recvOffsets != null; }
    public AllToAllVReference.Result expected() {
      return AllToAllVReference.expected(n(), inCounts, outCounts, counts, sendOffsets, recvOffsets);
    }
    @Override public String toString() {
      return name + " " + dtype + (offsets() ? " offsets" : " packed") + " counts=" + Arrays.deepToString(counts)
          + " in=" + Arrays.toString(inCounts) + " out=" + Arrays.toString(outCounts)
          + (offsets() ? " sendOffsets=" + Arrays.deepToString(sendOffsets) + " recvOffsets=" + Arrays.deepToString(recvOffsets) : "");
    }
  }

  // ------------------------------------------------------------------ scenarios

  /** A valid packed call: out holds what each rank receives plus up to {@code slack} elements. */
  public static Scenario packed(String name, DataType dt, long[][] counts, int slack, long seed, boolean bufferIn, boolean bufferCounts) {
    int n = counts.length;
    Random rnd = new Random(seed);
    long[] in = new long[n], out = new long[n];
    for (int i = 0; i < n; i++) in[i] = AllToAllVReference.sent(counts, i) + rnd.nextInt(slack + 1);
    for (int j = 0; j < n; j++) out[j] = AllToAllVReference.received(counts, j) + rnd.nextInt(slack + 1);
    return new Scenario(name, dt, in, out, counts, null, null, bufferIn, bufferCounts);
  }

  /**
   * A valid slot-layout call: shuffled gapped send blocks; receiver slots of count + up to
   * {@code slack} elements (so some slots are empty or exactly full), plus tail room.
   */
  public static Scenario slots(String name, DataType dt, long[][] counts, int slack, long seed, boolean bufferIn, boolean bufferCounts) {
    int n = counts.length;
    Random rnd = new Random(seed);
    AllToAllVReference.SendLayout sl = AllToAllVReference.scatteredSendOffsets(counts, slack, seed + 1);
    long[][] ro = new long[n][n];
    long[] out = new long[n];
    for (int j = 0; j < n; j++) {
      long at = rnd.nextInt(slack + 1);
      for (int i = 0; i < n; i++) {
        ro[j][i] = at;
        at += counts[i][j] + rnd.nextInt(slack + 1);
      }
      out[j] = at;
    }
    return new Scenario(name, dt, sl.inCounts(), out, counts, sl.sendOffsets(), ro, bufferIn, bufferCounts);
  }

  /** The random skewed matrix: every {@link AllToAllVReference.Skew} x FLOAT32/INT64/BFLOAT16 x packed/slots. */
  public static List<Scenario> skewedMatrix(int n, long seed, int maxTotal) {
    List<Scenario> out = new ArrayList<>();
    Random rnd = new Random(seed);
    int k = 0;
    for (AllToAllVReference.Skew skew : AllToAllVReference.Skew.values()) {
      for (DataType dt : new DataType[] {DataType.FLOAT32, DataType.INT64, DataType.BFLOAT16}) {
        for (boolean slots : new boolean[] {false, true}) {
          long[] totals = new long[n];
          for (int i = 0; i < n; i++) totals[i] = rnd.nextInt(maxTotal + 1);
          if (rnd.nextInt(3) == 0) totals[rnd.nextInt(n)] = 0; // a rank that sends nothing
          long[][] counts = AllToAllVReference.skewedCounts(totals, skew, seed + k);
          String name = skew + "#" + k;
          boolean bufIn = (k & 1) == 1, bufCounts = (k & 2) != 0;
          out.add(slots ? slots(name, dt, counts, 3, seed + 100 + k, bufIn, bufCounts)
                        : packed(name, dt, counts, 3, seed + 100 + k, bufIn, bufCounts));
          k++;
        }
      }
    }
    return out;
  }

  /** n x n matrix of the same count. */
  static long[][] constant(int n, long v) {
    long[][] c = new long[n][n];
    for (long[] row : c) Arrays.fill(row, v);
    return c;
  }

  // ------------------------------------------------------------------ values

  static long mix(long z) {
    z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
    z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
    return z ^ (z >>> 31);
  }

  /** The raw bits of input element {@code idx} of {@code rank}: sign bit clear, finite. */
  static long enc(DataType dt, int rank, long idx) {
    switch (dt) {
      case FLOAT32:
        if (idx >= 1_000_000 || rank >= 16) throw new IllegalArgumentException("float32 encoding needs rank < 16, index < 1M");
        return Float.floatToRawIntBits(rank * 1_000_000f + idx + 1) & 0xFFFFFFFFL;
      case FLOAT64: return Double.doubleToRawLongBits(rank * 1e12 + idx + 1);
      case INT32: return (rank + 1L) << 24 | (idx & 0xFFFFFF);
      case INT64: return (rank + 1L) << 40 | idx;
      case BFLOAT16: return Math.floorMod(mix(rank * 0x1_0000_0000L + idx), 0x7F00);  // positive finite bf16
      default: return Math.floorMod(mix(rank * 0x1_0000_0000L + idx), 0x7C00);       // positive finite fp16
    }
  }

  /** Poison of an output element (sign bit set, so never a valid encoding). */
  static long poison(DataType dt) { return dt.size() == 2 ? 0xFFFF : dt.size() == 4 ? 0xDEADBEEFL : 0xDEADBEEFDEADBEEFL; }

  /** Poison of a guard element, different from {@link #poison}. */
  static long guard(DataType dt) { return dt.size() == 2 ? 0xFFFE : dt.size() == 4 ? 0xBADC0FFEL : 0xBADC0FFEE0DDF00DL; }

  static long getBits(ByteBuffer b, int element, int es) {
    switch (es) {
      case 2: return b.getShort(element * 2) & 0xFFFFL;
      case 4: return b.getInt(element * 4) & 0xFFFFFFFFL;
      default: return b.getLong(element * 8);
    }
  }

  static void putBits(ByteBuffer b, int element, int es, long v) {
    switch (es) {
      case 2: b.putShort(element * 2, (short) v); break;
      case 4: b.putInt(element * 4, (int) v); break;
      default: b.putLong(element * 8, v);
    }
  }

  /** A direct buffer of GUARD + count + GUARD elements: guards poisoned with {@code g}, the body with {@code p}. */
  static ByteBuffer guarded(int count, int es, long p, long g) {
    ByteBuffer b = ByteBuffer.allocateDirect((2 * GUARD + count) * es).order(ByteOrder.nativeOrder());
    for (int e = 0; e < 2 * GUARD + count; e++) putBits(b, e, es, e < GUARD || e >= GUARD + count ? g : p);
    return b;
  }

  /** The tensor over the body of a {@link #guarded} buffer. */
  static HostTensor body(ByteBuffer parent, int count, DataType dt) {
    return HostTensor.wrap(parent.duplicate().position(GUARD * dt.size()).limit((GUARD + count) * dt.size()), dt);
  }

  /** This rank's input tensor (array or direct buffer), every element enc(rank, i). */
  static HostTensor input(DataType dt, int rank, int count, boolean buffer) {
    if (buffer) {
      ByteBuffer b = ByteBuffer.allocateDirect(count * dt.size()).order(ByteOrder.nativeOrder());
      for (int i = 0; i < count; i++) putBits(b, i, dt.size(), enc(dt, rank, i));
      return HostTensor.wrap(b, dt);
    }
    switch (dt) {
      case FLOAT32: {
        float[] a = new float[count];
        for (int i = 0; i < count; i++) a[i] = Float.intBitsToFloat((int) enc(dt, rank, i));
        return HostTensor.of(a);
      }
      case INT64: {
        long[] a = new long[count];
        for (int i = 0; i < count; i++) a[i] = enc(dt, rank, i);
        return HostTensor.of(a);
      }
      case BFLOAT16: {
        short[] a = new short[count];
        for (int i = 0; i < count; i++) a[i] = (short) enc(dt, rank, i);
        return HostTensor.bf16(a);
      }
      default:
        return input(dt, rank, count, true);
    }
  }

  /** Raw bits of element i of a host tensor (array or buffer). */
  static long bitsOf(HostTensor t, int i) {
    Object a = t.array();
    if (a == null) {
      ByteBuffer tmp = ByteBuffer.allocate(8).order(ByteOrder.nativeOrder());
      t.copyTo(i, 1, tmp, 0);
      return getBits(tmp, 0, t.dtype().size());
    }
    if (a instanceof float[] f) return Float.floatToRawIntBits(f[i]) & 0xFFFFFFFFL;
    if (a instanceof long[] l) return l[i];
    if (a instanceof short[] s) return s[i] & 0xFFFFL;
    if (a instanceof int[] x) return x[i] & 0xFFFFFFFFL;
    return Double.doubleToRawLongBits(((double[]) a)[i]);
  }

  /** An INT64 tensor of the values, as an array or a direct buffer. */
  static HostTensor longs(long[] v, boolean buffer) {
    if (!buffer) return HostTensor.of(v.clone());
    ByteBuffer b = ByteBuffer.allocateDirect(8 * v.length).order(ByteOrder.nativeOrder());
    for (int i = 0; i < v.length; i++) b.putLong(8 * i, v[i]);
    return HostTensor.wrap(b, DataType.INT64);
  }

  // ------------------------------------------------------------------ one rank's call

  /** This rank's tensors of a scenario; {@link #call} runs it, {@link #check} compares with the reference. */
  static final class RankCall {
    final Scenario s;
    final int rank;
    final HostTensor in;
    final ByteBuffer outParent;
    final HostTensor out;
    final ByteBuffer recvParent;
    final HostTensor recvCounts;
    final HostTensor sendCounts;
    final HostTensor sendOffsets;
    final HostTensor recvOffsets;

    RankCall(Scenario s, int rank) {
      this.s = s;
      this.rank = rank;
      DataType dt = s.dtype();
      int n = s.n();
      in = input(dt, rank, Math.toIntExact(s.inCounts()[rank]), s.bufferIn());
      int oc = Math.toIntExact(s.outCounts()[rank]);
      outParent = guarded(oc, dt.size(), poison(dt), guard(dt));
      out = body(outParent, oc, dt);
      recvParent = guarded(n, 8, RECV_POISON, guard(DataType.INT64));
      recvCounts = body(recvParent, n, DataType.INT64);
      sendCounts = longs(s.counts()[rank], s.bufferCounts());
      sendOffsets = s.offsets() ? longs(s.sendOffsets()[rank], s.bufferCounts()) : null;
      long[] ro = new long[n];
      if (s.offsets()) ro = s.recvOffsets()[rank];
      recvOffsets = s.offsets() ? longs(ro, s.bufferCounts()) : null;
    }

    void call(Communicator c) {
      if (s.offsets()) c.allToAllV(in, sendCounts, sendOffsets, out, recvCounts, recvOffsets);
      else c.allToAllV(in, sendCounts, out, recvCounts);
    }

    Tensor outTensor() { return out; }

    /**
     * Compares this rank's state after the call (which threw {@code thrown}, or null) with the
     * reference; returns failure lines (empty when all is right). At most a few element errors are listed.
     */
    List<String> check(AllToAllVReference.Result ref, Throwable thrown) {
      List<String> f = new ArrayList<>();
      String where = "rank " + rank + " [" + s.name() + " " + s.dtype() + (s.offsets() ? " offsets" : " packed") + "]: ";
      DataType dt = s.dtype();
      int es = dt.size();
      AllToAllVReference.RankResult rr = ref.ranks[rank];
      if (ref.ok()) {
        if (thrown != null) f.add(where + "unexpected " + thrown);
      } else if (!(thrown instanceof CommCapacityException)) {
        f.add(where + "expected CommCapacityException ending with '" + ref.error + "', got " + thrown);
      } else if (!thrown.getMessage().endsWith(": " + ref.error)) {
        f.add(where + "message '" + thrown.getMessage() + "' does not end with '" + ref.error + "'");
      }
      // recvCounts (written in both cases) and its guards
      for (int i = 0; i < s.n(); i++) {
        long got = recvParent.getLong(8 * (GUARD + i));
        if (got != rr.recvCounts[i]) f.add(where + "recvCounts[" + i + "] = " + got + ", expected " + rr.recvCounts[i]);
      }
      for (int e = 0; e < GUARD; e++) {
        if (recvParent.getLong(8 * e) != guard(DataType.INT64) || recvParent.getLong(8 * (GUARD + s.n() + e)) != guard(DataType.INT64)) {
          f.add(where + "recvCounts guard region overwritten");
          break;
        }
      }
      // out: guards, then every element
      int oc = Math.toIntExact(s.outCounts()[rank]);
      int bad = 0;
      for (int e = 0; e < GUARD; e++) {
        if (getBits(outParent, e, es) != guard(dt) || getBits(outParent, GUARD + oc + e, es) != guard(dt)) {
          f.add(where + "output guard region overwritten near guard element " + e);
          break;
        }
      }
      for (int p = 0; p < oc && bad < 5; p++) {
        long want = rr.written(p) ? enc(dt, rr.srcRank[p], rr.srcIndex[p]) : poison(dt);
        long got = getBits(outParent, GUARD + p, es);
        if (got != want) {
          bad++;
          f.add(where + "out[" + p + "] = 0x" + Long.toHexString(got) + ", expected 0x" + Long.toHexString(want)
              + (rr.written(p) ? " (rank " + rr.srcRank[p] + " element " + rr.srcIndex[p] + ")" : " (poison: must not be written)"));
        }
      }
      // the input is read, never written
      for (int i = 0; i < in.count() && bad < 5; i++) {
        if (bitsOf(in, i) != enc(dt, rank, i)) {
          bad++;
          f.add(where + "input element " + i + " was modified");
        }
      }
      if (!f.isEmpty()) f.add(where + "scenario " + s);
      return f;
    }
  }

  /**
   * Runs a valid scenario on this rank and returns the check's failures; an exception of the call
   * (a peer died, a timeout) propagates, as the fault-injection and soak harnesses need.
   */
  public static List<String> runValid(Communicator c, Scenario s) {
    RankCall rc = new RankCall(s, c.rank());
    rc.call(c);
    return rc.check(s.expected(), null);
  }

  /**
   * Runs the scenario on this rank and returns the check's failures. An invalid call must raise
   * {@link CommCapacityException} ending with the reference's text (both backends word the verdict
   * through the same {@code AllToAllVPlan}).
   */
  public static List<String> runAndCheck(Communicator c, Scenario s) {
    RankCall rc = new RankCall(s, c.rank());
    Throwable thrown = null;
    try {
      rc.call(c);
    } catch (RuntimeException e) {
      thrown = e;
    }
    return rc.check(s.expected(), thrown);
  }
}
