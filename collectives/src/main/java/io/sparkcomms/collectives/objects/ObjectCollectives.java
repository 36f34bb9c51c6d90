package io.sparkcomms.collectives.objects;

import io.sparkcomms.collectives.CommMismatchException;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.objects.ObjectHeader.Call;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Objects;
import java.util.function.IntPredicate;

/**
 * Collectives of Java objects over a {@link Communicator} (torchcomms' {@code all_gather_object},
 * {@code broadcast_object_list}, {@code gather_object}): each rank's object is serialized by an
 * {@link ObjectCodec} and moved as INT64 host tensors, so they run on the host and the GPU backend.
 * Like every collective, every rank must make the same call (the same method, root and limit, and
 * codecs that understand each other) in the same order as its other calls on the communicator.
 *
 * <p>Each call is two collectives. First a header round: an allGather of a fixed header per rank
 * ({@code ObjectHeader}: the call, root, limit, status, serialized length and, for a failure, the
 * object's class and the reason). Every rank checks every header the same way, so all ranks raise
 * the same exception, or none does:
 * <ul>
 *   <li>{@link CommMismatchException} when the ranks made different calls (another method, root or
 *       {@code maxBytes}), or a rank refused its own arguments (a root that is not a rank, a limit
 *       outside 0..{@link #MAX_LIMIT_BYTES}, a null codec);</li>
 *   <li>{@link CommObjectException} when a rank that sends could not serialize its object (the codec
 *       threw, for example an unregistered class with registration required, or ran out of stack or
 *       memory), its object is over {@code maxBytes} serialized, or its header is out of range. The
 *       message names the rank, the object's class and the reason; on the failing rank the codec's
 *       exception is the cause.</li>
 * </ul>
 * In both cases no payload moves. Then, only when every header passes, the payload round: the
 * serialized bytes packed into INT64 words (at most {@code maxBytes} + 7 bytes per rank), by
 * allGatherV with each rank's own word count for {@link #allGatherObject}, by gather to the root,
 * zero-padded to the longest object, for {@link #gatherObject}, and by broadcast from the root for
 * {@link #broadcastObject}. Every length a peer sent is checked against 0..{@code maxBytes} before
 * anything is allocated for it.
 *
 * <p>Deserialization is local: a rank that cannot deserialize what it received (a class missing from
 * its class path, a codec that does not match) raises {@link CommObjectException} naming the sending
 * rank, while the other ranks return normally; nothing else can be done once the bytes have arrived.
 * After any of these exceptions the communicator stays usable: either both rounds completed or the
 * payload round ran on no rank. A failure of the collectives themselves (timeout, abort) propagates as
 * it is.
 *
 * <p>The overloads without a codec build a {@link KryoObjectCodec} (default settings, the calling
 * thread's context class loader) per call and use {@link #DEFAULT_MAX_BYTES}; pass a codec to reuse
 * its Kryo instances or register classes.
 */
public final class ObjectCollectives {
  /**
   * The default limit on one rank's serialized object, 64 MiB. An allGatherObject allocates the
   * padded payload of every rank on every rank: up to size times the limit.
   */
  public static final int DEFAULT_MAX_BYTES = 64 << 20;
  /** The largest {@code maxBytes} accepted, 1 GiB. */
  public static final int MAX_LIMIT_BYTES = 1 << 30;
  /** Longest Java array: the gathered payload of all ranks must fit one. */
  private static final long MAX_ARRAY = Integer.MAX_VALUE - 8;

  private ObjectCollectives() {}

  /**
   * Every rank's object, in rank order (this rank's own as a deserialized copy), with a
   * {@link KryoObjectCodec} and {@link #DEFAULT_MAX_BYTES}.
   *
   * @param c the communicator; every rank calls this
   * @param o this rank's object, may be null
   * @return an unmodifiable list of {@code c.size()} objects (nulls where a rank sent null)
   * @throws CommObjectException on every rank when a rank's object cannot be sent; on this rank only
   *     when this rank cannot deserialize an object it received
   * @throws CommMismatchException on every rank when the ranks' calls differ
   */
  public static List<Object> allGatherObject(Communicator c, Object o) {
    return allGatherObject(c, o, new KryoObjectCodec(), DEFAULT_MAX_BYTES);
  }

  /**
   * Every rank's object, in rank order (this rank's own as a deserialized copy).
   *
   * @param c the communicator; every rank calls this
   * @param o this rank's object, may be null
   * @param codec serializes {@code o} and deserializes every rank's bytes
   * @param maxBytes the largest serialized object any rank may send, 0..{@link #MAX_LIMIT_BYTES}; the
   *     same on every rank
   * @return an unmodifiable list of {@code c.size()} objects (nulls where a rank sent null)
   * @throws CommObjectException on every rank when a rank's object cannot be sent; on this rank only
   *     when this rank cannot deserialize an object it received
   * @throws CommMismatchException on every rank when the ranks' calls differ or a rank refused its arguments
   */
  public static List<Object> allGatherObject(Communicator c, Object o, ObjectCodec codec, int maxBytes) {
    return gathered(Call.ALL_GATHER, c, o, -1, codec, maxBytes);
  }

  /**
   * The root's object on every rank, with a {@link KryoObjectCodec} and {@link #DEFAULT_MAX_BYTES}.
   *
   * @param c the communicator; every rank calls this
   * @param o the object on the root (may be null); ignored on the other ranks
   * @param root the rank whose object is sent, the same on every rank
   * @return on the root, {@code o} itself; elsewhere a deserialized copy of the root's object
   * @throws CommObjectException on every rank when the root's object cannot be sent; on this rank only
   *     when this rank cannot deserialize it
   * @throws CommMismatchException on every rank when the ranks' calls differ or a rank refused its arguments
   */
  public static Object broadcastObject(Communicator c, Object o, int root) {
    return broadcastObject(c, o, root, new KryoObjectCodec(), DEFAULT_MAX_BYTES);
  }

  /**
   * The root's object on every rank. Only the root serializes; the others send an empty header.
   *
   * @param c the communicator; every rank calls this
   * @param o the object on the root (may be null); ignored on the other ranks
   * @param root the rank whose object is sent, the same on every rank
   * @param codec serializes on the root, deserializes elsewhere
   * @param maxBytes the largest serialized object the root may send, 0..{@link #MAX_LIMIT_BYTES}; the
   *     same on every rank
   * @return on the root, {@code o} itself; elsewhere a deserialized copy of the root's object
   * @throws CommObjectException on every rank when the root's object cannot be sent; on this rank only
   *     when this rank cannot deserialize it
   * @throws CommMismatchException on every rank when the ranks' calls differ or a rank refused its arguments
   */
  public static Object broadcastObject(Communicator c, Object o, int root, ObjectCodec codec, int maxBytes) {
    Objects.requireNonNull(c, "communicator");
    Outgoing out = Outgoing.of(Call.BROADCAST, c, c.rank() == root ? o : null, root, codec, maxBytes, c.rank() == root);
    ObjectHeader[] hs = exchange(c, out.header);
    long[] lengths = ObjectHeader.check(Call.BROADCAST, hs, r -> r == root, c.rank(), out.error);
    int len = (int) lengths[root];
    int words = Words.of(len);
    long[] payload = c.rank() == root ? Words.pack(out.bytes, words) : new long[words];
    if (words > 0) c.broadcast(HostTensor.of(payload), root);
    return c.rank() == root ? o : decode(Call.BROADCAST, c.rank(), root, Words.unpack(payload, 0, len), codec);
  }

  /**
   * Every rank's object on the root, in rank order, with a {@link KryoObjectCodec} and
   * {@link #DEFAULT_MAX_BYTES}.
   *
   * @param c the communicator; every rank calls this
   * @param o this rank's object, may be null
   * @param root the rank that receives, the same on every rank
   * @return on the root, an unmodifiable list of {@code c.size()} deserialized objects; null elsewhere
   * @throws CommObjectException on every rank when a rank's object cannot be sent; on the root only
   *     when it cannot deserialize an object it received
   * @throws CommMismatchException on every rank when the ranks' calls differ or a rank refused its arguments
   */
  public static List<Object> gatherObject(Communicator c, Object o, int root) {
    return gatherObject(c, o, root, new KryoObjectCodec(), DEFAULT_MAX_BYTES);
  }

  /**
   * Every rank's object on the root, in rank order. The payload moves by gather, each rank's padded to
   * the longest; only the root holds and deserializes them.
   *
   * @param c the communicator; every rank calls this
   * @param o this rank's object, may be null
   * @param root the rank that receives, the same on every rank
   * @param codec serializes on every rank, deserializes on the root
   * @param maxBytes the largest serialized object any rank may send, 0..{@link #MAX_LIMIT_BYTES}; the
   *     same on every rank
   * @return on the root, an unmodifiable list of {@code c.size()} deserialized objects; null elsewhere
   * @throws CommObjectException on every rank when a rank's object cannot be sent; on the root only
   *     when it cannot deserialize an object it received
   * @throws CommMismatchException on every rank when the ranks' calls differ or a rank refused its arguments
   */
  public static List<Object> gatherObject(Communicator c, Object o, int root, ObjectCodec codec, int maxBytes) {
    return gathered(Call.GATHER, c, o, root, codec, maxBytes);
  }

  private static List<Object> gathered(Call call, Communicator c, Object o, int root, ObjectCodec codec, int maxBytes) {
    Objects.requireNonNull(c, "communicator");
    int n = c.size(), me = c.rank();
    Outgoing out = Outgoing.of(call, c, o, root, codec, maxBytes, true);
    ObjectHeader[] hs = exchange(c, out.header);
    long[] lengths = ObjectHeader.check(call, hs, r -> true, me, out.error);
    long longest = 0;
    for (long l : lengths) longest = Math.max(longest, l);
    int words = Words.of(longest);
    if ((long) n * words > MAX_ARRAY) {
      throw new CommObjectException(call.api + ": the longest object is " + longest + " bytes serialized; padded to it, the "
          + n + " ranks' objects exceed the largest Java array; no object was sent");
    }
    List<Object> objects = new ArrayList<>(n);
    if (call == Call.GATHER) {
      // padded to the longest, gathered on the root only
      long[] all = me == root ? new long[n * words] : null;
      if (words > 0) c.gather(HostTensor.of(Words.pack(out.bytes, words)), all == null ? null : HostTensor.of(all), root);
      if (me != root) return null;
      for (int r = 0; r < n; r++) objects.add(decode(call, me, r, Words.unpack(all, r * words, (int) lengths[r]), codec));
    } else {
      // each rank's words back to back, no padding: allGatherV with the counts every rank derived from the headers
      long[] counts = new long[n];
      long total = 0;
      for (int r = 0; r < n; r++) total += counts[r] = Words.of(lengths[r]);
      long[] all = new long[(int) total];
      if (total > 0) c.allGatherV(HostTensor.of(Words.pack(out.bytes, (int) counts[me])), HostTensor.of(all), counts);
      long at = 0;
      for (int r = 0; r < n; r++) {
        objects.add(decode(call, me, r, Words.unpack(all, (int) at, (int) lengths[r]), codec));
        at += counts[r];
      }
    }
    return Collections.unmodifiableList(objects);
  }

  /** Every rank's header, by rank (one allGather). */
  private static ObjectHeader[] exchange(Communicator c, ObjectHeader mine) {
    long[] all = new long[c.size() * ObjectHeader.WORDS];
    c.allGather(HostTensor.of(mine.encode()), HostTensor.of(all));
    ObjectHeader[] hs = new ObjectHeader[c.size()];
    for (int r = 0; r < hs.length; r++) hs[r] = ObjectHeader.decode(all, r);
    return hs;
  }

  private static Object decode(Call call, int me, int from, byte[] bytes, ObjectCodec codec) {
    try {
      return codec.deserialize(bytes);
    } catch (RuntimeException | StackOverflowError | LinkageError e) {
      throw new CommObjectException(call.api + ": rank " + me + " could not deserialize the object of rank " + from + " ("
          + bytes.length + " bytes): " + e, e);
    }
  }

  /** What this rank sends: its header, and its serialized object when the header says OK. */
  private static final class Outgoing {
    final ObjectHeader header;
    final byte[] bytes;
    final Throwable error;

    private Outgoing(ObjectHeader header, byte[] bytes, Throwable error) {
      this.header = header;
      this.bytes = bytes;
      this.error = error;
    }

    /** Checks the arguments, then serializes {@code o} when {@code sends}. Never throws for the object. */
    static Outgoing of(Call call, Communicator c, Object o, int root, ObjectCodec codec, int maxBytes, boolean sends) {
      String bad = null;
      if (call.rooted() && (root < 0 || root >= c.size())) bad = "root " + root + " is not a rank of 0.." + (c.size() - 1);
      else if (maxBytes < 0 || maxBytes > MAX_LIMIT_BYTES) bad = "maxBytes " + maxBytes + " is outside 0.." + MAX_LIMIT_BYTES;
      else if (codec == null) bad = "the codec is null";
      if (bad != null) return failed(call, root, maxBytes, ObjectHeader.BAD_ARGUMENT, 0, bad, null, null);
      if (!sends) return new Outgoing(ObjectHeader.of(call, root, maxBytes, ObjectHeader.OK, 0, "", null), new byte[0], null);
      String cls = o == null ? "null" : o.getClass().getName();
      byte[] b;
      // Errors too: a rank that leaves without its header would leave its peers waiting for the timeout.
      try {
        b = codec.serialize(o);
      } catch (RuntimeException | StackOverflowError | OutOfMemoryError | LinkageError e) {
        return failed(call, root, maxBytes, ObjectHeader.UNSERIALIZABLE, 0, cls, e.toString(), e);
      }
      if (b == null) return failed(call, root, maxBytes, ObjectHeader.UNSERIALIZABLE, 0, cls, codec + " returned null", null);
      if (b.length > maxBytes) return failed(call, root, maxBytes, ObjectHeader.OVER_LIMIT, b.length, cls, null, null);
      return new Outgoing(ObjectHeader.of(call, root, maxBytes, ObjectHeader.OK, b.length, cls, null), b, null);
    }

    private static Outgoing failed(Call call, int root, int maxBytes, int status, long length, String text, String reason,
        Throwable error) {
      return new Outgoing(ObjectHeader.of(call, root, maxBytes, status, length, text, reason), new byte[0], error);
    }
  }
}
