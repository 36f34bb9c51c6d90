package io.sparkcomms.spark.plugin;

import io.sparkcomms.spark.gpu.GpuClaimProtocol;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InvalidClassException;
import java.io.ObjectInputFilter;
import java.io.ObjectInputStream;
import java.io.ObjectOutputStream;
import java.io.ObjectStreamClass;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.util.Set;
import org.apache.spark.api.plugin.PluginContext;

/**
 * How the plugin's executor-to-driver messages ({@link RendezvousProtocol}, {@link GpuClaimProtocol})
 * and the driver's replies travel over {@code PluginContext.ask/send}: as {@code byte[]}, serialized
 * and deserialized here with this class's own class loader.
 *
 * <p>Why: Spark's RPC layer deserializes a message with the class loader that was current when its
 * RpcEnv was created. In an executor that is the JVM's application class loader, created before the
 * jars of {@code --jars} / {@code spark.jars} are fetched; the plugin itself is loaded from those
 * jars (SPARK-32119), so a reply object of ours could not be deserialized there
 * ({@code ClassNotFoundException: io.sparkcomms.spark.rendezvous.RendezvousProtocol$Reply} in the
 * transport handler, after which the executor lost its driver and exited). A {@code byte[]} needs no
 * class of ours in Spark's layer. Decoding accepts only the protocol's own classes and the JDK types they
 * hold ({@link ObjectInputFilter}).
 */
final class PluginWire {
  private static final Set<String> ALLOWED = Set.of("java.lang.String", "java.lang.Enum", "[B", "[[B", "[I");
  private static final ObjectInputFilter FILTER = info -> {
    Class<?> c = info.serialClass();
    if (c == null) return ObjectInputFilter.Status.UNDECIDED;
    String n = c.getName();
    boolean ours = n.startsWith(RendezvousProtocol.class.getName() + "$") || n.startsWith(GpuClaimProtocol.class.getName() + "$");
    return ours || ALLOWED.contains(n) ? ObjectInputFilter.Status.ALLOWED : ObjectInputFilter.Status.REJECTED;
  };

  private PluginWire() {}

  static byte[] encode(Object message) {
    if (!(message instanceof Serializable)) throw new IllegalArgumentException("not a plugin message: " + message);
    ByteArrayOutputStream bytes = new ByteArrayOutputStream(256);
    try (ObjectOutputStream out = new ObjectOutputStream(bytes)) {
      out.writeObject(message);
    } catch (IOException e) {
      throw new UncheckedIOException("encoding " + message, e);
    }
    return bytes.toByteArray();
  }

  /** The message in {@code wire} (null stays null: a {@code send} or a reply-less message). */
  static Object decode(Object wire) {
    if (wire == null) return null;
    if (!(wire instanceof byte[] b)) {
      throw new IllegalArgumentException("sparkcomms plugin: expected an encoded message, got " + wire.getClass().getName()
          + " (is the same sparkcomms version on the driver and the executors?)");
    }
    try (ObjectInputStream in = new ObjectInputStream(new ByteArrayInputStream(b)) {
      @Override protected Class<?> resolveClass(ObjectStreamClass desc) throws IOException, ClassNotFoundException {
        try {
          return Class.forName(desc.getName(), false, PluginWire.class.getClassLoader());
        } catch (ClassNotFoundException e) {
          return super.resolveClass(desc);
        }
      }
    }) {
      in.setObjectInputFilter(FILTER);
      return in.readObject();
    } catch (InvalidClassException e) {
      throw new IllegalArgumentException("sparkcomms plugin: rejected message: " + e.getMessage(), e);
    } catch (IOException | ClassNotFoundException e) {
      throw new IllegalArgumentException("sparkcomms plugin: undecodable message: " + e, e);
    }
  }

  /** {@code ctx.ask(message)} with the message and the reply encoded. */
  static Object ask(PluginContext ctx, Object message) throws Exception {
    return decode(ctx.ask(encode(message)));
  }

  /** {@code ctx.send(message)} encoded. */
  static void send(PluginContext ctx, Object message) throws IOException {
    ctx.send(encode(message));
  }
}
