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
import java.nio.channels.ClosedByInterruptException;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.EnumSet;

/**
 * The shared-memory segment of one host communicator: a file in /dev/shm mapped by every rank.
 *
 * <pre>
 * [header 4 KiB][control block per rank, 8 KiB each][data per rank: input area S | result area S]
 * header:  magic 0, ranks 8, staging bytes 16, creator pid 24 + start time 32 + PID namespace 40,
 *          barrier outcome 48 (ShmSignals), abort state 64 + rank 68, peers mapped 72,
 *          wake token 80..96 (ShmWake), abort reason length 128 + text 132..3840,
 *          sleeping flag per rank 3840..4096 (ShmSignals)
 * control: 64 barrier slots of 64 bytes (slot p = last epoch rank p signalled to this rank),
 *          two call descriptors (by call parity), wake port, detached flag
 * </pre>
 *
 * The file is created 0600 with CREATE_NEW under a random 128-bit name and backed in full at once
 * (every page written), so a full /dev/shm fails the creation instead of a later collective. Its name
 * is removed as soon as every rank has mapped it: by the last peer to map it, else by rank 0 when the
 * creation ends; nothing is left in /dev/shm even if a process is killed afterwards. A creator killed
 * before that leaves its file behind; creations remove such stale files in the background
 * ({@link ShmFiles#sweepStale}, {@link StaleSweeper}). A peer maps only a file that
 * {@link ShmFiles#openPeerSegment} accepts, and reads every length in the header as untrusted.
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
  static final int WAKE_PORT_OFFSET = 6144;    // int: the rank's wake channel port (ShmWake)
  static final int DETACHED_OFFSET = 6144 + 8; // int: 1 once the rank closed its communicator
  static final int CREATOR_PID = 24;      // header: pid of the process that created the file
  static final int CREATOR_START = 32;    // header: its start time, epoch ms (0 if unknown)
  static final int CREATOR_NS = 40;       // header: its PID namespace inode (0 if unknown)
  static final int ABORT_STATE = 64;      // int: 0 ok, 1 reason being written, 2 aborted
  static final int ABORT_RANK = 68;
  static final int MAPPED = 72;           // int: peers (ranks but the creator) that mapped the file and checked its header
  static final int OUTCOME = 48;          // long: last decided barrier epoch << 1 | 1 if it failed (ShmSignals)
  static final int WAKE_TOKEN = 80;       // 16 random bytes from the creator: a wake connection's proof (ShmWake)
  static final int ABORT_LEN = 128;
  static final int ABORT_TEXT = 132;
  /** Per rank an int, 1 while the rank sleeps in a barrier: all in a few lines that stay in every cache. */
  static final int SLEEPING = HEADER_BYTES - 4 * MAX_RANKS;
  static final int ABORT_TEXT_MAX = SLEEPING - ABORT_TEXT;

  /** The smallest staging area per rank (allToAllV keeps its sizes table of up to 1552 bytes in it). */
  static final long MIN_STAGING_BYTES = 4096;
  /**
   * The largest staging area per rank, 512 MiB: a rank's input and result areas (2 S bytes) are one
   * mapping, which Java indexes with an int, and the host algorithms compute byte offsets inside them as
   * ints; 2^29 is the largest power of two with 2 S below 2^31.
   */
  static final long MAX_STAGING_BYTES = 1L << 29;

  static final VarHandle LONGS = MethodHandles.byteBufferViewVarHandle(long[].class, ByteOrder.nativeOrder());
  static final VarHandle INTS = MethodHandles.byteBufferViewVarHandle(int[].class, ByteOrder.nativeOrder());

  private static final java.security.SecureRandom RANDOM = new java.security.SecureRandom();

  private final Path path;
  private final int ranks;
  private final long stagingBytes;
  /** Header and all control blocks. */
  final MappedByteBuffer ctrl;
  /** Per rank: its input area then its result area, 2*S bytes. */
  final MappedByteBuffer[] data;
  private boolean closed;

  /** Maps the whole file; on failure unmaps what it had mapped. */
  private ShmSegment(Path path, int ranks, long stagingBytes, FileChannel ch) throws IOException {
    this.path = path;
    this.ranks = ranks;
    this.stagingBytes = stagingBytes;
    long ctrlLen = ctrlRegionBytes(ranks);
    MappedByteBuffer c = null;
    MappedByteBuffer[] d = new MappedByteBuffer[ranks];
    try {
      c = ch.map(FileChannel.MapMode.READ_WRITE, 0, ctrlLen);
      c.order(ByteOrder.nativeOrder());
      for (int r = 0; r < ranks; r++) {
        d[r] = ch.map(FileChannel.MapMode.READ_WRITE, ctrlLen + r * 2 * stagingBytes, 2 * stagingBytes);
        d[r].order(ByteOrder.nativeOrder());
      }
    } catch (IOException | RuntimeException | Error e) {
      if (c != null) unmap(c);
      for (MappedByteBuffer b : d) if (b != null) unmap(b);
      throw e;
    }
    this.ctrl = c;
    this.data = d;
  }

  static long ctrlRegionBytes(int ranks) {
    long raw = HEADER_BYTES + (long) ranks * CTRL_BYTES;
    return (raw + 4095) & ~4095L;
  }

  static long totalBytes(int ranks, long stagingBytes) {
    return ctrlRegionBytes(ranks) + (long) ranks * 2 * stagingBytes;
  }

  /** Raises {@link IllegalArgumentException} unless a segment of this shape can be mapped. */
  static void checkShape(int ranks, long stagingBytes) {
    if (ranks < 1 || ranks > MAX_RANKS) throw new IllegalArgumentException("host backend supports 1.." + MAX_RANKS + " ranks, got " + ranks);
    if (stagingBytes < MIN_STAGING_BYTES || stagingBytes > MAX_STAGING_BYTES) {
      throw new IllegalArgumentException("stagingBytes " + stagingBytes + " is outside the host backend's range " + MIN_STAGING_BYTES
          + ".." + MAX_STAGING_BYTES + " (the maximum: a rank's input and result areas, 2 x stagingBytes, are one int-indexed mapping)");
    }
  }

  /**
   * Rank 0: creates the file in {@code dir} (0600, CREATE_NEW, random name), backs it in full, writes
   * the header, maps it. The shape is checked before any file exists; any failure after the file
   * exists removes it. Asks for a background sweep of stale files in {@code dir} without waiting for it.
   */
  static ShmSegment create(Path dir, int ranks, long stagingBytes) {
    checkShape(ranks, stagingBytes);
    String bad = ShmFiles.directoryProblem(dir);
    if (bad != null) throw new IllegalStateException("cannot create a shared-memory segment in " + dir + ": " + bad);
    StaleSweeper.request(dir);
    Path p = ShmFiles.newSegmentPath(dir);
    long total = totalBytes(ranks, stagingBytes);
    ProcessId me = ProcessId.current();
    ByteBuffer creator = ByteBuffer.allocate(24).order(ByteOrder.nativeOrder())  // 0: unknown
        .putLong(me.pid()).putLong(Math.max(0, me.startMillis())).putLong(Math.max(0, me.pidNamespace())).flip();
    FileChannel ch;
    try {
      ch = FileChannel.open(p, EnumSet.of(StandardOpenOption.CREATE_NEW, StandardOpenOption.READ, StandardOpenOption.WRITE),
          PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
    } catch (IOException e) {
      throw new UncheckedIOException("cannot create the shared-memory segment " + p + ": " + e, e);  // nothing to remove
    }
    boolean filling = false;
    try (ch) {
      // first of all, who created it: a creator killed during the rest of the set-up leaves a file that
      // a later sweep can attribute
      ch.write(creator, CREATOR_PID);
      p.toFile().deleteOnExit();
      filling = true;
      backWithZeros(ch, HEADER_BYTES, total);
      filling = false;
      ShmSegment s = new ShmSegment(p, ranks, stagingBytes, ch);
      s.ctrl.putInt(8, ranks);
      s.ctrl.putLong(16, stagingBytes);
      byte[] token = new byte[ShmWake.TOKEN_BYTES];
      RANDOM.nextBytes(token);
      s.ctrl.put(WAKE_TOKEN, token);
      LONGS.setRelease(s.ctrl, 0, MAGIC);
      return s;
    } catch (IOException e) {
      deleteQuietly(p);
      throw new UncheckedIOException(creationFailure(dir, p, total, e, filling), e);
    } catch (RuntimeException | Error e) {
      deleteQuietly(p);
      throw e;
    }
  }

  /**
   * Writes zeros over [from, to) of the new file, so that tmpfs allocates every page now: a sparse file
   * maps fine on a full /dev/shm and then raises SIGBUS (an InternalError in Java) at the first touch
   * of a missing page, inside a collective (Java has no fallocate). Cost: the pages count against
   * /dev/shm from creation on instead of from first use, and the writes take time, of which the page
   * allocation would otherwise come at first touch: measured on a loaded 2-core VM, 45-50 ms for the
   * default 2 ranks at 16 MiB staging (64 MiB), 160-290 ms for 8 ranks (256 MiB), 2-3 s for 64 ranks
   * (2 GiB).
   */
  private static void backWithZeros(FileChannel ch, long from, long to) throws IOException {
    ByteBuffer zeros = ByteBuffer.allocateDirect((int) Math.min(1 << 20, Math.max(0, to - from)));
    for (long pos = from; pos < to; ) {
      zeros.clear().limit((int) Math.min(zeros.capacity(), to - pos));
      while (zeros.hasRemaining()) pos += ch.write(zeros, pos);
    }
  }

  /** The message of an IOException while creating {@code p}: an interrupt, a full directory while backing it, or else the error itself. */
  private static String creationFailure(Path dir, Path p, long total, IOException e, boolean filling) {
    if (e instanceof ClosedByInterruptException) return "interrupted while creating the shared-memory segment " + p + " (removed)";
    String m = String.valueOf(e.getMessage());
    if (filling && (m.contains("No space left on device") || m.contains("Disk quota exceeded"))) {
      long free = -1;
      try {
        free = Files.getFileStore(dir).getUsableSpace();
      } catch (IOException | RuntimeException x) {
        // unknown
      }
      return "not enough space in " + dir + ": need " + total + " bytes for the shared-memory segment " + p
          + (free >= 0 ? ", " + free + " bytes free" : "") + " (" + m + "); free space there or lower stagingBytes";
    }
    return "cannot create the shared-memory segment " + p + ": " + e;
  }

  private static void deleteQuietly(Path p) {
    try {
      Files.deleteIfExists(p);
    } catch (IOException e) {
      // best effort: a later sweep removes it once this process is gone
    }
  }

  /**
   * Other ranks: maps the file {@code p} that rank 0 named, once {@link ShmFiles#openPeerSegment} has
   * accepted it as a segment in {@code dir}, and checks its header. The last peer to map it removes
   * its name ({@link #noteMapped}).
   */
  static ShmSegment open(Path dir, Path p, int ranks, long stagingBytes) {
    checkShape(ranks, stagingBytes);
    try (FileChannel ch = ShmFiles.openPeerSegment(dir, p, totalBytes(ranks, stagingBytes))) {
      ShmSegment s = new ShmSegment(p, ranks, stagingBytes, ch);
      long magic = (long) LONGS.getAcquire(s.ctrl, 0);
      if (magic != MAGIC || s.ctrl.getInt(8) != ranks || s.ctrl.getLong(16) != stagingBytes) {
        s.close();
        throw new IllegalStateException("segment " + p + " header does not match this communicator");
      }
      s.noteMapped();
      return s;
    } catch (IOException e) {
      throw new UncheckedIOException("cannot open shared-memory segment " + p + ": " + e.getMessage(), e);
    }
  }

  /**
   * Counts this peer as mapped; the peer that completes the count (every rank but the creator) removes
   * the name at once, which ends the time in which another process could open the file. The creator
   * removes it as well when the creation ends, for the case that a peer failed.
   */
  private void noteMapped() {
    int mapped = (int) INTS.getAndAdd(ctrl, MAPPED, 1) + 1;
    if (mapped == ranks - 1) deleteQuietly(path);
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

  /** Byte offset (in {@link #ctrl}) of the flag that says {@code rank} sleeps in a barrier. */
  static int sleeping(int rank) { return SLEEPING + 4 * rank; }

  /** The creator's wake token. */
  byte[] wakeToken() {
    byte[] t = new byte[ShmWake.TOKEN_BYTES];
    ctrl.get(WAKE_TOKEN, t);
    return t;
  }

  void publishWakePort(int rank, int port) { INTS.setRelease(ctrl, ctrlBase(rank) + WAKE_PORT_OFFSET, port); }

  /** A peer's published wake port: untrusted, {@link ShmWake#connect} checks its range. */
  int wakePort(int rank) { return (int) INTS.getAcquire(ctrl, ctrlBase(rank) + WAKE_PORT_OFFSET); }

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
    // the length is untrusted (any process mapping the segment can write it): only 0..ABORT_TEXT_MAX sizes the read
    int n = ctrl.getInt(ABORT_LEN);
    String who = "rank " + ctrl.getInt(ABORT_RANK) + ": ";
    if (n >= 0 && n <= ABORT_TEXT_MAX) return who + text(n);
    String note = "[abort reason length " + n + " outside 0.." + ABORT_TEXT_MAX + ": the segment header was overwritten";
    if (n < 0) return who + note + "]";
    String cut = text(ABORT_TEXT_MAX);
    int end = cut.length();
    while (end > 0 && cut.charAt(end - 1) == 0) end--;  // the unused rest of the text area
    return who + cut.substring(0, end) + " " + note + "; text cut at " + ABORT_TEXT_MAX + " bytes]";
  }

  /** The first {@code n} bytes of the abort text ({@code n} within 0..ABORT_TEXT_MAX). */
  private String text(int n) {
    byte[] b = new byte[n];
    for (int i = 0; i < n; i++) b[i] = ctrl.get(ABORT_TEXT + i);
    return new String(b, StandardCharsets.UTF_8);
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
