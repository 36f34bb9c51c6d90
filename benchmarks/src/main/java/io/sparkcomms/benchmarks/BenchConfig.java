package io.sparkcomms.benchmarks;

import io.sparkcomms.collectives.Algorithm;
import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.Sizes;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * The benchmark's command line, parsed and validated. {@link #toArgs()} gives the canonical form the
 * launcher hands to its rank processes, so every rank runs exactly the same configuration.
 */
final class BenchConfig {
  /** What the user asked for, as opposed to a real run. */
  static final class UsageException extends RuntimeException {
    UsageException(String msg) { super(msg); }
  }

  enum Baseline { NONE, TCP, VENDOR }

  /**
   * WALL: each rank's wall time per synchronous call (every backend and collective). DEVICE: the GPU
   * allReduce table of {@code io.sparkcomms.collectives.gpu.GpuBench}, device-event time per call over
   * back-to-back launches, with flat, tree, auto and the vendor library in every row.
   */
  enum Timing { WALL, DEVICE }

  /** The options that {@link Timing#DEVICE} takes; GpuBench picks its own iterations, warm-up and inputs. */
  private static final Set<String> DEVICE_OPTIONS = Set.of("-b", "-e", "-f", "-d", "-o", "-c", "--backend", "--ranks",
      "--algo", "--baseline", "--staging", "--csv", "--timing");

  static final long MAX_BYTES = 1L << 30;

  long minBytes = 1L << 10;
  long maxBytes = 64L << 20;
  long factor = 4;
  int warmup = 5;
  /** Warm-up time per row: rounds of doubling call counts until the slowest rank spent this long (JIT). */
  double warmupSeconds = 0.5;
  /** Timed iterations per row; 0 means auto (about {@link #targetSeconds} per row). */
  int iters = 0;
  double targetSeconds = 0.2;
  int minIters = 3;
  int maxIters = 1000;
  DataType dtype = DataType.FLOAT32;
  ReduceOp op = ReduceOp.SUM;
  Collective collective = Collective.ALL_REDUCE;
  /** Root rank of broadcast, reduce, gather and scatter. */
  int root = 0;
  CommOptions.Backend backend = CommOptions.Backend.HOST;
  int ranks = 2;
  /** Requested algorithms, in row order (AUTO, or any of FLAT / TREE / LP). */
  List<Algorithm> algorithms = new ArrayList<>(List.of(Algorithm.AUTO));
  Baseline baseline = Baseline.NONE;
  Timing timing = Timing.WALL;
  Long stagingBytes;
  Integer lpBlockSize;
  Path csv;
  Long seed;
  int timeoutSeconds = 3600;
  boolean help;
  /** The options given on the command line, by their short name where they have one. */
  final Set<String> given = new LinkedHashSet<>();

  static String usage() {
    return String.join("\n",
        "usage: sparkcomms-bench [options]",
        "",
        "Launches --ranks rank processes on this host and times a collective over a range of sizes,",
        "checking every result against a float64 reference (rccl-tests style).",
        "",
        "  -b, --minbytes SIZE     smallest message (default 1K; suffixes K, M, G)",
        "  -e, --maxbytes SIZE     largest message (default 64M, at most 1G)",
        "  -f, --stepfactor N      multiply the size by N each step (default 4)",
        "  -w, --warmup_iters N    warm-up calls per row, at least (default 5)",
        "      --warmup-time SEC   and at least this long per row, in rounds of doubling counts, so the",
        "                          JIT has compiled the call path before the timed calls (default 0.5)",
        "  -n, --iters N|auto      timed calls per row (default auto: --target-time / median warm-up call,",
        "                          at least --min-iters, at most --max-iters)",
        "      --target-time SEC   time per row for -n auto (default 0.2)",
        "      --min-iters N       (default 3)      --max-iters N   (default 1000)",
        "  -d, --datatype T        float32|bfloat16|float16|float64|int32|int64 (default float32)",
        "  -o, --op OP             sum|avg|min|max|prod|premul_sum(f) (default sum)",
        "  -c, --collective C      allreduce|allgather|reducescatter|alltoall|broadcast|reduce|gather|",
        "                          scatter|allgatherv|reducescatterv|sendrecv (default allreduce); sizes",
        "                          and bandwidths of each below; sendrecv: one batch per call in which",
        "                          each rank sends to rank+1 and receives from rank-1 (nccl-tests'",
        "                          sendrecv_perf)",
        "      --root R            root rank of broadcast, reduce, gather and scatter (default 0); the",
        "                          other ranks pass null for the tensor they do not use",
        "      --backend B         host|gpu (default host)",
        "      --ranks N           rank processes to launch (default 2)",
        "      --algo A            auto|flat|tree|lp|all, or a comma list; all = flat,tree,lp (default auto)",
        "      --baseline B        none|tcp|vendor (default none). tcp: the naive path, every rank sends",
        "                          its array to rank 0 over loopback TCP, rank 0 reduces and sends the",
        "                          result back (allreduce only). vendor: NCCL/RCCL (gpu backend only;",
        "                          allreduce, allgather, reducescatter, broadcast)",
        "      --staging SIZE      per-rank staging buffer (default: the backend's, docs/configuration.md)",
        "      --lp-block N        elements per FP8 scale (default 128)",
        "      --timing T          wall|device (default wall). wall: each rank's wall time per synchronous",
        "                          call. device (--backend gpu, allreduce, sum): the GPU allReduce table,",
        "                          device-event time per call over back-to-back launches, flat, tree, auto",
        "                          and NCCL/RCCL in every row; takes -b -e -f -d --ranks --staging --csv",
        "      --csv FILE          also write the rows to FILE as CSV",
        "      --seed N            base seed of the random inputs (default: from the clock)",
        "      --timeout SEC       give up on the whole run after SEC seconds (default 3600)",
        "  -h, --help              this text",
        "",
        "Size of a row (nccl-tests convention: the call's largest buffer, in bytes, rounded down to whole",
        "elements and, where the buffer is split over the n ranks, to a multiple of n):",
        "  allreduce, broadcast, reduce, sendrecv: a rank's input; allgather, gather: the output, n times a rank's",
        "  input; reducescatter, scatter: the input, n times a rank's output; alltoall: a rank's input.",
        "  allgatherv, reducescatterv: the total T of the per-rank counts; rank r gets a share of T",
        "  proportional to r+1, count[r] = floor(T*S(r+1)/S(n)) - floor(T*S(r)/S(n)) with",
        "  S(k) = k(k+1)/2, so the counts add up to T; a rank whose share is under one element gets 0",
        "  (2 ranks, 1K float32: 85 and 171 elements).",
        "algbw = size / time; busbw = algbw * factor (nccl-tests' PERFORMANCE.md): allreduce 2(n-1)/n;",
        "  allgather, allgatherv, reducescatter, reducescatterv, alltoall, gather, scatter (n-1)/n;",
        "  broadcast, reduce, sendrecv 1.",
        "",
        "  --spark [--master URL] [--backend host|gpu] [-b SIZE] [-e SIZE] [-n N] [-w N] [--ranks N] [--csv FILE]",
        "                          instead: the barrier-stage allReduce sweep inside Spark (float32 sum, sizes",
        "                          doubling), through SparkSubmit with the sparkcomms plugin; default master",
        "                          local-cluster[2,1,1024]",
        "",
        "Environment variables of CommOptions (RCCL_LOW_PRECISION_ENABLE, SPARKCOMMS_*) apply first;",
        "the flags above override them.",
        "Exit status: 0 ok, 1 a rank failed or a result was wrong, 2 usage error or backend unavailable.");
  }

  /** Every option that takes a value (each is a case of {@link #parse}). */
  private static final Set<String> VALUE_OPTIONS = Set.of(
      "-b", "--minbytes", "-e", "--maxbytes", "-f", "--stepfactor", "-w", "--warmup_iters", "--warmup",
      "-n", "--iters", "--target-time", "--warmup-time", "--min-iters", "--max-iters", "-d", "--datatype", "--dtype",
      "-o", "--op", "-c", "--collective", "--root", "--backend", "--ranks", "--algo", "--baseline", "--timing",
      "--staging", "--lp-block", "--csv", "--seed", "--timeout");

  static BenchConfig parse(String[] args) {
    BenchConfig c = new BenchConfig();
    for (int i = 0; i < args.length; i++) {
      String a = args[i];
      String v = null;
      int eq = a.indexOf('=');
      if (a.startsWith("--") && eq > 0) {
        v = a.substring(eq + 1);
        a = a.substring(0, eq);
      }
      if (a.equals("-h") || a.equals("--help")) {
        c.help = true;
        continue;
      }
      if (a.equals("--spark")) throw new UsageException("--spark is run by bin/sparkcomms-bench (through SparkSubmit)");
      if (!VALUE_OPTIONS.contains(a)) throw new UsageException("unknown option " + a);
      if (v == null) {
        if (i + 1 >= args.length) throw new UsageException(a + " needs a value");
        v = args[++i];
      }
      c.given.add(shortName(a));
      try {
        switch (a) {
          case "-b": case "--minbytes": c.minBytes = Sizes.parseBytes(v); break;
          case "-e": case "--maxbytes": c.maxBytes = Sizes.parseBytes(v); break;
          case "-f": case "--stepfactor": c.factor = Long.parseLong(v.trim()); break;
          case "-w": case "--warmup_iters": case "--warmup": c.warmup = Integer.parseInt(v.trim()); break;
          case "-n": case "--iters":
            c.iters = v.trim().equalsIgnoreCase("auto") ? 0 : Integer.parseInt(v.trim());
            if (c.iters < 0 || (c.iters == 0 && !v.trim().equalsIgnoreCase("auto"))) throw new UsageException("-n must be >= 1 or auto, got " + v);
            break;
          case "--target-time": c.targetSeconds = Double.parseDouble(v.trim()); break;
          case "--warmup-time": c.warmupSeconds = Double.parseDouble(v.trim()); break;
          case "--min-iters": c.minIters = Integer.parseInt(v.trim()); break;
          case "--max-iters": c.maxIters = Integer.parseInt(v.trim()); break;
          case "-d": case "--datatype": case "--dtype": c.dtype = parseDtype(v); break;
          case "-o": case "--op": c.op = ReduceOp.parse(v); break;
          case "-c": case "--collective": c.collective = parseCollective(v); break;
          case "--root": c.root = Integer.parseInt(v.trim()); break;
          case "--backend": c.backend = parseBackend(v); break;
          case "--ranks": c.ranks = Integer.parseInt(v.trim()); break;
          case "--algo": c.algorithms = parseAlgos(v); break;
          case "--baseline": c.baseline = parseBaseline(v); break;
          case "--timing": c.timing = parseTiming(v); break;
          case "--staging": c.stagingBytes = Sizes.parseBytes(v); break;
          case "--lp-block": c.lpBlockSize = Integer.parseInt(v.trim()); break;
          case "--csv": c.csv = Paths.get(v).toAbsolutePath(); break;
          case "--seed": c.seed = Long.decode(v.trim()); break;
          case "--timeout": c.timeoutSeconds = Integer.parseInt(v.trim()); break;
          default: throw new UsageException("unknown option " + a);
        }
      } catch (NumberFormatException e) {
        throw new UsageException(a + ": not a number: '" + v + "'");
      } catch (UsageException e) {
        throw e;
      } catch (IllegalArgumentException e) {
        throw new UsageException(a + ": " + e.getMessage());
      }
    }
    if (!c.help) c.validate();
    return c;
  }

  /** The short name of an option that has one (-b for --minbytes), else the option itself. */
  private static String shortName(String a) {
    switch (a) {
      case "--minbytes": return "-b";
      case "--maxbytes": return "-e";
      case "--stepfactor": return "-f";
      case "--warmup_iters": case "--warmup": return "-w";
      case "--iters": return "-n";
      case "--datatype": case "--dtype": return "-d";
      case "--op": return "-o";
      case "--collective": return "-c";
      default: return a;
    }
  }

  private void validate() {
    if (minBytes < 1) throw new UsageException("-b must be at least 1 byte");
    if (maxBytes < minBytes) throw new UsageException("-e (" + maxBytes + ") is below -b (" + minBytes + ")");
    if (maxBytes > MAX_BYTES) throw new UsageException("-e above 1G is not supported (Java arrays hold the data)");
    if (factor < 2) throw new UsageException("-f must be >= 2, got " + factor);
    if (warmup < 0) throw new UsageException("-w must be >= 0, got " + warmup);
    if (minIters < 1 || maxIters < minIters) throw new UsageException("need 1 <= --min-iters <= --max-iters");
    if (!(targetSeconds > 0)) throw new UsageException("--target-time must be positive");
    if (!(warmupSeconds >= 0)) throw new UsageException("--warmup-time must be >= 0");
    if (ranks < 1 || ranks > 64) throw new UsageException("--ranks must be in 1..64, got " + ranks);
    if (timeoutSeconds < 1) throw new UsageException("--timeout must be >= 1 second");
    if (reduces() && !op.supports(dtype)) throw new UsageException("op " + opName() + " is not defined for " + typeName());
    if (collective == Collective.BATCH && ranks < 2) throw new UsageException("sendrecv needs two ranks or more (--ranks)");
    if (given.contains("--root") && !collective.isRooted()) {
      throw new UsageException("--root is for broadcast, reduce, gather and scatter, not " + collectiveName());
    }
    if (root < 0 || root >= ranks) throw new UsageException("--root must be in 0.." + (ranks - 1) + " (--ranks " + ranks + "), got " + root);
    if (baseline == Baseline.TCP && collective != Collective.ALL_REDUCE) {
      throw new UsageException("--baseline tcp covers allreduce only, not " + collectiveName()
          + " (leave out --baseline)");
    }
    if (baseline == Baseline.VENDOR && backend != CommOptions.Backend.GPU) {
      throw new UsageException("--baseline vendor needs --backend gpu (NCCL/RCCL)");
    }
    if (baseline == Baseline.VENDOR && !collective.hasVendorVariant()) {
      // the planner runs such a call as FLAT: the row would repeat the library's own
      throw new UsageException("--baseline vendor covers allreduce, allgather, reducescatter and broadcast, not "
          + collectiveName() + " (NCCL/RCCL is not used for it; leave out --baseline)");
    }
    if (timing == Timing.DEVICE) {
      if (backend != CommOptions.Backend.GPU) throw new UsageException("--timing device needs --backend gpu");
      if (collective != Collective.ALL_REDUCE || op.kind() != ReduceOp.Kind.SUM) {
        throw new UsageException("--timing device measures allreduce with op sum only");
      }
      if (!algorithms.equals(List.of(Algorithm.AUTO))) {
        throw new UsageException("--timing device measures flat, tree, auto and the vendor library in every row: leave out --algo");
      }
      if (baseline == Baseline.TCP) throw new UsageException("--baseline tcp is only for --timing wall");
      for (String g : given) {
        if (!DEVICE_OPTIONS.contains(g)) throw new UsageException("--timing device does not take " + g);
      }
    }
    // Option values are checked by the builder: fail here, not in the ranks.
    options(algorithms.get(0), System.getenv());
  }

  /** Whether the collective takes a reduce op. */
  boolean reduces() {
    return collective == Collective.ALL_REDUCE || collective == Collective.REDUCE_SCATTER || collective == Collective.REDUCE
        || collective == Collective.REDUCE_SCATTER_V;
  }

  /**
   * The bus bandwidth factor of nccl-tests (its PERFORMANCE.md; busbw = algbw * factor, algbw = size
   * / time, size as in {@link BenchData.Layout#of}): what each rank's link must carry relative to the
   * size, so that busbw is comparable across rank counts. allreduce 2(n-1)/n; allgather, allgatherv,
   * reducescatter, reducescatterv, alltoall, gather and scatter (n-1)/n (size: the n-rank total);
   * broadcast and reduce 1.
   */
  static double busFactor(Collective c, int n) {
    switch (c) {
      case ALL_REDUCE: return 2.0 * (n - 1) / n;
      case BROADCAST: case REDUCE: case BATCH: return 1.0;
      case ALL_GATHER: case ALL_GATHER_V: case REDUCE_SCATTER: case REDUCE_SCATTER_V: case ALL_TO_ALL:
      case GATHER: case SCATTER:
        return (double) (n - 1) / n;
      default: throw new IllegalArgumentException(c.apiName());
    }
  }

  /** {@link #busFactor} as a formula, for the header. */
  static String busFactorFormula(Collective c) {
    switch (c) {
      case ALL_REDUCE: return "2(n-1)/n";
      case BROADCAST: case REDUCE: case BATCH: return "1";
      default: return "(n-1)/n";
    }
  }

  /** The op as printed in rows: sum, avg, min, max, prod, premul_sum(f); "none" for copies. */
  String opName() {
    if (!reduces()) return "none";
    return op.kind() == ReduceOp.Kind.PRODUCT ? "prod" : op.toString().toLowerCase(Locale.ROOT);
  }

  String typeName() { return dtype.name().toLowerCase(Locale.ROOT); }

  String collectiveName() { return collective == Collective.BATCH ? "sendrecv" : collective.apiName().toLowerCase(Locale.ROOT); }

  /** The message sizes: min, min*f, ... up to max. */
  List<Long> sizes() {
    List<Long> s = new ArrayList<>();
    for (long b = minBytes; b <= maxBytes; b = Math.multiplyExact(b, factor)) {
      s.add(b);
      if (b > maxBytes / factor) break;
    }
    return s;
  }

  /** The communicator options of one algorithm: environment first, then the flags. */
  CommOptions options(Algorithm a, Map<String, String> env) {
    try {
      CommOptions.Builder b = CommOptions.builder().applyEnvironment(env);
      b.backend(backend).algorithm(a);
      if (stagingBytes != null) b.stagingBytes(stagingBytes);
      if (lpBlockSize != null) b.lpBlockSize(lpBlockSize);
      return b.build();
    } catch (IllegalArgumentException e) {
      throw new UsageException("invalid options: " + e.getMessage());
    }
  }

  Duration timeout() { return Duration.ofSeconds(timeoutSeconds); }

  /** The command line of {@code GpuBench} for {@link Timing#DEVICE}. */
  List<String> gpuBenchArgs() {
    List<String> a = new ArrayList<>();
    add(a, "--ranks", Integer.toString(ranks));
    add(a, "-b", Long.toString(minBytes));
    add(a, "-e", Long.toString(maxBytes));
    add(a, "-f", Long.toString(factor));
    add(a, "-d", typeName());
    if (stagingBytes != null) add(a, "--staging", Long.toString(stagingBytes));
    if (csv != null) add(a, "--csv", csv.toString());
    return a;
  }

  /** The canonical command line of this configuration (what the rank processes are given). */
  List<String> toArgs() {
    List<String> a = new ArrayList<>();
    add(a, "-b", Long.toString(minBytes));
    add(a, "-e", Long.toString(maxBytes));
    add(a, "-f", Long.toString(factor));
    add(a, "-w", Integer.toString(warmup));
    add(a, "-n", iters == 0 ? "auto" : Integer.toString(iters));
    add(a, "--target-time", Double.toString(targetSeconds));
    add(a, "--warmup-time", Double.toString(warmupSeconds));
    add(a, "--min-iters", Integer.toString(minIters));
    add(a, "--max-iters", Integer.toString(maxIters));
    add(a, "-d", typeName());
    add(a, "-o", op.kind() == ReduceOp.Kind.PREMUL_SUM ? "premul_sum(" + op.factor() + ")" : op.kind().name().toLowerCase(Locale.ROOT));
    add(a, "-c", collectiveName());
    if (collective.isRooted()) add(a, "--root", Integer.toString(root));
    add(a, "--backend", backend.name().toLowerCase(Locale.ROOT));
    add(a, "--ranks", Integer.toString(ranks));
    add(a, "--algo", algoList());
    add(a, "--baseline", baseline.name().toLowerCase(Locale.ROOT));
    if (stagingBytes != null) add(a, "--staging", Long.toString(stagingBytes));
    if (lpBlockSize != null) add(a, "--lp-block", Integer.toString(lpBlockSize));
    if (csv != null) add(a, "--csv", csv.toString());
    if (seed != null) add(a, "--seed", Long.toString(seed));
    add(a, "--timeout", Integer.toString(timeoutSeconds));
    return a;
  }

  String algoList() {
    List<String> s = new ArrayList<>();
    for (Algorithm x : algorithms) s.add(x.name().toLowerCase(Locale.ROOT));
    return String.join(",", s);
  }

  private static void add(List<String> a, String k, String v) {
    a.add(k);
    a.add(v);
  }

  static DataType parseDtype(String v) {
    switch (v.trim().toLowerCase(Locale.ROOT)) {
      case "float32": case "float": case "fp32": case "f32": return DataType.FLOAT32;
      case "bfloat16": case "bf16": return DataType.BFLOAT16;
      case "float16": case "half": case "fp16": case "f16": return DataType.FLOAT16;
      case "float64": case "double": case "fp64": case "f64": return DataType.FLOAT64;
      case "int32": case "int": case "i32": return DataType.INT32;
      case "int64": case "long": case "i64": return DataType.INT64;
      default: throw new UsageException("unknown dtype '" + v + "' (float32|bfloat16|float16|float64|int32|int64)");
    }
  }

  static Collective parseCollective(String v) {
    switch (v.trim().toLowerCase(Locale.ROOT).replace("_", "").replace("-", "")) {
      case "allreduce": return Collective.ALL_REDUCE;
      case "allgather": return Collective.ALL_GATHER;
      case "reducescatter": return Collective.REDUCE_SCATTER;
      case "alltoall": return Collective.ALL_TO_ALL;
      case "broadcast": case "bcast": return Collective.BROADCAST;
      case "reduce": return Collective.REDUCE;
      case "gather": return Collective.GATHER;
      case "scatter": return Collective.SCATTER;
      case "allgatherv": return Collective.ALL_GATHER_V;
      case "reducescatterv": return Collective.REDUCE_SCATTER_V;
      case "sendrecv": return Collective.BATCH;
      default: throw new UsageException("unknown collective '" + v
          + "' (allreduce|allgather|reducescatter|alltoall|broadcast|reduce|gather|scatter|allgatherv|reducescatterv|sendrecv)");
    }
  }

  static CommOptions.Backend parseBackend(String v) {
    switch (v.trim().toLowerCase(Locale.ROOT)) {
      case "host": return CommOptions.Backend.HOST;
      case "gpu": return CommOptions.Backend.GPU;
      default: throw new UsageException("unknown backend '" + v + "' (host|gpu)");
    }
  }

  static Timing parseTiming(String v) {
    switch (v.trim().toLowerCase(Locale.ROOT)) {
      case "wall": return Timing.WALL;
      case "device": return Timing.DEVICE;
      default: throw new UsageException("unknown timing '" + v + "' (wall|device)");
    }
  }

  static Baseline parseBaseline(String v) {
    switch (v.trim().toLowerCase(Locale.ROOT)) {
      case "none": return Baseline.NONE;
      case "tcp": return Baseline.TCP;
      case "vendor": case "nccl": case "rccl": return Baseline.VENDOR;
      default: throw new UsageException("unknown baseline '" + v + "' (none|tcp|vendor)");
    }
  }

  static List<Algorithm> parseAlgos(String v) {
    List<Algorithm> out = new ArrayList<>();
    for (String part : v.split(",")) {
      String p = part.trim().toLowerCase(Locale.ROOT);
      List<Algorithm> add;
      switch (p) {
        case "auto": add = List.of(Algorithm.AUTO); break;
        case "flat": add = List.of(Algorithm.FLAT); break;
        case "tree": add = List.of(Algorithm.TREE); break;
        case "lp": add = List.of(Algorithm.LP); break;
        case "all": add = List.of(Algorithm.FLAT, Algorithm.TREE, Algorithm.LP); break;
        default: throw new UsageException("unknown algorithm '" + part + "' (auto|flat|tree|lp|all)");
      }
      for (Algorithm a : add) if (!out.contains(a)) out.add(a);
    }
    if (out.isEmpty()) throw new UsageException("--algo needs at least one algorithm");
    return out;
  }
}
