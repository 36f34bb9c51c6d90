package io.sparkcomms.collectives.host;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.Algorithm;
import io.sparkcomms.collectives.CommMismatchException;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.RankGroup;
import io.sparkcomms.collectives.ReduceOp;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Input and output of a host call in direct buffers of one allocation: the same memory (in place) and
 * disjoint memory work; memory that partly overlaps is refused on every rank where a call could read
 * input that it already overwrote, and allToAllV (which copies its input first) is right with it.
 */
class HostOverlapTest {
  /** 40,000 floats: more than two chunks of the 64 KiB staging area (16,384 floats). */
  static final int N = 40_000;

  static CommOptions opts(Algorithm a) {
    return CommOptions.builder().backend(CommOptions.Backend.HOST).stagingBytes(64 << 10).algorithm(a)
        .timeout(Duration.ofSeconds(30)).build();
  }

  static ByteBuffer direct(int bytes) { return ByteBuffer.allocateDirect(bytes).order(ByteOrder.nativeOrder()); }

  static HostTensor floats(ByteBuffer all, int fromElement, int count) {
    return HostTensor.wrap(all.slice(4 * fromElement, 4 * count), DataType.FLOAT32);
  }

  interface Call {
    void run(Communicator c, HostTensor in, HostTensor out);
  }

  /** Every collective with an input it reads, with the output element count it needs for N input elements on 2 ranks. */
  static final List<Object[]> CALLS = List.of(
      new Object[] {"allReduce", N, (Call) (c, in, out) -> c.allReduce(in, out, ReduceOp.SUM)},
      new Object[] {"allGather", 2 * N, (Call) (c, in, out) -> c.allGather(in, out)},
      new Object[] {"reduceScatter", N / 2, (Call) (c, in, out) -> c.reduceScatter(in, out, ReduceOp.SUM)},
      new Object[] {"allToAll", N, (Call) (c, in, out) -> c.allToAll(in, out)},
      new Object[] {"broadcast", N, (Call) (c, in, out) -> c.broadcast(in, out, 0)});

  @Test void partlyOverlappingInputAndOutputAreRefusedOnEveryRank() {
    for (Algorithm a : new Algorithm[] {Algorithm.FLAT, Algorithm.TREE, Algorithm.LP}) {
      try (RankGroup g = new RankGroup(2, opts(a))) {
        for (Object[] call : CALLS) {
          for (int shift : new int[] {1, -1}) {
            int outCount = (int) call[1];
            List<Object> res = g.runCatching(r -> {
              ByteBuffer all = direct(4 * (Math.max(N, outCount) + 1));
              HostTensor in = floats(all, shift > 0 ? 0 : 1, N), out = floats(all, shift > 0 ? 1 : 0, outCount);
              ((Call) call[2]).run(g.comm(r), in, out);
              return null;
            });
            for (int r = 0; r < 2; r++) {
              String what = call[0] + " " + a + " shift " + shift + " rank " + r;
              if (call[0].equals("broadcast") && r != 0) {
                // a non-root's input is never read, so only the root's arguments are refused
                CommMismatchException e = assertInstanceOf(CommMismatchException.class, res.get(r), what);
                assertTrue(e.getMessage().contains("rank 0 rejected its arguments: broadcast: input and output partly overlap"),
                    what + ": " + e.getMessage());
                continue;
              }
              IllegalArgumentException e = assertInstanceOf(IllegalArgumentException.class, res.get(r), what);
              assertTrue(e.getMessage().contains(call[0] + ": input and output partly overlap"), what + ": " + e.getMessage());
            }
          }
        }
        g.assertStillWorks();
      }
    }
  }

  @Test void aPartialOverlapOnOneRankFailsTheCallOnEveryRank() {
    try (RankGroup g = new RankGroup(2, opts(Algorithm.AUTO))) {
      List<Object> res = g.runCatching(r -> {
        ByteBuffer all = direct(4 * (N + 1));
        g.comm(r).allReduce(floats(all, 0, N), r == 1 ? floats(all, 1, N) : floats(direct(4 * N), 0, N), ReduceOp.SUM);
        return null;
      });
      assertInstanceOf(IllegalArgumentException.class, res.get(1));
      CommMismatchException e = assertInstanceOf(CommMismatchException.class, res.get(0));
      assertTrue(e.getMessage().contains("rank 1 rejected its arguments") && e.getMessage().contains("overlap"), e.getMessage());
      g.assertStillWorks();
    }
  }

  @Test void inPlaceAndDisjointViewsOfOneAllocationGiveTheRightSum() {
    try (RankGroup g = new RankGroup(2, opts(Algorithm.AUTO))) {
      // in place: two tensors over the same bytes; disjoint: [0, N) and [N, 2N) of one allocation
      for (boolean inPlace : new boolean[] {true, false}) {
        List<Object> res = g.run(r -> {
          ByteBuffer all = direct(4 * 2 * N);
          HostTensor in = floats(all, 0, N), out = floats(all, inPlace ? 0 : N, N);
          for (int i = 0; i < N; i++) in.setDouble(i, i + r);
          g.comm(r).allReduce(in, out, ReduceOp.SUM);
          for (int i = 0; i < N; i++) if (out.getDouble(i) != 2 * i + 1) return "element " + i + ": " + out.getDouble(i);
          return null;
        });
        res.forEach(x -> assertNull(x, "in place " + inPlace));
      }
    }
  }

  /** allToAllV over three staging rounds, out = in shifted by one element: copies its input first, so it is right. */
  @Test void allToAllVOverPartlyOverlappingBuffersIsRight() {
    int c = 20_000;  // per peer: a stream of 40,000 ints on each rank, three rounds of 16,384
    try (RankGroup g = new RankGroup(2, opts(Algorithm.AUTO))) {
      List<Object> res = g.run(r -> {
        ByteBuffer all = direct(4 * (2 * c + 1));
        HostTensor in = HostTensor.wrap(all.slice(0, 4 * 2 * c), DataType.INT32);
        HostTensor out = HostTensor.wrap(all.slice(4, 4 * 2 * c), DataType.INT32);
        for (int i = 0; i < 2 * c; i++) in.setDouble(i, r * 1_000_000 + i);
        long[] recv = new long[2];
        g.comm(r).allToAllV(in, HostTensor.of(new long[] {c, c}), out, HostTensor.of(recv));
        for (int s = 0; s < 2; s++) {
          for (int t = 0; t < c; t++) {
            double want = s * 1_000_000 + r * c + t, got = out.getDouble(s * c + t);
            if (got != want) return "from rank " + s + " element " + t + ": " + got + ", expected " + want;
          }
        }
        return recv[0] == c && recv[1] == c ? null : "recvCounts " + recv[0] + "," + recv[1];
      });
      res.forEach(x -> assertNull(x));
    }
  }

  @Test void allToAllVRefusesRecvCountsThatOverlapItsData() {
    int c = 100;
    try (RankGroup g = new RankGroup(2, opts(Algorithm.AUTO))) {
      for (boolean overInput : new boolean[] {true, false}) {
        List<Object> res = g.runCatching(r -> {
          ByteBuffer data = direct(4 * 2 * c);
          HostTensor in = overInput ? HostTensor.wrap(data.slice(0, 8 * c), DataType.INT32) : HostTensor.of(new int[2 * c]);
          HostTensor out = overInput ? HostTensor.of(new int[2 * c]) : HostTensor.wrap(data.slice(0, 8 * c), DataType.INT32);
          HostTensor recvCounts = HostTensor.wrap(data.slice(8, 16), DataType.INT64);
          g.comm(r).allToAllV(in, HostTensor.of(new long[] {c, c}), out, recvCounts);
          return null;
        });
        for (int r = 0; r < 2; r++) {
          IllegalArgumentException e = assertInstanceOf(IllegalArgumentException.class, res.get(r), "rank " + r);
          assertTrue(e.getMessage().contains("recvCounts overlaps the " + (overInput ? "input" : "output")), e.getMessage());
        }
      }
      g.assertStillWorks();
    }
  }
}
