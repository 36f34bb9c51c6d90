package io.sparkcomms.collectives.reliability;

import io.sparkcomms.collectives.Algorithm;
import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.rendezvous.FileRendezvous;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.locks.LockSupport;

/**
 * kill -9 of one rank process at a random moment of a stream of checked collectives, many times per
 * collective. Rank processes are long-lived {@link WorkerMain}s; each trial builds a fresh
 * communicator from a fresh rendezvous directory, a random rank is killed after a random delay (which
 * lands in communicator creation or anywhere in the calls), and a pre-started spare takes its place.
 *
 * <p>Per trial it checks: every survivor raises a communicator exception within timeout + slack (a
 * survivor that does not is a hang, and is killed); no survivor ever returns a wrong element; the
 * killed process is gone; a new communicator of the same size (with the replacement) then works; no
 * segment is left in /dev/shm — right after the crash ("stale", which the next communicator creation
 * sweeps) and at the end of the run ("leaks").
 */
public final class FaultInjection {
  private FaultInjection() {}

  /** One row of the table: a collective, and the algorithm its communicator is forced to. */
  public record RowSpec(String name, Collective kind, Algorithm algo) {}

  public static final List<RowSpec> ROWS = List.of(
      new RowSpec("allReduce FLAT", Collective.ALL_REDUCE, Algorithm.FLAT),
      new RowSpec("allReduce TREE", Collective.ALL_REDUCE, Algorithm.TREE),
      new RowSpec("allReduce LP", Collective.ALL_REDUCE, Algorithm.LP),
      new RowSpec("allGather", Collective.ALL_GATHER, Algorithm.AUTO),
      new RowSpec("reduceScatter", Collective.REDUCE_SCATTER, Algorithm.AUTO),
      new RowSpec("allToAll", Collective.ALL_TO_ALL, Algorithm.AUTO),
      new RowSpec("broadcast", Collective.BROADCAST, Algorithm.AUTO),
      new RowSpec("allToAllV", Collective.ALL_TO_ALL_V, Algorithm.AUTO),
      new RowSpec("barrier", Collective.BARRIER, Algorithm.AUTO));

  /** Settings of a run. */
  public static final class Config {
    public int ranks = 3;
    public int trials = 100;
    public long timeoutMs = 3_000;
    public long slackMs = 2_000;
    public long maxKillDelayMs = 300;
    /** Start the kill delay once every rank reported its communicator created (faults land in the calls only). */
    public boolean killAfterCreate;
    public int maxElems = 1 << 16;
    public long stagingBytes = 64 << 10;
    public int recoveryCalls = 3;
    public long seed = System.nanoTime();
    public List<RowSpec> rows = ROWS;
    public PrintStream progress;
  }

  /** Counters of one row. */
  public static final class Row {
    public final String name;
    public int trials, faults, killsDuringCreate, survivors, survivorsRaised, hangs, wrong, unexpected;
    public int recoveries, recoveryFailures, staleAfterCrash, leftAfterRecovery, unattributedAfterRecovery, victimsAlive;
    public long maxRaiseMs;
    long sumRaiseMs;
    public final Map<String, Integer> exceptions = new TreeMap<>();
    final List<String> notes = new ArrayList<>();

    Row(String name) { this.name = name; }

    public double meanRaiseMs() { return survivorsRaised == 0 ? 0 : (double) sumRaiseMs / survivorsRaised; }
  }

  /** Result of a run. */
  public static final class Summary {
    public final List<Row> rows = new ArrayList<>();
    public final Config config;
    public int leaksAtEnd;
    /** GPU backend: trial starts at which a worker still held a communicator, IPC mapping or allocation. */
    public int gpuResidue, gpuResidueChecks;
    public final List<String> gpuResidueLines = new ArrayList<>();
    /** This run's files in /dev/shm after the last trial, before the final start that sweeps. */
    public int beforeFinalSweep;
    public int survivingProcesses;
    public final List<String> leakedNames = new ArrayList<>();
    public long wallMs;

    Summary(Config c) { this.config = c; }

    public int total(java.util.function.ToIntFunction<Row> f) { return rows.stream().mapToInt(f).sum(); }

    /** Problems that must not happen; empty when the run passed. */
    public List<String> problems() {
      List<String> p = new ArrayList<>();
      for (Row r : rows) {
        if (r.hangs > 0) p.add(r.name + ": " + r.hangs + " hang(s)");
        if (r.wrong > 0) p.add(r.name + ": " + r.wrong + " wrong result(s)");
        if (r.unexpected > 0) p.add(r.name + ": " + r.unexpected + " unexpected outcome(s)");
        if (r.recoveryFailures > 0) p.add(r.name + ": " + r.recoveryFailures + " failed recovery communicator(s)");
        if (r.leftAfterRecovery > 0) p.add(r.name + ": " + r.leftAfterRecovery + " segment(s) left after the next start");
        if (r.victimsAlive > 0) p.add(r.name + ": " + r.victimsAlive + " killed rank(s) still alive");
        if (r.faults != r.trials) p.add(r.name + ": " + (r.trials - r.faults) + " trial(s) without a fault");
        p.addAll(r.notes);
      }
      if (leaksAtEnd > 0) p.add(leaksAtEnd + " segment(s) left in /dev/shm at the end: " + leakedNames);
      if (survivingProcesses > 0) p.add(survivingProcesses + " rank process(es) still alive at the end");
      if (gpuResidue > 0) p.add(gpuResidue + " trial start(s) with GPU resources still held from the trial before: " + gpuResidueLines);
      return p;
    }

    /** A markdown table of the run. */
    public String table() {
      StringBuilder b = new StringBuilder();
      b.append("| collective | trials | faults injected | killed in create | survivors raised | raise ms mean / max "
          + "| hangs | wrong results | unexpected | new comm after fault OK | stale segment after crash | still there after next start | leaks |\n");
      b.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
      for (Row r : rows) {
        b.append(String.format(Locale.ROOT, "| %s | %d | %d | %d | %d / %d | %.0f / %d | %d | %d | %d | %d / %d | %d | %d + %d | %d |%n",
            r.name, r.trials, r.faults, r.killsDuringCreate, r.survivorsRaised, r.survivors, r.meanRaiseMs(), r.maxRaiseMs,
            r.hangs, r.wrong, r.unexpected, r.recoveries - r.recoveryFailures, r.recoveries, r.staleAfterCrash,
            r.leftAfterRecovery, r.unattributedAfterRecovery, r.leftAfterRecovery + r.victimsAlive));
      }
      b.append(String.format(Locale.ROOT, "| **total** | %d | %d | %d | %d / %d | max %d | %d | %d | %d | %d / %d | %d | %d + %d | %d segments, %d processes |%n",
          total(r -> r.trials), total(r -> r.faults), total(r -> r.killsDuringCreate), total(r -> r.survivorsRaised),
          total(r -> r.survivors), rows.stream().mapToLong(r -> r.maxRaiseMs).max().orElse(0), total(r -> r.hangs),
          total(r -> r.wrong), total(r -> r.unexpected), total(r -> r.recoveries - r.recoveryFailures), total(r -> r.recoveries),
          total(r -> r.staleAfterCrash), total(r -> r.leftAfterRecovery), total(r -> r.unattributedAfterRecovery),
          leaksAtEnd, survivingProcesses));
      b.append("\n\"still there after next start\": with a creator record + without one (creator killed before writing"
          + " it; swept by a start " + UNATTRIBUTED_STALE_MILLIS / 1000 + " s later). This run's files in /dev/shm after the last trial: "
          + beforeFinalSweep + "; after one more start " + UNATTRIBUTED_STALE_MILLIS / 1000 + " s later (= leaks): " + leaksAtEnd + ".\n");
      Map<String, Integer> ex = new TreeMap<>();
      for (Row r : rows) r.exceptions.forEach((k, v) -> ex.merge(k, v, Integer::sum));
      b.append("\nSurvivors' exceptions: ").append(ex).append('\n');
      if (gpuResidueChecks > 0) {
        b.append(String.format(Locale.ROOT, "GPU backend: %d trial starts checked the worker's live communicators, peer IPC mappings and"
            + " device allocations (sc_live_resources); %d found any left over (= GPU leaks).%n", gpuResidueChecks, gpuResidue));
      }
      b.append(String.format(Locale.ROOT, "Settings: %s backend, %d ranks, timeout %d ms (+ %d ms slack), kill delay 0..%d ms%s, "
              + "sizes 1..%d elements, staging %d KiB, seed %d, wall %.1f s%n",
          System.getProperty(WorkerMain.BACKEND_PROPERTY, "host"), config.ranks, config.timeoutMs, config.slackMs,
          config.maxKillDelayMs, config.killAfterCreate ? " after every rank created its communicator" : "", config.maxElems, config.stagingBytes >> 10,
          config.seed, wallMs / 1000.0));
      return b.toString();
    }
  }

  /** Whether a /dev/shm entry is this run's: created by one of its workers, or (no creator record yet) new. */
  private static boolean ours(String name, Set<Long> pids, Set<String> before) {
    long pid = ShmProbe.creatorPid(ShmProbe.SHM.resolve(name));
    return pid != 0 ? pids.contains(pid) : !before.contains(name);
  }

  /** This run's entries in /dev/shm now. */
  private static Set<String> oursNow(List<Worker> all, Set<String> before) {
    Set<Long> pids = new HashSet<>();
    for (Worker w : all) pids.add(w.pid());
    Set<String> out = new HashSet<>();
    for (String n : ShmProbe.segments()) if (ours(n, pids, before)) out.add(n);
    return out;
  }

  private static final Set<String> COMM_EXCEPTIONS = Set.of("CommAbortedException", "CommTimeoutException", "CommException",
      "RendezvousException");

  /** ShmSegment.UNATTRIBUTED_STALE_MILLIS. */
  static final long UNATTRIBUTED_STALE_MILLIS = 5_000;

  public static Summary run(Config cfg) {
    Summary sum = new Summary(cfg);
    long t0 = System.nanoTime();
    int n = cfg.ranks;
    SplittableRandom rnd = new SplittableRandom(cfg.seed);
    Set<String> initial = ShmProbe.segments();
    Worker[] ws = new Worker[n];
    Deque<Worker> spares = new ArrayDeque<>();
    List<Worker> all = new ArrayList<>();
    try {
      for (int r = 0; r < n; r++) all.add(ws[r] = Worker.start());
      Worker sp = Worker.start();
      all.add(sp);
      spares.add(sp);
      for (Worker w : ws) {
        if (!w.awaitReady(60_000)) throw new IllegalStateException("worker did not start: " + w.tail());
      }
      int rowIx = 0;
      for (RowSpec spec : cfg.rows) {
        Row row = new Row(spec.name());
        sum.rows.add(row);
        for (int t = 0; t < cfg.trials; t++) {
          trial(cfg, spec, row, "T" + rowIx + "." + t, rnd, ws, spares, all);
        }
        rowIx++;
        if (cfg.progress != null) {
          cfg.progress.printf(Locale.ROOT, "%-15s trials %d, survivors raised %d/%d (max %d ms), hangs %d, wrong %d, recovery failures %d, stale %d%n",
              row.name, row.trials, row.survivorsRaised, row.survivors, row.maxRaiseMs, row.hangs, row.wrong, row.recoveryFailures,
              row.staleAfterCrash);
        }
      }
    } finally {
      for (Worker w : all) w.close();
      for (Worker w : all) w.waitDead(5_000);
      sum.survivingProcesses = (int) all.stream().filter(w -> w.process.isAlive()).count();
    }
    // A stale file left by a creator killed before it wrote its creator record is only attributable by
    // age: wait that long, start one more communicator (which sweeps), and count what is still there.
    sum.beforeFinalSweep = oursNow(all, initial).size();
    if (sum.beforeFinalSweep > 0) {
      LockSupport.parkNanos((UNATTRIBUTED_STALE_MILLIS + 500) * 1_000_000L);
      io.sparkcomms.collectives.host.HostCommunicator.create(io.sparkcomms.collectives.rendezvous.InJvmRendezvous.group(1).member(0),
          io.sparkcomms.collectives.CommOptions.builder().stagingBytes(4096).build()).close();
    }
    sum.leakedNames.addAll(oursNow(all, initial));
    sum.leaksAtEnd = sum.leakedNames.size();
    // GPU workers report what their process still holds when a trial starts (after closing the last
    // communicator, often one that a fault broke): communicators, peers' IPC mappings, allocations.
    for (Worker w : all) {
      for (String l : w.printed("RES ")) {
        sum.gpuResidueChecks++;
        if (!l.endsWith(" 0 0 0")) {
          sum.gpuResidue++;
          if (sum.gpuResidueLines.size() < 5) sum.gpuResidueLines.add(l);
        }
      }
    }
    sum.wallMs = (System.nanoTime() - t0) / 1_000_000;
    return sum;
  }

  private static String runCommand(String id, Path dir, int rank, int n, RowSpec spec, long seed, Config cfg, long calls) {
    return "RUN " + id + " " + dir + " " + rank + " " + n + " " + spec.kind() + " " + spec.algo() + " " + seed + " "
        + cfg.timeoutMs + " " + cfg.stagingBytes + " " + cfg.maxElems + " " + calls;
  }

  /** Waits (bounded) until every worker printed "CREATED id" (a GPU communicator takes ~1 s to build). */
  private static void awaitCreated(Worker[] ws, String id, long deadline) {
    for (Worker w : ws) {
      while (System.nanoTime() < deadline && w.printed("CREATED " + id + " ").isEmpty()) LockSupport.parkNanos(200_000);
    }
  }

  private static void trial(Config cfg, RowSpec spec, Row row, String id, SplittableRandom rnd, Worker[] ws,
                            Deque<Worker> spares, List<Worker> all) {
    int n = ws.length;
    row.trials++;
    Set<String> before = ShmProbe.segments();
    Path dir = FileRendezvous.createDirectory();
    Path dir2 = null;
    Set<String> segs = new HashSet<>();
    try {
      int victim = rnd.nextInt(n);
      long delayNanos = rnd.nextLong(cfg.maxKillDelayMs * 1_000_000L + 1);
      long seed = rnd.nextLong();
      for (int r = 0; r < n; r++) ws[r].send(runCommand(id + ".f", dir, r, n, spec, seed, cfg, -1));
      if (cfg.killAfterCreate) awaitCreated(ws, id + ".f", System.nanoTime() + 60_000_000_000L);
      LockSupport.parkNanos(delayNanos);
      long tKill = System.nanoTime();
      ws[victim].kill();
      row.faults++;
      if (!ws[victim].waitDead(10_000)) row.victimsAlive++;
      boolean created = ws[victim].drain().stream().anyMatch(l -> l.text().startsWith("CREATED " + id + ".f ") && l.nanos() < tKill);
      if (!created) row.killsDuringCreate++;
      long deadline = tKill + (cfg.timeoutMs + cfg.slackMs) * 1_000_000L;
      List<Integer> replace = new ArrayList<>();
      replace.add(victim);
      for (int r = 0; r < n; r++) {
        if (r == victim) continue;
        row.survivors++;
        Worker.Trial tr = ws[r].collect(id + ".f", deadline);
        row.wrong += (int) tr.count("WRONG");
        if (tr.segment() != null) segs.add(tr.segment());
        if (tr.end() == null) {
          row.hangs++;
          row.notes.add(id + " rank " + r + " did not raise within timeout + slack: " + ws[r].tail());
          ws[r].kill();
          replace.add(r);
        } else if (tr.done() || !COMM_EXCEPTIONS.contains(tr.exception())) {
          row.unexpected++;
          row.notes.add(id + " rank " + r + ": " + tr.end().text());
        } else {
          long ms = (tr.end().nanos() - tKill) / 1_000_000;
          row.survivorsRaised++;
          row.sumRaiseMs += ms;
          row.maxRaiseMs = Math.max(row.maxRaiseMs, ms);
          row.exceptions.merge(tr.exception(), 1, Integer::sum);
        }
      }
      // right after the crash: anything of this trial still in /dev/shm?
      Set<String> stale = oursNow(all, before);
      for (String s : segs) if (Files.exists(Path.of(s))) stale.add(Path.of(s).getFileName().toString());
      row.staleAfterCrash += stale.size();

      // replace the killed (and any hung) rank with pre-started spares, then check a new communicator works
      for (int r : replace) {
        ws[r].waitDead(5_000);
        if (spares.isEmpty()) {
          Worker w = Worker.start();
          all.add(w);
          spares.add(w);
        }
        ws[r] = spares.poll();
        Worker w = Worker.start();
        all.add(w);
        spares.add(w);
      }
      for (Worker w : ws) {
        if (!w.awaitReady(60_000)) row.notes.add(id + ": replacement worker did not start: " + w.tail());
      }
      dir2 = FileRendezvous.createDirectory();
      long seed2 = rnd.nextLong();
      row.recoveries++;
      for (int r = 0; r < n; r++) ws[r].send(runCommand(id + ".r", dir2, r, n, spec, seed2, cfg, cfg.recoveryCalls));
      long deadline2 = System.nanoTime() + (cfg.timeoutMs * 4 + cfg.slackMs) * 1_000_000L;
      boolean ok = true;
      for (int r = 0; r < n; r++) {
        Worker.Trial tr = ws[r].collect(id + ".r", deadline2);
        row.wrong += (int) tr.count("WRONG");
        if (tr.segment() != null) segs.add(tr.segment());
        if (!tr.done()) {
          ok = false;
          row.notes.add(id + " recovery rank " + r + ": " + (tr.end() == null ? "no answer: " + ws[r].tail() : tr.end().text()));
          if (tr.end() == null) {
            ws[r].kill();
            ws[r].waitDead(5_000);
            ws[r] = Worker.start();
            all.add(ws[r]);
            ws[r].awaitReady(60_000);
          }
        }
      }
      if (!ok) row.recoveryFailures++;
      // after the next start, the crashed trial's segment must be gone (swept), and the new one unlinked;
      // a file without a creator record is only swept once old enough (counted, and checked at the end)
      for (String s : stale) {
        if (!Files.exists(ShmProbe.SHM.resolve(s))) continue;
        if (ShmProbe.creatorPid(ShmProbe.SHM.resolve(s)) == 0) row.unattributedAfterRecovery++;
        else row.leftAfterRecovery++;
      }
      for (String s : segs) {
        if (Files.exists(Path.of(s)) && !stale.contains(Path.of(s).getFileName().toString())) row.leftAfterRecovery++;
      }
    } finally {
      ShmProbe.deleteTree(dir);
      ShmProbe.deleteTree(dir2);
    }
  }

  /** Standalone runner: prints the summary table; exit 0 when no hang, wrong result or leak happened. */
  public static void main(String[] args) {
    Config c = new Config();
    c.progress = System.out;
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--ranks": c.ranks = Integer.parseInt(args[++i]); break;
        case "--trials": c.trials = Integer.parseInt(args[++i]); break;
        case "--timeout-ms": c.timeoutMs = Long.parseLong(args[++i]); break;
        case "--slack-ms": c.slackMs = Long.parseLong(args[++i]); break;
        case "--max-delay-ms": c.maxKillDelayMs = Long.parseLong(args[++i]); break;
        case "--kill-after-create": c.killAfterCreate = true; break;
        case "--max-elems": c.maxElems = Integer.parseInt(args[++i]); break;
        case "--seed": c.seed = Long.parseLong(args[++i]); break;
        case "--backend": System.setProperty(WorkerMain.BACKEND_PROPERTY, args[++i]); break;
        case "--rows": {
          List<String> want = List.of(args[++i].split(","));
          c.rows = ROWS.stream().filter(r -> want.contains(r.name().replace(' ', '_'))).toList();
          break;
        }
        default:
          System.err.println("usage: FaultInjection [--ranks N] [--trials T] [--timeout-ms MS] [--slack-ms MS] "
              + "[--max-delay-ms MS] [--max-elems N] [--seed S] [--backend host|gpu] [--kill-after-create] [--rows allReduce_FLAT,allGather,...]");
          System.exit(2);
      }
    }
    Summary s = run(c);
    System.out.println();
    System.out.print(s.table());
    List<String> p = s.problems();
    System.out.println(p.isEmpty() ? "PASS: no hang, no wrong result, no leak" : "FAIL:\n  " + String.join("\n  ", p));
    System.exit(p.isEmpty() ? 0 : 1);
  }
}
