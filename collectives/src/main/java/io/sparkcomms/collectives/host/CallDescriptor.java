package io.sparkcomms.collectives.host;

import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.CommException;
import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.Protocol;
import io.sparkcomms.collectives.ReduceOp;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/**
 * The descriptor every rank publishes for each call in its control block (two slots, by call parity:
 * {@link ShmSegment#descriptor}), so that every rank can check that all made the same call. Fields,
 * native byte order, at byte offsets: seq (long) 0, collective 8, dtype 12, op kind 16 (-1: none),
 * root 20, PREMUL factor (double) 24, count (long) 32, protocol code 40, problem text length 44,
 * allToAllV layout 48, per-rank counts fingerprint (long, 0: none) 56, problem text (UTF-8) from 64
 * to the end of the slot.
 *
 * <p>A peer's descriptor is untrusted: {@link #read} checks every field's range (enum codes, text
 * length within the slot) before anything uses it, and an unreadable one is an error, not a call.
 */
record CallDescriptor(long seq, int kind, int dtype, int op, int root, double factor, long count, int protocol,
                      int layout, long countsFingerprint, String problem) {
  private static final int D_SEQ = 0, D_KIND = 8, D_DTYPE = 12, D_OP = 16, D_ROOT = 20, D_FACTOR = 24,
      D_COUNT = 32, D_PROTO = 40, D_PLEN = 44, D_LAYOUT = 48, D_COUNTS = 56, D_PTEXT = 64;
  static final int MAX_TEXT = ShmSegment.DESC_BYTES - D_PTEXT;

  /** allToAllV's layout (ranks that disagree fail the call); NONE for every other collective. */
  static final int LAYOUT_NONE = 0, LAYOUT_PACKED = 1, LAYOUT_OFFSETS = 2;

  /** The descriptor of call {@code seq}. */
  static CallDescriptor of(long seq, HostCall c) {
    int layout = LAYOUT_NONE;
    if (c.kind() == Collective.ALL_TO_ALL_V && c.plan().splits() != null) {
      layout = c.plan().splits().hasOffsets() ? LAYOUT_OFFSETS : LAYOUT_PACKED;
    }
    ReduceOp op = c.op();
    return new CallDescriptor(seq, c.kind().ordinal(), c.dtype().ordinal(), op == null ? -1 : op.kind().ordinal(),
        c.root(), op == null ? 0 : op.factor(), c.count(), c.protocol().code(), layout,
        c.plan().counts() == null ? 0 : c.plan().counts().fingerprint(), c.problem());
  }

  /** Writes this descriptor at byte {@code at} of {@code b}; a problem text longer than the slot is cut. */
  void write(ByteBuffer b, int at) {
    b.putLong(at + D_SEQ, seq);
    b.putInt(at + D_KIND, kind);
    b.putInt(at + D_DTYPE, dtype);
    b.putInt(at + D_OP, op);
    b.putInt(at + D_ROOT, root);
    b.putDouble(at + D_FACTOR, factor);
    b.putLong(at + D_COUNT, count);
    b.putInt(at + D_PROTO, protocol);
    b.putInt(at + D_LAYOUT, layout);
    b.putLong(at + D_COUNTS, countsFingerprint);
    byte[] text = problem == null ? new byte[0] : problem.getBytes(StandardCharsets.UTF_8);
    int len = Math.min(text.length, MAX_TEXT);
    for (int i = 0; i < len; i++) b.put(at + D_PTEXT + i, text[i]);
    b.putInt(at + D_PLEN, len);
  }

  /** Reads and checks rank {@code rank}'s descriptor at byte {@code at}; raises {@link CommException} if unreadable. */
  static CallDescriptor read(ByteBuffer b, int at, int rank) {
    int kind = b.getInt(at + D_KIND), dtype = b.getInt(at + D_DTYPE), op = b.getInt(at + D_OP);
    int proto = b.getInt(at + D_PROTO), layout = b.getInt(at + D_LAYOUT), plen = b.getInt(at + D_PLEN);
    String bad = kind < 0 || kind >= Collective.values().length ? "collective " + kind
        : dtype < 0 || dtype >= DataType.values().length ? "dtype " + dtype
        : op < -1 || op >= ReduceOp.Kind.values().length ? "op " + op
        : Protocol.ofCode(proto) == null ? "protocol " + proto
        : layout < LAYOUT_NONE || layout > LAYOUT_OFFSETS ? "layout " + layout
        : plen < 0 || plen > MAX_TEXT ? "problem text length " + plen
        : null;
    if (bad != null) {
      throw new CommException("rank " + rank + " published an unreadable call descriptor (" + bad
          + "): its memory was overwritten, or it runs another sparkcomms version");
    }
    String text = null;
    if (plen > 0) {
      byte[] t = new byte[plen];
      for (int i = 0; i < plen; i++) t[i] = b.get(at + D_PTEXT + i);
      text = new String(t, StandardCharsets.UTF_8);
    }
    return new CallDescriptor(b.getLong(at + D_SEQ), kind, dtype, op, b.getInt(at + D_ROOT), b.getDouble(at + D_FACTOR),
        b.getLong(at + D_COUNT), proto, layout, b.getLong(at + D_COUNTS), text);
  }

  /** Whether both describe the same call (the sequence number and problem text aside). */
  boolean sameCall(CallDescriptor o) {
    return kind == o.kind && dtype == o.dtype && op == o.op && root == o.root
        && Double.doubleToLongBits(factor) == Double.doubleToLongBits(o.factor) && count == o.count
        && protocol == o.protocol && layout == o.layout && countsFingerprint == o.countsFingerprint;
  }

  /** For messages; only for a descriptor that {@link #read} accepted (or this rank's own). */
  String describe() {
    return "#" + seq + " " + Collective.values()[kind].apiName() + "(count=" + count + ", dtype=" + DataType.values()[dtype]
        + ", op=" + (op < 0 ? "-" : ReduceOp.Kind.values()[op] + (op == ReduceOp.Kind.PREMUL_SUM.ordinal() ? "(" + factor + ")" : ""))
        + ", root=" + root + ", algo=" + Protocol.ofCode(protocol) + layoutText()
        + (countsFingerprint == 0 ? "" : ", counts=#" + Long.toHexString(countsFingerprint)) + ")";
  }

  private String layoutText() {
    switch (layout) {
      case LAYOUT_PACKED: return ", layout=packed";
      case LAYOUT_OFFSETS: return ", layout=offsets";
      default: return "";
    }
  }
}
