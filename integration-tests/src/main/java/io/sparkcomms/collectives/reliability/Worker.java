package io.sparkcomms.collectives.reliability;

import java.io.ByteArrayOutputStream;
import java.io.FileInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;

/** The parent's handle of a {@link WorkerMain} process: commands in, time-stamped event lines out. */
final class Worker implements AutoCloseable {
  /** An output line and when the parent read it (System.nanoTime). */
  record Line(long nanos, String text) {
    String[] words() { return text.split(" ", 4); }
  }

  final Process process;
  private final PrintWriter stdin;
  private final BlockingQueue<Line> lines = new LinkedBlockingQueue<>();
  /** Every line read so far, for diagnostics. */
  final List<String> history = java.util.Collections.synchronizedList(new ArrayList<>());
  private volatile boolean ready;
  /** The WARM answer: null before it, then whether the CUDA start-up worked. */
  private volatile Boolean warm;
  private volatile boolean outputEnded;
  /** First CREATED / STREAM / CLOSING / CORRUPTED / FAIL / DONE line of each trial id, by "KIND id": looked up without scanning the history. */
  private final java.util.Map<String, Line> marks = new java.util.concurrent.ConcurrentHashMap<>();

  /**
   * The latest CALL line of each trial id. CALL lines go nowhere else (not to the history, not to the
   * queue): a stream prints one per call, and a worker runs many trials.
   */
  private final java.util.Map<String, Long> calls = new java.util.concurrent.ConcurrentHashMap<>();

  /**
   * The file the worker's stdout and stderr go to. Not a pipe: when a process dies, the JDK's stream of
   * its pipe (Process.getInputStream) can drop the last lines it wrote (JDK 17, a child writing a line
   * every 20 us and killed with kill -9: a few lines missing in 1 of 20 kills), and what a killed rank
   * wrote last is evidence (the call it died in). A file keeps every byte its write(2)s wrote, whatever
   * happens to the writer afterwards.
   */
  private final Path output;

  /** How long the reader sleeps when the file has nothing new and the worker still runs. */
  private static final long POLL_NANOS = 500_000;

  private Worker(Process p, Path output) {
    this.process = p;
    this.output = output;
    this.stdin = new PrintWriter(new OutputStreamWriter(p.getOutputStream(), StandardCharsets.UTF_8), true);
    Thread t = new Thread(this::readOutput, "worker-reader-" + p.pid());
    t.setDaemon(true);
    t.start();
  }

  /**
   * Follows the output file until the worker is gone and everything it wrote is read. Liveness is looked
   * at before each read: a read that finds nothing new after the process was seen dead has read all it
   * wrote. Only whole lines are handled; a last line without its newline is handled at the end.
   */
  private void readOutput() {
    ByteArrayOutputStream partial = new ByteArrayOutputStream();
    try (InputStream in = new FileInputStream(output.toFile())) {
      byte[] buf = new byte[1 << 16];
      while (true) {
        boolean gone = !process.isAlive();
        int k = in.read(buf);
        if (k > 0) {
          int from = 0;
          for (int i = 0; i < k; i++) {
            if (buf[i] != '\n') continue;
            partial.write(buf, from, i - from);
            onLine(partial.toString(StandardCharsets.UTF_8));
            partial.reset();
            from = i + 1;
          }
          partial.write(buf, from, k - from);
        } else if (gone) {
          break;
        } else {
          java.util.concurrent.locks.LockSupport.parkNanos(POLL_NANOS);
        }
      }
    } catch (IOException e) {
      // unreadable: the output ends here
    }
    if (partial.size() > 0) onLine(partial.toString(StandardCharsets.UTF_8));
    try {
      Files.deleteIfExists(output);
    } catch (IOException ignored) {
      // best effort: a temp file
    }
    outputEnded = true;
    lines.add(new Line(System.nanoTime(), "EOF"));
  }

  private void onLine(String l) {
    if (l.startsWith("CALL ")) {  // one per call: only the latest of each trial is kept
      String[] w = l.split(" ");
      if (w.length == 3) {
        try {
          calls.put(w[1], Long.parseLong(w[2]));
          return;
        } catch (NumberFormatException e) {
          // not an announcement: kept as an ordinary line
        }
      }
    }
    history.add(l);
    if (l.startsWith("READY")) {
      synchronized (this) {
        ready = true;
        notifyAll();
      }
    } else if (l.startsWith("WARM ")) {  // "WARM ms" when the CUDA start-up worked, "WARM failed: ..." when not
      synchronized (this) {
        warm = l.matches("WARM \\d+");
        notifyAll();
      }
    }
    Line line = new Line(System.nanoTime(), l);
    if (l.startsWith("CREATED ") || l.startsWith("STREAM ") || l.startsWith("CLOSING ") || l.startsWith("CORRUPTED ")
        || l.startsWith("FAIL ") || l.startsWith("DONE ")) {
      String[] w = l.split(" ", 3);
      if (w.length >= 2) marks.putIfAbsent(w[0] + " " + w[1], line);
    }
    lines.add(line);
  }

  /** Starts a worker JVM with this JVM's classpath. */
  static Worker start() { return start(null); }

  /** {@link #start()}; host backend: with its segments in {@code segmentDir} (null: the default, /dev/shm). */
  static Worker start(Path segmentDir) {
    List<String> cmd = new ArrayList<>(List.of(ShmProbe.javaBinary(), "-Xmx256m", "-XX:+UseSerialGC", "-Xss4m",
        "-D" + WorkerMain.BACKEND_PROPERTY + "=" + System.getProperty(WorkerMain.BACKEND_PROPERTY, "host"),
        "-D" + WorkerMain.VENDOR_PROPERTY + "=" + System.getProperty(WorkerMain.VENDOR_PROPERTY, "true")));
    if (segmentDir != null) cmd.add("-D" + WorkerMain.SEGMENT_DIR_PROPERTY + "=" + segmentDir);
    cmd.addAll(List.of("-cp", System.getProperty("java.class.path"), WorkerMain.class.getName()));
    ProcessBuilder pb = new ProcessBuilder(cmd);
    pb.redirectErrorStream(true);
    Path out = null;
    try {
      out = Files.createTempFile("sparkcomms-worker-", ".out");
      out.toFile().deleteOnExit();  // (the reader deletes it once the worker is gone and read)
      pb.redirectOutput(out.toFile());
      return new Worker(pb.start(), out);
    } catch (IOException e) {
      if (out != null) out.toFile().delete();
      throw new UncheckedIOException("cannot start a worker JVM", e);
    }
  }

  long pid() { return process.pid(); }

  /** The first line {@code kind id ...} (kind CREATED, STREAM, CLOSING, CORRUPTED, FAIL or DONE) read so far, or null. */
  Line mark(String kind, String id) { return marks.get(kind + " " + id); }

  /**
   * The latest (highest) call index of trial {@code id} this worker announced ("CALL id i") and the parent
   * read so far, or -1. Lines are read in order and the worker writes each one before it starts the call, so the
   * rank had entered that call when this returns it. Once the output ended (a killed rank, {@link
   * #awaitOutputEnd}), it is the last call the rank entered.
   */
  long lastCall(String id) {
    return calls.getOrDefault(id, -1L);
  }

  /** Waits (bounded) until the reader saw the end of the process's output: every line it printed is read. */
  boolean awaitOutputEnd(long millis) {
    long until = System.nanoTime() + millis * 1_000_000L;
    while (!outputEnded && System.nanoTime() < until) java.util.concurrent.locks.LockSupport.parkNanos(1_000_000L);
    return outputEnded;
  }

  /** Waits until the worker JVM has started and printed READY. */
  synchronized boolean awaitReady(long millis) {
    long until = System.currentTimeMillis() + millis;
    try {
      while (!ready && process.isAlive() && System.currentTimeMillis() < until) wait(Math.max(1, Math.min(100, until - System.currentTimeMillis())));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    return ready;
  }

  /** The lines of trial {@code id} up to its DONE or FAIL line ({@code end}, null if the deadline came first). */
  record Trial(List<Line> lines, Line end) {
    boolean done() { return end != null && end.text.startsWith("DONE"); }
    long count(String kind) { return lines.stream().filter(l -> l.text.startsWith(kind + " ")).count(); }
    /** Calls this rank completed in the trial: from "FAIL id X after N calls" or "DONE id N". */
    long calls() {
      if (end == null) return -1;
      String[] w = end.text.split(" ");
      if (w[0].equals("DONE") && w.length > 2) return Long.parseLong(w[2]);
      for (int i = 0; i + 2 < w.length; i++) {
        if (w[i].equals("after") && w[i + 2].startsWith("calls")) return Long.parseLong(w[i + 1]);
      }
      return -1;
    }
    /** The ALGOS line's counts: "FLAT=12 LP=30" as a map. */
    java.util.Map<String, Long> algos() {
      java.util.Map<String, Long> m = new java.util.TreeMap<>();
      for (Line l : lines) {
        if (!l.text.startsWith("ALGOS ")) continue;
        String[] w = l.text.split(" ");
        for (int i = 2; i < w.length; i++) {
          int eq = w[i].indexOf('=');
          if (eq > 0) m.merge(w[i].substring(0, eq), Long.parseLong(w[i].substring(eq + 1)), Long::sum);
        }
      }
      return m;
    }
    /** The first line of this trial starting with {@code kind}, or null. */
    Line first(String kind) {
      return lines.stream().filter(l -> l.text.startsWith(kind + " ")).findFirst().orElse(null);
    }
    String segment() {
      return lines.stream().filter(l -> l.text.startsWith("SEG ")).map(l -> l.words()[2]).findFirst().orElse(null);
    }
    /** The exception class of a FAIL line. */
    String exception() { return end == null || !end.text.startsWith("FAIL") ? null : end.words()[2]; }
  }

  Trial collect(String id, long deadline) {
    List<Line> got = new ArrayList<>();
    while (true) {
      Line l = awaitAny(deadline, "SEG " + id + " ", "CREATED " + id + " ", "STREAM " + id + " ", "WRONG " + id + " ", "CLOSING " + id + " ",
          "CLOSED " + id + " ", "CORRUPTED " + id + " ", "ALGOS " + id + " ", "DONE " + id + " ", "FAIL " + id + " ");
      if (l == null) return new Trial(got, null);
      got.add(l);
      if (l.text.startsWith("DONE") || l.text.startsWith("FAIL")) return new Trial(got, l);
    }
  }

  void send(String command) { stdin.println(command); }

  /**
   * The next line starting with {@code prefix} (other lines are dropped), or null at the deadline
   * (System.nanoTime) or when the process ended.
   */
  Line await(String prefix, long deadline) {
    return awaitAny(deadline, prefix);
  }

  /** The next line starting with one of {@code prefixes}; null at the deadline or at end of output. */
  Line awaitAny(long deadline, String... prefixes) {
    while (true) {
      long left = deadline - System.nanoTime();
      Line l;
      try {
        l = left <= 0 ? lines.poll() : lines.poll(left, TimeUnit.NANOSECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        return null;
      }
      if (l == null) return null;
      if (l.text.equals("EOF")) {
        lines.add(l); // keep the end marker for later calls
        return null;
      }
      for (String p : prefixes) if (l.text.startsWith(p)) return l;
    }
  }

  /** Every line read so far that starts with {@code prefix} (consumed or not). */
  List<String> printed(String prefix) {
    synchronized (history) {
      return history.stream().filter(l -> l.startsWith(prefix)).toList();
    }
  }

  /**
   * GPU backend: waits (bounded) until the worker printed its WARM line, i.e. finished the CUDA
   * start-up asked for when it was started; true if it did.
   */
  synchronized boolean awaitWarm(long millis) {
    long until = System.currentTimeMillis() + millis;
    try {
      while (warm == null && process.isAlive() && System.currentTimeMillis() < until) wait(Math.max(1, Math.min(100, until - System.currentTimeMillis())));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    return Boolean.TRUE.equals(warm);
  }

  /** Lines already read and not yet consumed. */
  List<Line> drain() {
    List<Line> out = new ArrayList<>();
    lines.drainTo(out);
    for (Line l : out) if (l.text.equals("EOF")) lines.add(l);
    return out;
  }

  void kill() { process.destroyForcibly(); }

  boolean waitDead(long millis) {
    try {
      return process.waitFor(millis, TimeUnit.MILLISECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    }
  }

  String tail() {
    synchronized (history) {
      return String.join(" | ", history.subList(Math.max(0, history.size() - 6), history.size()));
    }
  }

  /** Asks the worker to exit; kills it if it does not within a few seconds. */
  @Override public void close() {
    if (process.isAlive()) {
      send("EXIT");
      if (!waitDead(5_000)) {
        kill();
        waitDead(5_000);
      }
    }
  }
}
