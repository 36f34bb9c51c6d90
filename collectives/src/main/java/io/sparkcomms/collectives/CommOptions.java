package io.sparkcomms.collectives;

import io.sparkcomms.collectives.lp.Fp8Format;
import java.time.Duration;
import java.util.EnumMap;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;

/**
 * Settings of a communicator. Immutable; build with {@link #builder()}, start from the environment with
 * {@link #fromEnvironment()} (RCCLX's variable names are honored for familiarity).
 *
 * <p>Every rank of a communicator must use the same options: the algorithm of each call is chosen from
 * them, and ranks that choose differently fail that call with {@link CommMismatchException}.
 */
public final class CommOptions {
  /** Which backend a communicator runs on. */
  public enum Backend { AUTO, HOST, GPU }

  /**
   * The value of a setting left unset: the backend's own default applies. The host backend's defaults
   * are {@link io.sparkcomms.collectives.algo.Thresholds}; the GPU backend passes only settings that
   * are set to the native library, whose parameter table (per rank count) or environment supplies the
   * rest.
   */
  public static final long BACKEND_DEFAULT = -1;
  public static final Duration DEFAULT_TIMEOUT = Duration.ofSeconds(120);
  /** Largest byte threshold (flatMaxBytes, treeMaxBytes, lpMinBytes): 2^48, as in the native parameter table. */
  public static final long MAX_THRESHOLD_BYTES = 1L << 48;
  /** Calls a communicator's flight record holds unless set ({@link #flightRecorderSize()}). */
  public static final int DEFAULT_FLIGHT_RECORDER_SIZE = 64;
  /** Largest flight record size the builder takes. */
  public static final int MAX_FLIGHT_RECORDER_SIZE = 65536;

  private final Backend backend;
  private final Algorithm algorithm;
  private final long flatMaxBytes;
  private final long treeMaxBytes;
  private final Duration timeout;
  private final boolean lowPrecision;
  private final Map<Collective, Boolean> lowPrecisionPerCollective;
  private final long lpMinBytes;
  private final Fp8Format fp8Format;
  private final int lpBlockSize;
  private final int lpOneShotMaxRanks;
  private final long stagingBytes;
  private final boolean vendor;
  private final boolean nanCheck;
  private final int flightRecorderSize;

  private CommOptions(Builder b) {
    this.backend = b.backend;
    this.algorithm = b.algorithm;
    this.flatMaxBytes = b.flatMaxBytes;
    this.treeMaxBytes = b.treeMaxBytes;
    this.timeout = b.timeout;
    this.lowPrecision = b.lowPrecision;
    this.lowPrecisionPerCollective = new EnumMap<>(b.lowPrecisionPerCollective);
    this.lpMinBytes = b.lpMinBytes;
    this.fp8Format = b.fp8Format;
    this.lpBlockSize = b.lpBlockSize;
    this.lpOneShotMaxRanks = b.lpOneShotMaxRanks;
    this.stagingBytes = b.stagingBytes;
    this.vendor = b.vendor;
    this.nanCheck = b.nanCheck;
    this.flightRecorderSize = b.flightRecorderSize;
  }

  public static Builder builder() { return new Builder(); }

  /** Defaults overridden by the process environment (see {@link Builder#applyEnvironment(Map)}). */
  public static CommOptions fromEnvironment() { return builder().applyEnvironment(System.getenv()).build(); }

  public static CommOptions defaults() { return builder().build(); }

  public Builder toBuilder() {
    Builder b = new Builder();
    b.backend = backend;
    b.algorithm = algorithm;
    b.flatMaxBytes = flatMaxBytes;
    b.treeMaxBytes = treeMaxBytes;
    b.timeout = timeout;
    b.lowPrecision = lowPrecision;
    b.lowPrecisionPerCollective.putAll(lowPrecisionPerCollective);
    b.lpMinBytes = lpMinBytes;
    b.fp8Format = fp8Format;
    b.lpBlockSize = lpBlockSize;
    b.lpOneShotMaxRanks = lpOneShotMaxRanks;
    b.stagingBytes = stagingBytes;
    b.vendor = vendor;
    b.nanCheck = nanCheck;
    b.flightRecorderSize = flightRecorderSize;
    return b;
  }

  public Backend backend() { return backend; }
  /** Forced algorithm, or AUTO. */
  public Algorithm algorithm() { return algorithm; }
  /** Largest allReduce (bytes) on the flat one-shot under AUTO, or {@link #BACKEND_DEFAULT}. */
  public long flatMaxBytes() { return flatMaxBytes; }
  /**
   * Largest allReduce (bytes) on the tree two-shot under AUTO (above: the vendor library where there
   * is one), or {@link #BACKEND_DEFAULT}.
   */
  public long treeMaxBytes() { return treeMaxBytes; }
  /** Bound of every wait for a peer. */
  public Duration timeout() { return timeout; }
  /** Smallest message (bytes) that uses FP8 under AUTO when low precision is enabled, or {@link #BACKEND_DEFAULT}. */
  public long lpMinBytes() { return lpMinBytes; }
  /** FP8 format on the wire; null means: the backend's choice (on the GPU from the device: E4M3FNUZ on gfx942, else E4M3FN). */
  public Fp8Format fp8Format() { return fp8Format; }
  /** Elements per FP8 scale, or {@link #BACKEND_DEFAULT}. */
  public int lpBlockSize() { return lpBlockSize; }
  /**
   * Largest rank count whose LP allReduce is one-shot (every rank quantizes its input once, sums
   * every rank's dequantized input in rank order); above it, two-shot (the reduced slice is
   * requantized, so two quantizations). {@link #BACKEND_DEFAULT} when unset. Both backends (the GPU
   * one passes a set value to the native option {@code lp_oneshot_max_ranks}).
   */
  public int lpOneShotMaxRanks() { return lpOneShotMaxRanks; }
  /**
   * Per-rank staging buffer size in bytes (larger messages are processed in chunks), or
   * {@link #BACKEND_DEFAULT}. The builder takes 4 KiB..1 GiB; the host backend maps at most 512 MiB
   * per rank (its input and result areas, twice this size, are one int-indexed mapping), and a larger
   * value fails its communicator creation on every rank before any file is created.
   */
  public long stagingBytes() { return stagingBytes; }
  /** Whether the GPU backend may load NCCL/RCCL (for VENDOR and above the DDA range). */
  public boolean vendor() { return vendor; }
  /** The global low-precision switch. */
  public boolean lowPrecision() { return lowPrecision; }
  /**
   * Whether host tensor inputs are scanned for NaN before each collective but barrier and allToAllV
   * (the whole input tensor; of broadcast and scatter the root's); a NaN fails the call on every rank
   * ({@link io.sparkcomms.collectives.observe.NanCheck}). Default false. Ranks may differ.
   */
  public boolean nanCheck() { return nanCheck; }
  /**
   * How many of its last calls a communicator's flight record holds ({@link Communicator#flightRecord()});
   * 0 records none. Default {@link #DEFAULT_FLIGHT_RECORDER_SIZE}. Ranks may differ.
   */
  public int flightRecorderSize() { return flightRecorderSize; }

  /** Whether FP8 is enabled for {@code c}: its own switch if set, else the global one. */
  public boolean lowPrecisionEnabled(Collective c) {
    if (!c.hasLowPrecision()) return false;
    Boolean own = lowPrecisionPerCollective.get(c);
    return own != null ? own : lowPrecision;
  }

  /**
   * The settings every rank of one communicator must share, as {@code name=value} pairs in a fixed
   * order: they decide which algorithm a call takes and how staging is laid out, so ranks that differ
   * would run different kernels against each other. The timeout may differ per rank.
   */
  public java.util.List<String> agreedSettings() {
    java.util.List<String> l = new java.util.ArrayList<>();
    l.add("algorithm=" + algorithm);
    l.add("flatMaxBytes=" + text(flatMaxBytes));
    l.add("treeMaxBytes=" + text(treeMaxBytes));
    l.add("lowPrecision=" + lowPrecision);
    l.add("lowPrecisionPerCollective=" + new java.util.TreeMap<>(lowPrecisionPerCollective));
    l.add("lpMinBytes=" + text(lpMinBytes));
    l.add("fp8Format=" + (fp8Format == null ? "default" : fp8Format));
    l.add("lpBlockSize=" + text(lpBlockSize));
    l.add("lpOneShotMaxRanks=" + text(lpOneShotMaxRanks));
    l.add("stagingBytes=" + text(stagingBytes));
    l.add("vendor=" + vendor);
    return l;
  }

  /** A knob's value for messages: "default" when unset. */
  private static String text(long v) { return v == BACKEND_DEFAULT ? "default" : Long.toString(v); }

  @Override public String toString() {
    return "CommOptions{backend=" + backend + ", algorithm=" + algorithm + ", flatMaxBytes=" + text(flatMaxBytes)
        + ", treeMaxBytes=" + text(treeMaxBytes) + ", timeout=" + timeout + ", lowPrecision=" + lowPrecision
        + ", lowPrecisionPerCollective=" + lowPrecisionPerCollective + ", lpMinBytes=" + text(lpMinBytes)
        + ", fp8Format=" + (fp8Format == null ? "default" : fp8Format) + ", lpBlockSize=" + text(lpBlockSize)
        + ", lpOneShotMaxRanks=" + text(lpOneShotMaxRanks) + ", stagingBytes=" + text(stagingBytes) + ", vendor=" + vendor
        + ", nanCheck=" + nanCheck + ", flightRecorderSize=" + flightRecorderSize + "}";
  }

  /** Builder; every setter validates its argument. */
  public static final class Builder {
    private Backend backend = Backend.AUTO;
    private Algorithm algorithm = Algorithm.AUTO;
    private long flatMaxBytes = BACKEND_DEFAULT;
    private long treeMaxBytes = BACKEND_DEFAULT;
    private Duration timeout = DEFAULT_TIMEOUT;
    private boolean lowPrecision;
    private final Map<Collective, Boolean> lowPrecisionPerCollective = new EnumMap<>(Collective.class);
    private long lpMinBytes = BACKEND_DEFAULT;
    private Fp8Format fp8Format;
    private int lpBlockSize = (int) BACKEND_DEFAULT;
    private int lpOneShotMaxRanks = (int) BACKEND_DEFAULT;
    private long stagingBytes = BACKEND_DEFAULT;
    private boolean vendor = true;
    private boolean nanCheck;
    private int flightRecorderSize = DEFAULT_FLIGHT_RECORDER_SIZE;

    private Builder() {}

    /** Allow the GPU backend to use NCCL/RCCL (default true). */
    public Builder vendor(boolean on) { this.vendor = on; return this; }

    public Builder backend(Backend b) { this.backend = Objects.requireNonNull(b); return this; }
    public Builder algorithm(Algorithm a) { this.algorithm = Objects.requireNonNull(a); return this; }
    public Builder flatMaxBytes(long v) { this.flatMaxBytes = nonNegative("flatMaxBytes", v); return this; }
    public Builder treeMaxBytes(long v) { this.treeMaxBytes = nonNegative("treeMaxBytes", v); return this; }
    public Builder timeout(Duration t) {
      if (t == null || t.isNegative() || t.isZero()) throw new IllegalArgumentException("timeout must be positive, got " + t);
      this.timeout = t;
      return this;
    }
    public Builder lowPrecision(boolean on) { this.lowPrecision = on; return this; }
    /** Per-collective switch; overrides the global one for {@code c}. */
    public Builder lowPrecision(Collective c, boolean on) {
      if (!c.hasLowPrecision()) throw new IllegalArgumentException(c.apiName() + " has no low-precision variant");
      lowPrecisionPerCollective.put(c, on);
      return this;
    }
    public Builder lpMinBytes(long v) { this.lpMinBytes = nonNegative("lpMinBytes", v); return this; }
    public Builder fp8Format(Fp8Format f) { this.fp8Format = f; return this; }
    /** Elements per FP8 scale block: 4..65536 and a multiple of 4, on both backends (the GPU's range). */
    public Builder lpBlockSize(int v) {
      if (v < 4 || v > 65536 || v % 4 != 0) throw new IllegalArgumentException("lpBlockSize must be a multiple of 4 in 4..65536, got " + v);
      this.lpBlockSize = v;
      return this;
    }
    /** Largest rank count whose LP allReduce is one-shot (0: always two-shot). */
    /** 0..64 (the host backend's rank limit); the GPU backend takes 0..8 and refuses more at creation. */
    public Builder lpOneShotMaxRanks(int v) {
      if (v < 0 || v > 64) throw new IllegalArgumentException("lpOneShotMaxRanks must be in 0..64, got " + v);
      this.lpOneShotMaxRanks = v;
      return this;
    }
    /** Scan host tensor inputs for NaN before each call ({@link CommOptions#nanCheck()}); default false. */
    public Builder nanCheck(boolean on) { this.nanCheck = on; return this; }
    /** Calls the flight record holds: 0..65536 (0: none); default {@link #DEFAULT_FLIGHT_RECORDER_SIZE}. */
    public Builder flightRecorderSize(int n) {
      if (n < 0 || n > MAX_FLIGHT_RECORDER_SIZE) {
        throw new IllegalArgumentException("flightRecorderSize must be in 0.." + MAX_FLIGHT_RECORDER_SIZE + ", got " + n);
      }
      this.flightRecorderSize = n;
      return this;
    }
    public Builder stagingBytes(long v) {
      if (v < 4096 || v > (1L << 30)) throw new IllegalArgumentException("stagingBytes must be in 4 KiB..1 GiB, got " + v);
      this.stagingBytes = v;
      return this;
    }

    /**
     * Applies RCCLX-style environment variables: {@code RCCL_LOW_PRECISION_ENABLE},
     * {@code RCCL_LOW_PRECISION_ENABLE_{ALLREDUCE,ALLGATHER,REDUCESCATTER,ALLTOALL}},
     * {@code RCCL_DDA_ALL_REDUCE_FLAT_MAX_BYTES}, {@code RCCL_DDA_ALL_REDUCE_TREE_MAX_BYTES}, and our own
     * {@code SPARKCOMMS_ALGO}, {@code SPARKCOMMS_BACKEND}, {@code SPARKCOMMS_TIMEOUT_MS},
     * {@code SPARKCOMMS_LP_MIN_BYTES}, {@code SPARKCOMMS_LP_BLOCK_SIZE},
     * {@code SPARKCOMMS_LP_ONESHOT_MAX_RANKS}, {@code SPARKCOMMS_FP8_FORMAT},
     * {@code SPARKCOMMS_STAGING_BYTES}, {@code SPARKCOMMS_VENDOR}, {@code SPARKCOMMS_NAN_CHECK},
     * {@code SPARKCOMMS_FLIGHT_RECORDER_SIZE}. Sizes and counts follow
     * {@link Sizes#parse}, switches {@link Flags#parse}; {@code SPARKCOMMS_TIMEOUT_MS} is a whole number
     * of milliseconds (digits only, no suffix). A blank size, count, switch or timeout is not set. A
     * malformed or out-of-range value is an error naming the variable.
     */
    public Builder applyEnvironment(Map<String, String> env) {
      bool(env, "RCCL_LOW_PRECISION_ENABLE", this::lowPrecision);
      String[][] per = {{"ALLREDUCE", "ALL_REDUCE"}, {"ALLGATHER", "ALL_GATHER"},
          {"REDUCESCATTER", "REDUCE_SCATTER"}, {"ALLTOALL", "ALL_TO_ALL"}};
      for (String[] p : per) {
        Collective c = Collective.valueOf(p[1]);
        bool(env, "RCCL_LOW_PRECISION_ENABLE_" + p[0], on -> lowPrecision(c, on));
      }
      bytes(env, "RCCL_DDA_ALL_REDUCE_FLAT_MAX_BYTES", this::flatMaxBytes);
      bytes(env, "RCCL_DDA_ALL_REDUCE_TREE_MAX_BYTES", this::treeMaxBytes);
      String v;
      if ((v = env.get("SPARKCOMMS_ALGO")) != null) algorithm(Algorithm.valueOf(v.trim().toUpperCase(Locale.ROOT)));
      if ((v = env.get("SPARKCOMMS_BACKEND")) != null) backend(Backend.valueOf(v.trim().toUpperCase(Locale.ROOT)));
      millis(env, "SPARKCOMMS_TIMEOUT_MS", ms -> timeout(Duration.ofMillis(ms)));
      bytes(env, "SPARKCOMMS_LP_MIN_BYTES", this::lpMinBytes);
      bytes(env, "SPARKCOMMS_LP_BLOCK_SIZE", n -> lpBlockSize((int) Math.min(Integer.MAX_VALUE, n)));
      bytes(env, "SPARKCOMMS_LP_ONESHOT_MAX_RANKS", n -> lpOneShotMaxRanks((int) Math.min(Integer.MAX_VALUE, n)));
      if ((v = env.get("SPARKCOMMS_FP8_FORMAT")) != null) fp8Format(Fp8Format.parse(v));
      bytes(env, "SPARKCOMMS_STAGING_BYTES", this::stagingBytes);
      bool(env, "SPARKCOMMS_VENDOR", this::vendor);
      bool(env, "SPARKCOMMS_NAN_CHECK", this::nanCheck);
      bytes(env, "SPARKCOMMS_FLIGHT_RECORDER_SIZE", n -> flightRecorderSize((int) Math.min(Integer.MAX_VALUE, n)));
      return this;
    }

    public CommOptions build() {
      if (treeMaxBytes != BACKEND_DEFAULT && flatMaxBytes != BACKEND_DEFAULT && treeMaxBytes < flatMaxBytes) {
        throw new IllegalArgumentException("treeMaxBytes (" + treeMaxBytes + ") is below flatMaxBytes (" + flatMaxBytes + ")");
      }
      return new CommOptions(this);
    }

    /** A byte threshold: 0..2^48, the range the native parameter table takes (core/params.def). */
    private static long nonNegative(String name, long v) {
      if (v < 0 || v > MAX_THRESHOLD_BYTES) throw new IllegalArgumentException(name + " must be in 0..2^48, got " + v);
      return v;
    }

    /** Applies the switch {@code name} of {@code env} when set ({@link Flags#parse}); errors name it. */
    private static void bool(Map<String, String> env, String name, java.util.function.Consumer<Boolean> set) {
      Flags.parse(name, env.get(name)).ifPresent(set);
    }

    /** Applies the size or count {@code name} of {@code env} when set ({@link Sizes#parse}); errors name it. */
    private static void bytes(Map<String, String> env, String name, java.util.function.LongConsumer set) {
      String v = env.get(name);
      java.util.OptionalLong n = Sizes.parse(name, v);
      if (n.isEmpty()) return;
      try {
        set.accept(n.getAsLong());
      } catch (IllegalArgumentException e) {
        throw new IllegalArgumentException(name + "=" + v + ": " + e.getMessage(), e);
      }
    }

    /** Applies the whole number of milliseconds {@code name} of {@code env} when set (digits only); errors name it. */
    private static void millis(Map<String, String> env, String name, java.util.function.LongConsumer set) {
      String v = env.get(name);
      if (v == null || v.isBlank()) return;
      if (!v.strip().chars().allMatch(ch -> ch >= '0' && ch <= '9')) {
        throw new IllegalArgumentException(name + "=" + v + ": expected a whole number of milliseconds (digits only, e.g. 120000)");
      }
      long ms = Sizes.parse(name, v).getAsLong();
      try {
        set.accept(ms);
      } catch (IllegalArgumentException e) {
        throw new IllegalArgumentException(name + "=" + v + ": " + e.getMessage(), e);
      }
    }
  }
}
