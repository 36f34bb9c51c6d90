package io.sparkcomms.collectives.liveness;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** With real child processes: an exit is reported once and soon, a live process never, a stopped watch never. */
class PeerWatchTest {
  private static Process child() throws Exception {
    return new ProcessBuilder("sleep", "60").redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
  }

  private static ProcessId idOf(Process p) {
    return new ProcessId(p.pid(), p.toHandle().info().startInstant().orElseThrow().toEpochMilli());
  }

  @Test void encodesAndDecodes() {
    ProcessId me = ProcessId.current();
    assertEquals(me, ProcessId.decode(me.encode()));
    assertNull(ProcessId.decode(new byte[3]));
    assertTrue(me.visible());
    assertFalse(me.gone());
  }

  /** A start time recorded by another JVM may be off by up to 1 s; the watched id carries this JVM's view. */
  @Test void seenHereToleratesAnotherJvmsStartTimeAndKeepsItsOwn() throws Exception {
    Process a = child();
    try {
      ProcessId exact = idOf(a);
      ProcessId near = new ProcessId(exact.pid(), exact.startMillis() - 700);
      assertEquals(exact, near.seenHere(), "the local view, exact start time");
      assertTrue(near.visible());
      assertNull(new ProcessId(exact.pid(), exact.startMillis() - 60_000).seenHere(), "another process with this pid");
      assertNull(new ProcessId(exact.pid(), -1).seenHere(), "start time unknown: not watchable");
      assertFalse(near.gone(ProcessId.START_TOLERANCE_MILLIS));
      assertTrue(new ProcessId(exact.pid(), exact.startMillis() - 60_000).gone(ProcessId.START_TOLERANCE_MILLIS), "pid reused");
      assertArrayEquals(new ProcessId[] {null, exact}, PeerWatch.watchable(new ProcessId[] {ProcessId.current(), near}, 0));
      a.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
      assertTrue(exact.gone());
      assertNull(near.seenHere(), "exited");
    } finally {
      a.destroyForcibly();
    }
  }

  @Test void anExitedPeerIsReportedOnceAndSoon() throws Exception {
    Process a = child(), b = child();
    try {
      ProcessId[] peers = PeerWatch.watchable(new byte[][] {ProcessId.current().encode(), idOf(a).encode(), idOf(b).encode()}, 0);
      assertNull(peers[0], "this rank is not watched");
      assertNotNull(peers[1]);
      assertNotNull(peers[2]);
      List<String> got = new CopyOnWriteArrayList<>();
      try (PeerWatch.Watch w = PeerWatch.watch(peers, "rank 0 aborted", got::add)) {
        Thread.sleep(3 * PeerWatch.PERIOD_MILLIS);
        assertTrue(got.isEmpty(), "live peers reported: " + got);
        long t0 = System.nanoTime();
        b.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
        // a hang guard, not a measurement: the watch polls every PERIOD_MILLIS
        while (got.isEmpty() && System.nanoTime() - t0 < 60_000_000_000L) Thread.sleep(10);
        assertEquals(1, got.size(), "reported once: " + got);
        assertTrue(got.get(0).startsWith("rank 2 (pid " + b.pid() + ") exited; rank 0 aborted"), got.get(0));
        a.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
        Thread.sleep(3 * PeerWatch.PERIOD_MILLIS);
        assertEquals(1, got.size(), "no second report: " + got);
      }
    } finally {
      a.destroyForcibly();
      b.destroyForcibly();
    }
  }

  /** A killed process whose parent never reaps it stays a zombie (still "alive" to ProcessHandle): gone. */
  @Test void aZombieIsGone() throws Exception {
    // sh starts a background sleep, prints its pid and becomes another sleep (exec), which never waits for it
    Process parent = new ProcessBuilder("sh", "-c", "sleep 600 & echo $!; exec sleep 600").redirectErrorStream(true).start();
    try {
      long pid = Long.parseLong(new java.io.BufferedReader(new java.io.InputStreamReader(parent.getInputStream())).readLine().trim());
      ProcessHandle h = ProcessHandle.of(pid).orElseThrow();
      ProcessId id = new ProcessId(pid, h.info().startInstant().orElseThrow().toEpochMilli());
      assertTrue(id.visible());
      assertFalse(id.gone());
      // kill only once sh has become sleep: a child that dies while sh still runs is reaped by sh
      long te = System.nanoTime();
      while (!parent.toHandle().info().command().orElse("").endsWith("sleep") && System.nanoTime() - te < 30_000_000_000L) {
        Thread.sleep(10);
      }
      assertTrue(parent.toHandle().info().command().orElse("").endsWith("sleep"), "sh did not exec sleep within 30 s");
      h.destroyForcibly();
      long t0 = System.nanoTime();
      while (!ProcessId.zombie(pid) && System.nanoTime() - t0 < 30_000_000_000L) Thread.sleep(10);   // a hang guard
      assertTrue(ProcessId.zombie(pid), "the killed child is a zombie");
      assertTrue(id.gone(), "a zombie counts as gone");
    } finally {
      parent.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
    }
  }

  @Test void aStoppedWatchReportsNothing() throws Exception {
    Process a = child();
    List<String> got = new CopyOnWriteArrayList<>();
    PeerWatch.Watch w = PeerWatch.watch(new ProcessId[] {null, idOf(a)}, "x", got::add);
    w.close();
    a.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
    Thread.sleep(3 * PeerWatch.PERIOD_MILLIS);
    assertTrue(got.isEmpty(), "reported after close: " + got);
  }

  @Test void peersNotVisibleHereAreNotWatched() {
    ProcessId me = ProcessId.current();
    ProcessId otherStart = new ProcessId(me.pid(), me.startMillis() - 60_000);  // this pid, another process's start
    ProcessId noSuchPid = new ProcessId(Integer.MAX_VALUE - 7, me.startMillis());
    assertFalse(otherStart.visible());
    assertFalse(noSuchPid.visible());
    assertTrue(me.pidNamespace() >= 0, "this JVM reads its PID namespace");
    ProcessId otherNamespace = new ProcessId(me.pid(), me.startMillis(), me.pidNamespace() + 1);  // same numbers, another namespace
    assertFalse(otherNamespace.visible());
    ProcessId[] w = PeerWatch.watchable(new byte[][] {new byte[0], otherStart.encode(), noSuchPid.encode(), otherNamespace.encode(), me.encode()}, 0);
    assertArrayEquals(new ProcessId[5], w, "nothing watchable (the last is this very process: ranks as threads)");
    assertNull(PeerWatch.watch(w, "x", m -> {}));
  }
}
