package io.sparkcomms.spark;

import io.sparkcomms.collectives.objects.ObjectCodec;
import io.sparkcomms.collectives.objects.ObjectCollectives;
import java.nio.ByteBuffer;
import java.util.Objects;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.serializer.KryoSerializer;
import org.apache.spark.serializer.Serializer;
import scala.reflect.ClassTag;
import scala.reflect.ClassTag$;

/**
 * An {@link ObjectCodec} on Spark's {@link KryoSerializer}, for the object collectives inside Spark
 * ({@link BarrierComms#allGatherObject}): the application's Kryo settings apply as they do to its
 * shuffles and cached data ({@code spark.kryo.registrator}, {@code spark.kryo.classesToRegister},
 * {@code spark.kryo.registrationRequired}, {@code spark.kryo.referenceTracking},
 * {@code spark.kryo.unsafe}), along with the classes Spark registers itself. An object whose
 * serialized form exceeds {@code spark.kryoserializer.buffer.max} (64 MiB unless set) cannot be
 * serialized; {@link ObjectCollectives}' {@code maxBytes} limit applies as well.
 *
 * <p>Thread safety: safe for concurrent use. {@link KryoSerializer} is; each {@link #serialize} and
 * {@link #deserialize} takes a serializer instance of its own ({@link KryoSerializer#newInstance},
 * which borrows a Kryo from the serializer's pool when {@code spark.kryo.pool} is on, the default).
 */
public final class SparkKryoCodec implements ObjectCodec {
  private static final ClassTag<Object> ANY = ClassTag$.MODULE$.AnyRef();

  /** The codec of the current {@link SparkEnv}, rebuilt when the environment changes. */
  private record Cached(SparkEnv env, SparkKryoCodec codec) {}

  private static volatile Cached current;

  private final KryoSerializer serializer;

  /**
   * A codec on a new {@link KryoSerializer} of {@code conf}.
   *
   * @param conf the Spark configuration whose {@code spark.kryo.*} settings apply
   */
  public SparkKryoCodec(SparkConf conf) { this(new KryoSerializer(Objects.requireNonNull(conf, "conf"))); }

  /**
   * A codec on {@code serializer}.
   *
   * @param serializer the Kryo serializer to use, shared with whatever else uses it
   */
  public SparkKryoCodec(KryoSerializer serializer) { this.serializer = Objects.requireNonNull(serializer, "serializer"); }

  /**
   * The codec of this JVM's {@link SparkEnv}: on Spark's own serializer when {@code spark.serializer}
   * is the {@link KryoSerializer} (so it also loads classes as the executor's serializer does), else
   * on a {@link KryoSerializer} of the environment's configuration. Built once per environment.
   *
   * @return the codec
   * @throws IllegalStateException outside a Spark driver or executor (no {@link SparkEnv})
   */
  public static SparkKryoCodec current() {
    SparkEnv env = SparkEnv.get();
    if (env == null) {
      throw new IllegalStateException("SparkKryoCodec.current() needs a running Spark driver or executor (SparkEnv.get() is null)");
    }
    Cached c = current;
    if (c == null || c.env() != env) {
      Serializer own = env.serializer();
      c = new Cached(env, own instanceof KryoSerializer k ? new SparkKryoCodec(k) : new SparkKryoCodec(env.conf()));
      current = c;
    }
    return c.codec();
  }

  /** {@inheritDoc} Spark's exception (for example an unregistered class) propagates. */
  @Override public byte[] serialize(Object o) {
    ByteBuffer b = serializer.newInstance().serialize(o, ANY);
    byte[] out = new byte[b.remaining()];
    b.get(out);
    return out;
  }

  /** {@inheritDoc} */
  @Override public Object deserialize(byte[] bytes) {
    return serializer.newInstance().deserialize(ByteBuffer.wrap(bytes), ANY);
  }

  @Override public String toString() { return "SparkKryoCodec[" + serializer + "]"; }
}
