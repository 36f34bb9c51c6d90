package io.sparkcomms.collectives.reliability;

import io.sparkcomms.collectives.Algorithm;
import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.CollectiveChecker;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.CommStats;
import io.sparkcomms.collectives.Protocol;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.Comms;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.Tensor;
import io.sparkcomms.collectives.Work;
import io.sparkcomms.collectives.rendezvous.FileRendezvous;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * Soak: many mixed collectives across rank processes, every result checked on every rank (inputs are
 * pure functions of seed, call, rank and element, so each rank computes the reference of its own
 * output). Calls vary collective, dtype, op, size (log-uniform 1..maxElems elements), data shape,
 * communicator (AUTO with FP8 enabled, forced FLAT, TREE, LP; small staging areas so large calls are
 * chunked), in-place or not, sync or async. Each rank reports RSS (VmRSS) after set-up, after warm-up
 * and at the end with a fixed, pre-touched heap (so growth is off-heap: mappings, direct memory), its
 * segment mappings, descriptors and threads; the launcher looks for this run's /dev/shm entries after
 * it (created by one of its ranks, by the creator record; other programs' come and go meanwhile).
 *
 * <pre>
 * launcher: SoakMain [--ranks 4] [--calls 100000] [--max-elems 262144] [--seed S] [--heap-mb 512]
 * rank:     SoakMain --rank R --dir D --ranks N --calls C --max-elems M --seed S
 * </pre>
 */
public final class SoakMain {
  private SoakMain() {}

  /** Launcher settings. */
  public static final class Config {
    public int ranks = 4;
    public long calls = 100_000;
    public int maxElems = 256 << 10;
    public long seed = System.nanoTime();
    public int heapMb = 512;
    public long timeoutMs = 60_000;
    public PrintStream progress;
  }

  /** What the launcher saw. */
  public static final class Result {
    public final List<Map<String, String>> ranks = new ArrayList<>();
    public final List<String> failures = new ArrayList<>();
    /** Every program's sparkcomms-* entries in /dev/shm, before and after the run. */
    public Set<String> shmBefore;
    public Set<String> shmAfter;
    /** This run's entries left in /dev/shm after it (see {@link #launch}). */
    public Set<String> left;
    public long wallMs;
    public Config config;

    public long sum(String key) { return ranks.stream().mapToLong(m -> Long.parseLong(m.getOrDefault(key, "0"))).sum(); }
    public long max(String key) { return ranks.stream().mapToLong(m -> Long.parseLong(m.getOrDefault(key, "0"))).max().orElse(0); }

    public List<String> problems() {
      List<String> p = new ArrayList<>(failures);
      if (ranks.size() != config.ranks) p.add("only " + ranks.size() + " of " + config.ranks + " ranks reported");
      if (sum("wrong") > 0) p.add(sum("wrong") + " wrong element(s)");
      if (max("mapsAfterClose") > 0) p.add("segment mappings left after close");
      if (max("mappedAfterClose") > 0) p.add("mapped buffers left after close");
      if (!left.isEmpty()) p.add("left in /dev/shm: " + left);
      for (Map<String, String> m : ranks) {
        if (Long.parseLong(m.get("calls")) != config.calls) p.add("rank " + m.get("rank") + " made " + m.get("calls") + " calls");
      }
      return p;
    }

    public String table() {
      StringBuilder b = new StringBuilder();
      b.append("| rank | calls checked | wrong | RSS MiB: set-up / after warm-up / end | growth after warm-up MiB "
          + "| segment mappings open / after close | fds start / end | threads start / end | s |\n");
      b.append("|---:|---:|---:|---|---:|---|---|---|---:|\n");
      for (Map<String, String> m : ranks) {
        b.append(String.format(Locale.ROOT, "| %s | %s | %s | %.0f / %.0f / %.0f | %+.1f | %s / %s | %s / %s | %s / %s | %s |%n",
            m.get("rank"), m.get("calls"), m.get("wrong"), kb(m, "rssStart"), kb(m, "rssWarm"), kb(m, "rssEnd"),
            kb(m, "rssEnd") - kb(m, "rssWarm"), m.get("mapsOpen"), m.get("mapsAfterClose"), m.get("fdsStart"), m.get("fdsEnd"),
            m.get("threadsStart"), m.get("threadsEnd"), m.get("seconds")));
      }
      Map<String, Long> algos = new LinkedHashMap<>();
      Map<String, Long> kinds = new LinkedHashMap<>();
      if (!ranks.isEmpty()) {
        for (String k : ranks.get(0).keySet()) {
          if (k.startsWith("algo.")) algos.put(k.substring(5), Long.parseLong(ranks.get(0).get(k)));
          if (k.startsWith("kind.")) kinds.put(k.substring(5), Long.parseLong(ranks.get(0).get(k)));
        }
      }
      b.append("\nCalls per collective (each rank): ").append(kinds).append("; per algorithm: ").append(algos)
          .append("; async: ").append(ranks.isEmpty() ? "-" : ranks.get(0).get("async")).append('\n');
      b.append(String.format(Locale.ROOT, "/dev/shm sparkcomms-* entries (any program's): %d before, %d after; this run's left: %d."
              + " %d ranks, sizes 1..%d elements, seed %d, wall %.0f s%n",
          shmBefore.size(), shmAfter.size(), left.size(), config.ranks, config.maxElems, config.seed, wallMs / 1000.0));
      return b.toString();
    }

    private static double kb(Map<String, String> m, String k) { return Long.parseLong(m.get(k)) / 1024.0; }
  }

  // ------------------------------------------------------------------ launcher

  public static Result launch(Config cfg) {
    Result res = new Result();
    res.config = cfg;
    long t0 = System.nanoTime();
    res.shmBefore = ShmProbe.segments();
    Path dir = FileRendezvous.createDirectory();
    List<Process> ps = new ArrayList<>();
    List<CompletableFuture<List<String>>> outs = new ArrayList<>();
    try {
      for (int r = 0; r < cfg.ranks; r++) {
        ProcessBuilder pb = new ProcessBuilder(ShmProbe.javaBinary(), "-Xms" + cfg.heapMb + "m", "-Xmx" + cfg.heapMb + "m",
            "-XX:+AlwaysPreTouch", "-XX:+UseSerialGC", "-Xss4m", "-cp", System.getProperty("java.class.path"),
            SoakMain.class.getName(), "--rank", "" + r, "--dir", dir.toString(), "--ranks", "" + cfg.ranks,
            "--calls", "" + cfg.calls, "--max-elems", "" + cfg.maxElems, "--seed", "" + cfg.seed, "--timeout-ms", "" + cfg.timeoutMs);
        pb.redirectErrorStream(true);
        Process p = pb.start();
        ps.add(p);
        final boolean echo = r == 0;
        outs.add(CompletableFuture.supplyAsync(() -> {
          List<String> lines = new ArrayList<>();
          try (BufferedReader rd = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
            for (String l; (l = rd.readLine()) != null; ) {
              lines.add(l);
              if (cfg.progress != null && (echo && l.startsWith("PROGRESS") || l.startsWith("WRONG") || l.startsWith("FAIL"))) {
                cfg.progress.println(l);
              }
            }
          } catch (IOException e) {
            lines.add("FAIL IO " + e);
          }
          return lines;
        }));
      }
      for (int r = 0; r < cfg.ranks; r++) {
        Process p = ps.get(r);
        List<String> lines;
        try {
          if (!p.waitFor(7, TimeUnit.DAYS)) throw new IllegalStateException("rank " + r + " did not finish");
          lines = outs.get(r).get();
        } catch (Exception e) {
          throw new IllegalStateException(e);
        }
        if (p.exitValue() != 0) res.failures.add("rank " + r + " exited " + p.exitValue() + ": " + tail(lines));
        for (String l : lines) {
          if (l.startsWith("RESULT ")) res.ranks.add(parse(l));
          if (l.startsWith("FAIL")) res.failures.add("rank " + r + ": " + l);
        }
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } finally {
      ps.forEach(Process::destroyForcibly);
      ShmProbe.deleteTree(dir);
    }
    res.shmAfter = ShmProbe.segments();
    // This run's: created by one of its ranks (a segment's first bytes are its creator's pid), or
    // without that record yet and new. One without the record may be another program's, caught the
    // moment it was created: it gets its record (or is gone) at once, so only what stays ours for 3 s counts.
    Set<Long> pids = new java.util.HashSet<>();
    for (Process p : ps) pids.add(p.pid());
    res.left = new java.util.TreeSet<>();
    for (String n : res.shmAfter) if (ours(n, pids, res.shmBefore)) res.left.add(n);
    for (int i = 0; i < 30 && !res.left.isEmpty(); i++) {
      java.util.concurrent.locks.LockSupport.parkNanos(100_000_000L);
      res.left.removeIf(n -> !Files.exists(ShmProbe.SHM.resolve(n)) || !ours(n, pids, res.shmBefore));
    }
    res.wallMs = (System.nanoTime() - t0) / 1_000_000;
    return res;
  }

  /** Whether /dev/shm entry {@code name} was created by one of {@code pids}, or has no creator record and is not in {@code before}. */
  private static boolean ours(String name, Set<Long> pids, Set<String> before) {
    long pid = ShmProbe.creatorPid(ShmProbe.SHM.resolve(name));
    return pid != 0 ? pids.contains(pid) : !before.contains(name);
  }

  private static String tail(List<String> lines) {
    return String.join(" | ", lines.subList(Math.max(0, lines.size() - 5), lines.size()));
  }

  private static Map<String, String> parse(String line) {
    Map<String, String> m = new LinkedHashMap<>();
    for (String kv : line.substring(7).trim().split(" ")) {
      int eq = kv.indexOf('=');
      if (eq > 0) m.put(kv.substring(0, eq), kv.substring(eq + 1));
    }
    return m;
  }

  // ------------------------------------------------------------------ one rank

  private static final Collective[] KINDS = {
      Collective.ALL_REDUCE, Collective.ALL_REDUCE, Collective.ALL_REDUCE, Collective.ALL_REDUCE,
      Collective.ALL_GATHER, Collective.REDUCE_SCATTER, Collective.ALL_TO_ALL, Collective.BROADCAST, Collective.BARRIER,
      Collective.ALL_TO_ALL_V};

  private static final Algorithm[] COMMS = {Algorithm.AUTO, Algorithm.FLAT, Algorithm.TREE, Algorithm.LP};

  static int rankMain(Map<String, String> a) throws IOException {
    WorkerMain.startOrphanWatchdog();
    int rank = Integer.parseInt(a.get("--rank"));
    int n = Integer.parseInt(a.get("--ranks"));
    long calls = Long.parseLong(a.get("--calls"));
    int maxElems = Integer.parseInt(a.get("--max-elems"));
    long seed = Long.parseLong(a.get("--seed"));
    Duration timeout = Duration.ofMillis(Long.parseLong(a.get("--timeout-ms")));
    Path dir = Paths.get(a.get("--dir"));
    long t0 = System.nanoTime();
    Communicator[] comms = new Communicator[COMMS.length];
    for (int k = 0; k < COMMS.length; k++) {
      CommOptions.Builder o = CommOptions.builder().backend(CommOptions.Backend.HOST).algorithm(COMMS[k]).timeout(timeout)
          .stagingBytes(256 << 10);
      if (COMMS[k] == Algorithm.AUTO) o.stagingBytes(1 << 20).lowPrecision(true).lpMinBytes(512 << 10).flatMaxBytes(64 << 10);
      Path sub = Files.createDirectories(dir.resolve(COMMS[k].name()));
      comms[k] = Comms.create(new FileRendezvous(sub, rank, n), o.build());
    }
    CollectiveChecker[] sync = new CollectiveChecker[COMMS.length];
    CollectiveChecker[] async = new CollectiveChecker[COMMS.length];
    Communicator[] viaAsync = new Communicator[COMMS.length];
    for (int k = 0; k < COMMS.length; k++) {
      viaAsync[k] = new ViaAsync(comms[k]);
      sync[k] = new CollectiveChecker(comms[k], seed + 2L * k);
      async[k] = new CollectiveChecker(viaAsync[k], seed + 2L * k + 1);
    }
    System.gc();
    long rssStart = ShmProbe.rssKb(), fdsStart = ShmProbe.openFds(), threadsStart = ShmProbe.status("Threads");
    long mapsOpen = ShmProbe.segmentMappings();
    long rssWarm = rssStart;
    long warmUp = Math.max(1, calls / 10);
    SplittableRandom rnd = new SplittableRandom(seed);
    Map<Collective, Long> byKind = new EnumMap<>(Collective.class);
    long asyncCalls = 0, wrong = 0;
    int[] reported = new int[2 * COMMS.length];
    Work pending = null; // a barrierAsync left running on communicator pendingOn while others are used
    int pendingOn = -1;
    for (long i = 0; i < calls; i++) {
      Collective kind = KINDS[rnd.nextInt(KINDS.length)];
      int k = rnd.nextInt(COMMS.length);
      boolean useAsync = rnd.nextInt(5) == 0;
      boolean lpOnly = COMMS[k] == Algorithm.LP && rnd.nextInt(4) != 0;
      if (pending != null && pendingOn == k) {
        // the checker learns the algorithm from the communicator's statistics: no other call of this
        // communicator may complete during a checked one
        pending.waitFor();
        pending = null;
      }
      if (rnd.nextInt(100) == 0 && pending == null) {
        pendingOn = (k + 1 + rnd.nextInt(COMMS.length - 1)) % COMMS.length;
        pending = comms[pendingOn].barrierAsync(); // runs on its async thread during this call on another communicator
      }
      CollectiveChecker ck = useAsync ? async[k] : sync[k];
      String what = CallMix.call(ck, useAsync ? viaAsync[k] : comms[k], kind, lpOnly, rnd, maxElems);
      if (pending != null && rnd.nextInt(2) == 0) {
        pending.waitFor();
        pending = null;
      }
      byKind.merge(kind, 1L, Long::sum);
      if (useAsync) asyncCalls++;
      int slot = 2 * k + (useAsync ? 1 : 0);
      if (ck.failures().size() > reported[slot]) {
        wrong += ck.failures().size() - reported[slot];
        System.out.println("WRONG rank " + rank + " call " + i + " " + what + ": " + ck.failures().get(reported[slot]));
        reported[slot] = ck.failures().size();
      }
      if (i + 1 == warmUp) {
        System.gc();
        rssWarm = ShmProbe.rssKb();
      }
      if (rank == 0 && (i + 1) % Math.max(1, calls / 20) == 0) {
        System.out.printf(Locale.ROOT, "PROGRESS %d/%d calls, %.0f s, RSS %d MiB%n", i + 1, calls,
            (System.nanoTime() - t0) / 1e9, ShmProbe.rssKb() >> 10);
      }
    }
    if (pending != null) pending.waitFor();
    System.gc();
    long rssEnd = ShmProbe.rssKb();
    Map<Protocol, Long> byAlgo = new EnumMap<>(Protocol.class);
    for (Communicator c : comms) {
      CommStats s = c.stats();
      for (Protocol al : Protocol.values()) if (s.calls(al) > 0) byAlgo.merge(al, s.calls(al), Long::sum);
    }
    for (Communicator c : comms) c.close();
    System.gc();
    StringBuilder out = new StringBuilder("RESULT");
    out.append(" rank=").append(rank).append(" calls=").append(calls).append(" wrong=").append(wrong)
        .append(" rssStart=").append(rssStart).append(" rssWarm=").append(rssWarm).append(" rssEnd=").append(rssEnd)
        .append(" mapsOpen=").append(mapsOpen).append(" mapsAfterClose=").append(ShmProbe.segmentMappings())
        .append(" mappedAfterClose=").append(ShmProbe.mappedBuffers())
        .append(" fdsStart=").append(fdsStart).append(" fdsEnd=").append(ShmProbe.openFds())
        .append(" threadsStart=").append(threadsStart).append(" threadsEnd=").append(ShmProbe.status("Threads"))
        .append(" async=").append(asyncCalls)
        .append(" seconds=").append((System.nanoTime() - t0) / 1_000_000_000L);
    byKind.forEach((kk, v) -> out.append(" kind.").append(kk.apiName()).append('=').append(v));
    byAlgo.forEach((al, v) -> out.append(" algo.").append(al).append('=').append(v));
    System.out.println(out);
    return wrong == 0 ? 0 : 1;
  }

  /** Routes every synchronous collective through its async form and Work.waitFor(). */
  static final class ViaAsync implements Communicator {
    private final Communicator c;

    ViaAsync(Communicator c) { this.c = c; }

    @Override public int rank() { return c.rank(); }
    @Override public int size() { return c.size(); }
    @Override public String backendName() { return c.backendName(); }
    @Override public CommOptions options() { return c.options(); }
    @Override public void allReduce(Tensor in, Tensor out, ReduceOp op) { c.allReduceAsync(in, out, op).waitFor(); }
    @Override public Work allReduceAsync(Tensor in, Tensor out, ReduceOp op) { return c.allReduceAsync(in, out, op); }
    @Override public void allGather(Tensor in, Tensor out) { c.allGatherAsync(in, out).waitFor(); }
    @Override public Work allGatherAsync(Tensor in, Tensor out) { return c.allGatherAsync(in, out); }
    @Override public void reduceScatter(Tensor in, Tensor out, ReduceOp op) { c.reduceScatterAsync(in, out, op).waitFor(); }
    @Override public Work reduceScatterAsync(Tensor in, Tensor out, ReduceOp op) { return c.reduceScatterAsync(in, out, op); }
    @Override public void allToAll(Tensor in, Tensor out) { c.allToAllAsync(in, out).waitFor(); }
    @Override public Work allToAllAsync(Tensor in, Tensor out) { return c.allToAllAsync(in, out); }
    @Override public void allToAllV(Tensor in, Tensor sc, Tensor out, Tensor rc) { c.allToAllVAsync(in, sc, out, rc).waitFor(); }
    @Override public Work allToAllVAsync(Tensor in, Tensor sc, Tensor out, Tensor rc) { return c.allToAllVAsync(in, sc, out, rc); }
    @Override public void allToAllV(Tensor in, Tensor sc, Tensor so, Tensor out, Tensor rc, Tensor ro) {
      c.allToAllVAsync(in, sc, so, out, rc, ro).waitFor();
    }
    @Override public Work allToAllVAsync(Tensor in, Tensor sc, Tensor so, Tensor out, Tensor rc, Tensor ro) {
      return c.allToAllVAsync(in, sc, so, out, rc, ro);
    }
    @Override public void broadcast(Tensor in, Tensor out, int root) { c.broadcastAsync(in, out, root).waitFor(); }
    @Override public Work broadcastAsync(Tensor in, Tensor out, int root) { return c.broadcastAsync(in, out, root); }
    @Override public void reduce(Tensor in, Tensor out, ReduceOp op, int root) { c.reduceAsync(in, out, op, root).waitFor(); }
    @Override public Work reduceAsync(Tensor in, Tensor out, ReduceOp op, int root) { return c.reduceAsync(in, out, op, root); }
    @Override public void gather(Tensor in, Tensor out, int root) { c.gatherAsync(in, out, root).waitFor(); }
    @Override public Work gatherAsync(Tensor in, Tensor out, int root) { return c.gatherAsync(in, out, root); }
    @Override public void scatter(Tensor in, Tensor out, int root) { c.scatterAsync(in, out, root).waitFor(); }
    @Override public Work scatterAsync(Tensor in, Tensor out, int root) { return c.scatterAsync(in, out, root); }
    @Override public void allGatherV(Tensor in, Tensor out, long[] counts) { c.allGatherVAsync(in, out, counts).waitFor(); }
    @Override public Work allGatherVAsync(Tensor in, Tensor out, long[] counts) { return c.allGatherVAsync(in, out, counts); }
    @Override public void reduceScatterV(Tensor in, Tensor out, long[] counts, ReduceOp op) {
      c.reduceScatterVAsync(in, out, counts, op).waitFor();
    }
    @Override public Work reduceScatterVAsync(Tensor in, Tensor out, long[] counts, ReduceOp op) {
      return c.reduceScatterVAsync(in, out, counts, op);
    }
    @Override public void send(Tensor t, int peer) { c.sendAsync(t, peer).waitFor(); }
    @Override public void recv(Tensor t, int peer) { c.recvAsync(t, peer).waitFor(); }
    @Override public Work sendAsync(Tensor t, int peer) { return c.sendAsync(t, peer); }
    @Override public Work recvAsync(Tensor t, int peer) { return c.recvAsync(t, peer); }
    @Override public io.sparkcomms.collectives.BatchSendRecv batch() { return c.batch(); }
    @Override public Communicator withOptions(io.sparkcomms.collectives.CallOptions o) { return c.withOptions(o); }
    @Override public Communicator split(int[] ranks) { return c.split(ranks); }
    @Override public Communicator split(int color, int key) { return c.split(color, key); }
    @Override public void barrier() { c.barrierAsync().waitFor(); }
    @Override public Work barrierAsync() { return c.barrierAsync(); }
    @Override public void abort(String reason) { c.abort(reason); }
    @Override public boolean isAborted() { return c.isAborted(); }
    @Override public CommStats stats() { return c.stats(); }
    @Override public void close() { c.close(); }
    @Override public io.sparkcomms.collectives.observe.RemovableHandle addHook(io.sparkcomms.collectives.observe.CallHook hook) { return c.addHook(hook); }
    @Override public java.util.List<io.sparkcomms.collectives.observe.CallRecord> flightRecord() { return c.flightRecord(); }
  }

  public static void main(String[] args) {
    Map<String, String> a = new LinkedHashMap<>();
    for (int i = 0; i + 1 < args.length; i += 2) a.put(args[i], args[i + 1]);
    if (a.containsKey("--rank")) {
      int rc;
      try {
        rc = rankMain(a);
      } catch (Throwable t) {
        System.out.println("FAIL " + t);
        t.printStackTrace(System.out);
        rc = 3;
      }
      System.out.flush();
      Runtime.getRuntime().halt(rc);
    }
    Config c = new Config();
    c.progress = System.out;
    if (a.containsKey("--ranks")) c.ranks = Integer.parseInt(a.get("--ranks"));
    if (a.containsKey("--calls")) c.calls = Long.parseLong(a.get("--calls"));
    if (a.containsKey("--max-elems")) c.maxElems = Integer.parseInt(a.get("--max-elems"));
    if (a.containsKey("--seed")) c.seed = Long.parseLong(a.get("--seed"));
    if (a.containsKey("--heap-mb")) c.heapMb = Integer.parseInt(a.get("--heap-mb"));
    if (a.containsKey("--timeout-ms")) c.timeoutMs = Long.parseLong(a.get("--timeout-ms"));
    Result r = launch(c);
    System.out.println();
    System.out.print(r.table());
    List<String> p = r.problems();
    System.out.println(p.isEmpty() ? "PASS: every element checked, nothing left behind" : "FAIL:\n  " + String.join("\n  ", p));
    System.exit(p.isEmpty() ? 0 : 1);
  }
}
