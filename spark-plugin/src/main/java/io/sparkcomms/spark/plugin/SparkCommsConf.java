package io.sparkcomms.spark.plugin;

import io.sparkcomms.collectives.Algorithm;
import io.sparkcomms.collectives.algo.Thresholds;
import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.Flags;
import io.sparkcomms.collectives.Sizes;
import io.sparkcomms.collectives.lp.Fp8Format;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import org.apache.spark.network.util.JavaUtils;
import org.apache.spark.SparkConf;
import scala.Tuple2;

/**
 * The one place that lists every {@code spark.sparkcomms.*} key, with its default and documentation,
 * and reads them. The table of keys in {@code docs/configuration.md} is generated from
 * {@link #markdownTable()} (a test keeps it in sync).
 *
 * <p>Communicator options are layered: {@link CommOptions} defaults, then the environment (the
 * process environment overlaid with the conf's {@code spark.executorEnv.*} entries, so RCCLX's
 * variable names work in local mode too), then the {@code spark.sparkcomms.*} keys that are set.
 *
 * <p>Instances are immutable snapshots of a configuration; create one per use with {@link #of}.
 */
public final class SparkCommsConf {
  /** Prefix of every key. */
  public static final String PREFIX = "spark.sparkcomms.";

  /** One documented key. {@code defaultValue} is the text shown in the table. */
  public record Entry(String key, String defaultValue, String doc) {
    /** The key without {@link #PREFIX}. */
    public String shortName() { return key.substring(PREFIX.length()); }
  }

  private static final List<Entry> ENTRIES = new ArrayList<>();

  public static final Entry RESOURCE_NAME = entry("resourceName", "gpu",
      "Spark resource name of the GPUs (as in `spark.executor.resource.<name>.amount`). Each executor must hold at most one.");
  public static final Entry NUMA_AFFINITY = entry("numaAffinity", "false",
      "Bind each executor process to the CPUs of its GPU's NUMA node (sysfs `local_cpulist`, applied with `taskset`). Logged either way.");
  public static final Entry GPU_CLAIM_CHECK_INTERVAL = entry("gpuClaimCheckInterval", "5s",
      "How often an executor re-checks its GPU claim with the driver. An executor whose GPU another executor of its host also claims logs why and exits.");
  public static final Entry RENDEZVOUS = entry("rendezvous", "auto",
      "How the tasks of a barrier stage meet to build a communicator: `auto` (over the plugin's RPC channel, a few milliseconds per round, when `spark.plugins` loads SparkCommsPlugin; else `barrier`), `rpc` (the plugin's RPC channel; an error without the plugin) or `barrier` (Spark's `BarrierTaskContext.allGather`, about a second per round: Spark polls its barrier coordinator once a second).");
  public static final Entry NODE_NAMES = entry("node.names", "(none)",
      "The node of each executor, as `executorId=node` pairs separated by commas, for the cases detection cannot know (and to simulate nodes on one host). When set, or when a barrier stage's tasks run on more than one host, the stage's communicator spans nodes: the ranks of one node share memory, the nodes exchange over Spark's network library. An executor not listed takes `SPARKCOMMS_NODE` from its environment, else `NODE_NAME` (the Kubernetes downward API's `spec.nodeName`), else its host. Ranks that name one node must share /dev/shm; where they cannot, every rank is a node of its own (a warning names the node).");
  public static final Entry REQUIRE_AUTHENTICATE = entry("security.requireAuthenticate", "false",
      "Refuse to start (the driver plugin stops the SparkContext) unless `spark.authenticate=true`. Without Spark's authentication any process that can reach the driver's RPC port can send to the plugin's endpoint and read the application's configuration; the driver logs a warning then, and also when `spark.network.crypto.enabled` is off (the plugin's messages, IPC handles among them, travel in clear). See docs/security.md.");
  public static final Entry ACCUMULATORS_ENABLED = entry("accumulators.enabled", "true",
      "Named accumulators for the barrier stages that BarrierDatasets, VectorColumns, DataParallelTrainer and TensorParallelInference run: each task adds the calls, bytes and time of its communicators' collectives (and its calls per protocol) when it ends, and the Spark UI's stage page shows them per task and in total, under names starting `sparkcomms: `. The driver registers a fresh set for each of their jobs. `false`: none are registered (a set given with `BarrierOptions.accumulators` is still fed).");
  public static final Entry BACKEND = entry("backend", "auto",
      "Communicator backend: `auto` (GPU when available, else host), `host` or `gpu`. Env: `SPARKCOMMS_BACKEND`.");
  public static final Entry ALGO = entry("algo", "auto",
      "Force an algorithm: `auto`, `flat`, `tree`, `lp` or `vendor`. Env: `SPARKCOMMS_ALGO`.");
  public static final Entry FLAT_MAX_BYTES = entry("flatMaxBytes", "(backend)",
      "Largest allReduce that uses the flat one-shot algorithm under `auto`. Unset: the backend's default (host " + Sizes.format(Thresholds.FLAT_MAX_BYTES) + "; GPU: the native library's, per rank count). Env: `RCCL_DDA_ALL_REDUCE_FLAT_MAX_BYTES`.");
  public static final Entry TREE_MAX_BYTES = entry("treeMaxBytes", "(backend)",
      "Largest allReduce that uses the tree two-shot algorithm under `auto`; above it NCCL/RCCL where loaded. Unset: the backend's default (host unlimited; GPU: the native library's, per rank count). Env: `RCCL_DDA_ALL_REDUCE_TREE_MAX_BYTES`.");
  public static final Entry TIMEOUT = entry("timeout", CommOptions.DEFAULT_TIMEOUT.toSeconds() + "s",
      "Bound of every wait for a peer: collectives and the barrier-stage rendezvous (Spark time string). Env: `SPARKCOMMS_TIMEOUT_MS`.");
  public static final Entry LOW_PRECISION = entry("lowPrecision", "false",
      "Enable FP8 low-precision collectives for large messages. Env: `RCCL_LOW_PRECISION_ENABLE`.");
  public static final Entry LOW_PRECISION_ALL_REDUCE = entry("lowPrecision.allReduce", "(lowPrecision)",
      "Low precision for allReduce; overrides `lowPrecision`. Env: `RCCL_LOW_PRECISION_ENABLE_ALLREDUCE`.");
  public static final Entry LOW_PRECISION_ALL_GATHER = entry("lowPrecision.allGather", "(lowPrecision)",
      "Low precision for allGather; overrides `lowPrecision`. Env: `RCCL_LOW_PRECISION_ENABLE_ALLGATHER`.");
  public static final Entry LOW_PRECISION_REDUCE_SCATTER = entry("lowPrecision.reduceScatter", "(lowPrecision)",
      "Low precision for reduceScatter; overrides `lowPrecision`. Env: `RCCL_LOW_PRECISION_ENABLE_REDUCESCATTER`.");
  public static final Entry LOW_PRECISION_ALL_TO_ALL = entry("lowPrecision.allToAll", "(lowPrecision)",
      "Low precision for allToAll; overrides `lowPrecision`. Env: `RCCL_LOW_PRECISION_ENABLE_ALLTOALL`.");
  public static final Entry LP_MIN_BYTES = entry("lpMinBytes", "(backend)",
      "Smallest message that uses FP8 when low precision is enabled. Unset: host " + Sizes.format(Thresholds.LP_MIN_BYTES) + "; GPU: the native library's default. Env: `SPARKCOMMS_LP_MIN_BYTES`.");
  public static final Entry FP8_FORMAT = entry("fp8Format", "(device)",
      "FP8 wire format: `e4m3fn` or `e4m3fnuz`; unset chooses from the device (E4M3FNUZ on gfx942). Env: `SPARKCOMMS_FP8_FORMAT`.");
  public static final Entry LP_BLOCK_SIZE = entry("lpBlockSize", "(backend)",
      "Elements per FP8 scale: a multiple of 4 in 4..65536. Unset: host " + Thresholds.LP_BLOCK_SIZE + "; GPU: the native library's default. Env: `SPARKCOMMS_LP_BLOCK_SIZE`.");
  public static final Entry LP_ONESHOT_MAX_RANKS = entry("lpOneShotMaxRanks", "(backend)",
      "Largest rank count whose FP8 allReduce is one-shot (each input quantized once); above it two-shot (the reduced slice is requantized: two quantizations). Both backends: 0..64 (the GPU takes 0..8). Unset: host " + Thresholds.LP_ONESHOT_MAX_RANKS + "; GPU: the native library's default. Env: `SPARKCOMMS_LP_ONESHOT_MAX_RANKS`.");
  public static final Entry STAGING_BYTES = entry("stagingBytes", "(backend)",
      "Per-rank staging buffer; larger messages are processed in chunks. Unset: host " + Sizes.format(Thresholds.STAGING_BYTES) + "; GPU: the native library's default. Env: `SPARKCOMMS_STAGING_BYTES`.");
  public static final Entry NAN_CHECK = entry("nanCheck", "false",
      "Scan the input of every collective but barrier and allToAllV (of broadcast and scatter: the root's) in host memory for NaN before the call; a NaN fails that call on every rank: `IllegalArgumentException` on the rank that holds it, `CommMismatchException` on its peers. Inputs in GPU memory are not scanned. Ranks may differ. Env: `SPARKCOMMS_NAN_CHECK`.");
  public static final Entry FLIGHT_RECORDER_SIZE = entry("flightRecorderSize", Integer.toString(CommOptions.DEFAULT_FLIGHT_RECORDER_SIZE),
      "How many of its last calls each communicator records (0..65536; 0: none). A call that times out, mismatches or is aborted logs them and attaches them to its exception, so the task's failure reason shows what the rank was doing. Ranks may differ. Env: `SPARKCOMMS_FLIGHT_RECORDER_SIZE`.");

  private static final Map<Entry, Collective> PER_COLLECTIVE_LP = Map.of(
      LOW_PRECISION_ALL_REDUCE, Collective.ALL_REDUCE,
      LOW_PRECISION_ALL_GATHER, Collective.ALL_GATHER,
      LOW_PRECISION_REDUCE_SCATTER, Collective.REDUCE_SCATTER,
      LOW_PRECISION_ALL_TO_ALL, Collective.ALL_TO_ALL);

  private static final String EXECUTOR_ENV_PREFIX = "spark.executorEnv.";

  private final Map<String, String> conf;

  private SparkCommsConf(Map<String, String> conf) { this.conf = conf; }

  /** A snapshot of {@code conf}. */
  public static SparkCommsConf of(SparkConf conf) { return of(toMap(conf)); }

  /** A snapshot of a Spark configuration given as a map of its entries. */
  public static SparkCommsConf of(Map<String, String> conf) {
    return new SparkCommsConf(Collections.unmodifiableMap(new HashMap<>(conf)));
  }

  /** Every documented key, in table order. */
  public static List<Entry> entries() { return Collections.unmodifiableList(ENTRIES); }

  /** The entry for {@code key}, if it is one of ours. */
  public static Optional<Entry> find(String key) {
    return ENTRIES.stream().filter(e -> e.key().equals(key)).findFirst();
  }

  /** All entries of a {@link SparkConf} as a map. */
  public static Map<String, String> toMap(SparkConf conf) {
    Map<String, String> m = new LinkedHashMap<>();
    for (Tuple2<String, String> t : conf.getAll()) m.put(t._1(), t._2());
    return m;
  }

  /** The raw value of {@code e} if set. */
  public Optional<String> raw(Entry e) { return Optional.ofNullable(conf.get(e.key())).map(String::trim); }

  /** The raw Spark configuration entry {@code key}, if set (any key, not only ours). */
  public Optional<String> sparkValue(String key) { return Optional.ofNullable(conf.get(key)).map(String::trim); }

  /** Keys under {@link #PREFIX} that are set but not documented here (typos, removed keys). */
  public List<String> unknownKeys() {
    List<String> out = new ArrayList<>();
    for (String k : conf.keySet()) if (k.startsWith(PREFIX) && find(k).isEmpty()) out.add(k);
    Collections.sort(out);
    return out;
  }

  public String resourceName() { return raw(RESOURCE_NAME).filter(s -> !s.isEmpty()).orElse(RESOURCE_NAME.defaultValue()); }

  public boolean numaAffinity() { return raw(NUMA_AFFINITY).flatMap(v -> bool(NUMA_AFFINITY, v))
      .orElseGet(() -> bool(NUMA_AFFINITY, NUMA_AFFINITY.defaultValue()).orElseThrow()); }

  public Duration gpuClaimCheckInterval() {
    return duration(GPU_CLAIM_CHECK_INTERVAL, raw(GPU_CLAIM_CHECK_INTERVAL).orElse(GPU_CLAIM_CHECK_INTERVAL.defaultValue()));
  }

  /** Whether the driver plugin refuses to start without {@code spark.authenticate=true} ({@link #REQUIRE_AUTHENTICATE}). */
  public boolean requireAuthenticate() {
    return raw(REQUIRE_AUTHENTICATE).flatMap(v -> bool(REQUIRE_AUTHENTICATE, v))
        .orElseGet(() -> bool(REQUIRE_AUTHENTICATE, REQUIRE_AUTHENTICATE.defaultValue()).orElseThrow());
  }

  /** Whether the barrier stages of {@code io.sparkcomms.spark.dataset} register and feed the stage page's accumulators ({@link #ACCUMULATORS_ENABLED}). */
  public boolean accumulatorsEnabled() {
    return raw(ACCUMULATORS_ENABLED).flatMap(v -> bool(ACCUMULATORS_ENABLED, v))
        .orElseGet(() -> bool(ACCUMULATORS_ENABLED, ACCUMULATORS_ENABLED.defaultValue()).orElseThrow());
  }

  /** How barrier tasks meet ({@link #RENDEZVOUS}). */
  public enum RendezvousMode { AUTO, RPC, BARRIER }

  public RendezvousMode rendezvous() {
    return enumValue(RENDEZVOUS, RendezvousMode.class, raw(RENDEZVOUS).filter(s -> !s.isEmpty()).orElse(RENDEZVOUS.defaultValue()));
  }

  /** {@link #NODE_NAMES}: executor id to node name; empty when unset. Raises naming the key on a malformed pair. */
  public Map<String, String> nodeNames() {
    Map<String, String> m = new java.util.LinkedHashMap<>();
    String v = raw(NODE_NAMES).orElse("");
    if (v.isEmpty()) return m;
    for (String pair : v.split(",")) {
      String p = pair.trim();
      int eq = p.indexOf('=');
      if (eq <= 0 || eq == p.length() - 1) {
        throw new IllegalArgumentException(NODE_NAMES.key() + ": '" + p + "' is not executorId=node");
      }
      m.put(p.substring(0, eq).trim(), p.substring(eq + 1).trim());
    }
    return m;
  }

  /** Communicator options layered over the current process environment. */
  public CommOptions commOptions() { return commOptions(System.getenv()); }

  /**
   * Communicator options: defaults, then {@code processEnv} overlaid with the conf's
   * {@code spark.executorEnv.*} entries, then the {@code spark.sparkcomms.*} keys that are set. A
   * malformed value raises {@link IllegalArgumentException} naming the key.
   */
  public CommOptions commOptions(Map<String, String> processEnv) {
    Map<String, String> env = new HashMap<>(processEnv);
    conf.forEach((k, v) -> {
      if (k.startsWith(EXECUTOR_ENV_PREFIX)) env.put(k.substring(EXECUTOR_ENV_PREFIX.length()), v);
    });
    CommOptions.Builder b = CommOptions.builder().applyEnvironment(env);
    apply(BACKEND, v -> b.backend(enumValue(BACKEND, CommOptions.Backend.class, v)));
    apply(ALGO, v -> b.algorithm(enumValue(ALGO, Algorithm.class, v)));
    apply(FLAT_MAX_BYTES, v -> bytes(FLAT_MAX_BYTES, v).ifPresent(b::flatMaxBytes));
    apply(TREE_MAX_BYTES, v -> bytes(TREE_MAX_BYTES, v).ifPresent(b::treeMaxBytes));
    apply(TIMEOUT, v -> b.timeout(duration(TIMEOUT, v)));
    apply(LOW_PRECISION, v -> bool(LOW_PRECISION, v).ifPresent(b::lowPrecision));
    PER_COLLECTIVE_LP.forEach((e, c) -> apply(e, v -> bool(e, v).ifPresent(on -> b.lowPrecision(c, on))));
    apply(LP_MIN_BYTES, v -> bytes(LP_MIN_BYTES, v).ifPresent(b::lpMinBytes));
    apply(FP8_FORMAT, v -> b.fp8Format(parse(FP8_FORMAT, v, Fp8Format::parse)));
    apply(LP_BLOCK_SIZE, v -> bytes(LP_BLOCK_SIZE, v).ifPresent(n -> b.lpBlockSize((int) Math.min(Integer.MAX_VALUE, n))));
    apply(LP_ONESHOT_MAX_RANKS, v -> bytes(LP_ONESHOT_MAX_RANKS, v).ifPresent(n -> b.lpOneShotMaxRanks((int) Math.min(Integer.MAX_VALUE, n))));
    apply(STAGING_BYTES, v -> bytes(STAGING_BYTES, v).ifPresent(b::stagingBytes));
    apply(NAN_CHECK, v -> bool(NAN_CHECK, v).ifPresent(b::nanCheck));
    apply(FLIGHT_RECORDER_SIZE, v -> bytes(FLIGHT_RECORDER_SIZE, v).ifPresent(n -> b.flightRecorderSize((int) Math.min(Integer.MAX_VALUE, n))));
    try {
      return b.build();
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException("sparkcomms configuration: " + e.getMessage(), e);
    }
  }

  /** The markdown table of every key, as generated into {@code docs/configuration.md}. */
  public static String markdownTable() {
    StringBuilder sb = new StringBuilder();
    sb.append("| Key | Default | Meaning |\n|---|---|---|\n");
    for (Entry e : ENTRIES) {
      sb.append("| `").append(e.key()).append("` | `").append(e.defaultValue()).append("` | ")
          .append(e.doc().replace("|", "\\|")).append(" |\n");
    }
    return sb.toString();
  }

  // ------------------------------------------------------------------ parsing helpers

  private interface Setter { void set(String value); }

  private interface Parser<T> { T parse(String value); }

  private void apply(Entry e, Setter setter) {
    Optional<String> v = raw(e);
    if (v.isEmpty()) return;
    try {
      setter.set(v.get());
    } catch (IllegalArgumentException | ArithmeticException ex) {
      if (ex.getMessage() != null && ex.getMessage().startsWith(e.key())) throw ex;
      throw new IllegalArgumentException(e.key() + "=" + v.get() + ": " + ex.getMessage(), ex);
    }
  }

  private static <T> T parse(Entry e, String v, Parser<T> p) {
    try {
      return p.parse(v.trim());
    } catch (RuntimeException ex) {
      throw new IllegalArgumentException(e.key() + "=" + v + ": " + ex.getMessage(), ex);
    }
  }

  /** A size or count in the grammar of {@link Sizes#parse} (the same text as its environment variable); empty when blank. */
  private static OptionalLong bytes(Entry e, String v) { return Sizes.parse(e.key(), v); }

  private static Duration duration(Entry e, String v) {
    return parse(e, v, s -> Duration.ofMillis(JavaUtils.timeStringAsMs(s)));
  }

  /** A switch in the grammar of {@link Flags#parse} (the same text as its environment variable); empty when blank. */
  static Optional<Boolean> bool(Entry e, String v) { return Flags.parse(e.key(), v); }

  private static <E extends Enum<E>> E enumValue(Entry e, Class<E> type, String v) {
    try {
      return Enum.valueOf(type, v.trim().toUpperCase(Locale.ROOT));
    } catch (IllegalArgumentException ex) {
      List<String> names = new ArrayList<>();
      for (E c : type.getEnumConstants()) names.add(c.name().toLowerCase(Locale.ROOT));
      throw new IllegalArgumentException(e.key() + "=" + v + ": expected one of " + names);
    }
  }

  private static Entry entry(String shortName, String defaultValue, String doc) {
    Entry e = new Entry(PREFIX + shortName, defaultValue, doc);
    ENTRIES.add(e);
    return e;
  }
}
