package io.sparkcomms.collectives.gpu;

import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.CommException;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.liveness.PeerWatch;
import io.sparkcomms.collectives.liveness.ProcessId;
import io.sparkcomms.collectives.rendezvous.PairDirectory;
import io.sparkcomms.collectives.rendezvous.Rendezvous;
import io.sparkcomms.nativeapi.GpuLibrary;
import io.sparkcomms.nativeapi.SparkCommsNative;
import io.sparkcomms.nativeapi.SparkCommsNative.sc_comm;
import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.Pointer;

/**
 * Builds a {@link GpuCommunicator}: the native communicator, its options, the connection to the
 * peers' memory, the vendor communicator and the peer watch, in as few rendezvous rounds as the
 * protocol allows.
 *
 * <ol>
 *   <li>Local: {@code sc_comm_create} (staging 0 = the native default when the option is unset), the
 *       options ({@link #configure}), {@code sc_comm_export}; rank 0 also makes the vendor unique id
 *       when it may use the vendor library.</li>
 *   <li>Round 1, one message per rank ({@link Hello}): its setup error (or none), its export blob, its
 *       process, whether it can use the vendor library, and (rank 0) the vendor unique id. Every rank
 *       checks every message's lengths before using any field; an error on any rank fails every rank,
 *       naming each failing rank.</li>
 *   <li>Local: {@code sc_comm_connect}, the stream. Round 2: every rank's outcome; any failure fails
 *       every rank. (The vendor initialization must not start unless every rank connected: it blocks
 *       until all ranks join it.)</li>
 *   <li>Only when every rank can use the vendor library and rank 0 sent an id: {@code
 *       sc_vendor_comm_init}, then round 3, its outcome on every rank.</li>
 * </ol>
 */
final class GpuSetup {
  private static final int MAGIC = 0x53434731;  // "SCG1"
  /** Longest setup error text a peer may send. */
  private static final int MAX_ERROR = 16 << 10;
  /** Largest export blob or vendor id the native side may ask for (the blob holds a few IPC handles). */
  private static final int MAX_NATIVE_BLOB = 1 << 20;

  private GpuSetup() {}

  /** Collective over the rendezvous: every rank calls it with its own device. */
  static GpuCommunicator create(Rendezvous rv, CommOptions o, int device) {
    GpuLibrary.require();
    int n = rv.size(), r = rv.rank();
    Duration t = o.timeout();
    long exportSize = SparkCommsNative.sc_comm_export_size();
    int idLen = SparkCommsNative.sc_vendor_unique_id_size();
    // sizes from the native side, used to size buffers: checked against what any build can need
    if (exportSize < 1 || exportSize > MAX_NATIVE_BLOB) throw new CommException("sc_comm_export_size answered " + exportSize + " bytes");
    if (idLen < 0 || idLen > MAX_NATIVE_BLOB) throw new CommException("sc_vendor_unique_id_size answered " + idLen + " bytes");
    int blobLen = (int) exportSize;
    boolean vendorWanted = o.vendor() && n > 1;
    boolean vendorReady = vendorWanted && SparkCommsNative.sc_vendor_available() == 1;
    sc_comm comm = null;
    Pointer stream = null;
    try {
      // ---- local: create, configure, export
      byte[] blob = new byte[0];
      byte[] id = new byte[0];
      String err = Native.failure(SparkCommsNative.sc_set_device(device), "sc_set_device(" + device + ")");
      if (err == null) {
        sc_comm c = new sc_comm();
        long staging = o.stagingBytes() == CommOptions.BACKEND_DEFAULT ? 0 : o.stagingBytes();
        err = Native.failure(SparkCommsNative.sc_comm_create(r, n, device, staging, nativeSeconds(t), c), "sc_comm_create");
        if (err == null) comm = c;
      }
      if (err == null) err = configure(comm, o);
      if (err == null) {
        BytePointer mine = new BytePointer(blobLen);
        err = Native.failure(SparkCommsNative.sc_comm_export(comm, mine, blobLen), "sc_comm_export");
        if (err == null) {
          blob = new byte[blobLen];
          mine.get(blob);
        }
      }
      if (err == null && r == 0 && vendorReady) {
        BytePointer idp = new BytePointer(idLen);
        err = Native.failure(SparkCommsNative.sc_vendor_unique_id(idp, idLen), "sc_vendor_unique_id");
        if (err == null) {
          id = new byte[idLen];
          idp.get(id);
        }
      }
      // ---- round 1
      byte[] pairs = r == 0 ? PairDirectory.fresh().encode().getBytes(StandardCharsets.UTF_8) : new byte[0];
      Hello me = new Hello(err, blob, ProcessId.current().encode(), vendorReady, id, pairs);
      byte[][] raw = rv.allGather(me.encode(), t);
      Hello[] all = new Hello[n];
      for (int p = 0; p < n; p++) all[p] = Hello.decode(raw[p], p, blobLen, idLen);
      List<String> failed = new ArrayList<>();
      for (int p = 0; p < n; p++) if (all[p].error() != null) failed.add("rank " + p + ": " + all[p].error());
      if (!failed.isEmpty()) throw new CommException("GPU communicator setup failed: " + String.join("; ", failed));
      ProcessId[] ids = new ProcessId[n];
      for (int p = 0; p < n; p++) ids[p] = ProcessId.decode(all[p].process());
      // every rank just answered: judge now which peers this process can watch
      ProcessId[] watched = n > 1 ? PeerWatch.watchable(ids, r) : new ProcessId[0];
      // ---- local: connect, stream; round 2
      BytePointer blobs = new BytePointer((long) blobLen * n);
      for (int p = 0; p < n; p++) blobs.position((long) p * blobLen).put(all[p].blob());
      blobs.position(0);
      err = Native.failure(SparkCommsNative.sc_comm_connect(comm, blobs, blobLen), "sc_comm_connect");
      if (err == null) {
        Pointer s = new Pointer((Pointer) null);
        err = Native.failure(SparkCommsNative.sc_stream_create(s), "sc_stream_create");
        if (err == null) stream = s;
      }
      agree(rv, err, t, "connect to peers' GPU memory");
      // ---- vendor; round 3
      boolean vendor = all[0].id().length == idLen && idLen > 0;
      for (Hello h : all) vendor &= h.vendorReady();
      if (vendor) {
        err = Native.failure(SparkCommsNative.sc_vendor_comm_init(comm, new BytePointer(all[0].id())), "sc_vendor_comm_init");
        agree(rv, err, t, "initialize the vendor communicator");
      }
      GpuCommunicator g = new GpuCommunicator(r, n, o, device, comm, stream, vendor,
          PairDirectory.decode(new String(all[0].pairs(), StandardCharsets.UTF_8)));
      g.watchPeers(watched);
      return g;
    } catch (RuntimeException e) {
      if (comm != null) {
        SparkCommsNative.sc_comm_abort(comm);
        SparkCommsNative.sc_comm_destroy(comm);
      }
      if (stream != null) SparkCommsNative.sc_stream_destroy(stream);
      throw e;
    }
  }

  /**
   * A timeout as the native library takes it (seconds, in (0, 1e7]; sc_comm_set_timeout refuses more):
   * the communicator's at creation, and again when a call's own timeout is undone.
   */
  static double nativeSeconds(Duration t) {
    double s = t.compareTo(Duration.ofSeconds(10_000_000)) >= 0 ? 1e7 : t.toNanos() / 1e9;
    return s > 0 ? s : 1e-6;
  }

  /**
   * Passes the options to the native library before the export (connect compares the settings
   * that must agree): only what the options set explicitly, so every other knob keeps the native
   * default of the rank count (or the environment), plus the four LP flags, always, so that the
   * options and not each rank's environment decide where AUTO may use FP8 (a forced algorithm is
   * passed with every call, so a forced FLAT allGather stays direct whatever the flags say).
   * Returns the first refusal as text, or null.
   */
  static String configure(sc_comm comm, CommOptions o) {
    List<Object[]> set = new ArrayList<>();
    if (o.flatMaxBytes() != CommOptions.BACKEND_DEFAULT) set.add(new Object[] {"flat_max_bytes", o.flatMaxBytes()});
    if (o.treeMaxBytes() != CommOptions.BACKEND_DEFAULT) set.add(new Object[] {"tree_max_bytes", o.treeMaxBytes()});
    if (o.lpBlockSize() != CommOptions.BACKEND_DEFAULT) set.add(new Object[] {"lp_block_size", (long) o.lpBlockSize()});
    if (o.fp8Format() != null) set.add(new Object[] {"fp8_format", (long) o.fp8Format().ordinal()});
    if (o.lpMinBytes() != CommOptions.BACKEND_DEFAULT) set.add(new Object[] {"lp_min_bytes", o.lpMinBytes()});
    if (o.lpOneShotMaxRanks() != CommOptions.BACKEND_DEFAULT) {
      set.add(new Object[] {"lp_oneshot_max_ranks", (long) o.lpOneShotMaxRanks()});
    }
    set.add(new Object[] {"lp_allreduce", flag(o.lowPrecisionEnabled(Collective.ALL_REDUCE))});
    set.add(new Object[] {"lp_allgather", flag(o.lowPrecisionEnabled(Collective.ALL_GATHER))});
    set.add(new Object[] {"lp_reducescatter", flag(o.lowPrecisionEnabled(Collective.REDUCE_SCATTER))});
    set.add(new Object[] {"lp_alltoall", flag(o.lowPrecisionEnabled(Collective.ALL_TO_ALL))});
    for (Object[] kv : set) {
      String key = (String) kv[0];
      long value = (Long) kv[1];
      String err = Native.failure(SparkCommsNative.sc_comm_set_option(comm, key, value), "sc_comm_set_option(" + key + "=" + value + ")");
      if (err != null) return err;
    }
    return null;
  }

  private static long flag(boolean on) { return on ? 1 : 0; }

  /** Every rank learns every rank's outcome of a setup step; all raise, naming each failed rank, if one failed. */
  private static void agree(Rendezvous rv, String err, Duration t, String step) {
    byte[] mine = err == null ? new byte[0] : truncate(err).getBytes(StandardCharsets.UTF_8);
    byte[][] all = rv.allGather(mine, t);
    List<String> failed = new ArrayList<>();
    for (int p = 0; p < all.length; p++) {
      if (all[p].length > 0) failed.add("rank " + p + " could not " + step + ": " + truncate(new String(all[p], StandardCharsets.UTF_8)));
    }
    if (!failed.isEmpty()) throw new CommException(String.join("; ", failed));
  }

  private static String truncate(String s) { return s.length() <= MAX_ERROR / 4 ? s : s.substring(0, MAX_ERROR / 4) + "..."; }

  /**
   * One rank's round-1 message: [magic int][error length int, UTF-8 error][blob length int, blob]
   * [process length int, process][vendor ready byte][id length int, id], big-endian.
   */
  record Hello(String error, byte[] blob, byte[] process, boolean vendorReady, byte[] id, byte[] pairs) {
    byte[] encode() {
      byte[] e = error == null ? new byte[0] : truncate(error).getBytes(StandardCharsets.UTF_8);
      ByteBuffer b = ByteBuffer.allocate(4 + 4 + e.length + 4 + blob.length + 4 + process.length + 1 + 4 + id.length + 4 + pairs.length);
      b.putInt(MAGIC).putInt(e.length).put(e).putInt(blob.length).put(blob).putInt(process.length).put(process)
          .put((byte) (vendorReady ? 1 : 0)).putInt(id.length).put(id).putInt(pairs.length).put(pairs);
      return b.array();
    }

    /**
     * Rank {@code rank}'s message, every length checked before use: the error at most
     * {@link #MAX_ERROR} bytes, the blob exactly {@code blobLen} bytes unless the rank reports an
     * error (then any length up to it), the process an encoded {@link ProcessId}, the id empty or
     * {@code idLen} bytes and only from rank 0, nothing after it.
     */
    static Hello decode(byte[] raw, int rank, int blobLen, int idLen) {
      String bad;
      try {
        ByteBuffer b = ByteBuffer.wrap(raw);
        if (b.getInt() != MAGIC) throw new IllegalArgumentException("not a GPU setup message");
        byte[] e = bytes(b, MAX_ERROR, "error");
        byte[] blob = bytes(b, blobLen, "export blob");
        byte[] proc = bytes(b, 64, "process");
        int vr = b.get();
        byte[] id = bytes(b, idLen, "vendor id");
        byte[] pairs = bytes(b, PairDirectory.MAX_TEXT, "pair directory");
        if (b.hasRemaining()) throw new IllegalArgumentException(b.remaining() + " trailing bytes");
        String error = e.length == 0 ? null : new String(e, StandardCharsets.UTF_8);
        if (error == null && blob.length != blobLen) throw new IllegalArgumentException("export blob of " + blob.length + " bytes, expected " + blobLen);
        if (ProcessId.decode(proc) == null) throw new IllegalArgumentException("process id of " + proc.length + " bytes");
        if (vr != 0 && vr != 1) throw new IllegalArgumentException("vendor flag " + vr);
        if (id.length != 0 && (rank != 0 || id.length != idLen)) throw new IllegalArgumentException("vendor id of " + id.length + " bytes");
        if (rank == 0 && error == null) PairDirectory.decode(new String(pairs, StandardCharsets.UTF_8));
        if (rank != 0 && pairs.length != 0) throw new IllegalArgumentException("pair directory from rank " + rank);
        return new Hello(error, blob, proc, vr == 1, id, pairs);
      } catch (IllegalArgumentException | BufferUnderflowException e) {
        bad = e.getMessage() != null ? e.getMessage() : "too short";
      }
      throw new CommException("rank " + rank + " sent an unreadable GPU setup message (" + bad
          + "; another sparkcomms version, or another native library?)");
    }

    private static byte[] bytes(ByteBuffer b, int max, String what) {
      int len = b.getInt();
      if (len < 0 || len > max || len > b.remaining()) throw new IllegalArgumentException(what + " length " + len);
      byte[] out = new byte[len];
      b.get(out);
      return out;
    }
  }
}
