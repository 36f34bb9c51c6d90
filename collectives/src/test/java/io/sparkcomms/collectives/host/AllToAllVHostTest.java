package io.sparkcomms.collectives.host;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.AllToAllVReference;
import io.sparkcomms.collectives.AllToAllVReference.Skew;
import io.sparkcomms.collectives.CommCapacityException;
import io.sparkcomms.collectives.CommMismatchException;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.RankGroup;
import io.sparkcomms.collectives.Work;
import io.sparkcomms.collectives.host.AllToAllVHarness.RankCall;
import io.sparkcomms.collectives.host.AllToAllVHarness.Scenario;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * allToAllV on the host backend, ranks as threads, against {@link AllToAllVReference}: random skewed
 * counts (zeros, one receiver gets everything, Zipf), both layouts, FLOAT32/INT64/BFLOAT16, totals far
 * beyond the (4 KiB) staging area, and every capacity error raised on every rank with nothing written.
 */
class AllToAllVHostTest {
  static final int STAGING = 4096;

  static CommOptions opts() {
    return CommOptions.builder().backend(CommOptions.Backend.HOST).stagingBytes(STAGING)
        .timeout(Duration.ofSeconds(30)).build();
  }

  /** Runs the scenarios in order on every rank; fails with every rank's mismatches. */
  static void runAll(RankGroup g, List<Scenario> scs, long seed) {
    List<List<String>> per = g.run(r -> {
      List<String> f = new ArrayList<>();
      for (Scenario s : scs) f.addAll(AllToAllVHarness.runAndCheck(g.comm(r), s));
      return f;
    });
    List<String> all = new ArrayList<>();
    per.forEach(all::addAll);
    assertTrue(all.isEmpty(), "seed " + seed + ":\n" + String.join("\n", all));
  }

  /** A normal allReduce still works on every rank (the communicator was not aborted). */
  static void stillWorks(RankGroup g) {
    g.assertStillWorks();
    for (int r = 0; r < g.size(); r++) assertFalse(g.comm(r).isAborted());
  }

  /** Runs one (invalid) scenario; every rank must raise the reference's CommCapacityException, same text everywhere. */
  static void capacityError(RankGroup g, Scenario s, String mustContain) {
    AllToAllVReference.Result ref = s.expected();
    assertNotNull(ref.error, "scenario should be invalid: " + s);
    assertTrue(ref.error.contains(mustContain), ref.error);
    List<Object> res = g.run(r -> {
      RankCall rc = new RankCall(s, r);
      Throwable thrown = null;
      try {
        rc.call(g.comm(r));
      } catch (RuntimeException e) {
        thrown = e;
      }
      List<String> f = rc.check(ref, thrown);
      return f.isEmpty() ? thrown : f;
    });
    String msg = null;
    for (int r = 0; r < res.size(); r++) {
      assertInstanceOf(CommCapacityException.class, res.get(r), "rank " + r + ": " + res.get(r));
      String m = ((Exception) res.get(r)).getMessage();
      if (msg == null) msg = m;
      assertEquals(msg, m, "rank " + r + " reported a different violation");
    }
    stillWorks(g);
  }

  // ------------------------------------------------------------------ correct calls

  @ParameterizedTest(name = "{0} ranks")
  @ValueSource(ints = {2, 3, 4, 8})
  void randomSkewedCountsMatchTheReference(int n) {
    long seed = System.nanoTime();
    List<Scenario> scs = AllToAllVHarness.skewedMatrix(n, seed, 3000);
    // the data of some calls does not fit the staging area: several rounds
    assertTrue(scs.stream().anyMatch(s -> java.util.stream.IntStream.range(0, n)
        .anyMatch(i -> s.dtype().size() * AllToAllVReference.sent(s.counts(), i) > 2L * STAGING)), "seed " + seed);
    try (RankGroup g = new RankGroup(n, opts())) {
      runAll(g, scs, seed);
      stillWorks(g);
    }
  }

  @ParameterizedTest(name = "{0} ranks")
  @ValueSource(ints = {2, 3, 4, 8})
  void countsOneAndSevenAndSelfOnly(int n) {
    long seed = 42;
    List<Scenario> scs = new ArrayList<>();
    for (DataType dt : new DataType[] {DataType.FLOAT32, DataType.INT64, DataType.BFLOAT16}) {
      for (long v : new long[] {1, 7}) {
        scs.add(AllToAllVHarness.packed("all-" + v, dt, AllToAllVHarness.constant(n, v), 0, seed, false, false));
        scs.add(AllToAllVHarness.slots("all-" + v, dt, AllToAllVHarness.constant(n, v), 1, seed, true, true));
      }
      long[][] self = new long[n][n];
      for (int i = 0; i < n; i++) self[i][i] = 7;
      scs.add(AllToAllVHarness.packed("self-only", dt, self, 0, seed, true, false));
      long[][] one = new long[n][n];
      one[n - 1][0] = 1; // a single element in the whole call
      scs.add(AllToAllVHarness.slots("single", dt, one, 0, seed, false, true));
      scs.add(AllToAllVHarness.packed("nothing", dt, new long[n][n], 0, seed, false, false));
    }
    try (RankGroup g = new RankGroup(n, opts())) {
      runAll(g, scs, seed);
    }
  }

  @Test
  void manyRoundsWhenOneRankReceivesEverything() {
    int n = 4;
    long seed = System.nanoTime();
    long[] totals = {20_000, 20_000, 3, 15_000}; // 80 KB of float32 per sender: ~20 rounds of 4 KiB
    List<Scenario> scs = List.of(
        AllToAllVHarness.packed("hot", DataType.FLOAT32, AllToAllVReference.skewedCounts(totals, Skew.ONE_RECEIVES_ALL, seed), 5, seed, false, false),
        AllToAllVHarness.slots("hot", DataType.INT64, AllToAllVReference.skewedCounts(totals, Skew.ONE_RECEIVES_ALL, seed + 1), 5, seed, true, true),
        AllToAllVHarness.slots("zipf", DataType.BFLOAT16, AllToAllVReference.skewedCounts(totals, Skew.ZIPF, seed + 2), 5, seed, false, true));
    try (RankGroup g = new RankGroup(n, opts())) {
      runAll(g, scs, seed);
    }
  }

  @Test
  void asyncCallsAndInPlaceOverSeveralRounds() {
    int n = 3;
    long seed = 7;
    try (RankGroup g = new RankGroup(n, opts())) {
      // async: two calls in flight, then a sync one
      Scenario a = AllToAllVHarness.packed("async-a", DataType.FLOAT32, AllToAllVReference.skewedCounts(new long[] {2000, 10, 3000}, Skew.ZIPF, 1), 2, seed, false, false);
      Scenario b = AllToAllVHarness.slots("async-b", DataType.INT64, AllToAllVReference.skewedCounts(new long[] {900, 0, 700}, Skew.ZEROS, 2), 2, seed, true, false);
      List<List<String>> per = g.run(r -> {
        Communicator c = g.comm(r);
        RankCall ra = new RankCall(a, r), rb = new RankCall(b, r);
        Work wa = c.allToAllVAsync(ra.in, ra.sendCounts, ra.out, ra.recvCounts);
        Work wb = c.allToAllVAsync(rb.in, rb.sendCounts, rb.sendOffsets, rb.out, rb.recvCounts, rb.recvOffsets);
        wb.waitFor();
        assertTrue(wa.isCompleted());
        List<String> f = new ArrayList<>(ra.check(a.expected(), null));
        f.addAll(rb.check(b.expected(), null));
        return f;
      });
      per.forEach(f -> assertTrue(f.isEmpty(), String.join("\n", f)));

      // in place (the same array as in and out): every rank sends 3000 float32 (3 rounds) and receives 3000
      long[][] counts = {{1000, 1500, 500}, {1000, 0, 2000}, {1000, 1500, 500}};
      List<Object> res = g.run(r -> {
        float[] x = new float[3000];
        for (int i = 0; i < x.length; i++) x[i] = Float.intBitsToFloat((int) AllToAllVHarness.enc(DataType.FLOAT32, r, i));
        long[] rc = new long[n];
        g.comm(r).allToAllV(HostTensor.of(x), HostTensor.of(counts[r]), HostTensor.of(x), HostTensor.of(rc));
        AllToAllVReference.RankResult want = AllToAllVReference.expected(n, new long[] {3000, 3000, 3000},
            new long[] {3000, 3000, 3000}, counts, null, null).ranks[r];
        for (int p = 0; p < x.length; p++) {
          long e = AllToAllVHarness.enc(DataType.FLOAT32, want.srcRank[p], want.srcIndex[p]);
          if ((Float.floatToRawIntBits(x[p]) & 0xFFFFFFFFL) != e) return "rank " + r + ": in-place out[" + p + "] wrong";
        }
        return java.util.Arrays.equals(rc, want.recvCounts) ? "ok" : "rank " + r + ": recvCounts wrong";
      });
      res.forEach(o -> assertEquals("ok", o));

      // in place through two different views of one direct buffer (not the same object)
      List<Object> res2 = g.run(r -> {
        java.nio.ByteBuffer buf = java.nio.ByteBuffer.allocateDirect(4 * 3000).order(java.nio.ByteOrder.nativeOrder());
        for (int i = 0; i < 3000; i++) buf.putInt(4 * i, (int) AllToAllVHarness.enc(DataType.FLOAT32, r, i));
        long[] rc = new long[n];
        g.comm(r).allToAllV(HostTensor.wrap(buf, DataType.FLOAT32), HostTensor.of(counts[r]),
            HostTensor.wrap(buf.duplicate().order(java.nio.ByteOrder.nativeOrder()), DataType.FLOAT32), HostTensor.of(rc));
        AllToAllVReference.RankResult want = AllToAllVReference.expected(n, new long[] {3000, 3000, 3000},
            new long[] {3000, 3000, 3000}, counts, null, null).ranks[r];
        for (int p = 0; p < 3000; p++) {
          long e = AllToAllVHarness.enc(DataType.FLOAT32, want.srcRank[p], want.srcIndex[p]);
          if ((buf.getInt(4 * p) & 0xFFFFFFFFL) != e) return "rank " + r + ": aliased-views out[" + p + "] wrong";
        }
        return "ok";
      });
      res2.forEach(o -> assertEquals("ok", o));
    }
  }

  // ------------------------------------------------------------------ capacity errors

  @Test
  void packedOverflowRaisesOnEveryRankWritesRecvCountsAndNoOutput() {
    int n = 4;
    try (RankGroup g = new RankGroup(n, opts())) {
      Scenario s = AllToAllVHarness.packed("overflow", DataType.FLOAT32,
          AllToAllVReference.skewedCounts(new long[] {3000, 2500, 10, 3000}, Skew.ONE_RECEIVES_ALL, 5), 0, 5, false, false);
      int hot = 0;
      while (AllToAllVReference.received(s.counts(), hot) == 0) hot++;
      s.outCounts()[hot] -= 1; // one element too many for the receiver that gets everything
      capacityError(g, s, "receiver rank " + hot + " cannot hold");
      // and a valid call right after (the sizes area is reused)
      runAll(g, AllToAllVHarness.skewedMatrix(n, 11, 1500).subList(0, 4), 11);
      // overflow on the first receiver, from the last sender, in int64 with direct buffers
      long[][] c = AllToAllVHarness.constant(n, 600);
      Scenario t = AllToAllVHarness.packed("overflow-last", DataType.INT64, c, 0, 6, true, true);
      t.outCounts()[0] = 600L * n - 1;
      // the earlier senders' blocks leave 600n - 1 - 600(n-1) = 599 elements for the last one
      capacityError(g, t, "receiver rank 0 cannot hold the 600 elements from sender rank " + (n - 1) + ": its room for them is 599 elements");
    }
  }

  @Test
  void slotOverflowRaisesOnEveryRank() {
    int n = 3;
    try (RankGroup g = new RankGroup(n, opts())) {
      long[][] c = AllToAllVReference.skewedCounts(new long[] {2000, 1200, 900}, Skew.ZEROS, 9);
      c[1][2] += 5;
      Scenario s = AllToAllVHarness.slots("slot-overflow", DataType.BFLOAT16, c, 0, 9, true, false);
      s.counts()[1][2] += 1;      // one more than its exact slot
      s.inCounts()[1] += 1;       // still inside rank 1's input
      capacityError(g, s, "receiver rank 2 cannot hold the " + c[1][2] + " elements from sender rank 1: its room for them is "
          + (c[1][2] - 1) + " elements");
    }
  }

  @Test
  void negativeCountRaisesOnEveryRank() {
    int n = 3;
    try (RankGroup g = new RankGroup(n, opts())) {
      long[][] c = AllToAllVHarness.constant(n, 5);
      Scenario s = AllToAllVHarness.packed("negative", DataType.INT64, c, 2, 3, false, true);
      s.counts()[2][1] = -3;
      capacityError(g, s, "sender rank 2 sends a negative count -3 to receiver rank 1");
      Scenario t = AllToAllVHarness.slots("negative", DataType.FLOAT32, AllToAllVHarness.constant(n, 5), 2, 3, true, false);
      t.counts()[0][0] = -1;
      capacityError(g, t, "sender rank 0 sends a negative count -1 to receiver rank 0");
    }
  }

  @Test
  void recvOffsetsOutOfOrderOrOutsideTheOutputRaiseOnEveryRank() {
    int n = 4;
    try (RankGroup g = new RankGroup(n, opts())) {
      Scenario s = AllToAllVHarness.slots("decreasing", DataType.FLOAT32, AllToAllVHarness.constant(n, 3), 2, 4, false, false);
      long[] ro = s.recvOffsets()[2];
      long tmp = ro[1];
      ro[1] = ro[2];
      ro[2] = tmp; // strictly decreasing at index 2 (slots hold >= 3 elements)
      // slot 1 now runs from the old start of slot 2 back to the old start of slot 1
      capacityError(g, s, "receiver rank 2: its slot for sender rank 1 spans output offsets " + ro[1] + ".." + tmp + ", reversed");
      Scenario t = AllToAllVHarness.slots("outside", DataType.INT64, AllToAllVHarness.constant(n, 3), 2, 4, true, true);
      t.recvOffsets()[1][n - 1] = t.outCounts()[1] + 1;
      // the last offset past the output ends the slot before it outside the output
      capacityError(g, t, "receiver rank 1: its slot for sender rank " + (n - 2) + " spans output offsets " + t.recvOffsets()[1][n - 2]
          + ".." + (t.outCounts()[1] + 1) + ", reversed or outside its output");
      Scenario u = AllToAllVHarness.slots("negative-offset", DataType.BFLOAT16, AllToAllVHarness.constant(n, 3), 2, 4, true, true);
      u.recvOffsets()[3][0] = -1;
      capacityError(g, u, "receiver rank 3: its slot for sender rank 0 spans output offsets -1.." + u.recvOffsets()[3][1] + ", reversed or outside");
    }
  }

  @Test
  void sendBlockOutsideTheInputRaisesOnEveryRank() {
    int n = 3;
    try (RankGroup g = new RankGroup(n, opts())) {
      Scenario s = AllToAllVHarness.packed("short-input", DataType.FLOAT32, AllToAllVHarness.constant(n, 4), 0, 1, false, false);
      s.inCounts()[1] -= 1; // rank 1's last block (for rank 2) runs one past its input
      capacityError(g, s, "sender rank 1: its block of 4 elements for receiver rank 2 runs past the end of its input: 3 elements from the block's offset to the end");
      Scenario t = AllToAllVHarness.slots("bad-send-offset", DataType.INT64, AllToAllVHarness.constant(n, 4), 1, 1, true, true);
      t.sendOffsets()[0][1] = -2;
      capacityError(g, t, "sender rank 0: its block of 4 elements for receiver rank 1 starts at a negative input offset");
      Scenario u = AllToAllVHarness.slots("send-offset-past-end", DataType.BFLOAT16, AllToAllVHarness.constant(n, 4), 1, 1, false, false);
      u.sendOffsets()[2][0] = u.inCounts()[2] - 3;
      capacityError(g, u, "sender rank 2: its block of 4 elements for receiver rank 0");
    }
  }

  /**
   * Failing and valid calls back to back, with different sizes each time: a rank that leaves a failed
   * call early must not overwrite the sizes a slower peer still reads (8 threads on few cores).
   */
  @Test
  void failedAndValidCallsBackToBack() {
    int n = 8;
    long seed = System.nanoTime();
    List<Scenario> scs = new ArrayList<>();
    java.util.Random rnd = new java.util.Random(seed);
    for (int k = 0; k < 60; k++) {
      long[] totals = new long[n];
      for (int i = 0; i < n; i++) totals[i] = rnd.nextInt(40);
      long[][] c = AllToAllVReference.skewedCounts(totals, Skew.values()[k % 3], seed + k);
      Scenario s = AllToAllVHarness.packed("b2b#" + k, DataType.INT64, c, 2, seed + k, false, false);
      if (k % 2 == 0) {
        int j = rnd.nextInt(n);
        s.outCounts()[j] = Math.max(0, AllToAllVReference.received(c, j) - 1 - rnd.nextInt(3));
        if (AllToAllVReference.received(c, j) == 0) s.counts()[rnd.nextInt(n)][j] = -1 - rnd.nextInt(5);
      }
      scs.add(s);
    }
    try (RankGroup g = new RankGroup(n, opts())) {
      runAll(g, scs, seed);
      stillWorks(g);
    }
  }

  /** A rank that never calls: the others fail within the timeout, like every other collective. */
  @Test
  void aMissingRankTimesOutEverywhereElse() {
    CommOptions o = CommOptions.builder().backend(CommOptions.Backend.HOST).stagingBytes(STAGING)
        .timeout(Duration.ofMillis(1500)).build();
    try (RankGroup g = new RankGroup(3, o)) {
      Scenario s = AllToAllVHarness.packed("absent", DataType.FLOAT32, AllToAllVHarness.constant(3, 2000), 0, 1, false, false);
      List<Object> res = g.runCatching(r -> {
        if (r == 2) return "absent";
        new RankCall(s, r).call(g.comm(r));
        return "returned";
      });
      for (int r = 0; r < 2; r++) {
        assertTrue(res.get(r) instanceof io.sparkcomms.collectives.CommTimeoutException
            || res.get(r) instanceof io.sparkcomms.collectives.CommAbortedException, "rank " + r + ": " + res.get(r));
        assertTrue(g.comm(r).isAborted());
      }
    }
  }

  // ------------------------------------------------------------------ disagreements

  @Test
  void ranksDisagreeingOnLayoutOrDtypeRaiseMismatchEverywhere() {
    int n = 3;
    try (RankGroup g = new RankGroup(n, opts())) {
      Scenario packed = AllToAllVHarness.packed("p", DataType.FLOAT32, AllToAllVHarness.constant(n, 2), 0, 1, false, false);
      Scenario slots = AllToAllVHarness.slots("s", DataType.FLOAT32, AllToAllVHarness.constant(n, 2), 0, 1, false, false);
      Scenario ints = AllToAllVHarness.packed("i", DataType.INT64, AllToAllVHarness.constant(n, 2), 0, 1, false, false);
      for (Scenario other : new Scenario[] {slots, ints}) {
        List<Object> res = g.run(r -> {
          RankCall rc = new RankCall(r == 1 ? other : packed, r);
          try {
            rc.call(g.comm(r));
            return "returned";
          } catch (RuntimeException e) {
            // nothing was written to out
            for (int p = 0; p < rc.out.count(); p++) {
              if (AllToAllVHarness.bitsOf(rc.out, p) != AllToAllVHarness.poison(rc.out.dtype())) return "rank " + r + " wrote out";
            }
            return e;
          }
        });
        for (int r = 0; r < n; r++) {
          assertInstanceOf(CommMismatchException.class, res.get(r), "rank " + r + ": " + res.get(r));
          assertFalse(res.get(r) instanceof CommCapacityException, "rank " + r + ": " + res.get(r));
          String m = ((Exception) res.get(r)).getMessage();
          assertTrue(m.contains(other == slots ? "layout=offsets" : "dtype=INT64"), m);
        }
        stillWorks(g);
      }
      // a local shape error on one rank (recvCounts too short): that rank IllegalArgumentException, the others mismatch
      List<Object> res = g.runCatching(r -> {
        RankCall rc = new RankCall(packed, r);
        g.comm(r).allToAllV(rc.in, rc.sendCounts, rc.out, r == 2 ? HostTensor.of(new long[n - 1]) : rc.recvCounts);
        return "returned";
      });
      assertInstanceOf(IllegalArgumentException.class, res.get(2));
      assertInstanceOf(CommMismatchException.class, res.get(0));
      assertTrue(((Exception) res.get(0)).getMessage().contains("rank 2 rejected"), ((Exception) res.get(0)).getMessage());
      stillWorks(g);
      runAll(g, List.of(packed, slots), 1);
    }
  }
}
