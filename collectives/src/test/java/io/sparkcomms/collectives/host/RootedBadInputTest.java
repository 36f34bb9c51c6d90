package io.sparkcomms.collectives.host;

import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.CommMismatchException;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.RankGroup;
import io.sparkcomms.collectives.ReduceOp;
import java.time.Duration;
import java.util.List;
import java.util.function.BiConsumer;
import org.junit.jupiter.api.Test;

/**
 * The bad-input cases of reduce, gather, scatter, allGatherV and reduceScatterV at 3 ranks: one
 * rank's invalid arguments (IllegalArgumentException there, CommMismatchException on the others) and
 * ranks whose valid arguments disagree (CommMismatchException everywhere), never a hang; the
 * communicator works afterwards.
 */
class RootedBadInputTest {
  private static final int N = 3;

  /** Runs {@code call} on every rank and checks who raised what: {@code badRank} IllegalArgumentException (-1: nobody), the rest CommMismatchException. */
  private static void expect(RankGroup g, int badRank, String what, BiConsumer<Communicator, Integer> call) {
    List<Object> got = g.run(r -> {
      try {
        call.accept(g.comm(r), r);
        return "returned";
      } catch (RuntimeException e) {
        return e;
      }
    });
    for (int r = 0; r < N; r++) {
      Class<?> want = r == badRank ? IllegalArgumentException.class : CommMismatchException.class;
      assertTrue(want.isInstance(got.get(r)), what + ": rank " + r + " gave " + got.get(r) + ", expected " + want.getSimpleName());
    }
    g.assertStillWorks();
  }

  private static HostTensor f(int n) { return HostTensor.of(new float[n]); }

  @Test void rootedCalls() {
    CommOptions o = CommOptions.builder().backend(CommOptions.Backend.HOST).timeout(Duration.ofSeconds(30)).build();
    try (RankGroup g = new RankGroup(N, o)) {
      expect(g, 1, "reduce, root out of range on rank 1", (c, r) -> c.reduce(f(8), f(8), ReduceOp.SUM, r == 1 ? 5 : 0));
      expect(g, -1, "reduce, roots 0 and 2", (c, r) -> c.reduce(f(8), f(8), ReduceOp.SUM, r == 2 ? 2 : 0));
      expect(g, 0, "gather, no output on the root", (c, r) -> c.gather(f(4), null, 0));
      expect(g, 0, "gather, the root's output too small", (c, r) -> c.gather(f(4), f(r == 0 ? 11 : 12), 0));
      expect(g, -1, "gather, counts 4 and 5", (c, r) -> c.gather(f(r == 1 ? 5 : 4), f(15), 0));
      expect(g, 2, "scatter, no input on the root", (c, r) -> c.scatter(null, f(4), 2));
      expect(g, -1, "scatter, roots 1 and 0", (c, r) -> c.scatter(f(12), f(4), r == 0 ? 0 : 1));
      expect(g, 1, "reduce, a null op on rank 1", (c, r) -> c.reduce(f(8), f(8), r == 1 ? null : ReduceOp.MIN, 0));
      expect(g, -1, "reduce, SUM vs MAX", (c, r) -> c.reduce(f(8), f(8), r == 1 ? ReduceOp.MAX : ReduceOp.SUM, 0));
    }
  }

  @Test void perRankCountCalls() {
    CommOptions o = CommOptions.builder().backend(CommOptions.Backend.HOST).timeout(Duration.ofSeconds(30)).build();
    try (RankGroup g = new RankGroup(N, o)) {
      long[] ok = {3, 0, 5};
      expect(g, 1, "allGatherV, a count array of the wrong length on rank 1",
          (c, r) -> c.allGatherV(f((int) ok[r]), f(8), r == 1 ? new long[] {3, 0} : ok));
      expect(g, 2, "allGatherV, a negative count on rank 2",
          (c, r) -> c.allGatherV(f((int) ok[r]), f(8), r == 2 ? new long[] {3, -1, 5} : ok));
      expect(g, 0, "allGatherV, rank 0's input is not counts[0]", (c, r) -> c.allGatherV(f(r == 0 ? 4 : (int) ok[r]), f(9), ok));
      expect(g, 1, "allGatherV, output shorter than the total on rank 1", (c, r) -> c.allGatherV(f((int) ok[r]), f(r == 1 ? 7 : 8), ok));
      // rank 2 thinks rank 0 sends 2 elements and rank 1 one: the same total, another layout
      long[] other = {2, 1, 5};
      expect(g, -1, "allGatherV, the same total in another split", (c, r) -> c.allGatherV(f((int) ok[r]), f(8), r == 2 ? other : ok));
      expect(g, -1, "reduceScatterV, counts that differ on rank 2 (same total)",
          (c, r) -> c.reduceScatterV(f(8), f(5), r == 2 ? other : ok, ReduceOp.SUM));
      expect(g, 1, "reduceScatterV, input shorter than the total on rank 1",
          (c, r) -> c.reduceScatterV(f(r == 1 ? 7 : 8), f(5), ok, ReduceOp.SUM));
    }
  }
}
