package io.sparkcomms.collectives;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * split(int[]) and split(color, key) on the host backend, ranks as threads: group shapes (1, 2 and
 * uneven sizes), child rank order, a child used between calls of its parent, nested splits, ranks
 * that disagree, and a parent's abort reaching its children.
 */
class SplitTest {
  private static CommOptions options() {
    return CommOptions.builder().backend(CommOptions.Backend.HOST).timeout(Duration.ofSeconds(30)).build();
  }

  /** allReduce SUM of (parent rank + 1) over {@code c}: the sum over its members. */
  private static double sumOfMembers(Communicator c, int parentRank) {
    double[] x = {parentRank + 1};
    c.allReduce(HostTensor.of(x), ReduceOp.SUM);
    return x[0];
  }

  /** What each rank saw of its child: {childRank, childSize, sum of members' parent rank + 1}, or null. */
  private static double[] describe(Communicator child, int parentRank) {
    if (child == null) return null;
    return new double[] {child.rank(), child.size(), sumOfMembers(child, parentRank)};
  }

  @Test void colorsMakeGroupsOfOneTwoAndFiveOrderedByKey() {
    try (RankGroup g = new RankGroup(8, options())) {
      // colors: rank 0 alone, ranks 1-2, ranks 3-7; rank 6 opts out; keys reverse the order inside a color
      int[] color = {0, 1, 1, 2, 2, 2, -1, 2};
      List<double[]> seen = g.run(r -> {
        Communicator c = g.comm(r).split(color[r], 100 - r);
        try {
          double parentSum = sumOfMembers(g.comm(r), r);  // the parent, used between the child's calls
          double[] d = describe(c, r);
          if (c != null) assertEquals(d[2], sumOfMembers(c, r), "second child call");
          return d == null ? null : new double[] {d[0], d[1], d[2], parentSum};
        } finally {
          if (c != null) c.close();
        }
      });
      assertArrayEquals(new double[] {0, 1, 1, 36}, seen.get(0));
      assertArrayEquals(new double[] {1, 2, 5, 36}, seen.get(1));  // key 99 of rank 1 after key 98 of rank 2
      assertArrayEquals(new double[] {0, 2, 5, 36}, seen.get(2));
      assertNull(seen.get(6));
      // color 2: ranks 3, 4, 5, 7 ordered by key 100-r: 7, 5, 4, 3
      assertArrayEquals(new double[] {3, 4, 4 + 5 + 6 + 8, 36}, seen.get(3));
      assertArrayEquals(new double[] {0, 4, 4 + 5 + 6 + 8, 36}, seen.get(7));
      g.assertStillWorks();
    }
  }

  @Test void aRankListGivesChildRanksInListOrderAndNullElsewhere() {
    try (RankGroup g = new RankGroup(4, options())) {
      int[] list = {3, 1};
      List<double[]> seen = g.run(r -> {
        Communicator c = g.comm(r).split(list);
        try {
          return describe(c, r);
        } finally {
          if (c != null) c.close();
        }
      });
      assertNull(seen.get(0));
      assertNull(seen.get(2));
      assertArrayEquals(new double[] {0, 2, 4 + 2}, seen.get(3));
      assertArrayEquals(new double[] {1, 2, 4 + 2}, seen.get(1));
    }
  }

  @Test void nestedSplitsAndAllGatherInTheGrandchild() {
    try (RankGroup g = new RankGroup(8, options())) {
      List<long[]> seen = g.run(r -> {
        try (Communicator half = g.comm(r).split(r / 4, r)) {
          Communicator pair = half.split(half.rank() / 2, 0);
          try {
            long[] mine = {r};
            long[] all = new long[pair.size()];
            pair.allGather(HostTensor.of(mine), HostTensor.of(all));
            half.barrier();
            return all;
          } finally {
            pair.close();
          }
        }
      });
      for (int r = 0; r < 8; r++) {
        int first = r / 2 * 2;
        assertArrayEquals(new long[] {first, first + 1}, seen.get(r), "rank " + r);
      }
      g.assertStillWorks();
    }
  }

  @Test void ranksThatDisagreeFailEverywhereAndTheParentStaysUsable() {
    try (RankGroup g = new RankGroup(4, options())) {
      // different lists
      List<Object> outcome = g.run(r -> {
        try {
          Communicator c = g.comm(r).split(r == 2 ? new int[] {0, 1, 3} : new int[] {0, 1, 2});
          if (c != null) c.close();
          return "returned";
        } catch (CommMismatchException e) {
          return e;
        }
      });
      outcome.forEach(o -> assertInstanceOf(CommMismatchException.class, o, String.valueOf(o)));
      assertTrue(((Exception) outcome.get(0)).getMessage().contains("disagree on the rank list"), outcome.get(0).toString());
      g.assertStillWorks();

      // an invalid list on one rank: IllegalArgumentException there, CommMismatchException on the others
      List<Object> invalid = g.run(r -> {
        try {
          Communicator c = g.comm(r).split(r == 1 ? new int[] {0, 0} : new int[] {0, 1});
          if (c != null) c.close();
          return "returned";
        } catch (RuntimeException e) {
          return e;
        }
      });
      for (int r = 0; r < 4; r++) {
        Class<?> want = r == 1 ? IllegalArgumentException.class : CommMismatchException.class;
        assertTrue(want.isInstance(invalid.get(r)), "rank " + r + ": " + invalid.get(r));
      }
      assertTrue(((Exception) invalid.get(1)).getMessage().contains("listed twice"), invalid.get(1).toString());

      // split(int[]) on one rank, split(color, key) on the others
      List<Object> forms = g.run(r -> {
        try {
          Communicator c = r == 3 ? g.comm(r).split(new int[] {0, 1, 2, 3}) : g.comm(r).split(0, r);
          if (c != null) c.close();
          return "returned";
        } catch (CommMismatchException e) {
          return e;
        }
      });
      forms.forEach(o -> assertInstanceOf(CommMismatchException.class, o, String.valueOf(o)));
      g.assertStillWorks();
    }
  }

  @Test void abortingTheParentAbortsItsChildren() {
    try (RankGroup g = new RankGroup(2, options())) {
      List<Communicator> kids = g.run(r -> g.comm(r).split(0, r));
      try {
        g.comm(0).abort("stop");
        for (Communicator k : kids) assertTrue(k.isAborted(), "child of rank " + k.rank());
        CommException e = assertThrows(CommException.class, () -> kids.get(0).barrier());
        assertTrue(e.getMessage().contains("parent communicator"), e.getMessage());
      } finally {
        kids.forEach(k -> {
          if (k != null) k.close();
        });
      }
    }
  }

  @Test void aSplitOfOneRankAndTheWholeGroup() {
    try (RankGroup g = new RankGroup(3, options())) {
      List<double[]> whole = g.run(r -> {
        try (Communicator c = g.comm(r).split(new int[] {0, 1, 2})) {
          return describe(c, r);
        }
      });
      for (int r = 0; r < 3; r++) assertArrayEquals(new double[] {r, 3, 6}, whole.get(r));
      List<double[]> single = g.run(r -> {
        try (Communicator c = g.comm(r).split(r, 0)) {
          assertNotNull(c);
          return describe(c, r);
        }
      });
      for (int r = 0; r < 3; r++) assertArrayEquals(new double[] {0, 1, r + 1}, single.get(r));
      List<Communicator> none = g.run(r -> g.comm(r).split(new int[0]));
      none.forEach(c -> {
        if (c != null) fail("an empty list gave a communicator");
      });
    }
  }
}
