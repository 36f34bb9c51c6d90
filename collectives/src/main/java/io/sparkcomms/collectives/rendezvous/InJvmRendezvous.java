package io.sparkcomms.collectives.rendezvous;

import java.time.Duration;
import java.util.HashMap;
import java.util.Map;

/**
 * Rendezvous between threads of one JVM. Create one {@link Group} and give each thread
 * {@code group.member(rank)}.
 */
public final class InJvmRendezvous implements Rendezvous {
  private final Group group;
  private final int rank;
  private long round;

  private InJvmRendezvous(Group group, int rank) {
    this.group = group;
    this.rank = rank;
  }

  public static Group group(int size) { return new Group(size); }

  @Override public int rank() { return rank; }
  @Override public int size() { return group.size; }

  @Override public byte[][] allGather(byte[] mine, Duration timeout) {
    return group.exchange(round++, rank, mine.clone(), timeout);
  }

  @Override public String describe() { return "in-JVM rendezvous of " + group.size + " ranks"; }

  /** The shared state of one group of ranks. */
  public static final class Group {
    private final int size;
    private final Map<Long, byte[][]> rounds = new HashMap<>();
    private final Map<Long, Integer> arrived = new HashMap<>();
    private final Map<Long, Integer> departed = new HashMap<>();

    private Group(int size) {
      if (size < 1) throw new IllegalArgumentException("size must be >= 1, got " + size);
      this.size = size;
    }

    public int size() { return size; }

    public Rendezvous member(int rank) {
      if (rank < 0 || rank >= size) throw new IllegalArgumentException("rank " + rank + " outside 0.." + (size - 1));
      return new InJvmRendezvous(this, rank);
    }

    private synchronized byte[][] exchange(long round, int rank, byte[] mine, Duration timeout) {
      byte[][] slots = rounds.computeIfAbsent(round, r -> new byte[size][]);
      if (slots[rank] != null) throw new IllegalStateException("rank " + rank + " joined round " + round + " twice");
      slots[rank] = mine;
      arrived.merge(round, 1, Integer::sum);
      notifyAll();
      long deadline = System.nanoTime() + timeout.toNanos();
      while (arrived.get(round) < size) {
        long left = deadline - System.nanoTime();
        if (left <= 0) {
          StringBuilder missing = new StringBuilder();
          for (int r = 0; r < size; r++) if (slots[r] == null) missing.append(missing.length() == 0 ? "" : ",").append(r);
          throw new RendezvousException("rendezvous round " + round + ": rank(s) " + missing
              + " did not arrive within " + timeout.toMillis() + " ms");
        }
        try {
          wait(Math.max(1, left / 1_000_000), 0);
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new RendezvousException("interrupted while waiting in rendezvous round " + round, e);
        }
      }
      byte[][] result = new byte[size][];
      for (int r = 0; r < size; r++) result[r] = slots[r].clone();
      if (departed.merge(round, 1, Integer::sum) == size) {
        rounds.remove(round);
        arrived.remove(round);
        departed.remove(round);
      }
      return result;
    }
  }
}
