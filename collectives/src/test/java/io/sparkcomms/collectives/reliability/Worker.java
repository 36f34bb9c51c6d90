package io.sparkcomms.collectives.reliability;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
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

  private Worker(Process p) {
    this.process = p;
    this.stdin = new PrintWriter(new OutputStreamWriter(p.getOutputStream(), StandardCharsets.UTF_8), true);
    Thread t = new Thread(() -> {
      try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
        for (String l; (l = r.readLine()) != null; ) {
          history.add(l);
          if (l.startsWith("READY")) {
            synchronized (this) {
              ready = true;
              notifyAll();
            }
          }
          lines.add(new Line(System.nanoTime(), l));
        }
      } catch (IOException e) {
        // process gone
      }
      lines.add(new Line(System.nanoTime(), "EOF"));
    }, "worker-reader-" + p.pid());
    t.setDaemon(true);
    t.start();
  }

  /** Starts a worker JVM with this JVM's classpath. */
  static Worker start() {
    ProcessBuilder pb = new ProcessBuilder(ShmProbe.javaBinary(), "-Xmx256m", "-XX:+UseSerialGC", "-Xss4m",
        "-D" + WorkerMain.BACKEND_PROPERTY + "=" + System.getProperty(WorkerMain.BACKEND_PROPERTY, "host"),
        "-cp", System.getProperty("java.class.path"), WorkerMain.class.getName());
    pb.redirectErrorStream(true);
    try {
      return new Worker(pb.start());
    } catch (IOException e) {
      throw new UncheckedIOException("cannot start a worker JVM", e);
    }
  }

  long pid() { return process.pid(); }

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
    String segment() {
      return lines.stream().filter(l -> l.text.startsWith("SEG ")).map(l -> l.words()[2]).findFirst().orElse(null);
    }
    /** The exception class of a FAIL line. */
    String exception() { return end == null || !end.text.startsWith("FAIL") ? null : end.words()[2]; }
  }

  Trial collect(String id, long deadline) {
    List<Line> got = new ArrayList<>();
    while (true) {
      Line l = awaitAny(deadline, "SEG " + id + " ", "CREATED " + id + " ", "WRONG " + id + " ", "DONE " + id + " ", "FAIL " + id + " ");
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
