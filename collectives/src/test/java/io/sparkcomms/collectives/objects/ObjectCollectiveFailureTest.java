package io.sparkcomms.collectives.objects;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.esotericsoftware.kryo.Kryo;
import com.esotericsoftware.kryo.Serializer;
import com.esotericsoftware.kryo.io.Input;
import com.esotericsoftware.kryo.io.Output;
import io.sparkcomms.collectives.CommMismatchException;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.RankGroup;
import io.sparkcomms.collectives.objects.ObjectHeader.Call;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.IntFunction;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * What fails where: an object one rank cannot serialize, or one over the limit, makes every rank
 * raise before any payload moves; ranks that make different calls all raise; a forged length is
 * refused before it is allocated; a deserialization failure raises on the failing rank only. The
 * communicator works after each. A registrator's settings and serializers apply.
 */
class ObjectCollectiveFailureTest {
  static final int N = 3;
  static final int LIMIT = 1024;
  static RankGroup g;

  /** Its registered serializer refuses to write it. */
  static final class Poison {}

  /** Not registered: refused when the registrator requires registration. */
  static final class Unregistered {}

  /** Read back by its registered serializer, which marks what it builds. */
  static final class Tagged {
    final int value;
    final boolean viaSerializer;

    Tagged(int value, boolean viaSerializer) {
      this.value = value;
      this.viaSerializer = viaSerializer;
    }
  }

  static final class PoisonSerializer extends Serializer<Poison> {
    @Override public void write(Kryo k, Output out, Poison p) { throw new IllegalStateException("poison refuses to be written"); }

    @Override public Poison read(Kryo k, Input in, Class<Poison> t) { return new Poison(); }
  }

  static final class TaggedSerializer extends Serializer<Tagged> {
    @Override public void write(Kryo k, Output out, Tagged t) { out.writeInt(t.value); }

    @Override public Tagged read(Kryo k, Input in, Class<Tagged> type) { return new Tagged(in.readInt(), true); }
  }

  static final KryoObjectCodec CODEC = new KryoObjectCodec(k -> {
    k.register(Poison.class, new PoisonSerializer());
    k.register(Tagged.class, new TaggedSerializer());
  });

  static final KryoObjectCodec STRICT = new KryoObjectCodec(k -> {
    k.setRegistrationRequired(true);
    k.register(Tagged.class, new TaggedSerializer());
  });

  @BeforeAll static void start() {
    g = new RankGroup(N, CommOptions.builder().backend(CommOptions.Backend.HOST).timeout(Duration.ofSeconds(30)).build());
  }

  @AfterAll static void stop() {
    if (g != null) g.close();
  }

  /** Runs f on every rank, asserts every rank raised {@code type}, returns the exceptions by rank. */
  static <E extends RuntimeException> List<E> everyRankRaises(Class<E> type, IntFunction<Object> f) {
    List<Object> res = g.runCatching(f);
    for (int r = 0; r < N; r++) assertInstanceOf(type, res.get(r), "rank " + r + ": " + res.get(r));
    @SuppressWarnings("unchecked") List<E> es = (List<E>) (List<?>) res;
    // the same verdict on every rank, after the name of the rank's own call
    for (E e : es) assertEquals(verdict(es.get(0)), verdict(e), "the same verdict on every rank");
    g.assertStillWorks();
    return es;
  }

  @Test void aRegistratorsSerializerAndSettingsApply() {
    List<List<Object>> got = g.run(r -> ObjectCollectives.allGatherObject(g.comm(r), new Tagged(10 + r, false), STRICT, LIMIT));
    for (List<Object> l : got) {
      for (int s = 0; s < N; s++) {
        Tagged t = (Tagged) l.get(s);
        assertEquals(10 + s, t.value);
        assertTrue(t.viaSerializer, "read by the registered serializer");
      }
    }
    List<CommObjectException> es = everyRankRaises(CommObjectException.class, r -> ObjectCollectives.allGatherObject(
        g.comm(r), r == 2 ? new Unregistered() : new Tagged(r, false), STRICT, LIMIT));
    String m = es.get(0).getMessage();
    assertTrue(m.contains("rank 2 could not serialize") && m.contains(Unregistered.class.getName())
        && m.contains("not registered"), m);
    assertTrue(m.contains("allGatherObject") && !m.contains("rank 0") && !m.contains("rank 1"), m);
  }

  @Test void anObjectOneRankCannotSerializeFailsEveryRank() {
    List<CommObjectException> es = everyRankRaises(CommObjectException.class, r -> ObjectCollectives.allGatherObject(
        g.comm(r), r == 1 ? new Poison() : "fine " + r, CODEC, LIMIT));
    String m = es.get(0).getMessage();
    assertTrue(m.contains("rank 1 could not serialize its object (" + Poison.class.getName() + ")")
        && m.contains("poison refuses to be written") && m.endsWith("no object was sent"), m);
    assertInstanceOf(IllegalStateException.class, rootCause(es.get(1)), "the failing rank keeps the codec's exception");
    assertNull(es.get(0).getCause());

    es = everyRankRaises(CommObjectException.class, r -> ObjectCollectives.gatherObject(
        g.comm(r), r == 0 ? new Poison() : "fine", 2, CODEC, LIMIT));
    assertTrue(es.get(2).getMessage().startsWith("gatherObject: rank 0 could not serialize"), es.get(2).getMessage());

    es = everyRankRaises(CommObjectException.class, r -> ObjectCollectives.broadcastObject(
        g.comm(r), r == 2 ? new Poison() : "ignored", 2, CODEC, LIMIT));
    assertTrue(es.get(0).getMessage().startsWith("broadcastObject: rank 2 could not serialize"), es.get(0).getMessage());
    // a non-root's object is not serialized: its Poison is no failure
    List<Object> b = g.run(r -> ObjectCollectives.broadcastObject(g.comm(r), r == 2 ? "from 2" : new Poison(), 2, CODEC, LIMIT));
    assertEquals(List.of("from 2", "from 2", "from 2"), b);
  }

  @Test void anObjectOverTheLimitOnOneRankFailsEveryRank() {
    List<CommObjectException> es = everyRankRaises(CommObjectException.class, r -> ObjectCollectives.allGatherObject(
        g.comm(r), r == 0 ? new byte[2 * LIMIT] : new byte[10], CODEC, LIMIT));
    String m = es.get(0).getMessage();
    assertTrue(m.contains("rank 0's object ([B) is ") && m.contains("over the limit of 1024 bytes"), m);

    es = everyRankRaises(CommObjectException.class, r -> ObjectCollectives.broadcastObject(
        g.comm(r), "x".repeat(r == 1 ? LIMIT : 1), 1, CODEC, LIMIT));
    assertTrue(es.get(0).getMessage().contains("rank 1's object (java.lang.String)"), es.get(0).getMessage());

    // exactly at the limit passes: find the array length whose serialized form is LIMIT bytes
    int n = LIMIT - (CODEC.serialize(new byte[0]).length + 1);
    assertEquals(LIMIT, CODEC.serialize(new byte[n]).length);
    List<List<Object>> ok = g.run(r -> ObjectCollectives.allGatherObject(g.comm(r), new byte[n], CODEC, LIMIT));
    assertEquals(n, ((byte[]) ok.get(2).get(0)).length);
  }

  @Test void ranksThatMakeDifferentCallsAllRaise() {
    List<CommMismatchException> es = everyRankRaises(CommMismatchException.class, r -> ObjectCollectives.allGatherObject(
        g.comm(r), "x", CODEC, r == 1 ? 2 * LIMIT : LIMIT));
    String m = es.get(0).getMessage();
    assertTrue(m.contains("rank 0 allGatherObject(maxBytes 1024)") && m.contains("rank 1 allGatherObject(maxBytes 2048)"), m);

    es = everyRankRaises(CommMismatchException.class, r -> ObjectCollectives.broadcastObject(g.comm(r), "x", r == 2 ? 1 : 0, CODEC, LIMIT));
    assertTrue(es.get(0).getMessage().contains("rank 2 broadcastObject(root 1, maxBytes 1024)"), es.get(0).getMessage());

    es = everyRankRaises(CommMismatchException.class, r -> r == 0
        ? ObjectCollectives.gatherObject(g.comm(r), "x", 0, CODEC, LIMIT) : ObjectCollectives.allGatherObject(g.comm(r), "x", CODEC, LIMIT));
    assertTrue(es.get(0).getMessage().contains("rank 0 gatherObject(root 0"), es.get(0).getMessage());

    es = everyRankRaises(CommMismatchException.class, r -> ObjectCollectives.gatherObject(g.comm(r), "x", N, CODEC, LIMIT));
    assertTrue(es.get(0).getMessage().contains("rank 0: root 3 is not a rank of 0..2"), es.get(0).getMessage());

    es = everyRankRaises(CommMismatchException.class, r -> ObjectCollectives.allGatherObject(g.comm(r), "x", r == 1 ? null : CODEC, LIMIT));
    assertTrue(es.get(0).getMessage().contains("rank 1: the codec is null"), es.get(0).getMessage());
  }

  /** Rank 1 sends a header whose length is past the limit (a peer gone wrong): the others refuse it, allocating nothing. */
  @Test void aLengthOutOfRangeIsRefusedBeforeAnythingIsAllocated() {
    List<Object> res = g.runCatching(r -> {
      if (r != 1) return ObjectCollectives.allGatherObject(g.comm(r), "x", CODEC, LIMIT);
      long[] forged = ObjectHeader.of(Call.ALL_GATHER, -1, LIMIT, ObjectHeader.OK, Integer.MAX_VALUE, "", null).encode();
      g.comm(r).allGather(HostTensor.of(forged), HostTensor.of(new long[N * ObjectHeader.WORDS]));
      return "forged";
    });
    assertEquals("forged", res.get(1));
    for (int r : new int[] {0, 2}) {
      CommObjectException e = assertInstanceOf(CommObjectException.class, res.get(r), "rank " + r);
      assertTrue(e.getMessage().contains("rank 1 reported a serialized length of 2147483647 bytes, outside 0..1024"), e.getMessage());
    }
    g.assertStillWorks();
  }

  /** A codec that cannot read what it received raises on its own rank; the others have their objects. */
  @Test void aDeserializationFailureRaisesOnlyWhereItHappens() {
    ObjectCodec unreadable = new ObjectCodec() {
      @Override public byte[] serialize(Object o) { return CODEC.serialize(o); }

      @Override public Object deserialize(byte[] bytes) { throw new IllegalArgumentException("this rank cannot read"); }
    };
    List<Object> res = g.runCatching(r -> ObjectCollectives.allGatherObject(g.comm(r), "from " + r, r == 2 ? unreadable : CODEC, LIMIT));
    assertEquals(List.of("from 0", "from 1", "from 2"), res.get(0));
    assertEquals(List.of("from 0", "from 1", "from 2"), res.get(1));
    CommObjectException e = assertInstanceOf(CommObjectException.class, res.get(2));
    assertTrue(e.getMessage().startsWith("allGatherObject: rank 2 could not deserialize the object of rank 0"), e.getMessage());
    assertInstanceOf(IllegalArgumentException.class, e.getCause());

    res = g.runCatching(r -> ObjectCollectives.broadcastObject(g.comm(r), "root's", 0, r == 0 ? unreadable : CODEC, LIMIT));
    assertEquals(List.of("root's", "root's", "root's"), res, "the root does not deserialize its own object");
    g.assertStillWorks();
  }

  /** As the codec's Javadoc says: Kryo 4 writes the JDK's immutable lists but cannot build them back. */
  @Test void immutableJdkListsDoNotReadBack() {
    byte[] b = CODEC.serialize(List.of(1, 2));
    assertThrows(RuntimeException.class, () -> CODEC.deserialize(b));
  }

  @Test void theCodecWorksAfterAFailedCall() {
    assertInstanceOf(IllegalStateException.class, rootCause(assertThrows(RuntimeException.class,
        () -> CODEC.serialize(List.of(new ArrayList<>(List.of(new Poison())))))));
    Tagged t = (Tagged) CODEC.deserialize(CODEC.serialize(new Tagged(3, false)));
    assertEquals(3, t.value);
    assertSame(Boolean.TRUE, t.viaSerializer);
  }

  private static String verdict(RuntimeException e) { return e.getMessage().substring(e.getMessage().indexOf(": ")); }

  private static Throwable rootCause(Throwable t) {
    while (t.getCause() != null && t.getCause() != t) t = t.getCause();
    return t;
  }
}
