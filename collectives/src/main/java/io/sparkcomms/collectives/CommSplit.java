package io.sparkcomms.collectives;

import io.sparkcomms.collectives.rendezvous.FileRendezvous;
import io.sparkcomms.collectives.rendezvous.Rendezvous;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Stream;

/**
 * {@link Communicator#split(int[])} and {@link Communicator#split(int, int)}: three rounds over the
 * parent, every parent rank taking part (members of no child too), each an allGather of INT64 words:
 * <ol>
 *   <li>the call: its form, this rank's argument problem, and the rank list's fingerprint or the
 *       color and key. Ranks that made different calls or a rank with invalid arguments fail the
 *       split on every rank before anything is created, so every rank computes the same groups;</li>
 *   <li>each child's first rank (its leader) creates a private rendezvous directory
 *       ({@link FileRendezvous#createDirectory()}) and publishes its path (or why it could not); every
 *       member then builds its child over {@link FileRendezvous} in that directory, with the parent's
 *       options, on the parent's backend (the ranks of one node share the file system);</li>
 *   <li>every rank's creation outcome: one that failed fails the split on every rank (children already
 *       built are closed), and after this round no member still reads a rendezvous directory, so the
 *       leaders remove theirs.</li>
 * </ol>
 * A path from a peer is untrusted: its length is checked, and {@link FileRendezvous} refuses a
 * directory that is not a private directory of this user.
 */
final class CommSplit {
  /** Every rank's words in rank order (the same count from every rank); collective over the parent. */
  interface Words {
    long[] allGather(long[] mine);
  }

  /** Builds a child communicator over {@code rv} (collective over the child's ranks). */
  interface Create {
    AbstractCommunicator create(Rendezvous rv);
  }

  private static final long FORM_LIST = 1, FORM_COLOR = 2;
  private static final int ROUND1 = 4;
  /** Round 2: status, byte length, then the path's (or the error's) UTF-8 bytes in 8-byte words. */
  private static final int TEXT_WORDS = 64, ROUND2 = 2 + TEXT_WORDS;
  private static final long NONE = 0, OK = 1, FAILED = 2;

  private final int rank;
  private final int size;
  private final Words words;
  private final Create create;

  CommSplit(int rank, int size, Words words, Create create) {
    this.rank = rank;
    this.size = size;
    this.words = words;
    this.create = create;
  }

  /** split(int[]): the child of the ranks listed, or null on a rank not listed. */
  AbstractCommunicator byList(int[] ranks) {
    String problem = listProblem(ranks);
    long[] mine = {FORM_LIST, problem == null ? 0 : 1, problem == null ? fingerprint(ranks) : 0, ranks == null ? 0 : ranks.length};
    long[] all = words.allGather(mine);
    checkForms(all);
    for (int p = 0; p < size; p++) {
      if (all[p * ROUND1 + 1] != 0) {
        if (p == rank) throw new IllegalArgumentException("split: " + problem);
        throw new CommMismatchException("split: rank " + p + " passed an invalid rank list (it raised IllegalArgumentException)");
      }
    }
    for (int p = 0; p < size; p++) {
      if (all[p * ROUND1 + 2] != mine[2] || all[p * ROUND1 + 3] != mine[3]) {
        throw new CommMismatchException("split: ranks disagree on the rank list: rank " + rank + " passed " + Arrays.toString(ranks)
            + " (" + mine[3] + " ranks, fingerprint #" + Long.toHexString(mine[2]) + "), rank " + p + " passed "
            + all[p * ROUND1 + 3] + " ranks, fingerprint #" + Long.toHexString(all[p * ROUND1 + 2]));
      }
    }
    List<int[]> groups = ranks.length == 0 ? List.of() : List.of(ranks.clone());
    return build(groups);
  }

  /** split(color, key): the child of the ranks of this rank's color (ordered by key, then parent rank), or null for a negative color. */
  AbstractCommunicator byColor(int color, int key) {
    long[] all = words.allGather(new long[] {FORM_COLOR, 0, color, key});
    checkForms(all);
    List<int[]> groups = new ArrayList<>();
    Integer[] order = new Integer[size];
    for (int p = 0; p < size; p++) order[p] = p;
    Arrays.sort(order, Comparator.<Integer>comparingLong(p -> all[p * ROUND1 + 2]).thenComparingLong(p -> all[p * ROUND1 + 3])
        .thenComparingInt(p -> p));
    for (int i = 0; i < size; ) {
      long c = all[order[i] * ROUND1 + 2];
      int j = i;
      while (j < size && all[order[j] * ROUND1 + 2] == c) j++;
      if (c >= 0) {
        int[] g = new int[j - i];
        for (int k = i; k < j; k++) g[k - i] = order[k];
        groups.add(g);
      }
      i = j;
    }
    return build(groups);
  }

  private void checkForms(long[] all) {
    for (int p = 0; p < size; p++) {
      if (all[p * ROUND1] != all[rank * ROUND1]) {
        throw new CommMismatchException("split: ranks disagree: rank " + rank + " called " + form(all[rank * ROUND1]) + ", rank " + p
            + " called " + form(all[p * ROUND1]));
      }
    }
  }

  private static String form(long f) { return f == FORM_LIST ? "split(int[] ranks)" : f == FORM_COLOR ? "split(color, key)" : "#" + f; }

  /** Rounds 2 and 3 for {@code groups} (each a list of parent ranks in child order; the same on every rank). */
  private AbstractCommunicator build(List<int[]> groups) {
    int[] mine = null;
    int childRank = -1;
    for (int[] g : groups) {
      for (int i = 0; i < g.length; i++) {
        if (g[i] == rank) {
          mine = g;
          childRank = i;
        }
      }
    }
    boolean leader = mine != null && childRank == 0;
    Path dir = null;
    long[] r2 = new long[ROUND2];
    if (leader) {
      try {
        dir = FileRendezvous.createDirectory();
        text(r2, OK, dir.toString());
      } catch (RuntimeException e) {
        text(r2, FAILED, e.toString());
      }
    }
    AbstractCommunicator child = null;
    String failure = null;
    try {
      long[] all2 = words.allGather(r2);
      if (mine != null) {
        int lead = mine[0];
        long status = all2[lead * ROUND2];
        String text = readText(all2, lead);
        if (status != OK) {
          failure = "rank " + lead + " could not create the rendezvous directory of ranks " + Arrays.toString(mine) + ": " + text;
        } else {
          try {
            child = create.create(new FileRendezvous(Paths.get(text), childRank, mine.length));
          } catch (RuntimeException e) {
            failure = "creating the communicator of ranks " + Arrays.toString(mine) + " failed on rank " + rank + ": " + e;
          }
        }
      }
      long[] all3 = words.allGather(new long[] {failure == null ? 0 : 1});
      if (failure != null) throw new CommException("split: " + failure);
      for (int p = 0; p < size; p++) {
        if (all3[p] != 0) throw new CommException("split: creating a child communicator failed on rank " + p + " (its exception says why)");
      }
      AbstractCommunicator made = child;
      child = null;
      return made;
    } finally {
      if (child != null) child.close();
      if (dir != null) removeDirectory(dir);
    }
  }

  /** Writes status and text (cut to the field) into round-2 words. */
  private static void text(long[] w, long status, String s) {
    byte[] b = s.getBytes(StandardCharsets.UTF_8);
    int n = Math.min(b.length, TEXT_WORDS * 8);
    if (status == OK && b.length > n) {
      status = FAILED;
      b = ("its path is longer than " + TEXT_WORDS * 8 + " bytes").getBytes(StandardCharsets.UTF_8);
      n = b.length;
    }
    w[0] = status;
    w[1] = n;
    for (int i = 0; i < n; i++) w[2 + i / 8] |= (b[i] & 0xffL) << (8 * (i % 8));
  }

  /** Rank {@code p}'s round-2 text; its length is checked against the field. */
  private static String readText(long[] all, int p) {
    long n = all[p * ROUND2 + 1];
    if (n < 0 || n > TEXT_WORDS * 8) return "(an unreadable text of length " + n + ")";
    byte[] b = new byte[(int) n];
    for (int i = 0; i < n; i++) b[i] = (byte) (all[p * ROUND2 + 2 + i / 8] >>> (8 * (i % 8)));
    return new String(b, StandardCharsets.UTF_8);
  }

  /** Why {@code ranks} is no valid list for a parent of {@code size} ranks, or null. */
  private String listProblem(int[] ranks) {
    if (ranks == null) return "the rank list is null";
    if (ranks.length > size) return "the rank list has " + ranks.length + " entries, more than the " + size + " ranks";
    boolean[] seen = new boolean[size];
    for (int r : ranks) {
      if (r < 0 || r >= size) return "rank " + r + " in the list is outside 0.." + (size - 1);
      if (seen[r]) return "rank " + r + " is listed twice";
      seen[r] = true;
    }
    return null;
  }

  /** FNV-1a over the list, in order (the order is the child ranks'). */
  private static long fingerprint(int[] ranks) { return Fnv.of(java.util.Arrays.stream(ranks).asLongStream().toArray(), 4); }

  private static void removeDirectory(Path dir) {
    try (Stream<Path> s = Files.list(dir)) {
      for (Path f : (Iterable<Path>) s::iterator) Files.deleteIfExists(f);
      Files.deleteIfExists(dir);
    } catch (IOException e) {
      System.getLogger(CommSplit.class.getName()).log(System.Logger.Level.WARNING, "could not remove " + dir + ": " + e);
    }
  }
}
