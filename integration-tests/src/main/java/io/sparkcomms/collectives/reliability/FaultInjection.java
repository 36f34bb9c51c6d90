package io.sparkcomms.collectives.reliability;

import io.sparkcomms.collectives.Algorithm;
import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.rendezvous.FileRendezvous;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Deque;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Queue;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.locks.LockSupport;

/**
 * Faults injected into one rank process at a random moment of a stream of checked collectives, many
 * times per collective: kill -9 (default), a pause (SIGSTOP) beyond the timeout, the rank closing its
 * communicator while its peers still call, or the rank corrupting the barrier flag a peer reads for its
 * arrivals. Rank processes are long-lived {@link WorkerMain}s; each
 * trial builds a fresh communicator from a fresh rendezvous directory, a random rank is faulted after
 * a random delay, a pre-started spare takes the place of a killed (or hung) rank, and the ranks then
 * build a new communicator that must work.
 *
 * <p>Per trial it checks: every survivor raises a communicator exception within timeout + slack of the
 * fault (a survivor that does not is a hang, and is killed; one that raises before the fault is
 * unexpected); no rank ever returns a wrong element; the faulted rank behaves (kill: the process is
 * gone; pause: after SIGCONT it raises within timeout + slack; close: it closes and returns; corrupt: see
 * {@code --fault}); a new
 * communicator of the same size then works; no segment is left in /dev/shm — right after the fault
 * ("stale", which the sweep that the next communicator creation starts removes) and at the end of the run ("leaks"); GPU
 * backend: at the start of every trial, and once more after the last, every rank process reports what
 * it still holds ({@code sc_live_resources}: communicators, peer IPC mappings, device allocations),
 * which must be nothing.
 *
 * <p>Where a kill landed: every rank announces each checked call it enters on its output ({@code CALL id
 * i}, written before call i starts; see {@link WorkerMain}). Right before the kill the harness takes, for
 * every rank, the last call it has read such a line for (so each rank had entered that call before the
 * kill was sent); after the kill it reads the killed rank's output to its end, whose last announced call
 * is the call it died in. A kill counts as mid-call (the "mid-call kills" column) when every rank had
 * announced call K ({@code --kill-gate-call}) or a later one before it: every rank had then created its
 * communicator and completed K calls, and every peer was in call K or a later one when the kill came. A
 * kill that cannot be shown so (a rank's line not read yet, or not written) is not counted as one,
 * whatever its timing really was. A call is a checked call as a whole (its inputs, the collective, the
 * check of its result): from outside the rank the collective cannot be told apart from the rest, so a
 * rank killed while it checks the result of call i died in call i.
 *
 * <p>Options of {@link #main}:
 * <ul>
 *   <li>{@code --backend host|gpu}: the workers' backend (GPU: rank r on GPU r % GPUs, host tensors
 *       staged through the device; several trials may share a GPU, each with its own contexts).</li>
 *   <li>{@code --ranks N}, {@code --trials T} (per collective and fault), {@code --timeout-ms},
 *       {@code --slack-ms}, {@code --max-delay-ms} (fault delay 0..max), {@code --max-elems},
 *       {@code --seed}.</li>
 *   <li>{@code --rows allReduce_FLAT,allReduce_TREE,allReduce_LP,allGather,reduceScatter,allToAll,
 *       broadcast,allToAllV,barrier}: which collectives (default all).</li>
 *   <li>{@code --fault kill|pause|close|corrupt} or a list ({@code kill,pause,close,corrupt}): each collective gets
 *       {@code --trials} trials of each fault, one table row per pair. {@code pause}: SIGSTOP of the
 *       rank; it stays stopped until every survivor raised (at least one must raise
 *       CommTimeoutException, all within timeout + slack) and at least timeout + {@code --pause-extra-ms}
 *       (default 500), then SIGCONT: it must raise within timeout + slack (else it is a hang, and is
 *       killed). {@code close}: the rank closes its communicator before its next call and stops
 *       calling; its peers must raise within timeout + slack. {@code corrupt}: every rank runs a finite
 *       stream of K + {@code --corrupt-tail-calls} (default 40) calls, K drawn in 1..{@code --corrupt-max-call}
 *       (default 8); when the faulted rank is about to make call K, a helper thread of its process waits
 *       0..{@code --corrupt-max-delay-us} (default 500) microseconds, then overwrites the barrier flag that
 *       one random other rank reads for the faulted rank's arrivals (host: its slot in the shared segment;
 *       GPU: that word of every block, collectives' and allToAllV's flags, {@code sc_debug_corrupt_flag})
 *       with a garbage value: in half the trials far ahead (2^40 + a random offset below 2^20: the host
 *       reports "corrupted", the GPU "already at a later operation"), in the others behind (0 or 1, never
 *       more than what the rank really signalled: the peer must not take it as an arrival, and either
 *       times out / reports it, or sees the faulted rank's next arrival overwrite it). The faulted rank keeps
 *       calling. Expected, for every rank including the faulted one: no wrong element, and either it raises
 *       a communicator exception within timeout + slack of the write (time of the write: the faulted
 *       process's System.nanoTime() just before it, the same CLOCK_MONOTONIC as this process's on Linux)
 *       or it completes every call of its stream (the corruption went unnoticed: the faulted rank's next
 *       arrival overwrote the word before the peer read it). A survivor that raised before the write is
 *       unexpected. "Faulted rank as expected" for corrupt: the write happened (its CORRUPTED line says ok)
 *       and then the rank raised a communicator exception within timeout + slack of it or completed its
 *       stream, with no wrong element. Pause, close and corrupt always wait until every rank created its
 *       communicator; corrupt lands in call 1 or later, so every rank is in its stream.</li>
 *   <li>{@code --kill-after-create} (alias {@code --fault-after-create}): the fault delay starts once
 *       the harness has read from every rank that it entered call K of its stream (kill: K =
 *       {@code --kill-gate-call}, default 1, so every rank had completed a call of the communicator;
 *       pause and close: K = 0, the first call), so the fault lands in the stream of calls, for every
 *       collective (a GPU communicator takes longer to build than the default 300 ms delay: without the
 *       flag every GPU kill lands in creation). Every kill is then a mid-call kill (see above), and one
 *       that is not is a failure of the run. Without the flag the delay starts when the ranks are asked
 *       to create the communicator, so kills land anywhere, creation included, and the table says where
 *       ("in create", "in stream", "mid-call kills"). The table's "in stream" column counts the faults
 *       that landed in the stream. A fault communicator that fails before the fault (a rank raised in
 *       creation or before call K: a rendezvous timeout on a loaded host, say) is not faulted: every
 *       rank must raise, and the trial starts over with a fresh one (shown under the table; a trial
 *       whose three attempts all fail counts as unexpected).</li>
 *   <li>{@code --kill-gate-call K}: the call every rank must have announced before a kill counts as
 *       mid-call, and with {@code --kill-after-create} the call the kill waits for (default 1).</li>
 *   <li>{@code --parallel P}: P independent trials at once, in P lanes; each lane has its own rank
 *       processes and spare, every trial its own rendezvous directory, communicator and random draws
 *       (all drawn from {@code --seed} up front, in row order, so a trial's victim, delay and data do not
 *       depend on scheduling). Counters are merged per row. Leak checks stay exact: GPU resources are
 *       per process; /dev/shm files are attributed to a trial by their creator record (the pid of one
 *       of the trial's processes), and a file without one (creator killed before writing it) only to a
 *       trial whose rank 0 was killed during creation, each file to one trial at most. A trial's start
 *       sweeps every stale file, also other lanes' (the sweep is global by design), so with P &gt; 1 the
 *       "stale segment after crash" count can be lower; "still there after next start" and the final
 *       leak count are unaffected.</li>
 *   <li>{@code --recovery-timeout-ms}: timeout of the communicator built after the fault (default: the
 *       same as {@code --timeout-ms}). GPU: the replacement's CUDA start-up is awaited before (it is not
 *       what the recovery checks), but a survivor first closes its failed communicator, and the NCCL
 *       abort in that close took up to 5.4 s with 12 trials at once and 13 s with 20 (2x H200, 32
 *       cores); its peer meanwhile waits in the first rendezvous round.</li>
 *   <li>{@code --corrupt-max-call K}, {@code --corrupt-tail-calls T}, {@code --corrupt-max-delay-us D}: see
 *       {@code corrupt} above.</li>
 *   <li>{@code --quiet}: no line per trial (by default one, prefixed with the trial id).</li>
 *   <li>{@code --no-vendor}: GPU communicators without the vendor (NCCL/RCCL) communicator (always
 *       without it when a trial's ranks outnumber the GPUs: rank r is on GPU r % GPUs).</li>
 * </ul>
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

  /** What is done to the victim rank. */
  public enum Fault {
    /** kill -9 of the process. */
    KILL,
    /** SIGSTOP beyond the timeout, then SIGCONT. */
    PAUSE,
    /** The rank closes its communicator mid-stream and stops calling. */
    CLOSE,
    /** The rank overwrites the barrier flag one peer reads for its arrivals with a garbage value, and keeps calling. */
    CORRUPT;

    String label() { return name().toLowerCase(Locale.ROOT); }
  }

  /** Settings of a run. */
  public static final class Config {
    public int ranks = 3;
    public int trials = 100;
    public long timeoutMs = 3_000;
    public long slackMs = 2_000;
    public long maxKillDelayMs = 300;
    /**
     * Start the fault delay once every rank announced entering call {@link #killGateCall} (kill) or its
     * first call (pause, close): faults land in the calls only.
     */
    public boolean faultAfterCreate;
    /** Kill: a kill is mid-call when every rank had announced this call or a later one before it. */
    public int killGateCall = 1;
    public int maxElems = 1 << 16;
    public long stagingBytes = 64 << 10;
    public int recoveryCalls = 3;
    /** Timeout of the communicator built after the fault; 0: {@link #timeoutMs}. */
    public long recoveryTimeoutMs;
    /** Pause: the victim stays stopped at least timeout + this. */
    public long pauseExtraMs = 500;
    /** Corrupt: the flag is overwritten when the victim is about to make call K, K drawn in 1..this. */
    public int corruptMaxCall = 8;
    /** Corrupt: every rank's stream is K + this many calls. */
    public int corruptTailCalls = 40;
    /** Corrupt: the helper thread waits 0..this many microseconds after call K began before it writes. */
    public long corruptMaxDelayMicros = 500;
    public long seed = System.nanoTime();
    public List<RowSpec> rows = ROWS;
    public List<Fault> faults = List.of(Fault.KILL);
    /** Trials run at once, each in its own lane of rank processes. */
    public int parallel = 1;
    public PrintStream progress;
    /** One line per trial, prefixed with its id; null: none. */
    public PrintStream trialLog;

    long recoveryTimeout() { return recoveryTimeoutMs > 0 ? recoveryTimeoutMs : timeoutMs; }
  }

  /** Counters of one row (a collective and a fault). Updated by merging a trial's counters under the row's lock. */
  public static final class Row {
    public final String name;
    public final Fault fault;
    public int trials, faults, killsDuringCreate, survivors, survivorsRaised, hangs, wrong, unexpected;
    /** The faulted rank had entered the stream of collectives (printed STREAM: inside its first call or later). */
    public int inStream;
    /**
     * Kill: kills before which every rank had announced entering call {@link Config#killGateCall} or a
     * later one (read by the harness before it sent the kill).
     */
    public int midCall;
    /** Kill, over the mid-call kills: the lowest and highest call the killed rank died in (its last announced call). */
    public long landedMin = Long.MAX_VALUE, landedMax = -1;
    /** A survivor had completed at least one collective when it raised. */
    public int afterFirstCall;
    /** The victim did what it must (kill: gone; pause: raised after SIGCONT; close: closed and returned). */
    public int victimsOk;
    /** Pause / close: the victim did not (kill: see {@link #victimsAlive}). */
    public int victimsBad;
    /** Pause: trials in which a survivor raised CommTimeoutException. */
    public int timeoutTrials;
    /** Corrupt: survivors that completed every call of their stream, correctly (the corruption went unnoticed by them). */
    public int survivorsCompleted;
    /** Corrupt: trials whose value was far ahead (the others: behind). */
    public int corruptAhead;
    /** Corrupt: trials in which at least one rank raised. */
    public int corruptNoticed;
    /** Corrupt: the faulted rank raised / completed its stream (both as expected). */
    public int victimRaised, victimCompleted;
    /**
     * Faults in the calls only: fault communicators that failed before the fault (a rank raised during
     * creation or its first call, e.g. a rendezvous timeout on a loaded host); the trial then started
     * over with a fresh communicator. Shown, not a failure; a trial whose every attempt failed is.
     */
    public int setupRetries;
    public int recoveries, recoveryFailures, staleAfterCrash, leftAfterRecovery, unattributedAfterRecovery, victimsAlive;
    public long maxRaiseMs;
    /** Recovery: the longest close of a failed communicator by a surviving rank process before it (ms). */
    public long maxSurvivorCloseMs;
    public long minRaiseMs = Long.MAX_VALUE;
    long sumRaiseMs;
    /** Pause: SIGCONT to the resumed rank's exception, max. */
    public long maxResumeMs;
    public final Map<String, Integer> exceptions = new TreeMap<>();
    /** Calls completed by all ranks of the faulted communicators, by algorithm. */
    public final Map<String, Long> algos = new TreeMap<>();
    final List<String> notes = new ArrayList<>();
    final List<String> setupNotes = new ArrayList<>();

    Row(String name, Fault fault) {
      this.name = name;
      this.fault = fault;
    }

    public double meanRaiseMs() { return survivorsRaised == 0 ? 0 : (double) sumRaiseMs / survivorsRaised; }

    public String label() { return name + " / " + fault.label(); }

    synchronized void merge(Row t) {
      trials += t.trials;
      faults += t.faults;
      killsDuringCreate += t.killsDuringCreate;
      inStream += t.inStream;
      midCall += t.midCall;
      landedMin = Math.min(landedMin, t.landedMin);
      landedMax = Math.max(landedMax, t.landedMax);
      afterFirstCall += t.afterFirstCall;
      survivors += t.survivors;
      survivorsRaised += t.survivorsRaised;
      hangs += t.hangs;
      wrong += t.wrong;
      unexpected += t.unexpected;
      victimsOk += t.victimsOk;
      victimsBad += t.victimsBad;
      timeoutTrials += t.timeoutTrials;
      survivorsCompleted += t.survivorsCompleted;
      corruptAhead += t.corruptAhead;
      corruptNoticed += t.corruptNoticed;
      victimRaised += t.victimRaised;
      victimCompleted += t.victimCompleted;
      setupRetries += t.setupRetries;
      recoveries += t.recoveries;
      recoveryFailures += t.recoveryFailures;
      staleAfterCrash += t.staleAfterCrash;
      leftAfterRecovery += t.leftAfterRecovery;
      unattributedAfterRecovery += t.unattributedAfterRecovery;
      victimsAlive += t.victimsAlive;
      maxRaiseMs = Math.max(maxRaiseMs, t.maxRaiseMs);
      maxSurvivorCloseMs = Math.max(maxSurvivorCloseMs, t.maxSurvivorCloseMs);
      minRaiseMs = Math.min(minRaiseMs, t.minRaiseMs);
      sumRaiseMs += t.sumRaiseMs;
      maxResumeMs = Math.max(maxResumeMs, t.maxResumeMs);
      t.exceptions.forEach((k, v) -> exceptions.merge(k, v, Integer::sum));
      t.algos.forEach((k, v) -> algos.merge(k, v, Long::sum));
      notes.addAll(t.notes);
      setupNotes.addAll(t.setupNotes);
    }
  }

  /** Result of a run. */
  public static final class Summary {
    public final List<Row> rows = new ArrayList<>();
    public final Config config;
    public int leaksAtEnd;
    /** GPU backend: trial starts (and end-of-run checks) at which a worker still held a communicator, IPC mapping or allocation. */
    public int gpuResidue, gpuResidueChecks;
    public final List<String> gpuResidueLines = new ArrayList<>();
    /** This run's files in /dev/shm after the last trial, before the final start that sweeps. */
    public int beforeFinalSweep;
    public int survivingProcesses;
    public final List<String> leakedNames = new ArrayList<>();
    public long wallMs;
    private final Map<Row, Integer> finished = new ConcurrentHashMap<>();

    Summary(Config c) { this.config = c; }

    public int total(java.util.function.ToIntFunction<Row> f) { return rows.stream().mapToInt(f).sum(); }

    /** Problems that must not happen; empty when the run passed. */
    public List<String> problems() {
      List<String> p = new ArrayList<>();
      for (Row r : rows) {
        String n = r.label();
        if (r.hangs > 0) p.add(n + ": " + r.hangs + " hang(s)");
        if (r.wrong > 0) p.add(n + ": " + r.wrong + " wrong result(s)");
        if (r.unexpected > 0) p.add(n + ": " + r.unexpected + " unexpected outcome(s)");
        if (r.recoveryFailures > 0) p.add(n + ": " + r.recoveryFailures + " failed recovery communicator(s)");
        if (r.leftAfterRecovery > 0) p.add(n + ": " + r.leftAfterRecovery + " segment(s) left after the next start");
        if (r.victimsAlive > 0) p.add(n + ": " + r.victimsAlive + " killed rank(s) still alive");
        if (r.victimsBad > 0) p.add(n + ": " + r.victimsBad + " faulted rank(s) that did not raise / close as they must");
        if (r.faults != r.trials) p.add(n + ": " + (r.trials - r.faults) + " trial(s) without a fault");
        if (config.faultAfterCreate && r.fault == Fault.KILL && r.midCall != r.faults) {
          p.add(n + ": " + (r.faults - r.midCall) + " kill(s) not shown to land mid-call (every rank in call "
              + config.killGateCall + " or later)");
        }
        p.addAll(r.notes);
      }
      if (leaksAtEnd > 0) p.add(leaksAtEnd + " segment(s) left in /dev/shm at the end: " + leakedNames);
      if (survivingProcesses > 0) p.add(survivingProcesses + " rank process(es) still alive at the end");
      if (gpuResidue > 0) p.add(gpuResidue + " check(s) with GPU resources still held from the trial before: " + gpuResidueLines);
      return p;
    }

    private static String pct(int k, int of) {
      return of == 0 ? "-" : String.format(Locale.ROOT, "%d (%.0f%%)", k, 100.0 * k / of);
    }

    /** A markdown table of the run. */
    public String table() {
      StringBuilder b = new StringBuilder();
      b.append("| collective | fault | trials | faults injected | in create | in stream | mid-call kills | survivors raised | raise ms min / mean / max "
          + "| hangs | wrong results | unexpected | faulted rank as expected | new comm after fault OK | stale segment after crash "
          + "| still there after next start | leaks |\n");
      b.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
      for (Row r : rows) {
        b.append(String.format(Locale.ROOT, "| %s | %s | %d | %d | %d | %s | %s | %d / %d | %d / %.0f / %d | %d | %d | %d | %d / %d | %d / %d | %d | %d + %d | %d |%n",
            r.name, r.fault.label(), r.trials, r.faults, r.killsDuringCreate, pct(r.inStream, r.faults),
            r.fault == Fault.KILL ? pct(r.midCall, r.faults) : "-", r.survivorsRaised,
            r.survivors, r.survivorsRaised == 0 ? 0 : r.minRaiseMs, r.meanRaiseMs(), r.maxRaiseMs, r.hangs, r.wrong, r.unexpected,
            r.victimsOk, r.faults, r.recoveries - r.recoveryFailures, r.recoveries, r.staleAfterCrash, r.leftAfterRecovery,
            r.unattributedAfterRecovery, r.leftAfterRecovery + r.victimsAlive));
      }
      int kills = total(r -> r.fault == Fault.KILL ? r.faults : 0);
      b.append(String.format(Locale.ROOT, "| **total** | | %d | %d | %d | %s | %s | %d / %d | max %d | %d | %d | %d | %d / %d | %d / %d | %d | %d + %d | %d segments, %d processes |%n",
          total(r -> r.trials), total(r -> r.faults), total(r -> r.killsDuringCreate), pct(total(r -> r.inStream), total(r -> r.faults)),
          rows.stream().anyMatch(r -> r.fault == Fault.KILL) ? pct(total(r -> r.fault == Fault.KILL ? r.midCall : 0), kills) : "-",
          total(r -> r.survivorsRaised), total(r -> r.survivors), rows.stream().mapToLong(r -> r.maxRaiseMs).max().orElse(0),
          total(r -> r.hangs), total(r -> r.wrong), total(r -> r.unexpected), total(r -> r.victimsOk), total(r -> r.faults),
          total(r -> r.recoveries - r.recoveryFailures), total(r -> r.recoveries), total(r -> r.staleAfterCrash),
          total(r -> r.leftAfterRecovery), total(r -> r.unattributedAfterRecovery), leaksAtEnd, survivingProcesses));
      b.append("\n\"in create\": the faulted rank had not created its communicator yet; \"in stream\": it had entered its stream of"
          + " collectives (it was inside its first call or a later one; the rest came between creation and the first call)."
          + " \"mid-call kills\": kills before which the harness had read from every rank that it entered call "
          + config.killGateCall + " or a later one (each rank writes a line before it starts a call); the others"
          + " could not be shown to land in the calls."
          + " \"faulted rank as expected\": kill: process gone; pause: after SIGCONT it raised within timeout + slack;"
          + " close: it closed and returned; corrupt: its flag write happened, and then, with no wrong element, it raised a"
          + " communicator exception within timeout + slack of the write or completed every call of its stream. Corrupt: a"
          + " survivor may also complete every call of its stream correctly instead of raising (the faulted rank's next"
          + " arrival overwrote the word first): \"survivors raised\" counts only those that raised; see the corrupt lines below. \"still there after next start\": with a creator record + without one (creator killed before"
          + " writing it; swept by a start " + UNATTRIBUTED_STALE_MILLIS / 1000 + " s later). This run's files in /dev/shm after the last"
          + " trial: " + beforeFinalSweep + "; after one more start " + UNATTRIBUTED_STALE_MILLIS / 1000 + " s later (= leaks): "
          + leaksAtEnd + ".\n");
      Map<String, Integer> ex = new TreeMap<>();
      for (Row r : rows) r.exceptions.forEach((k, v) -> ex.merge(k, v, Integer::sum));
      b.append("\nSurvivors' exceptions: ").append(ex).append('\n');
      for (Row r : rows) {
        if (r.fault == Fault.PAUSE) {
          b.append(String.format(Locale.ROOT, "Pause, %s: %d / %d trials with a survivor's CommTimeoutException; resumed rank raised"
              + " within %d ms of SIGCONT at most; exceptions %s%n", r.name, r.timeoutTrials, r.faults, r.maxResumeMs, r.exceptions));
        }
      }
      for (Row r : rows) {
        if (r.fault == Fault.CORRUPT) {
          b.append(String.format(Locale.ROOT, "Corrupt, %s: value far ahead in %d / %d trials, behind in %d; a rank raised in %d"
              + " trials, every rank completed its stream in %d; survivors raised %d, completed %d (of %d); faulted rank raised %d,"
              + " completed %d; exceptions %s%n", r.name, r.corruptAhead, r.faults, r.faults - r.corruptAhead, r.corruptNoticed,
              r.faults - r.corruptNoticed, r.survivorsRaised, r.survivorsCompleted, r.survivors, r.victimRaised, r.victimCompleted,
              r.exceptions));
        }
      }
      if (total(r -> r.setupRetries) > 0) {
        b.append("Fault communicators that failed before the fault and were started over: ").append(total(r -> r.setupRetries));
        for (Row r : rows) if (!r.setupNotes.isEmpty()) b.append("; ").append(r.label()).append(": ").append(r.setupNotes.get(0));
        b.append('\n');
      }
      if (rows.stream().anyMatch(r -> r.fault == Fault.KILL && r.midCall > 0)) {
        b.append("Mid-call kills, the calls the killed rank died in (its last announced call):");
        for (Row r : rows) {
          if (r.fault == Fault.KILL && r.midCall > 0) b.append(' ').append(r.name).append(' ').append(r.landedMin).append("..").append(r.landedMax).append(';');
        }
        b.append('\n');
      }
      b.append("Faults after a survivor had completed at least one collective:");
      for (Row r : rows) b.append(' ').append(r.label()).append(' ').append(pct(r.afterFirstCall, r.faults)).append(';');
      b.append('\n');
      b.append("Calls completed before the fault (all ranks; corrupt: in the whole stream, also after the write), by algorithm:");
      for (Row r : rows) b.append(' ').append(r.label()).append(' ').append(r.algos).append(';');
      b.append('\n');
      if (gpuResidueChecks > 0) {
        b.append(String.format(Locale.ROOT, "GPU backend: %d checks (every trial start, and every rank process after its last trial) of the"
            + " worker's live communicators, peer IPC mappings and device allocations (sc_live_resources); %d found any left over"
            + " (= GPU leaks).%n", gpuResidueChecks, gpuResidue));
      }
      b.append(String.format(Locale.ROOT, "Settings: %s backend%s, %d ranks, faults %s, timeout %d ms (+ %d ms slack)%s, delay 0..%d ms%s, "
              + "sizes 1..%d elements, staging %d KiB, %d trial(s) at once, seed %d, wall %.1f s%n",
          System.getProperty(WorkerMain.BACKEND_PROPERTY, "host"),
          "false".equals(System.getProperty(WorkerMain.VENDOR_PROPERTY)) ? " without the vendor communicator" : "", config.ranks,
          config.faults.stream().map(Fault::label).toList(), config.timeoutMs, config.slackMs,
          config.recoveryTimeout() != config.timeoutMs ? ", recovery communicator timeout " + config.recoveryTimeout() + " ms" : "",
          config.maxKillDelayMs, config.faultAfterCreate ? " after every rank entered call " + config.killGateCall
              + " (kill) / its first call (pause, close)" : "", config.maxElems,
          config.stagingBytes >> 10, config.parallel, config.seed, wallMs / 1000.0));
      if (config.faults.contains(Fault.CORRUPT)) {
        b.append(String.format(Locale.ROOT, "Corrupt settings: written at call 1..%d + 0..%d us of the faulted rank, streams of that"
            + " call + %d calls%n", config.corruptMaxCall, config.corruptMaxDelayMicros, config.corruptTailCalls));
      }
      return b.toString();
    }

    /** Counts a finished trial of {@code row}; prints the row's progress line when it was the row's last. */
    void trialFinished(Row row) {
      int k = finished.merge(row, 1, Integer::sum);
      if (k == config.trials && config.progress != null) {
        synchronized (row) {
          config.progress.printf(Locale.ROOT, "%-15s %-5s trials %d, survivors raised %d/%d (max %d ms), hangs %d, wrong %d, "
                  + "unexpected %d, faulted rank as expected %d/%d, recovery failures %d (survivors' close before it: max %d ms), stale %d%n",
              row.name, row.fault.label(), row.trials, row.survivorsRaised, row.survivors, row.maxRaiseMs, row.hangs, row.wrong,
              row.unexpected, row.victimsOk, row.faults, row.recoveryFailures, row.maxSurvivorCloseMs, row.staleAfterCrash);
          // the first problem's detail, so that a run cut short before its report still says why
          if (!row.notes.isEmpty()) config.progress.printf(Locale.ROOT, "  first of %d note(s): %s%n", row.notes.size(), row.notes.get(0));
        }
      }
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
    synchronized (all) {
      for (Worker w : all) pids.add(w.pid());
    }
    Set<String> out = new HashSet<>();
    for (String n : ShmProbe.segments()) if (ours(n, pids, before)) out.add(n);
    // one without a creator record may be another program's, caught the moment it was created: that
    // gets its record (or is gone) at once; what is still without one a second later is this run's
    for (int i = 0; i < 10 && out.stream().anyMatch(n -> ShmProbe.creatorPid(ShmProbe.SHM.resolve(n)) == 0); i++) {
      LockSupport.parkNanos(100_000_000L);
      out.removeIf(n -> !Files.exists(ShmProbe.SHM.resolve(n)) || !ours(n, pids, before));
    }
    return out;
  }

  private static final Set<String> COMM_EXCEPTIONS = Set.of("CommAbortedException", "CommTimeoutException", "CommException",
      "RendezvousException");

  /** ShmSegment.UNATTRIBUTED_STALE_MILLIS. */
  static final long UNATTRIBUTED_STALE_MILLIS = 5_000;

  /** One trial, drawn up front. */
  private record TrialSpec(Row row, RowSpec spec, Fault fault, String id, int victim, long delayNanos, long seed, long seed2,
      Corruption corruption) {
    /** Calls of every rank's fault stream: -1 (until failure), or finite for corrupt. */
    long calls(Config cfg) { return corruption == null ? -1 : corruption.atCall() + cfg.corruptTailCalls; }
  }

  /**
   * Corrupt: the victim overwrites the flag {@code peer} reads for its arrivals with {@code value} when it is
   * about to make call {@code atCall}, {@code delayMicros} later (its helper thread).
   */
  private record Corruption(int peer, long value, boolean ahead, int atCall, long delayMicros) {
    /** The WorkerMain command for trial {@code fid}. */
    String command(String fid) { return "CORRUPT " + fid + " " + peer + " " + value + " " + atCall + " " + delayMicros; }
  }

  /** Corrupt's far-ahead values start here: beyond any epoch a run reaches, on either backend. */
  static final long CORRUPT_AHEAD = 1L << 40;

  public static Summary run(Config cfg) {
    Summary sum = new Summary(cfg);
    long t0 = System.nanoTime();
    int n = cfg.ranks;
    SplittableRandom rnd = new SplittableRandom(cfg.seed);
    Set<String> initial = ShmProbe.segments();
    Queue<TrialSpec> queue = new ConcurrentLinkedQueue<>();
    int rowIx = 0;
    for (RowSpec spec : cfg.rows) {
      for (Fault f : cfg.faults) {
        Row row = new Row(spec.name(), f);
        sum.rows.add(row);
        for (int t = 0; t < cfg.trials; t++) {
          int victim = rnd.nextInt(n);
          long delay = rnd.nextLong(cfg.maxKillDelayMs * 1_000_000L + 1);
          long seed = rnd.nextLong(), seed2 = rnd.nextLong();
          Corruption cor = null;
          if (f == Fault.CORRUPT) {  // drawn only for corrupt: the other faults' draws stay what they were for a seed
            if (n < 2) throw new IllegalArgumentException("corrupt needs at least 2 ranks");
            int peer = (victim + 1 + rnd.nextInt(n - 1)) % n;
            boolean ahead = rnd.nextBoolean();
            long value = ahead ? CORRUPT_AHEAD + rnd.nextLong(1L << 20) : rnd.nextInt(2);
            int atCall = 1 + rnd.nextInt(Math.max(1, cfg.corruptMaxCall));
            long delayUs = rnd.nextLong(cfg.corruptMaxDelayMicros + 1);
            cor = new Corruption(peer, value, ahead, atCall, delayUs);
          }
          queue.add(new TrialSpec(row, spec, f, "T" + rowIx + "." + t, victim, delay, seed, seed2, cor));
        }
        rowIx++;
      }
    }
    List<Worker> all = Collections.synchronizedList(new ArrayList<>());
    Set<String> claimed = ConcurrentHashMap.newKeySet();
    int laneCount = Math.max(1, Math.min(cfg.parallel, queue.size()));
    List<Lane> lanes = new ArrayList<>();
    for (int k = 0; k < laneCount; k++) lanes.add(new Lane(k, cfg, all, claimed));
    ExecutorService pool = Executors.newFixedThreadPool(laneCount, r -> {
      Thread t = new Thread(r, "fault-injection-lane");
      t.setDaemon(true);
      return t;
    });
    try {
      List<Future<?>> running = new ArrayList<>();
      for (Lane l : lanes) running.add(pool.submit(() -> l.runAll(queue, sum)));
      for (Future<?> f : running) {
        try {
          f.get();
        } catch (ExecutionException e) {
          throw new IllegalStateException("a lane of trials failed: " + e.getCause(), e.getCause());
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
          throw new IllegalStateException("interrupted", e);
        }
      }
    } finally {
      pool.shutdownNow();
      List<Worker> ws;
      synchronized (all) {
        ws = new ArrayList<>(all);
      }
      for (Worker w : ws) {
        if (w.process.isAlive()) w.send("EXIT");
      }
      for (Worker w : ws) w.close();
      for (Worker w : ws) w.waitDead(5_000);
      sum.survivingProcesses = (int) ws.stream().filter(w -> w.process.isAlive()).count();
    }
    // A stale file left by a creator killed before it wrote its creator record is only attributable by
    // age: wait that long, start one more communicator (which sweeps), and count what is still there.
    sum.beforeFinalSweep = oursNow(all, initial).size();
    if (sum.beforeFinalSweep > 0) {
      LockSupport.parkNanos((UNATTRIBUTED_STALE_MILLIS + 500) * 1_000_000L);
      io.sparkcomms.collectives.host.HostCommunicator.create(io.sparkcomms.collectives.rendezvous.InJvmRendezvous.group(1).member(0),
          io.sparkcomms.collectives.CommOptions.builder().stagingBytes(4096).build()).close();
      Internals.awaitSweep();  // the creation only starts the sweep
    }
    sum.leakedNames.addAll(oursNow(all, initial));
    sum.leaksAtEnd = sum.leakedNames.size();
    // GPU workers report what their process still holds when a trial starts (after closing the last
    // communicator, often one that a fault broke), and after their last trial: communicators, peers'
    // IPC mappings, allocations. Per process, so trials running at once do not disturb each other.
    synchronized (all) {
      for (Worker w : all) {
        for (String l : w.printed("RES ")) {
          sum.gpuResidueChecks++;
          if (!l.endsWith(" 0 0 0")) {
            sum.gpuResidue++;
            if (sum.gpuResidueLines.size() < 5) sum.gpuResidueLines.add(l);
          }
        }
      }
    }
    sum.wallMs = (System.nanoTime() - t0) / 1_000_000;
    return sum;
  }

  private static String runCommand(String id, Path dir, int rank, int n, RowSpec spec, long seed, long timeoutMs, Config cfg, long calls) {
    return "RUN " + id + " " + dir + " " + rank + " " + n + " " + spec.kind() + " " + spec.algo() + " " + seed + " "
        + timeoutMs + " " + cfg.stagingBytes + " " + cfg.maxElems + " " + calls;
  }

  private static boolean gpu() { return "gpu".equals(System.getProperty(WorkerMain.BACKEND_PROPERTY)); }

  /**
   * A set of rank processes (and a pre-started spare) that runs trials one after another; lanes run at
   * once. Used by its own thread only; what it shares ({@code all}, {@code claimed}, the rows) is
   * thread-safe.
   */
  private static final class Lane {
    private final int index;
    private final Config cfg;
    private final Worker[] ws;
    private final Deque<Worker> spares = new ArrayDeque<>();
    private final List<Worker> all;
    /** /dev/shm files without a creator record already attributed to a trial (of any lane). */
    private final Set<String> claimed;

    Lane(int index, Config cfg, List<Worker> all, Set<String> claimed) {
      this.index = index;
      this.cfg = cfg;
      this.ws = new Worker[cfg.ranks];
      this.all = all;
      this.claimed = claimed;
    }

    private Worker startWorker() {
      Worker w = Worker.start();
      all.add(w);
      w.send("WARM"); // GPU: the CUDA start-up happens now, not in the trial that needs the process
      return w;
    }

    void runAll(Queue<TrialSpec> queue, Summary sum) {
      for (int r = 0; r < ws.length; r++) ws[r] = startWorker();
      spares.add(startWorker());
      for (Worker w : ws) {
        if (!w.awaitReady(60_000)) throw new IllegalStateException("lane " + index + ": worker did not start: " + w.tail());
      }
      for (TrialSpec ts; (ts = queue.poll()) != null; ) {
        if (Thread.currentThread().isInterrupted()) return;
        Row local = new Row(ts.row().name, ts.fault());
        String line = trial(ts, local);
        ts.row().merge(local);
        if (cfg.trialLog != null) cfg.trialLog.println(line);
        sum.trialFinished(ts.row());
      }
      if (gpu()) {  // what every rank process of this lane holds after its last trial
        String id = "L" + index + ".end";
        for (Worker w : ws) if (w.process.isAlive()) w.send("RES " + id);
        for (Worker w : ws) if (w.process.isAlive()) w.await("RES " + id + " ", System.nanoTime() + 30_000_000_000L);
      }
    }

    /**
     * Waits (bounded) until every worker announced entering call {@code call} of trial {@code id}
     * ("CALL id i", i &gt;= call): created its communicator (a GPU one takes ~1 s to build) and reached
     * that call; or ended the trial.
     */
    private void awaitCall(String id, long call, long deadline) {
      for (Worker w : ws) {
        while (System.nanoTime() < deadline && w.lastCall(id) < call && w.mark("FAIL", id) == null
            && w.mark("DONE", id) == null && w.process.isAlive()) {
          LockSupport.parkNanos(500_000);
        }
      }
    }

    /** The call every rank must have entered before the fault: kill, {@link Config#killGateCall}; the others, the first. */
    private long gateCall(Fault f) { return f == Fault.KILL ? Math.max(0, cfg.killGateCall) : 0; }

    /**
     * Corrupt: waits (bounded) until the victim printed its CORRUPTED line; false when it ended its stream
     * without one (it raised before it got to the call of the write: a set-up failure, not the fault's).
     */
    private boolean awaitCorruption(Worker v, String fid) {
      long deadline = System.nanoTime() + (2 * cfg.timeoutMs + cfg.slackMs) * 1_000_000L;
      while (v.mark("CORRUPTED", fid) == null && v.mark("FAIL", fid) == null && v.mark("DONE", fid) == null
          && v.process.isAlive() && System.nanoTime() < deadline) {
        LockSupport.parkNanos(500_000);
      }
      // (the reader thread records lines in order: a CORRUPTED line printed before FAIL / DONE is marked by now)
      return v.mark("CORRUPTED", fid) != null;
    }

    /** Takes a spare for rank {@code r} and starts the next spare. */
    private void replace(int r) {
      ws[r].waitDead(5_000);
      if (spares.isEmpty()) spares.add(startWorker());
      ws[r] = spares.poll();
      spares.add(startWorker());
    }

    /**
     * This trial's entries in /dev/shm now: created by one of its processes ({@code pids}); or, only if
     * {@code mayOwnUnattributed} (its rank 0 was killed during creation), without a creator record, new
     * since the trial began and not claimed by another trial.
     */
    private Set<String> trialSegments(Set<Long> pids, Set<String> before, boolean mayOwnUnattributed) {
      Set<String> out = new HashSet<>();
      for (String name : ShmProbe.segments()) {
        long pid = ShmProbe.creatorPid(ShmProbe.SHM.resolve(name));
        if (pid != 0 ? pids.contains(pid) : mayOwnUnattributed && !before.contains(name) && claimed.add(name)) out.add(name);
      }
      return out;
    }

    /** Set-up attempts of a fault communicator before the trial counts as failed (faults in the calls only). */
    private static final int SETUP_ATTEMPTS = 3;

    /**
     * Starts the trial's fault communicator on every rank: RUN without a call limit (corrupt: a finite
     * stream, and the CORRUPT command to the victim first). When the fault is to land in the calls,
     * waits until every rank entered call {@link #gateCall} (corrupt: and until the victim wrote the flag); if a
     * rank raised before (a rendezvous timeout on a loaded host, say), lets every rank finish, and starts
     * over with a fresh communicator (the failure is counted and shown, not injected into). Returns the
     * id of the communicator to fault, or null when every attempt failed (counted as unexpected).
     */
    private String start(TrialSpec ts, Row row, List<Path> dirs, Set<String> segs, StringBuilder log) {
      int n = ws.length;
      boolean inCalls = cfg.faultAfterCreate || ts.fault() != Fault.KILL;
      for (int attempt = 0; ; attempt++) {
        String fid = ts.id() + ".f" + (attempt == 0 ? "" : "." + attempt);
        Path dir = FileRendezvous.createDirectory();
        dirs.add(dir);
        Corruption cor = ts.corruption();
        if (cor != null) ws[ts.victim()].send(cor.command(fid));  // before RUN: it is read first
        for (int r = 0; r < n; r++) ws[r].send(runCommand(fid, dir, r, n, ts.spec(), ts.seed(), cfg.timeoutMs, cfg, ts.calls(cfg)));
        if (!inCalls) return fid;
        long gate = gateCall(ts.fault());
        awaitCall(fid, gate, System.nanoTime() + 60_000_000_000L);
        boolean streaming = true;
        // corrupt: a rank may already have raised because of the corruption, or finished its (finite) stream
        for (Worker w : ws) streaming &= w.lastCall(fid) >= gate && (cor != null || w.mark("FAIL", fid) == null);
        if (streaming && cor != null) streaming = awaitCorruption(ws[ts.victim()], fid);
        if (streaming) return fid;
        // a rank raised (or never got there): every rank must raise too, within timeout + slack
        String first = null;
        long firstNanos = 0;
        long deadline = System.nanoTime() + (2 * cfg.timeoutMs + cfg.slackMs) * 1_000_000L;
        for (int r = 0; r < n; r++) {
          Worker.Trial tr = ws[r].collect(fid, deadline);
          row.wrong += (int) tr.count("WRONG");
          if (tr.segment() != null) segs.add(tr.segment());
          if (tr.end() == null) {
            row.hangs++;
            row.notes.add(fid + " rank " + r + " did not raise after a peer failed before the fault: " + ws[r].tail());
            ws[r].kill();
            replace(r);
            if (!ws[r].awaitReady(60_000)) row.notes.add(fid + ": replacement worker did not start: " + ws[r].tail());
          } else if (!tr.done() && (firstNanos == 0 || tr.end().nanos() < firstNanos)) {
            first = "rank " + r + ": " + tr.end().text();
            firstNanos = tr.end().nanos();
          }
        }
        row.setupRetries++;
        if (row.setupNotes.size() < 3) row.setupNotes.add(first == null ? fid + ": a rank did not enter its calls" : first);
        log.append(" set-up failed (").append(first).append("), started over;");
        if (attempt + 1 == SETUP_ATTEMPTS) {
          row.unexpected++;
          row.notes.add(ts.id() + ": the fault communicator failed before the fault " + SETUP_ATTEMPTS + " times, last: " + first);
          return null;
        }
      }
    }

    private String trial(TrialSpec ts, Row row) {
      int n = ws.length;
      String id = ts.id();
      RowSpec spec = ts.spec();
      Fault fault = ts.fault();
      int victim = ts.victim();
      long tStart = System.nanoTime();
      Corruption cor = ts.corruption();
      StringBuilder log = new StringBuilder(cor != null
          ? String.format(Locale.ROOT, "[%s] %s corrupt: rank %d, at its call %d + %d us, writes %s %d into the flag rank %d reads:",
              id, spec.name(), victim, cor.atCall(), cor.delayMicros(), cor.ahead() ? "far ahead" : "behind", cor.value(), cor.peer())
          : String.format(Locale.ROOT, "[%s] %s %s rank %d after %d ms%s:", id, spec.name(),
              fault.label(), victim, ts.delayNanos() / 1_000_000, fault == Fault.KILL && cfg.faultAfterCreate
                  ? " once every rank entered call " + gateCall(fault) : cfg.faultAfterCreate || fault != Fault.KILL ? " in the calls" : ""));
      row.trials++;
      Set<String> before = ShmProbe.segments();
      Set<Long> pids = new HashSet<>();
      for (Worker w : ws) pids.add(w.pid());
      List<Path> dirs = new ArrayList<>();
      Set<String> segs = new HashSet<>();
      Worker v = ws[victim];
      boolean paused = false;
      try {
        String fid = start(ts, row, dirs, segs, log);
        if (fid == null) return log.toString();
        v = ws[victim];
        for (Worker w : ws) pids.add(w.pid());
        if (cor == null) LockSupport.parkNanos(ts.delayNanos());  // (corrupt: the victim's helper picks the moment)
        // kill: the call each rank had announced entering, read before the kill is sent, so written before it
        long entered = Long.MAX_VALUE;
        int behind = -1;
        if (fault == Fault.KILL) {
          for (int r = 0; r < n; r++) {
            long c = ws[r].lastCall(fid);
            if (c < entered) {
              entered = c;
              behind = r;
            }
          }
        }
        long tFault = System.nanoTime();
        if (cor == null) row.faults++;
        boolean corrupted = false;
        Worker.Trial victimTrial = null;
        switch (fault) {
          case KILL -> {
            v.kill();
            if (!v.waitDead(10_000)) {
              row.victimsAlive++;
              row.notes.add(id + " killed rank " + victim + " still alive after 10 s");
            } else {
              row.victimsOk++;
            }
            boolean ended = v.awaitOutputEnd(5_000);
            long landed = v.lastCall(fid);  // with its output read to the end: the last call it entered
            if (entered >= gateCall(fault)) {
              row.midCall++;
              row.landedMin = Math.min(row.landedMin, landed);
              row.landedMax = Math.max(row.landedMax, landed);
              log.append(" mid-call: killed in its call ").append(landed).append(ended ? "" : " or a later one (output not ended)")
                  .append(", every rank had entered call ").append(entered).append(" or a later one;");
            } else {
              log.append(" not shown mid-call: rank ").append(behind).append(entered < 0 ? " had announced no call"
                  : " had announced only call " + entered).append(" before the kill;");
            }
          }
          case PAUSE -> {
            ShmProbe.signal(v.pid(), "STOP");
            paused = true;
          }
          case CLOSE -> {
            v.send("CLOSE " + fid);
            // the rank closes before its next call: that is the fault's moment
            victimTrial = v.collect(fid, tFault + (cfg.timeoutMs + cfg.slackMs) * 1_000_000L);
            Worker.Line closing = victimTrial.first("CLOSING");
            if (closing != null) {
              // the victim's own clock (System.nanoTime: CLOCK_MONOTONIC on Linux) when it began to close:
              // a peer woken by the close can raise, and be read, before this line is read
              String[] w = closing.text().split(" ");
              long tc = w.length >= 5 && w[3].equals("at") ? Long.parseLong(w[4]) : closing.nanos();
              tFault = Math.abs(tc - closing.nanos()) < 10_000_000_000L ? tc : closing.nanos();
            }
            row.wrong += (int) victimTrial.count("WRONG");
            if (victimTrial.done() && closing != null && victimTrial.first("CLOSED") != null) {
              row.victimsOk++;
            } else {
              row.victimsBad++;
              row.notes.add(id + " closing rank " + victim + ": " + (victimTrial.end() == null ? "no answer: " + v.tail()
                  : victimTrial.end().text()));
              if (victimTrial.end() == null) v.kill();
            }
          }
          case CORRUPT -> {
            // start() returned once the victim printed "CORRUPTED fid ok at NANOS calls I peer P value V" (or "failed: ...")
            Worker.Line cl = v.mark("CORRUPTED", fid);
            String[] w = cl.text().split(" ");
            if (w.length >= 7 && w[2].equals("ok")) {
              corrupted = true;
              row.faults++;
              if (cor.ahead()) row.corruptAhead++;
              // the victim's clock is this process's (System.nanoTime: CLOCK_MONOTONIC on Linux); the read time if it is not
              long tw = Long.parseLong(w[4]);
              tFault = Math.abs(tw - cl.nanos()) < 10_000_000_000L ? tw : cl.nanos();
              log.append(" written at its call ").append(w[6]).append(';');
            } else {
              row.victimsBad++;
              row.notes.add(id + " rank " + victim + " did not write the flag: " + cl.text());
            }
          }
        }
        long deadline = tFault + (cfg.timeoutMs + cfg.slackMs) * 1_000_000L;
        List<Integer> replace = new ArrayList<>();
        if (fault == Fault.KILL) replace.add(victim);
        long maxCalls = -1, raiseMax = -1;
        boolean timeoutSeen = false, anyRaised = false;
        for (int r = 0; r < n; r++) {
          if (r == victim) continue;
          row.survivors++;
          Worker.Trial tr = ws[r].collect(fid, deadline);
          row.wrong += (int) tr.count("WRONG");
          tr.algos().forEach((k, c) -> row.algos.merge(k, c, Long::sum));
          if (tr.segment() != null) segs.add(tr.segment());
          if (tr.end() == null) {
            row.hangs++;
            row.notes.add(id + " rank " + r + " did not raise within timeout + slack: " + ws[r].tail());
            ws[r].kill();
            replace.add(r);
          } else if (fault == Fault.CORRUPT && tr.done()) {
            row.survivorsCompleted++;  // every call of its stream, each one checked
            maxCalls = Math.max(maxCalls, tr.calls());
          } else if (tr.done() || !COMM_EXCEPTIONS.contains(tr.exception())) {
            row.unexpected++;
            row.notes.add(id + " rank " + r + ": " + tr.end().text());
          } else if (tr.end().nanos() < tFault) {
            row.unexpected++;
            row.notes.add(id + " rank " + r + " raised " + (tFault - tr.end().nanos()) / 1_000_000 + " ms before the fault: "
                + tr.end().text());
          } else {
            long ms = (tr.end().nanos() - tFault) / 1_000_000;
            row.survivorsRaised++;
            row.sumRaiseMs += ms;
            row.maxRaiseMs = Math.max(row.maxRaiseMs, ms);
            row.minRaiseMs = Math.min(row.minRaiseMs, ms);
            raiseMax = Math.max(raiseMax, ms);
            row.exceptions.merge(tr.exception(), 1, Integer::sum);
            if (tr.exception().equals("CommTimeoutException")) timeoutSeen = true;
            anyRaised = true;
            maxCalls = Math.max(maxCalls, tr.calls());
          }
        }
        // (a paused rank is still stopped here, and a killed one's output all read: what it printed came before the fault)
        // (a survivor that completed a collective proves every rank was in the stream, whatever was read of the victim's output)
        boolean sawStream = v.mark("STREAM", fid) != null;
        boolean streaming = sawStream || maxCalls >= 1;
        boolean created = streaming || v.mark("CREATED", fid) != null;
        if (streaming) row.inStream++;
        else if (!created) row.killsDuringCreate++;
        if (maxCalls >= 1) row.afterFirstCall++;
        log.append(streaming ? " in stream" : created ? " before the first call" : " in creation");
        if (!sawStream && streaming) log.append(" (its STREAM line was not read)");
        if (maxCalls >= 0) log.append(" (survivors completed ").append(maxCalls).append(maxCalls == 1 ? " call)" : " calls)");
        if (fault == Fault.CORRUPT && raiseMax < 0) log.append("; no survivor raised");
        else log.append(String.format(Locale.ROOT, "; survivors raised %s in %d ms", row.exceptions.keySet(), raiseMax));
        if (fault == Fault.CORRUPT) log.append(", ").append(row.survivorsCompleted).append(" completed their stream");

        if (fault == Fault.CORRUPT) {
          // the corrupting rank kept calling: it raises within timeout + slack of its write, or completes its stream
          victimTrial = v.collect(fid, deadline);
          row.wrong += (int) victimTrial.count("WRONG");
          Worker.Line end = victimTrial.end();
          if (end == null) {
            row.victimsBad++;
            row.notes.add(id + " corrupting rank " + victim + " neither raised nor completed within timeout + slack: " + v.tail());
            v.kill();
            replace.add(victim);
          } else if (!corrupted) {
            log.append("; no write");  // counted above
          } else if (victimTrial.done()) {
            row.victimsOk++;
            row.victimCompleted++;
            log.append("; corrupting rank completed its stream");
          } else if (COMM_EXCEPTIONS.contains(victimTrial.exception()) && end.nanos() >= tFault) {
            row.victimsOk++;
            row.victimRaised++;
            anyRaised = true;
            log.append("; corrupting rank raised ").append(victimTrial.exception()).append(" in ")
                .append((end.nanos() - tFault) / 1_000_000).append(" ms");
          } else {
            row.victimsBad++;
            row.notes.add(id + " corrupting rank " + victim + (end.nanos() < tFault ? " raised before its write: " : ": ") + end.text());
          }
          if (corrupted && anyRaised) row.corruptNoticed++;
        }

        if (fault == Fault.PAUSE) {
          if (timeoutSeen) {
            row.timeoutTrials++;
          } else {
            row.unexpected++;
            row.notes.add(id + " pause: no survivor raised CommTimeoutException (" + row.exceptions + ")");
          }
          // stopped beyond the timeout, and until every survivor gave up
          long until = tFault + (cfg.timeoutMs + cfg.pauseExtraMs) * 1_000_000L;
          LockSupport.parkNanos(until - System.nanoTime());
          long tCont = System.nanoTime();
          ShmProbe.signal(v.pid(), "CONT");
          paused = false;
          victimTrial = v.collect(fid, tCont + (cfg.timeoutMs + cfg.slackMs) * 1_000_000L);
          row.wrong += (int) victimTrial.count("WRONG");
          if (victimTrial.end() == null) {
            row.victimsBad++;
            row.notes.add(id + " paused rank " + victim + " did not raise within timeout + slack of SIGCONT: " + v.tail());
            v.kill();
            replace.add(victim);
          } else if (victimTrial.done() || !COMM_EXCEPTIONS.contains(victimTrial.exception())) {
            row.victimsBad++;
            row.notes.add(id + " paused rank " + victim + " after SIGCONT: " + victimTrial.end().text());
          } else {
            row.victimsOk++;
            long ms = (victimTrial.end().nanos() - tCont) / 1_000_000;
            row.maxResumeMs = Math.max(row.maxResumeMs, ms);
            log.append("; resumed rank raised ").append(victimTrial.exception()).append(" in ").append(ms).append(" ms");
          }
        }
        if (victimTrial != null) {
          victimTrial.algos().forEach((k, c) -> row.algos.merge(k, c, Long::sum));
          if (victimTrial.segment() != null) segs.add(victimTrial.segment());
        }

        // right after the fault: anything of this trial still in /dev/shm?
        Set<String> stale = trialSegments(pids, before, fault == Fault.KILL && victim == 0 && !created);
        for (String s : segs) if (Files.exists(Path.of(s))) stale.add(Path.of(s).getFileName().toString());
        row.staleAfterCrash += stale.size();

        // replace the killed (and any hung) rank with pre-started spares, then check a new communicator works
        for (int r : replace) replace(r);
        for (Worker w : ws) {
          pids.add(w.pid());
          if (!w.awaitReady(60_000)) row.notes.add(id + ": replacement worker did not start: " + w.tail());
          // a spare's CUDA start-up is not what the recovery checks (it took > 16 s with 20 trials at once)
          if (gpu() && !w.awaitWarm(120_000)) row.notes.add(id + ": replacement worker did not finish its CUDA start-up: " + w.tail());
        }
        Path dir2 = FileRendezvous.createDirectory();
        dirs.add(dir2);
        row.recoveries++;
        long rt = cfg.recoveryTimeout();
        for (int r = 0; r < n; r++) ws[r].send(runCommand(id + ".r", dir2, r, n, spec, ts.seed2(), rt, cfg, cfg.recoveryCalls));
        long deadline2 = System.nanoTime() + (rt * 4 + cfg.slackMs) * 1_000_000L;
        boolean ok = true;
        for (int r = 0; r < n; r++) {
          Worker.Trial tr = ws[r].collect(id + ".r", deadline2);
          row.wrong += (int) tr.count("WRONG");
          Worker.Line made = tr.first("CREATED");  // "CREATED id ok prevclose ms": a survivor's close of the failed communicator
          String[] cw = made == null ? new String[0] : made.text().split(" ");
          if (cw.length >= 5 && cw[3].equals("prevclose")) row.maxSurvivorCloseMs = Math.max(row.maxSurvivorCloseMs, Long.parseLong(cw[4]));
          if (tr.segment() != null) segs.add(tr.segment());
          if (!tr.done()) {
            ok = false;
            row.notes.add(id + " recovery rank " + r + ": " + (tr.end() == null ? "no answer: " + ws[r].tail() : tr.end().text()));
            if (tr.end() == null) {
              ws[r].kill();
              ws[r].waitDead(5_000);
              ws[r] = startWorker();
              ws[r].awaitReady(60_000);
              if (gpu()) ws[r].awaitWarm(120_000);
            }
          }
        }
        if (!ok) row.recoveryFailures++;
        log.append(ok ? "; new communicator ok" : "; NEW COMMUNICATOR FAILED");
        // after the next start, the crashed trial's segment must be gone (swept), and the new one unlinked;
        // a file without a creator record is only swept once old enough (counted, and checked at the end)
        for (String s : stale) {
          Path p = ShmProbe.SHM.resolve(s);
          if (!Files.exists(p)) continue;
          long creator = ShmProbe.creatorPid(p);
          // the workers' creations sweep in the background: give that sweep a moment to reach the file
          for (long until = System.nanoTime() + 5_000_000_000L; creator != 0 && Files.exists(p) && System.nanoTime() < until; ) {
            LockSupport.parkNanos(20_000_000);
          }
          if (!Files.exists(p)) continue;
          if (creator == 0) row.unattributedAfterRecovery++;
          else if (pids.contains(creator)) row.leftAfterRecovery++;  // (else: another trial's file, not ours after all)
        }
        for (String s : segs) {
          if (Files.exists(Path.of(s)) && !stale.contains(Path.of(s).getFileName().toString())) row.leftAfterRecovery++;
        }
        if (row.wrong > 0) log.append("; ").append(row.wrong).append(" WRONG");
        if (row.hangs > 0) log.append("; ").append(row.hangs).append(" HANG(S)");
        if (row.unexpected > 0 || row.victimsBad > 0) log.append("; UNEXPECTED: ").append(row.notes);
      } finally {
        if (paused && v.process.isAlive()) ShmProbe.signalQuietly(v.pid(), "CONT");
        dirs.forEach(ShmProbe::deleteTree);
      }
      log.append(String.format(Locale.ROOT, " (%.1f s)", (System.nanoTime() - tStart) / 1e9));
      return log.toString();
    }
  }

  /** Standalone runner: prints the summary table; exit 0 when no hang, wrong result or leak happened. */
  public static void main(String[] args) {
    Config c = new Config();
    c.progress = System.out;
    c.trialLog = System.out;
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--ranks": c.ranks = Integer.parseInt(args[++i]); break;
        case "--trials": c.trials = Integer.parseInt(args[++i]); break;
        case "--timeout-ms": c.timeoutMs = Long.parseLong(args[++i]); break;
        case "--slack-ms": c.slackMs = Long.parseLong(args[++i]); break;
        case "--max-delay-ms": c.maxKillDelayMs = Long.parseLong(args[++i]); break;
        case "--kill-after-create", "--fault-after-create": c.faultAfterCreate = true; break;
        case "--kill-gate-call": c.killGateCall = Math.max(0, Integer.parseInt(args[++i])); break;
        case "--max-elems": c.maxElems = Integer.parseInt(args[++i]); break;
        case "--seed": c.seed = Long.parseLong(args[++i]); break;
        case "--backend": System.setProperty(WorkerMain.BACKEND_PROPERTY, args[++i]); break;
        case "--parallel": c.parallel = Math.max(1, Integer.parseInt(args[++i])); break;
        case "--recovery-timeout-ms": c.recoveryTimeoutMs = Long.parseLong(args[++i]); break;
        case "--pause-extra-ms": c.pauseExtraMs = Long.parseLong(args[++i]); break;
        case "--corrupt-max-call": c.corruptMaxCall = Math.max(1, Integer.parseInt(args[++i])); break;
        case "--corrupt-tail-calls": c.corruptTailCalls = Math.max(0, Integer.parseInt(args[++i])); break;
        case "--corrupt-max-delay-us": c.corruptMaxDelayMicros = Math.max(0, Long.parseLong(args[++i])); break;
        case "--quiet": c.trialLog = null; break;
        case "--no-vendor": System.setProperty(WorkerMain.VENDOR_PROPERTY, "false"); break;
        case "--fault": {
          List<Fault> fs = new ArrayList<>();
          for (String f : args[++i].split(",")) fs.add(Fault.valueOf(f.trim().toUpperCase(Locale.ROOT)));
          c.faults = fs.stream().distinct().toList();
          break;
        }
        case "--rows": {
          List<String> want = List.of(args[++i].split(","));
          List<String> known = ROWS.stream().map(r -> r.name().replace(' ', '_')).toList();
          for (String w : want) if (!known.contains(w)) usage("unknown row " + w + " (rows: " + String.join(",", known) + ")");
          c.rows = ROWS.stream().filter(r -> want.contains(r.name().replace(' ', '_'))).toList();
          break;
        }
        default:
          usage("unknown option " + args[i]);
      }
    }
    Summary s = run(c);
    System.out.println();
    System.out.print(s.table());
    List<String> p = s.problems();
    System.out.println(p.isEmpty() ? "PASS: no hang, no wrong result, no leak" : "FAIL:\n  " + String.join("\n  ", p));
    System.exit(p.isEmpty() ? 0 : 1);
  }

  private static void usage(String why) {
    System.err.println(why);
    System.err.println("usage: FaultInjection [--ranks N] [--trials T] [--timeout-ms MS] [--slack-ms MS] [--max-delay-ms MS] "
        + "[--max-elems N] [--seed S] [--backend host|gpu] [--fault kill|pause|close|corrupt|kill,pause,close,corrupt] "
        + "[--kill-after-create] [--kill-gate-call K] [--parallel P] [--recovery-timeout-ms MS] [--pause-extra-ms MS] [--corrupt-max-call K] "
        + "[--corrupt-tail-calls T] [--corrupt-max-delay-us D] [--quiet] [--no-vendor] [--rows allReduce_FLAT,allGather,...]");
    System.exit(2);
  }
}
