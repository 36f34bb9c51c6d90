package io.sparkcomms.collectives.objects;

import com.esotericsoftware.kryo.Kryo;
import com.esotericsoftware.kryo.KryoException;
import com.esotericsoftware.kryo.factories.SerializerFactory;
import com.esotericsoftware.kryo.io.Input;
import com.esotericsoftware.kryo.io.Output;
import com.esotericsoftware.kryo.pool.KryoPool;
import java.util.Objects;
import java.util.function.Consumer;
import org.objenesis.strategy.StdInstantiatorStrategy;

/**
 * An {@link ObjectCodec} on Kryo 4 ({@code writeClassAndObject}/{@code readClassAndObject}: the class
 * name travels with the object, so both sides need only the same classes, not the same registrations).
 *
 * <p>Each Kryo instance is set up as follows, then handed to the registrator: registration not
 * required ({@code setRegistrationRequired(false)}), references tracked (shared and cyclic object
 * graphs survive), classes without a no-argument constructor created through Objenesis (as Spark's
 * KryoSerializer does), Java records written component by component through their canonical
 * constructor, and classes loaded through the codec's class loader. The registrator may register
 * classes and serializers and change any of these settings (for example require registration).
 *
 * <p>Thread safety: the codec is safe for concurrent use. Kryo instances are not, so each
 * {@link #serialize} and {@link #deserialize} borrows one from a pool of the codec
 * ({@link KryoPool}, soft references: idle instances may be collected) and returns it afterwards; a
 * call that fails drops its instance instead, so no half-reset state is reused. A pool holds at most
 * as many instances as calls ran at once, each built once by the registrator.
 *
 * <p>Kryo 4 cannot read the JDK's immutable collections ({@code List.of}, {@code Map.of}): it fills
 * them through {@code add}/{@code put}. Send mutable ones ({@code ArrayList}, {@code HashMap}) or
 * register serializers for them.
 */
public final class KryoObjectCodec implements ObjectCodec {
  private static final int INITIAL_BUFFER = 4096;

  private final Consumer<Kryo> registrator;
  private final ClassLoader loader;
  private final KryoPool pool;

  /** A codec with Kryo's defaults above, loading classes through the calling thread's context class loader. */
  public KryoObjectCodec() { this(k -> {}); }

  /**
   * A codec whose Kryo instances {@code registrator} configures after the defaults, loading classes
   * through the context class loader of the thread that builds the codec (or this class's loader when
   * it has none).
   *
   * @param registrator registers classes and serializers on each new Kryo instance; it runs once per
   *     instance, possibly on several threads at once
   */
  public KryoObjectCodec(Consumer<Kryo> registrator) { this(registrator, contextLoader()); }

  /**
   * A codec whose Kryo instances {@code registrator} configures after the defaults and load classes
   * through {@code loader}.
   *
   * @param registrator registers classes and serializers on each new Kryo instance; it runs once per
   *     instance, possibly on several threads at once
   * @param loader the class loader that resolves the class names read
   */
  public KryoObjectCodec(Consumer<Kryo> registrator, ClassLoader loader) {
    this.registrator = Objects.requireNonNull(registrator, "registrator");
    this.loader = Objects.requireNonNull(loader, "loader");
    this.pool = new KryoPool.Builder(this::newKryo).softReferences().build();
  }

  private Kryo newKryo() {
    Kryo k = new Kryo();
    k.setRegistrationRequired(false);
    k.setReferences(true);
    k.setInstantiatorStrategy(new Kryo.DefaultInstantiatorStrategy(new StdInstantiatorStrategy()));
    k.addDefaultSerializer(Record.class, (SerializerFactory) (kryo, type) -> new RecordSerializer(type));
    k.setClassLoader(loader);
    registrator.accept(k);
    return k;
  }

  /** {@inheritDoc} Kryo's exception (for example an unregistered class) propagates. */
  @Override public byte[] serialize(Object o) {
    Kryo k = pool.borrow();
    Output out = new Output(INITIAL_BUFFER, -1);
    k.writeClassAndObject(out, o);
    pool.release(k);
    return out.toBytes();
  }

  /** {@inheritDoc} Bytes left over after the object are an error ({@link KryoException}). */
  @Override public Object deserialize(byte[] bytes) {
    Kryo k = pool.borrow();
    Input in = new Input(bytes);
    Object o = k.readClassAndObject(in);
    pool.release(k);
    if (in.position() != bytes.length) {
      throw new KryoException("the object ends at byte " + in.position() + " of " + bytes.length);
    }
    return o;
  }

  @Override public String toString() { return "KryoObjectCodec[" + registrator + ", " + loader + "]"; }

  private static ClassLoader contextLoader() {
    ClassLoader l = Thread.currentThread().getContextClassLoader();
    return l != null ? l : KryoObjectCodec.class.getClassLoader();
  }
}
