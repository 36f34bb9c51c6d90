package io.sparkcomms.spark.plugin;

import io.sparkcomms.spark.gpu.GpuClaimProtocol;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol.Abort;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol.Deposit;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol.Poll;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol.Reply;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol.Slot;
import io.sparkcomms.spark.rendezvous.RendezvousProtocol.Status;
import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import org.apache.spark.api.plugin.PluginContext;

/**
 * The payloads of the plugin's messages ({@link RendezvousProtocol}, {@link GpuClaimProtocol}):
 * a kind byte, then the fields in a fixed order, big-endian, lengths as 4-byte counts. Messages travel
 * over {@code PluginContext.ask/send} as {@code byte[]} sealed by {@link PluginAuth}.
 *
 * <p>Why bytes: Spark's RPC layer deserializes a message with the class loader that was current when
 * its RpcEnv was created; in an executor that is the application class loader, which cannot see the
 * plugin's jars from {@code --jars} (SPARK-32119), so a message object of ours could not be
 * deserialized there. Why by hand: nothing of the plugin deserializes objects; every length and count
 * is checked against its limit and against the bytes that remain before anything is allocated, and
 * every field against its range, so a short message cannot make the driver allocate more than the
 * message's own size. Limits: {@link RendezvousProtocol#MAX_BLOB_BYTES} per blob,
 * {@link RendezvousProtocol#MAX_RANKS} ranks, {@value #MAX_NAME_BYTES} bytes per host, resource name
 * or address, {@value #MAX_TEXT_BYTES} bytes per abort reason and {@value #MAX_REPLY_TEXT_BYTES} per
 * reply message (longer text is cut by the encoder), and {@link PluginAuth#MAX_REQUEST_BYTES} per
 * request as a whole.
 */
final class PluginWire {
  static final int MAX_NAME_BYTES = 1024;
  static final int MAX_TEXT_BYTES = 4096;
  static final int MAX_REPLY_TEXT_BYTES = 64 << 10;
  /** Largest reply payload: every rank's largest blob, plus a message. */
  static final int MAX_REPLY_BYTES = RendezvousProtocol.MAX_RANKS * (RendezvousProtocol.MAX_BLOB_BYTES + 4)
      + 2 * MAX_REPLY_TEXT_BYTES + 1024;

  private static final byte DEPOSIT = 1;
  private static final byte POLL = 2;
  private static final byte ABORT = 3;
  private static final byte CLAIM = 4;
  private static final byte CHECK = 5;
  private static final byte RELEASE = 6;
  private static final byte RENDEZVOUS_REPLY = 17;
  private static final byte CLAIM_REPLY = 18;

  private PluginWire() {}

  // ------------------------------------------------------------------ channel

  /** {@code ctx.ask(message)}, sealed as {@code sender}; the driver's reply opened and decoded (null stays null). */
  static Object ask(PluginContext ctx, PluginAuth.Sender sender, Object message) throws Exception {
    PluginAuth.Sealed sealed = sender.seal(encodeRequest(message));
    Object reply = ctx.ask(sealed.wire());
    return reply == null ? null : decodeReply(sender.openReply(reply, sealed.counter()));
  }

  /** {@code ctx.send(message)}, sealed as {@code sender}. */
  static void send(PluginContext ctx, PluginAuth.Sender sender, Object message) throws IOException {
    ctx.send(sender.seal(encodeRequest(message)).wire());
  }

  // ------------------------------------------------------------------ requests

  static byte[] encodeRequest(Object m) {
    Writer w = new Writer();
    if (m instanceof Deposit d) {
      w.kind(DEPOSIT).slot(d.slot()).bytes(d.blob(), RendezvousProtocol.MAX_BLOB_BYTES, "blob").i64(d.timeoutMs());
    } else if (m instanceof Poll p) {
      w.kind(POLL).slot(p.slot());
    } else if (m instanceof Abort a) {
      w.kind(ABORT).slot(a.slot()).text(a.reason(), MAX_TEXT_BYTES);
    } else if (m instanceof GpuClaimProtocol.Claim c) {
      w.kind(CLAIM).name(c.host(), "host").name(c.resourceName(), "resource name").name(c.address(), "address");
    } else if (m instanceof GpuClaimProtocol.Check) {
      w.kind(CHECK);
    } else if (m instanceof GpuClaimProtocol.Release) {
      w.kind(RELEASE);
    } else {
      throw new IllegalArgumentException("not a sparkcomms plugin request: " + m);
    }
    return w.done();
  }

  /** The request in {@code payload}; {@link IllegalArgumentException} naming what is wrong with it. */
  static Object decodeRequest(byte[] payload) {
    Reader r = new Reader(payload);
    byte kind = r.kind();
    Object m = switch (kind) {
      case DEPOSIT -> {
        Slot s = r.slot();
        byte[] blob = r.bytes("blob", RendezvousProtocol.MAX_BLOB_BYTES);
        long timeoutMs = r.i64();
        if (timeoutMs < 0) throw PluginAuth.refused("a deposit with a negative timeout " + timeoutMs + " ms");
        yield new Deposit(s, blob, timeoutMs);
      }
      case POLL -> new Poll(r.slot());
      case ABORT -> new Abort(r.slot(), r.string("abort reason", MAX_TEXT_BYTES));
      case CLAIM -> new GpuClaimProtocol.Claim(r.string("host", MAX_NAME_BYTES), r.string("resource name", MAX_NAME_BYTES),
          r.string("address", MAX_NAME_BYTES));
      case CHECK -> new GpuClaimProtocol.Check();
      case RELEASE -> new GpuClaimProtocol.Release();
      default -> throw PluginAuth.refused("a request of unknown kind " + kind);
    };
    r.end();
    return m;
  }

  // ------------------------------------------------------------------ replies

  static byte[] encodeReply(Object m) {
    Writer w = new Writer();
    if (m instanceof Reply r) {
      w.kind(RENDEZVOUS_REPLY).u8(r.status().ordinal()).text(r.message(), MAX_REPLY_TEXT_BYTES);
      w.i32(r.missing().length);
      for (int x : r.missing()) w.i32(x);
      byte[][] blobs = r.blobs() == null ? new byte[0][] : r.blobs();
      w.u8(r.blobs() == null ? 0 : 1).i32(blobs.length);
      for (byte[] b : blobs) w.bytes(b, RendezvousProtocol.MAX_BLOB_BYTES, "blob");
    } else if (m instanceof GpuClaimProtocol.Reply c) {
      w.kind(CLAIM_REPLY).u8(c.granted() ? 1 : 0).text(c.message(), MAX_REPLY_TEXT_BYTES);
    } else {
      throw new IllegalArgumentException("not a sparkcomms plugin reply: " + m);
    }
    return w.done();
  }

  static Object decodeReply(byte[] payload) {
    Reader r = new Reader(payload);
    byte kind = r.kind();
    Object m = switch (kind) {
      case RENDEZVOUS_REPLY -> {
        int status = r.u8();
        if (status >= Status.values().length) throw PluginAuth.refused("a reply of unknown status " + status);
        String message = r.string("reply message", MAX_REPLY_TEXT_BYTES);
        int[] missing = new int[r.count("missing ranks", RendezvousProtocol.MAX_RANKS)];
        for (int i = 0; i < missing.length; i++) missing[i] = r.index("missing rank", RendezvousProtocol.MAX_RANKS);
        boolean hasBlobs = r.bool("blobs flag");
        byte[][] blobs = new byte[r.count("blobs", RendezvousProtocol.MAX_RANKS)][];
        for (int i = 0; i < blobs.length; i++) blobs[i] = r.bytes("blob", RendezvousProtocol.MAX_BLOB_BYTES);
        yield new Reply(Status.values()[status], hasBlobs ? blobs : null, missing, message);
      }
      case CLAIM_REPLY -> new GpuClaimProtocol.Reply(r.bool("granted flag"), r.string("reply message", MAX_REPLY_TEXT_BYTES));
      default -> throw PluginAuth.refused("a reply of unknown kind " + kind);
    };
    r.end();
    return m;
  }

  // ------------------------------------------------------------------ fields

  private static final class Writer {
    private final ByteArrayOutputStream bytes = new ByteArrayOutputStream(128);
    private final DataOutputStream out = new DataOutputStream(bytes);

    Writer kind(byte k) { return u8(k); }

    Writer u8(int v) { return io(() -> out.writeByte(v)); }

    Writer i32(int v) { return io(() -> out.writeInt(v)); }

    Writer i64(long v) { return io(() -> out.writeLong(v)); }

    Writer slot(Slot s) {
      return i32(s.stageId()).i32(s.stageAttempt()).i32(s.group()).i32(s.round()).i32(s.rank()).i32(s.size()).i64(s.taskId());
    }

    Writer bytes(byte[] b, int max, String what) {
      if (b.length > max) throw new IllegalArgumentException("sparkcomms plugin: a " + what + " of " + b.length + " bytes exceeds the limit of " + max);
      return i32(b.length).io(() -> out.write(b));
    }

    /** An identifier: refused when too long (cutting it would change its meaning). */
    Writer name(String s, String what) { return bytes(s.getBytes(StandardCharsets.UTF_8), MAX_NAME_BYTES, what); }

    /** Free text: cut to {@code maxBytes} of UTF-8 if longer. */
    Writer text(String s, int maxBytes) {
      byte[] b = s.getBytes(StandardCharsets.UTF_8);
      if (b.length > maxBytes) b = cut(s, maxBytes - 3).concat("...").getBytes(StandardCharsets.UTF_8);
      return bytes(b, maxBytes, "text");
    }

    byte[] done() { return bytes.toByteArray(); }

    private interface Io { void run() throws IOException; }

    private Writer io(Io op) {
      try {
        op.run();
      } catch (IOException e) {
        throw new UncheckedIOException(e);   // a ByteArrayOutputStream does not fail
      }
      return this;
    }

    /** The longest prefix of {@code s}, whole code points, of at most {@code maxBytes} of UTF-8. */
    private static String cut(String s, int maxBytes) {
      int bytes = 0;
      int i = 0;
      while (i < s.length()) {
        int cp = s.codePointAt(i);
        int n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
        if (bytes + n > maxBytes) break;
        bytes += n;
        i += Character.charCount(cp);
      }
      return s.substring(0, i);
    }
  }

  /** Reads fields, checking every length against its limit and the bytes left before allocating. */
  private static final class Reader {
    private final ByteBuffer b;

    Reader(byte[] bytes) { b = ByteBuffer.wrap(bytes); }

    byte kind() { need(1, "message kind"); return b.get(); }

    int u8() { need(1, "byte"); return Byte.toUnsignedInt(b.get()); }

    boolean bool(String what) {
      int v = u8();
      if (v > 1) throw PluginAuth.refused("a " + what + " of " + v + " (0 or 1)");
      return v == 1;
    }

    int i32() { need(4, "int"); return b.getInt(); }

    long i64() { need(8, "long"); return b.getLong(); }

    /** A count in 0..max. */
    int count(String what, int max) {
      int n = i32();
      if (n < 0 || n > max) throw PluginAuth.refused("a count of " + n + " " + what + " (at most " + max + ")");
      return n;
    }

    /** An index in 0..bound-1. */
    int index(String what, int bound) {
      int n = i32();
      if (n < 0 || n >= bound) throw PluginAuth.refused("a " + what + " of " + n + " (0 to " + (bound - 1) + ")");
      return n;
    }

    byte[] bytes(String what, int max) {
      int n = i32();
      if (n < 0 || n > max) throw PluginAuth.refused("a " + what + " of " + n + " bytes; the limit is " + max);
      need(n, what);
      byte[] out = new byte[n];
      b.get(out);
      return out;
    }

    String string(String what, int maxBytes) { return PluginAuth.utf8(bytes(what, maxBytes), what); }

    Slot slot() {
      int stageId = nonNegative("stage id");
      int attempt = nonNegative("stage attempt");
      int group = nonNegative("group");
      int round = nonNegative("round");
      int rank = i32();
      int size = i32();
      long taskId = i64();
      if (size < 1 || size > RendezvousProtocol.MAX_RANKS) {
        throw PluginAuth.refused("a group of " + size + " ranks (1 to " + RendezvousProtocol.MAX_RANKS + ")");
      }
      if (rank < 0 || rank >= size) throw PluginAuth.refused("rank " + rank + " of a group of " + size);
      if (taskId < 0) throw PluginAuth.refused("a negative task id " + taskId);
      return new Slot(stageId, attempt, group, round, rank, size, taskId);
    }

    void end() {
      if (b.hasRemaining()) throw PluginAuth.refused("a message with " + b.remaining() + " bytes after its last field");
    }

    private int nonNegative(String what) {
      int n = i32();
      if (n < 0) throw PluginAuth.refused("a negative " + what + " " + n);
      return n;
    }

    private void need(int n, String what) {
      if (b.remaining() < n) {
        throw PluginAuth.refused("a truncated message: its " + what + " needs " + n + " bytes, " + b.remaining() + " remain");
      }
    }
  }
}
