package io.sparkcomms.collectives;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.AllToAllVReference.Skew;
import org.junit.jupiter.api.Test;

/** The reference itself, on hand-computed cases, and the skewed-count generator. */
class AllToAllVReferenceTest {
  @Test
  void packedTwoRanksByHand() {
    // rank 0 sends 1 to itself, 2 to rank 1; rank 1 sends 3 to rank 0, 0 to itself
    long[][] c = {{1, 2}, {3, 0}};
    AllToAllVReference.Result r = AllToAllVReference.expected(2, new long[] {3, 4}, new long[] {5, 3}, c, null, null);
    assertNull(r.error);
    assertArrayEquals(new long[] {1, 3}, r.ranks[0].recvCounts);
    assertArrayEquals(new long[] {2, 0}, r.ranks[1].recvCounts);
    assertArrayEquals(new int[] {0, 1, 1, 1, -1}, r.ranks[0].srcRank);
    assertArrayEquals(new long[] {0, 0, 1, 2, -1}, r.ranks[0].srcIndex);
    assertArrayEquals(new int[] {0, 0, -1}, r.ranks[1].srcRank);
    assertArrayEquals(new long[] {1, 2, -1}, r.ranks[1].srcIndex);
  }

  @Test
  void slotsByHand() {
    long[][] c = {{1, 2}, {0, 1}};
    long[][] so = {{5, 0}, {0, 3}};          // rank 0: block for 1 at 0, for 0 at 5; rank 1: block for 1 at 3
    long[][] ro = {{0, 2}, {1, 4}};          // rank 1's slots: [1, 4) from rank 0, [4, 6) from rank 1
    AllToAllVReference.Result r = AllToAllVReference.expected(2, new long[] {6, 4}, new long[] {3, 6}, c, so, ro);
    assertNull(r.error);
    assertArrayEquals(new int[] {0, -1, -1}, r.ranks[0].srcRank);
    assertArrayEquals(new long[] {5, -1, -1}, r.ranks[0].srcIndex);
    assertArrayEquals(new int[] {-1, 0, 0, -1, 1, -1}, r.ranks[1].srcRank);
    assertArrayEquals(new long[] {-1, 0, 1, -1, 3, -1}, r.ranks[1].srcIndex);
  }

  @Test
  void violationsAndTheirOrder() {
    long[][] c = {{1, 2}, {3, 0}};
    long[] in = {3, 3};
    // rank 0 holds 3 but would receive 4: reported at sender 1, whose block finds 2 elements left
    assertEquals("receiver rank 0 cannot hold the 3 elements from sender rank 1: its room for them is 2 elements",
        AllToAllVReference.violation(2, in, new long[] {3, 2}, c, null, null));
    // receivers first: a violation at receiver 0 wins over a negative count towards receiver 1
    long[][] neg = {{1, -2}, {3, 0}};
    assertTrue(AllToAllVReference.violation(2, in, new long[] {3, 2}, neg, null, null).startsWith("receiver rank 0 cannot hold"));
    assertEquals("sender rank 0 sends a negative count -2 to receiver rank 1",
        AllToAllVReference.violation(2, in, new long[] {4, 2}, neg, null, null));
    // sender 1's input holds 2 but it sends 3
    assertEquals("sender rank 1: its block of 3 elements for receiver rank 0 runs past the end of its input: 2 elements from the block's offset to the end",
        AllToAllVReference.violation(2, new long[] {3, 2}, new long[] {4, 2}, c, null, null));
    // slots: receiver 1's slot for rank 0 would run from 2 back to 0
    long[][] so = {{0, 1}, {0, 3}};
    assertEquals("receiver rank 1: its slot for sender rank 0 spans output offsets 2..0, reversed or outside its output"
        + " (receive offsets must be non-decreasing and within the output)",
        AllToAllVReference.violation(2, new long[] {3, 3}, new long[] {4, 4}, c, so, new long[][] {{0, 1}, {2, 0}}));
    assertEquals("receiver rank 0 cannot hold the 3 elements from sender rank 1: its room for them is 2 elements",
        AllToAllVReference.violation(2, new long[] {3, 3}, new long[] {4, 4}, c, so, new long[][] {{0, 2}, {0, 2}}));
    // an offset past the output ends the slot before it outside the output: slot 0 spans 0..5 of 4
    assertEquals("receiver rank 0: its slot for sender rank 0 spans output offsets 0..5, reversed or outside its output"
        + " (receive offsets must be non-decreasing and within the output)",
        AllToAllVReference.violation(2, new long[] {3, 3}, new long[] {4, 4}, c, so, new long[][] {{0, 5}, {0, 2}}));
    // a negative send offset, and one past the input's end
    assertEquals("sender rank 0: its block of 1 elements for receiver rank 0 starts at a negative input offset",
        AllToAllVReference.violation(2, new long[] {3, 3}, new long[] {4, 4}, c, new long[][] {{-1, 1}, {0, 3}}, new long[][] {{0, 2}, {0, 2}}));
    assertEquals("sender rank 0: its block of 1 elements for receiver rank 0 starts 4 elements past the end of its input",
        AllToAllVReference.violation(2, new long[] {3, 3}, new long[] {4, 4}, c, new long[][] {{7, 1}, {0, 3}}, new long[][] {{0, 2}, {0, 2}}));
    // an error still gives recvCounts, and no output
    AllToAllVReference.Result r = AllToAllVReference.expected(2, in, new long[] {3, 2}, c, null, null);
    assertArrayEquals(new long[] {1, 3}, r.ranks[0].recvCounts);
    assertNull(r.ranks[0].srcRank);
  }

  @Test
  void skewedCountsSumToTheTotalsAndAreSkewed() {
    long[] totals = {1000, 0, 37, 5000, 1, 999, 64, 128};
    for (Skew s : Skew.values()) {
      long[][] c = AllToAllVReference.skewedCounts(totals, s, 3);
      assertArrayEquals(c[3], AllToAllVReference.skewedCounts(totals, s, 3)[3], "deterministic");
      for (int i = 0; i < totals.length; i++) {
        assertEquals(totals[i], AllToAllVReference.sent(c, i), s + " row " + i);
        for (long v : c[i]) assertTrue(v >= 0);
      }
    }
    long[][] hot = AllToAllVReference.skewedCounts(totals, Skew.ONE_RECEIVES_ALL, 9);
    long sum = 0;
    for (long t : totals) sum += t;
    int receivers = 0;
    for (int j = 0; j < totals.length; j++) if (AllToAllVReference.received(hot, j) > 0) receivers++;
    assertEquals(1, receivers);
    long[][] zeros = AllToAllVReference.skewedCounts(totals, Skew.ZEROS, 9);
    int z = 0;
    for (long[] row : zeros) for (long v : row) if (v == 0) z++;
    assertTrue(z > 8, "zeros: " + z);
    long[][] zipf = AllToAllVReference.skewedCounts(new long[] {10_000, 10_000}, Skew.ZIPF, 1);
    assertTrue(Math.max(zipf[0][0], zipf[0][1]) > 2 * Math.min(zipf[0][0], zipf[0][1]));
    assertTrue(sum > 0);
  }
}
