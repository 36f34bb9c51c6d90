package io.sparkcomms.collectives;

import io.sparkcomms.collectives.host.HostCommunicator;
import io.sparkcomms.collectives.rendezvous.InJvmRendezvous;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.IntFunction;

/** N ranks as threads of this JVM, each with its own host communicator. For tests. */
public final class RankGroup implements AutoCloseable {
  private final ExecutorService pool;
  private final Communicator[] comms;

  public RankGroup(int n, CommOptions o) {
    pool = Executors.newFixedThreadPool(n);
    InJvmRendezvous.Group g = InJvmRendezvous.group(n);
    comms = new Communicator[n];
    List<Communicator> made = run(n, r -> HostCommunicator.create(g.member(r), o));
    for (int r = 0; r < n; r++) comms[r] = made.get(r);
  }

  public Communicator comm(int r) { return comms[r]; }

  /** Asserts that a normal allReduce still works on every rank (after a call that failed). */
  public void assertStillWorks() {
    List<Object> sums = run(r -> {
      double[] x = {r + 1};
      comms[r].allReduce(HostTensor.of(x), ReduceOp.SUM);
      return x[0];
    });
    double n = comms.length;
    sums.forEach(s -> org.junit.jupiter.api.Assertions.assertEquals(n * (n + 1) / 2, (double) s));
  }
  public int size() { return comms.length; }

  /** Runs {@code f(rank)} on every rank at once; returns results by rank or rethrows the first failure. */
  public <T> List<T> run(IntFunction<T> f) { return run(comms.length, f); }

  private <T> List<T> run(int n, IntFunction<T> f) {
    List<Future<T>> fs = new ArrayList<>();
    for (int r = 0; r < n; r++) {
      final int rank = r;
      fs.add(pool.submit(() -> f.apply(rank)));
    }
    List<T> out = new ArrayList<>();
    Throwable first = null;
    for (Future<T> fu : fs) {
      try {
        out.add(fu.get(900, TimeUnit.SECONDS)); // generous: CI machines may be loaded; every collective wait has its own timeout
      } catch (Exception e) {
        out.add(null);
        if (first == null) first = e.getCause() != null ? e.getCause() : e;
      }
    }
    if (first instanceof RuntimeException re) throw re;
    if (first instanceof Error er) throw er;
    if (first != null) throw new RuntimeException(first);
    return out;
  }

  /**
   * Results of {@code f(rank)} on {@code n} threads of a pool of their own, each a value or the
   * RuntimeException it threw; waits at most {@code waitSeconds} for each rank. For steps before
   * a group exists (creating communicators with per-rank options).
   */
  public static List<Object> runCatching(int n, long waitSeconds, IntFunction<Object> f) throws Exception {
    ExecutorService own = Executors.newFixedThreadPool(n);
    try {
      List<Future<Object>> fs = new ArrayList<>();
      for (int r = 0; r < n; r++) {
        final int rank = r;
        fs.add(own.submit(() -> {
          try {
            return f.apply(rank);
          } catch (RuntimeException e) {
            return e;
          }
        }));
      }
      List<Object> out = new ArrayList<>();
      for (Future<Object> fu : fs) out.add(fu.get(waitSeconds, TimeUnit.SECONDS));
      return out;
    } finally {
      own.shutdownNow();
    }
  }

  /** Results of {@code f(rank)} per rank, each a value or the exception it threw. */
  public List<Object> runCatching(IntFunction<Object> f) {
    return run(r -> {
      try {
        return f.apply(r);
      } catch (RuntimeException e) {
        return e;
      }
    });
  }

  @Override public void close() {
    for (Communicator c : comms) if (c != null) c.close();
    pool.shutdownNow();
  }
}
