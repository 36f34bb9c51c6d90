package io.sparkcomms.collectives.plan;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.CommCapacityException;
import io.sparkcomms.collectives.CommException;
import io.sparkcomms.collectives.CommMismatchException;
import org.junit.jupiter.api.Test;

/** The one allToAllV verdict: its status-word form (what the GPU kernel reports) and its exceptions. */
class AllToAllVPlanTest {
  @Test void statusWordsOfTheKernelGiveTheSameVerdictAndText() {
    long[][] c = {{1, 2}, {3, 0}};
    AllToAllVPlan.Verdict host = AllToAllVPlan.of(2, new long[] {3, 3}, new long[] {3, 2}, c, null, null).verdict();
    assertEquals(new AllToAllVPlan.Verdict(AllToAllVPlan.Problem.OVERFLOW, 0, 1, 3, 2), host);
    // the same five words as sc_alltoallv_status writes them
    AllToAllVPlan.Verdict gpu = AllToAllVPlan.Verdict.fromStatusWords(new long[] {1, 0, 1, 3, 2}, 2);
    assertEquals(host, gpu);
    assertEquals(host.message(), gpu.message());
    assertEquals("allToAllV (no output written, recvCounts were): " + host.message(), gpu.exception("allToAllV").getMessage());
    assertNull(AllToAllVPlan.Verdict.fromStatusWords(new long[] {0, -1, -1, 0, 0}, 2));
  }

  @Test void untrustedStatusWordsAreCheckedBeforeUse() {
    assertThrows(CommException.class, () -> AllToAllVPlan.Verdict.fromStatusWords(new long[] {9, 0, 0, 0, 0}, 2), "unknown code");
    assertThrows(CommException.class, () -> AllToAllVPlan.Verdict.fromStatusWords(new long[] {1, 2, 0, 0, 0}, 2), "receiver out of range");
    assertThrows(CommException.class, () -> AllToAllVPlan.Verdict.fromStatusWords(new long[] {2, 0, -1, 0, 0}, 2), "sender out of range");
    assertThrows(CommException.class, () -> AllToAllVPlan.Verdict.fromStatusWords(new long[] {1, 0}, 2), "short");
    // MISMATCH carries layouts, not a sender
    AllToAllVPlan.Verdict m = AllToAllVPlan.Verdict.fromStatusWords(new long[] {5, 1, 0, 1, 0}, 2);
    assertEquals("ranks disagree on the dtype or the layout: rank 1 passed offsets, rank 0 used the packed layout", m.message());
  }

  @Test void mismatchIsNotACapacityProblem() {
    CommMismatchException m = new AllToAllVPlan.Verdict(AllToAllVPlan.Problem.MISMATCH, 1, 0, 0, 1).exception("allToAllV");
    assertFalse(m instanceof CommCapacityException);
    assertInstanceOf(CommCapacityException.class, new AllToAllVPlan.Verdict(AllToAllVPlan.Problem.NEGATIVE, 0, 1, -1, 0).exception("x"));
  }

  @Test void offsetsOfTheLayouts() {
    long[][] c = {{1, 2, 0}, {3, 0, 4}, {5, 6, 7}};
    AllToAllVPlan packed = AllToAllVPlan.of(3, new long[] {3, 7, 18}, new long[] {9, 8, 11}, c, null, null);
    assertNull(packed.verdict());
    assertEquals(3, packed.sendOffset(1, 2));
    assertEquals(4, packed.recvOffset(0, 2), "after the blocks of ranks 0 and 1");
    assertEquals(2, packed.recvOffset(1, 2));
    long[][] so = {{2, 0, 3}, {0, 3, 3}, {0, 5, 11}};
    long[][] ro = {{0, 1, 4}, {0, 2, 2}, {0, 0, 4}};
    AllToAllVPlan slots = AllToAllVPlan.of(3, new long[] {3, 7, 18}, new long[] {9, 8, 11}, c, so, ro);
    assertNull(slots.verdict());
    assertEquals(11, slots.sendOffset(2, 2));
    assertEquals(4, slots.recvOffset(2, 2));
    assertTrue(slots.slots());
  }

  @Test void shapesAreChecked() {
    assertThrows(IllegalArgumentException.class, () -> AllToAllVPlan.of(2, new long[2], new long[2], new long[][] {{0, 0}, {0}}, null, null));
    assertThrows(IllegalArgumentException.class, () -> AllToAllVPlan.of(2, new long[2], new long[2], new long[2][2], new long[2][2], null));
    assertThrows(IllegalArgumentException.class, () -> AllToAllVPlan.of(2, new long[1], new long[2], new long[2][2], null, null));
  }

  @Test void sizesNearTheLongRangeDoNotWrap() {
    long big = Long.MAX_VALUE;
    long[][] c = {{big, 1}, {0, 0}};
    // sender 0's first block fills its whole input; the second would start past it
    AllToAllVPlan.Verdict v = AllToAllVPlan.of(2, new long[] {big, 0}, new long[] {big, big}, c, null, null).verdict();
    assertEquals(new AllToAllVPlan.Verdict(AllToAllVPlan.Problem.SEND_RANGE, 1, 0, 1, 0), v);
  }
}
