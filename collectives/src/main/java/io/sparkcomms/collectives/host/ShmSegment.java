package io.sparkcomms.collectives.host;

import io.sparkcomms.collectives.liveness.ProcessId;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.SecureRandom;
import java.util.EnumSet;
import java.util.HexFormat;

/**
 * The shared-memory segment of one host communicator: a file in /dev/shm mapped by every rank.
 *
 * <pre>
 * [header 4 KiB][control block per rank, 8 KiB each][data per rank: input area S | result area S]
 * header:  magic, ranks, staging bytes, creator pid + start time + PID namespace, abort state + reason
 * control: 64 barrier slots of 64 bytes (slot p = last epoch rank p signalled to this rank),
 *          two call descriptors (by call parity), 8 unused bytes, detached flag
 * </pre>
 *
 * The file is created 0600 with CREATE_NEW under a random 128-bit name, and unlinked by rank 0 as soon
 * as every rank has mapped it: nothing is left in /dev/shm even if a process is killed afterwards. A
 * creator killed before that leaves its file behind; the next {@link #create} removes such stale files
 * (see {@link ShmFiles#sweepStale}).
 * Ownership: this object owns the mappings; {@link #close()} unmaps them, after which every method that
 * other threads may call concurrently ({@link #abort}, {@link #isAborted}) is a no-op instead of a
 * read of unmapped memory.
 */
final class ShmSegment implements AutoCloseable {
  static final long MAGIC = 0x5350_4b43_4f4d_4d53L; // "SPKCOMMS"
  static final int MAX_RANKS = 64;
  static final int HEADER_BYTES = 4096;
  static final int CTRL_BYTES = 8192;
  static final int SLOT_BYTES = 64;
  static final int DESC_OFFSET = 4096;   // in a control block: two descriptors of DESC_BYTES
  static final int DESC_BYTES = 1024;
  // in a control block, from 6144: 8 bytes unused (a per-rank pid that nothing read; liveness uses
  // the greeting's ProcessId), then the detached flag
  static final int DETACHED_OFFSET = 6144 + 8; // int: 1 once the rank closed its communicator
  static final int CREATOR_PID = 24;      // header: pid of the process that created the file
  static final int CREATOR_START = 32;    // header: its start time, epoch ms (0 if unknown)
  static final int CREATOR_NS = 40;       // header: its PID namespace inode (0 if unknown)
  static final int ABORT_STATE = 64;      // int: 0 ok, 1 reason being written, 2 aborted
  static final int ABORT_RANK = 68;
  static final int ABORT_LEN = 128;
  static final int ABORT_TEXT = 132;
  static final int ABORT_TEXT_MAX = HEADER_BYTES - ABORT_TEXT;

  static final VarHandle LONGS = MethodHandles.byteBufferViewVarHandle(long[].class, ByteOrder.nativeOrder());
  static final VarHandle INTS = MethodHandles.byteBufferViewVarHandle(int[].class, ByteOrder.nativeOrder());

  private final Path path;
  private final int ranks;
  private final long stagingBytes;
  /** Header and all control blocks. */
  final MappedByteBuffer ctrl;
  /** Per rank: its input area then its result area, 2*S bytes. */
  final MappedByteBuffer[] data;
  private boolean closed;

  private ShmSegment(Path path, int ranks, long stagingBytes, FileChannel ch) throws IOException {
    this.path = path;
    this.ranks = ranks;
    this.stagingBytes = stagingBytes;
    long ctrlLen = ctrlRegionBytes(ranks);
    this.ctrl = ch.map(FileChannel.MapMode.READ_WRITE, 0, ctrlLen);
    this.ctrl.order(ByteOrder.nativeOrder());
    this.data = new MappedByteBuffer[ranks];
    for (int r = 0; r < ranks; r++) {
      data[r] = ch.map(FileChannel.MapMode.READ_WRITE, ctrlLen + r * 2 * stagingBytes, 2 * stagingBytes);
      data[r].order(ByteOrder.nativeOrder());
    }
  }

  static long ctrlRegionBytes(int ranks) {
    long raw = HEADER_BYTES + (long) ranks * CTRL_BYTES;
    return (raw + 4095) & ~4095L;
  }

  static long totalBytes(int ranks, long stagingBytes) {
    return ctrlRegionBytes(ranks) + (long) ranks * 2 * stagingBytes;
  }

  /** Rank 0: creates the file (0600, CREATE_NEW, random name), sizes it, writes the header, maps it. */
  static ShmSegment create(Path dir, int ranks, long stagingBytes) {
    ShmFiles.sweepStale(dir);
    byte[] token = new byte[16];
    new SecureRandom().nextBytes(token);
    Path p = dir.resolve("sparkcomms-" + HexFormat.of().formatHex(token));
    ProcessId me = ProcessId.current();
    ByteBuffer creator = ByteBuffer.allocate(24).order(ByteOrder.nativeOrder())  // 0: unknown
        .putLong(me.pid()).putLong(Math.max(0, me.startMillis())).putLong(Math.max(0, me.pidNamespace())).flip();
    try (FileChannel ch = FileChannel.open(p, EnumSet.of(StandardOpenOption.CREATE_NEW, StandardOpenOption.READ,
        StandardOpenOption.WRITE), PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")))) {
      // first of all, who created it: a creator killed during the rest of the set-up leaves a file that the
      // next start can attribute (sweepStale)
      ch.write(creator, CREATOR_PID);
      p.toFile().deleteOnExit();
      ch.write(ByteBuffer.allocate(1), totalBytes(ranks, stagingBytes) - 1); // size the file
      ShmSegment s = new ShmSegment(p, ranks, stagingBytes, ch);
      s.ctrl.putInt(8, ranks);
      s.ctrl.putLong(16, stagingBytes);
      LONGS.setRelease(s.ctrl, 0, MAGIC);
      return s;
    } catch (IOException e) {
      try {
        Files.deleteIfExists(p);
      } catch (IOException ignored) {
        // best effort
      }
      throw new UncheckedIOException("cannot create shared-memory segment " + p + ": " + e.getMessage()
          + " (is /dev/shm full? size needed " + totalBytes(ranks, stagingBytes) + " bytes)", e);
    }
  }

  /** Other ranks: open the file rank 0 made in {@code dir} and check its header. */
  static ShmSegment open(Path dir, Path p, int ranks, long stagingBytes) {
    try (FileChannel ch = FileChannel.open(p, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
      long want = totalBytes(ranks, stagingBytes);
      if (ch.size() != want) {
        throw new IllegalStateException("segment " + p + " has " + ch.size() + " bytes, expected " + want
            + ": do all ranks use the same rank count and staging size?");
      }
      ShmSegment s = new ShmSegment(p, ranks, stagingBytes, ch);
      long magic = (long) LONGS.getAcquire(s.ctrl, 0);
      if (magic != MAGIC || s.ctrl.getInt(8) != ranks || s.ctrl.getLong(16) != stagingBytes) {
        s.close();
        throw new IllegalStateException("segment " + p + " header does not match this communicator");
      }
      return s;
    } catch (IOException e) {
      throw new UncheckedIOException("cannot open shared-memory segment " + p + ": " + e.getMessage(), e);
    }
  }

  Path path() { return path; }
  int ranks() { return ranks; }
  long stagingBytes() { return stagingBytes; }

  /** Removes the file; the mappings stay valid. Safe to call twice. */
  void unlink() {
    try {
      Files.deleteIfExists(path);
    } catch (IOException e) {
      throw new UncheckedIOException("cannot remove segment " + path, e);
    }
  }

  static int ctrlBase(int rank) { return HEADER_BYTES + rank * CTRL_BYTES; }

  /** Byte offset (in {@link #ctrl}) of the slot where {@code from} signals {@code to}. */
  static int slot(int to, int from) { return ctrlBase(to) + from * SLOT_BYTES; }

  static int descriptor(int rank, long seq) { return ctrlBase(rank) + DESC_OFFSET + (int) (seq & 1) * DESC_BYTES; }

  /** Marks {@code rank} as gone (it closed its communicator): peers waiting for it stop waiting. */
  void markDetached(int rank) { INTS.setRelease(ctrl, ctrlBase(rank) + DETACHED_OFFSET, 1); }

  boolean isDetached(int rank) { return (int) INTS.getAcquire(ctrl, ctrlBase(rank) + DETACHED_OFFSET) != 0; }

  // ------------------------------------------------------------------ abort state in the header

  /**
   * Records the first abort reason; later calls keep the first. Returns true if this call won. Does
   * nothing once closed: another thread may abort while the owner closes.
   */
  synchronized boolean abort(int rank, String reason) {
    if (closed) return false;
    if (!INTS.compareAndSet(ctrl, ABORT_STATE, 0, 1)) return false;
    byte[] b = reason.getBytes(StandardCharsets.UTF_8);
    int n = Math.min(b.length, ABORT_TEXT_MAX);
    for (int i = 0; i < n; i++) ctrl.put(ABORT_TEXT + i, b[i]);
    ctrl.putInt(ABORT_LEN, n);
    ctrl.putInt(ABORT_RANK, rank);
    INTS.setRelease(ctrl, ABORT_STATE, 2); // publishes the reason written above
    return true;
  }

  synchronized boolean isAborted() { return !closed && (int) INTS.getAcquire(ctrl, ABORT_STATE) != 0; }

  /** The abort reason; waits briefly for a reason still being written. */
  synchronized String abortReason() {
    if (closed) return "communicator closed";
    long until = System.nanoTime() + 50_000_000L;
    while ((int) INTS.getAcquire(ctrl, ABORT_STATE) == 1 && System.nanoTime() < until) Thread.onSpinWait();
    if ((int) INTS.getAcquire(ctrl, ABORT_STATE) != 2) return "communicator aborted (reason not recorded)";
    int n = ctrl.getInt(ABORT_LEN);
    byte[] b = new byte[n];
    for (int i = 0; i < n; i++) b[i] = ctrl.get(ABORT_TEXT + i);
    return "rank " + ctrl.getInt(ABORT_RANK) + ": " + new String(b, StandardCharsets.UTF_8);
  }

  @Override public synchronized void close() {
    if (closed) return;
    closed = true;
    unmap(ctrl);
    for (MappedByteBuffer b : data) unmap(b);
  }

  private static final Method INVOKE_CLEANER;
  private static final Object UNSAFE;

  static {
    Method m = null;
    Object u = null;
    try {
      Class<?> c = Class.forName("sun.misc.Unsafe");
      Field f = c.getDeclaredField("theUnsafe");
      f.setAccessible(true);
      u = f.get(null);
      m = c.getMethod("invokeCleaner", ByteBuffer.class);
    } catch (ReflectiveOperationException | RuntimeException e) {
      // fall back to the garbage collector unmapping the segment
    }
    INVOKE_CLEANER = m;
    UNSAFE = u;
  }

  /** Unmaps now (jdk.unsupported's invokeCleaner) instead of waiting for the garbage collector. */
  private static void unmap(ByteBuffer b) {
    if (INVOKE_CLEANER == null) return;
    try {
      INVOKE_CLEANER.invoke(UNSAFE, b);
    } catch (ReflectiveOperationException e) {
      // left to the garbage collector
    }
  }
}
