package io.sparkcomms.spark.plugin;

import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.util.Arrays;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * The authentication of the plugin's messages. The driver plugin makes a key of {@value #KEY_BYTES}
 * random bytes per application ({@link #newKey}) and hands it to this application's executors only,
 * in the map {@code DriverPlugin.init} returns (Spark gives it to {@code ExecutorPlugin.init} as
 * {@code extraConf}, under {@link #KEY_SETTING}). Every message, either way, is one {@code byte[]}:
 *
 * <pre>
 *   version      1 byte   {@value #VERSION}
 *   direction    1 byte   'Q' executor to driver, 'R' driver to executor
 *   sender       2 bytes length (at most {@value #MAX_SENDER_BYTES}) + UTF-8: the executor id
 *   counter      8 bytes  the executor's message number (a reply repeats its request's)
 *   payload      4 bytes length + bytes ({@link PluginWire})
 *   mac          32 bytes HMAC-SHA256 with the key over everything before it
 * </pre>
 *
 * <p>Invariants: a message is read only after its size is checked against the limit and its MAC
 * matches (compared in constant time); the payload is decoded only after that. The driver accepts a
 * request only once: each executor numbers its messages from 1 up, and the driver refuses a number it
 * has seen, or one more than {@value #REPLAY_WINDOW} below the highest it has seen from that executor
 * (messages of concurrent threads may arrive out of order within that window). It keeps that state
 * for the {@value #MAX_SENDERS} executors heard from most recently. A reply names the executor and
 * the number of the request it answers, so an executor accepts only the answer to its own request.
 * The MAC binds the executor id to the message: the driver takes the sender from here, never from a
 * payload field.
 */
final class PluginAuth {
  /** The key of the executors' {@code extraConf} entry holding the key (Base64). Spark's redaction hides "secret" keys. */
  static final String KEY_SETTING = "sparkcomms.messageSecret";
  static final int KEY_BYTES = 32;
  static final byte VERSION = 1;
  static final byte TO_DRIVER = 'Q';
  static final byte TO_EXECUTOR = 'R';
  /** Largest executor-to-driver message, frame included. */
  static final int MAX_REQUEST_BYTES = 1 << 20;
  static final int MAX_SENDER_BYTES = 256;
  static final int REPLAY_WINDOW = 1024;
  static final int MAX_SENDERS = 65_536;
  private static final int MAC_BYTES = 32;
  private static final int HEADER_BYTES = 1 + 1 + 2 + 8 + 4;
  private static final String HMAC = "HmacSHA256";
  private static final SecureRandom RANDOM = new SecureRandom();

  private PluginAuth() {}

  /** A message whose MAC matched: who sent it, its number, and the payload to decode. */
  record Opened(String sender, long counter, byte[] payload) {}

  /** A sealed request and its number (its reply must repeat it). */
  record Sealed(long counter, byte[] wire) {}

  static byte[] newKey() {
    byte[] k = new byte[KEY_BYTES];
    RANDOM.nextBytes(k);
    return k;
  }

  static String encodeKey(byte[] key) { return Base64.getEncoder().encodeToString(key); }

  /** The key in {@code text}, which must be {@value #KEY_BYTES} bytes in Base64. */
  static byte[] decodeKey(String text) {
    byte[] k;
    try {
      k = Base64.getDecoder().decode(text.trim());
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("sparkcomms: the message key handed to this executor (" + KEY_SETTING
          + ") is not Base64", e);
    }
    if (k.length != KEY_BYTES) {
      throw new IllegalArgumentException("sparkcomms: the message key handed to this executor (" + KEY_SETTING
          + ") has " + k.length + " bytes, expected " + KEY_BYTES);
    }
    return k;
  }

  /** The executor side: seals requests as one executor and opens the driver's replies to them. Thread-safe. */
  static final class Sender {
    private final byte[] key;
    private final String executorId;
    private final AtomicLong counter = new AtomicLong();

    Sender(byte[] key, String executorId) {
      this.key = key.clone();
      this.executorId = executorId;
      checkSender(executorId);
    }

    String executorId() { return executorId; }

    Sealed seal(byte[] payload) {
      long n = counter.incrementAndGet();
      return new Sealed(n, PluginAuth.seal(key, TO_DRIVER, executorId, n, payload));
    }

    /** The payload of the driver's reply to request {@code counter}. */
    byte[] openReply(Object reply, long counter) {
      if (!(reply instanceof byte[] wire)) {
        throw refused("the driver plugin answered a " + (reply == null ? "null" : reply.getClass().getName())
            + ", not its byte[] reply (is the same sparkcomms version on the driver and the executors?)");
      }
      Opened o = open(key, TO_EXECUTOR, wire, PluginWire.MAX_REPLY_BYTES + frameBytes(executorId));
      if (!o.sender().equals(executorId) || o.counter() != counter) {
        throw refused("a reply for executor " + o.sender() + " message " + o.counter() + " reached executor "
            + executorId + " waiting for the answer to message " + counter);
      }
      return o.payload();
    }
  }

  /** The driver side: opens requests (size, MAC, replay) and seals replies. Thread-safe. */
  static final class Receiver {
    private final byte[] key;
    private final Map<String, Window> windows = new LinkedHashMap<>(16, 0.75f, true) {
      @Override protected boolean removeEldestEntry(Map.Entry<String, Window> eldest) { return size() > MAX_SENDERS; }
    };

    Receiver(byte[] key) { this.key = key.clone(); }

    /** {@code message}'s sender, number and payload; refuses anything else than an authentic, fresh byte[] request. */
    Opened open(Object message) {
      if (!(message instanceof byte[] wire)) {
        throw refused("a " + (message == null ? "null" : message.getClass().getName()) + ": the driver plugin accepts "
            + "only its own authenticated byte[] messages (is the same sparkcomms version on the driver and the executors?)");
      }
      Opened o = PluginAuth.open(key, TO_DRIVER, wire, MAX_REQUEST_BYTES);
      String replay;
      synchronized (windows) {
        replay = windows.computeIfAbsent(o.sender(), s -> new Window()).accept(o.counter());
      }
      if (replay != null) throw refused("message " + o.counter() + " of executor " + o.sender() + ": " + replay);
      return o;
    }

    byte[] sealReply(Opened request, byte[] payload) {
      return PluginAuth.seal(key, TO_EXECUTOR, request.sender(), request.counter(), payload);
    }
  }

  /**
   * The numbers seen from one sender: the highest, and which of the {@value #REPLAY_WINDOW} below
   * it (a ring of bits indexed by number modulo the window).
   */
  private static final class Window {
    private long highest;
    private final long[] seen = new long[REPLAY_WINDOW / 64];

    /** Null when {@code n} is new (and records it), else why it is refused. */
    String accept(long n) {
      if (n <= 0) return "message numbers start at 1";
      if (n > highest) {
        if (n - highest >= REPLAY_WINDOW) {
          Arrays.fill(seen, 0);
        } else {
          for (long c = highest + 1; c < n; c++) clear(c);
        }
        highest = n;
        set(n);
        return null;
      }
      if (highest - n >= REPLAY_WINDOW) {
        return "older than the replay window (" + REPLAY_WINDOW + " messages below the newest, " + highest + ")";
      }
      if (isSet(n)) return "replayed (the driver has accepted this message already)";
      set(n);
      return null;
    }

    private int bit(long n) { return (int) Math.floorMod(n, (long) REPLAY_WINDOW); }

    private boolean isSet(long n) { return (seen[bit(n) >>> 6] & (1L << (bit(n) & 63))) != 0; }

    private void set(long n) { seen[bit(n) >>> 6] |= 1L << (bit(n) & 63); }

    private void clear(long n) { seen[bit(n) >>> 6] &= ~(1L << (bit(n) & 63)); }
  }

  static byte[] seal(byte[] key, byte direction, String sender, long counter, byte[] payload) {
    byte[] id = sender.getBytes(StandardCharsets.UTF_8);
    ByteBuffer b = ByteBuffer.allocate(HEADER_BYTES + id.length + payload.length + MAC_BYTES);
    b.put(VERSION).put(direction).putShort((short) id.length).put(id).putLong(counter).putInt(payload.length).put(payload);
    b.put(mac(key, b.array(), b.position()));
    return b.array();
  }

  /** Checks size, version, direction and MAC of {@code wire}, in that order, then reads the frame. */
  static Opened open(byte[] key, byte direction, byte[] wire, int maxBytes) {
    if (wire.length > maxBytes) throw refused("a message of " + wire.length + " bytes; the limit is " + maxBytes);
    if (wire.length < HEADER_BYTES + MAC_BYTES) throw refused("a message of " + wire.length + " bytes, shorter than its frame");
    if (wire[0] != VERSION) {
      throw refused("a message of version " + wire[0] + ", expected " + VERSION
          + " (is the same sparkcomms version on the driver and the executors?)");
    }
    if (wire[1] != direction) throw refused("a message of direction '" + (char) wire[1] + "', expected '" + (char) direction + "'");
    int signed = wire.length - MAC_BYTES;
    if (!MessageDigest.isEqual(mac(key, wire, signed), Arrays.copyOfRange(wire, signed, wire.length))) {
      throw refused("a message whose authentication code does not match: it was not sealed with this application's "
          + "key (a sender of another application, a forgery, or a corrupted message)");
    }
    ByteBuffer b = ByteBuffer.wrap(wire, 0, signed);
    b.position(2);
    int idLength = Short.toUnsignedInt(b.getShort());
    if (idLength > MAX_SENDER_BYTES || idLength > b.remaining() - 12) {
      throw refused("a sender id of " + idLength + " bytes (at most " + MAX_SENDER_BYTES + ")");
    }
    byte[] id = new byte[idLength];
    b.get(id);
    long counter = b.getLong();
    int payloadLength = b.getInt();
    if (payloadLength != b.remaining()) {
      throw refused("a payload length of " + payloadLength + " in a frame with " + b.remaining() + " payload bytes");
    }
    byte[] payload = new byte[payloadLength];
    b.get(payload);
    return new Opened(utf8(id, "sender id"), counter, payload);
  }

  /** The frame bytes around a payload from {@code sender}. */
  static int frameBytes(String sender) {
    return HEADER_BYTES + sender.getBytes(StandardCharsets.UTF_8).length + MAC_BYTES;
  }

  static String utf8(byte[] bytes, String what) {
    try {
      CharBuffer c = StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
          .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(bytes));
      return c.toString();
    } catch (CharacterCodingException e) {
      throw refused("a " + what + " that is not UTF-8");
    }
  }

  static IllegalArgumentException refused(String what) {
    return new IllegalArgumentException("sparkcomms plugin: refused " + what);
  }

  private static void checkSender(String executorId) {
    if (executorId.getBytes(StandardCharsets.UTF_8).length > MAX_SENDER_BYTES) {
      throw new IllegalArgumentException("sparkcomms: executor id of more than " + MAX_SENDER_BYTES + " bytes: " + executorId);
    }
  }

  private static byte[] mac(byte[] key, byte[] data, int length) {
    try {
      Mac m = Mac.getInstance(HMAC);
      m.init(new SecretKeySpec(key, HMAC));
      m.update(data, 0, length);
      return m.doFinal();
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("HmacSHA256 is unavailable in this JVM", e);
    }
  }
}
