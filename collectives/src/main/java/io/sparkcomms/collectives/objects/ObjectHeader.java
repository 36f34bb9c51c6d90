package io.sparkcomms.collectives.objects;

import io.sparkcomms.collectives.CommMismatchException;
import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.CharsetEncoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.function.IntPredicate;

/**
 * One rank's header of an object collective, {@link #WORDS} INT64 words: the call (a marker and the
 * call's code), the root (-1 for allGatherObject), the size limit, the status, the serialized length
 * and a short UTF-8 text (the object's class and, for a failure, the reason). Every rank receives
 * every header and judges them with {@link #check}, which reads only the headers: so every rank
 * reaches the same verdict and raises the same exception, or none does.
 */
final class ObjectHeader {
  /** The three object collectives; the code is what the header carries. */
  enum Call {
    ALL_GATHER("allGatherObject"), BROADCAST("broadcastObject"), GATHER("gatherObject");

    final String api;

    Call(String api) { this.api = api; }

    long word() { return MARKER | (ordinal() + 1); }

    boolean rooted() { return this != ALL_GATHER; }
  }

  /** The object is serialized and within the limit (or this rank sends none: a broadcast's non-root). */
  static final int OK = 0;
  /** The codec threw (or returned null). */
  static final int UNSERIALIZABLE = 1;
  /** The serialized object is longer than the limit. */
  static final int OVER_LIMIT = 2;
  /** The rank refused its own arguments (root, limit, codec). */
  static final int BAD_ARGUMENT = 3;

  /** "SCOBJ" in the top five bytes of word 0; the call's code in the low byte. */
  private static final long MARKER = 0x53434F424A000000L;
  private static final int FIXED_WORDS = 6;
  private static final int TEXT_WORDS = 64;
  static final int TEXT_BYTES = TEXT_WORDS * 8;
  static final int WORDS = FIXED_WORDS + TEXT_WORDS;
  /** Separates the class name from the reason in the text. */
  private static final char SEP = '\n';

  final long call;
  final long root;
  final long maxBytes;
  final long status;
  final long length;
  final long textBytes;
  final String text;

  private ObjectHeader(long call, long root, long maxBytes, long status, long length, long textBytes, String text) {
    this.call = call;
    this.root = root;
    this.maxBytes = maxBytes;
    this.status = status;
    this.length = length;
    this.textBytes = textBytes;
    this.text = text;
  }

  /** This rank's header; {@code className} and {@code reason} are cut to fit the text. */
  static ObjectHeader of(Call c, int root, int maxBytes, int status, long length, String className, String reason) {
    String t = reason == null ? className : className + SEP + reason;
    return new ObjectHeader(c.word(), root, maxBytes, status, length, 0, t);
  }

  /** The header as {@link #WORDS} words. */
  long[] encode() {
    ByteBuffer b = ByteBuffer.allocate(TEXT_BYTES);
    CharsetEncoder enc = StandardCharsets.UTF_8.newEncoder().onMalformedInput(CodingErrorAction.REPLACE)
        .onUnmappableCharacter(CodingErrorAction.REPLACE);
    enc.encode(CharBuffer.wrap(text), b, true);     // stops at the last whole character that fits
    byte[] t = new byte[b.position()];
    b.flip().get(t);
    long[] w = new long[WORDS];
    w[0] = call;
    w[1] = root;
    w[2] = maxBytes;
    w[3] = status;
    w[4] = length;
    w[5] = t.length;
    System.arraycopy(Words.pack(t, TEXT_WORDS), 0, w, FIXED_WORDS, TEXT_WORDS);
    return w;
  }

  /** Rank {@code r}'s header out of the gathered words; a text length out of range leaves the text empty. */
  static ObjectHeader decode(long[] all, int r) {
    int o = r * WORDS;
    long n = all[o + 5];
    String t = n >= 0 && n <= TEXT_BYTES
        ? new String(Words.unpack(all, o + FIXED_WORDS, (int) n), StandardCharsets.UTF_8) : "";
    return new ObjectHeader(all[o], all[o + 1], all[o + 2], all[o + 3], all[o + 4], n, t);
  }

  /**
   * The serialized length of each rank's object (0 for ranks that send none), or the exception every
   * rank raises: {@link CommMismatchException} when the ranks made different calls (call, root,
   * limit) or one refused its arguments; {@link CommObjectException} when a sending rank could not
   * serialize its object, its object is over the limit, or a header is out of range.
   *
   * @param hs every rank's header, by rank
   * @param sends which ranks send an object
   * @param me this rank
   * @param localCause this rank's codec exception, attached when this rank is among those named
   */
  static long[] check(Call call, ObjectHeader[] hs, IntPredicate sends, int me, Throwable localCause) {
    ObjectHeader h0 = hs[0];
    boolean agree = known(h0.call);
    for (ObjectHeader h : hs) agree &= h.call == h0.call && h.root == h0.root && h.maxBytes == h0.maxBytes;
    if (!agree) {
      List<String> calls = new ArrayList<>();
      for (int r = 0; r < hs.length; r++) calls.add("rank " + r + " " + hs[r].describe());
      throw new CommMismatchException(call.api + ": the ranks made different object collective calls: "
          + String.join(", ", calls));
    }
    List<String> refused = new ArrayList<>();
    for (int r = 0; r < hs.length; r++) {
      if (hs[r].status == BAD_ARGUMENT) refused.add("rank " + r + ": " + hs[r].text);
    }
    if (!refused.isEmpty()) {
      throw new CommMismatchException(call.api + ": ranks refused their arguments (" + String.join("; ", refused) + ")");
    }
    long[] lengths = new long[hs.length];
    List<String> failed = new ArrayList<>();
    boolean meNamed = false;
    for (int r = 0; r < hs.length; r++) {
      ObjectHeader h = hs[r];
      String problem = null;
      if (h.status < OK || h.status > BAD_ARGUMENT || h.textBytes < 0 || h.textBytes > TEXT_BYTES) {
        problem = "rank " + r + " sent a header out of range (status " + h.status + ", text of " + h.textBytes + " bytes)";
      } else if (!sends.test(r)) {
        continue;
      } else if (h.status == UNSERIALIZABLE) {
        problem = "rank " + r + " could not serialize its object (" + h.className() + "): " + h.reason();
      } else if (h.status == OVER_LIMIT) {
        problem = "rank " + r + "'s object (" + h.className() + ") is " + h.length + " bytes serialized, over the limit of "
            + h.maxBytes + " bytes";
      } else if (h.length < 0 || h.length > h.maxBytes) {
        problem = "rank " + r + " reported a serialized length of " + h.length + " bytes, outside 0.." + h.maxBytes;
      } else {
        lengths[r] = h.length;
        continue;
      }
      failed.add(problem);
      meNamed |= r == me;
    }
    if (!failed.isEmpty()) {
      String msg = call.api + ": " + String.join("; ", failed) + "; no object was sent";
      throw meNamed && localCause != null ? new CommObjectException(msg, localCause) : new CommObjectException(msg);
    }
    return lengths;
  }

  private static boolean known(long word) {
    for (Call c : Call.values()) if (c.word() == word) return true;
    return false;
  }

  private String describe() {
    for (Call c : Call.values()) {
      if (c.word() == call) return c.api + "(" + (c.rooted() ? "root " + root + ", " : "") + "maxBytes " + maxBytes + ")";
    }
    return "a call that is not an object collective (header word 0x" + Long.toHexString(call) + ")";
  }

  private String className() {
    int i = text.indexOf(SEP);
    return i < 0 ? text : text.substring(0, i);
  }

  private String reason() {
    int i = text.indexOf(SEP);
    return i < 0 ? "(no reason given)" : text.substring(i + 1);
  }
}
