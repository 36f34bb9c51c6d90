package io.sparkcomms.collectives.host;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.sparkcomms.collectives.Algorithm;
import io.sparkcomms.collectives.CallOptions;
import io.sparkcomms.collectives.CommMismatchException;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.RankGroup;
import io.sparkcomms.collectives.ReduceOp;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.Test;

/**
 * Long random sequences of mixed host calls, every output checked: calls that end at their first
 * barrier (one chunk in half an input area: small allReduce, allGather, broadcast, reduce, gather,
 * barrier) next to calls that write the whole input or result area (chunked allReduce, tree,
 * reduceScatter, allToAll, scatter) and calls whose counts disagree (every rank must raise
 * CommMismatchException and go on), with random delays before calls, so that a rank that returned early
 * stages its next call while a peer still reads the last one. Inputs are random integers in float64,
 * so every reference sum is exact and any element read from the wrong call is caught; outputs are
 * poisoned with NaN first.
 */
class HostCallSequenceTest {
  /** 64 KiB staging: half an input area holds 4,096 doubles; larger calls run in chunks. */
  private static final CommOptions OPTIONS = CommOptions.builder().backend(CommOptions.Backend.HOST)
      .stagingBytes(64 << 10).timeout(Duration.ofSeconds(60)).build();
  private static final int CALLS = 1500;
  private static final int HALF = (64 << 10) / 2 / 8;

  @Test void twoRanks() { run(2, 20261203L); }

  @Test void threeRanks() { run(3, 20261204L); }

  private enum Kind { ALL_REDUCE, ALL_REDUCE_CHUNKED, ALL_REDUCE_TREE, ALL_GATHER, BROADCAST, REDUCE, GATHER, REDUCE_SCATTER, ALL_TO_ALL, SCATTER, BARRIER, MISMATCH }

  /** Call i of the sequence: the same on every rank (one seed), each rank's input its own. */
  private record Call(Kind kind, int count, int root, long inputSeed) {}

  private static List<Call> sequence(long seed, int n) {
    SplittableRandom r = new SplittableRandom(seed);
    Kind[] kinds = Kind.values();
    List<Call> calls = new ArrayList<>();
    for (int i = 0; i < CALLS; i++) {
      Kind k = kinds[r.nextInt(kinds.length)];
      int count = switch (k) {
        case ALL_REDUCE, BROADCAST, REDUCE -> 1 + r.nextInt(HALF);
        case ALL_GATHER, GATHER -> 1 + r.nextInt(HALF);
        case ALL_REDUCE_CHUNKED -> HALF + 1 + r.nextInt(3 * HALF);
        case ALL_REDUCE_TREE -> 1 + r.nextInt(3 * HALF);
        case REDUCE_SCATTER, ALL_TO_ALL, SCATTER -> 1 + r.nextInt(HALF / n);
        case MISMATCH -> 1 + r.nextInt(3 * HALF);
        case BARRIER -> 0;
      };
      calls.add(new Call(k, count, r.nextInt(n), r.nextLong()));
    }
    return calls;
  }

  private static double[] input(Call c, int rank, int length) {
    SplittableRandom r = new SplittableRandom(c.inputSeed() + 7919L * rank);
    double[] x = new double[length];
    for (int i = 0; i < length; i++) x[i] = r.nextInt(-1000, 1001);
    return x;
  }

  private static double[] poisoned(int length) {
    double[] y = new double[length];
    Arrays.fill(y, Double.NaN);
    return y;
  }

  private void run(int n, long seed) {
    List<Call> calls = sequence(seed, n);
    try (RankGroup g = new RankGroup(n, OPTIONS)) {
      List<String> wrong = g.run(rank -> {
        Communicator comm = g.comm(rank);
        SplittableRandom delays = new SplittableRandom(seed * 31 + rank);
        String first = "";
        for (int i = 0; i < calls.size(); i++) {  // every call, also after a wrong one: the peers make them too
          if (delays.nextInt(4) == 0) LockSupport.parkNanos(delays.nextLong(1_000, 200_000));
          String w = callAndCheck(comm, calls.get(i), rank, n);
          if (w != null && first.isEmpty()) first = "call " + i + " (" + calls.get(i) + ") on rank " + rank + ": " + w;
        }
        return first;
      });
      for (String w : wrong) assertEquals("", w);
    }
  }

  /** Runs one call and returns what was wrong with its output, or null. */
  private static String callAndCheck(Communicator comm, Call c, int rank, int n) {
    int k = c.count();
    switch (c.kind()) {
      case ALL_REDUCE, ALL_REDUCE_CHUNKED, ALL_REDUCE_TREE -> {
        double[] in = input(c, rank, k), out = poisoned(k);
        Communicator via = switch (c.kind()) {
          case ALL_REDUCE_CHUNKED -> comm.withOptions(CallOptions.algorithm(Algorithm.FLAT));
          case ALL_REDUCE_TREE -> comm.withOptions(CallOptions.algorithm(Algorithm.TREE));
          default -> comm;
        };
        via.allReduce(HostTensor.of(in), HostTensor.of(out), ReduceOp.SUM);
        return compare(out, sum(c, n, k, 0, k));
      }
      case ALL_GATHER, GATHER -> {
        double[] in = input(c, rank, k);
        boolean all = c.kind() == Kind.ALL_GATHER;
        double[] out = poisoned(n * k);
        if (all) comm.allGather(HostTensor.of(in), HostTensor.of(out));
        else comm.gather(HostTensor.of(in), rank == c.root() ? HostTensor.of(out) : null, c.root());
        if (!all && rank != c.root()) return null;
        double[] ref = new double[n * k];
        for (int p = 0; p < n; p++) System.arraycopy(input(c, p, k), 0, ref, p * k, k);
        return compare(out, ref);
      }
      case BROADCAST -> {
        double[] in = input(c, rank, k), out = poisoned(k);
        comm.broadcast(HostTensor.of(in), HostTensor.of(out), c.root());
        return compare(out, input(c, c.root(), k));
      }
      case REDUCE -> {
        double[] in = input(c, rank, k), out = poisoned(k);
        comm.reduce(HostTensor.of(in), HostTensor.of(out), ReduceOp.SUM, c.root());
        return rank == c.root() ? compare(out, sum(c, n, k, 0, k)) : null;
      }
      case REDUCE_SCATTER -> {
        double[] in = input(c, rank, n * k), out = poisoned(k);
        comm.reduceScatter(HostTensor.of(in), HostTensor.of(out), ReduceOp.SUM);
        return compare(out, sum(c, n, n * k, rank * k, k));
      }
      case ALL_TO_ALL -> {
        double[] in = input(c, rank, n * k), out = poisoned(n * k);
        comm.allToAll(HostTensor.of(in), HostTensor.of(out));
        double[] ref = new double[n * k];
        for (int p = 0; p < n; p++) System.arraycopy(input(c, p, n * k), rank * k, ref, p * k, k);
        return compare(out, ref);
      }
      case SCATTER -> {
        double[] in = input(c, rank, n * k), out = poisoned(k);
        comm.scatter(rank == c.root() ? HostTensor.of(in) : null, HostTensor.of(out), c.root());
        return compare(out, Arrays.copyOfRange(input(c, c.root(), n * k), rank * k, rank * k + k));
      }
      case BARRIER -> {
        comm.barrier();
        return null;
      }
      case MISMATCH -> {  // rank r passes k + r elements: every rank must raise, and the next call work
        double[] x = input(c, rank, k + rank);
        try {
          comm.allReduce(HostTensor.of(x), HostTensor.of(poisoned(k + rank)), ReduceOp.SUM);
          return "a mismatched allReduce (count " + (k + rank) + " here) returned";
        } catch (CommMismatchException e) {
          return null;
        }
      }
      default -> throw new AssertionError(c.kind());
    }
  }

  /** Elements [from, from + k) of the sum over ranks of each rank's input of {@code length}. */
  private static double[] sum(Call c, int n, int length, int from, int k) {
    double[] s = new double[k];
    for (int p = 0; p < n; p++) {
      double[] x = input(c, p, length);
      for (int i = 0; i < k; i++) s[i] += x[from + i];
    }
    return s;
  }

  private static String compare(double[] got, double[] want) {
    for (int i = 0; i < want.length; i++) {
      if (Double.compare(got[i], want[i]) != 0) return "element " + i + " is " + got[i] + ", expected " + want[i];
    }
    return null;
  }
}
