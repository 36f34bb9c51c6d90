package io.sparkcomms.collectives.objects;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.RankGroup;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Random;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The three object collectives at 1 to 8 ranks (threads of this JVM, host backend), each rank with an
 * object of another kind and size: an empty string, null, a 1 MB array, a record, a class without a
 * no-argument constructor, a HashMap whose two keys share one list. Every result is compared with the
 * object the sending rank built.
 */
class ObjectCollectivesTest {
  record Point(int x, String name, List<Integer> values) {}

  /** No no-argument constructor, a final field: built through Objenesis, fields set by Kryo. */
  static final class Account {
    final String owner;
    long balance;

    Account(String owner, long balance) {
      this.owner = owner;
      this.balance = balance;
    }

    @Override public boolean equals(Object o) {
      return o instanceof Account a && a.owner.equals(owner) && a.balance == balance;
    }

    @Override public int hashCode() { return Objects.hash(owner, balance); }
  }

  static CommOptions options() {
    return CommOptions.builder().backend(CommOptions.Backend.HOST).timeout(Duration.ofSeconds(30)).build();
  }

  /** Rank r's object: the kind cycles with r, the contents depend on r. */
  static Object objectOf(int r) {
    switch (r % 6) {
      case 0: return "";
      case 1: return null;
      case 2: {
        byte[] b = new byte[1_000_000];
        new Random(r).nextBytes(b);
        return b;
      }
      case 3: return new Point(r, "point " + r, new ArrayList<>(List.of(r, -r, 7)));
      case 4: return new Account("owner " + r, 1000L * r);
      default: {
        Map<String, Object> m = new HashMap<>();
        List<Long> shared = new ArrayList<>(List.of((long) r, 2L));
        m.put("a", shared);
        m.put("b", shared);
        m.put("rank", r);
        return m;
      }
    }
  }

  static void assertSameValue(Object expected, Object actual, String where) {
    if (expected instanceof byte[] e) {
      assertArrayEquals(e, (byte[]) actual, where);
    } else {
      assertEquals(expected, actual, where);
    }
    if (expected instanceof Map<?, ?>) {
      Map<?, ?> m = (Map<?, ?>) actual;
      assertSame(m.get("a"), m.get("b"), where + ": a list referenced twice arrives as one list");
    }
  }

  @ParameterizedTest
  @ValueSource(ints = {1, 2, 3, 4, 8})
  void objectsArriveAsSentAtEveryRankCount(int n) {
    KryoObjectCodec codec = new KryoObjectCodec();
    try (RankGroup g = new RankGroup(n, options())) {
      List<List<Object>> gathered = g.run(r -> ObjectCollectives.allGatherObject(g.comm(r), objectOf(r), codec, 4 << 20));
      for (int r = 0; r < n; r++) {
        assertEquals(n, gathered.get(r).size());
        for (int s = 0; s < n; s++) assertSameValue(objectOf(s), gathered.get(r).get(s), "allGather: rank " + r + " from " + s);
      }

      for (int root : new int[] {0, n - 1}) {
        Object[] sent = new Object[n];
        List<Object> got = g.run(r -> {
          sent[r] = r == root ? objectOf(root + 3) : "not the root's";
          return ObjectCollectives.broadcastObject(g.comm(r), sent[r], root, codec, 4 << 20);
        });
        for (int r = 0; r < n; r++) {
          assertSameValue(objectOf(root + 3), got.get(r), "broadcast from " + root + " to " + r);
          if (r == root) assertSame(sent[r], got.get(r), "the root gets its own object back");
          else if (!(sent[root] instanceof String) && sent[root] != null) assertNotSame(sent[root], got.get(r), "a copy");
        }
      }

      int root = n / 2;
      List<List<Object>> onRoot = g.run(r -> ObjectCollectives.gatherObject(g.comm(r), objectOf(r + 1), root, codec, 4 << 20));
      for (int r = 0; r < n; r++) {
        if (r != root) {
          assertNull(onRoot.get(r), "gather: rank " + r + " is not the root");
          continue;
        }
        assertEquals(n, onRoot.get(r).size());
        for (int s = 0; s < n; s++) assertSameValue(objectOf(s + 1), onRoot.get(r).get(s), "gather from " + s);
      }
      g.assertStillWorks();
    }
  }

  @ParameterizedTest
  @ValueSource(ints = {1, 3})
  void theDefaultOverloadsUseKryoAndTheDefaultLimit(int n) {
    try (RankGroup g = new RankGroup(n, options())) {
      List<List<Object>> all = g.run(r -> ObjectCollectives.allGatherObject(g.comm(r), objectOf(r + 3)));
      List<Object> b = g.run(r -> ObjectCollectives.broadcastObject(g.comm(r), objectOf(r + 3), 0));
      List<List<Object>> gathered = g.run(r -> ObjectCollectives.gatherObject(g.comm(r), objectOf(r + 3), n - 1));
      for (int r = 0; r < n; r++) {
        for (int s = 0; s < n; s++) assertSameValue(objectOf(s + 3), all.get(r).get(s), "allGather " + r + " from " + s);
        assertSameValue(objectOf(3), b.get(r), "broadcast to " + r);
      }
      for (int s = 0; s < n; s++) assertSameValue(objectOf(s + 3), gathered.get(n - 1).get(s), "gather from " + s);
      assertTrue(ObjectCollectives.DEFAULT_MAX_BYTES == 64 << 20);
    }
  }
}
