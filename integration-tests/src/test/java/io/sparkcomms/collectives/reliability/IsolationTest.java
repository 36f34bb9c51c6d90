package io.sparkcomms.collectives.reliability;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.host.HostCommunicator;
import io.sparkcomms.collectives.liveness.ProcessId;
import io.sparkcomms.collectives.rendezvous.FileRendezvous;
import io.sparkcomms.collectives.rendezvous.InJvmRendezvous;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * Isolation of a communicator's memory: the segment file is 0600 with a 128-bit random name, another
 * Unix user cannot open it, and it is gone from /dev/shm once every rank mapped it (so nothing can
 * attach afterwards); a crashed job leaves nothing behind, and a creator killed during creation — the
 * only window where the name exists — leaves a stale file that the sweep a later start begins removes.
 */
class IsolationTest {
  private final List<Worker> workers = new ArrayList<>();
  private final List<Path> dirs = new ArrayList<>();

  @AfterEach void tearDown() {
    workers.forEach(Worker::close);
    dirs.forEach(ShmProbe::deleteTree);
  }

  static CommOptions opts(long timeoutMs) {
    return CommOptions.builder().backend(CommOptions.Backend.HOST).stagingBytes(64 << 10)
        .timeout(Duration.ofMillis(timeoutMs)).build();
  }

  /** Waits for a sparkcomms-* entry that is not in {@code before}. */
  private static String awaitNewSegment(Set<String> before, long millis) {
    long until = System.nanoTime() + millis * 1_000_000L;
    while (System.nanoTime() < until) {
      Set<String> now = ShmProbe.segments();
      now.removeAll(before);
      if (!now.isEmpty()) return now.iterator().next();
      LockSupport.parkNanos(2_000_000);
    }
    return null;
  }

  @Test
  void theSegmentIsPrivateUnguessableAndUnlinkedOnceAllRanksMappedIt() throws Exception {
    Set<String> before = ShmProbe.segments();
    long mappingsBefore = ShmProbe.segmentMappings();
    InJvmRendezvous.Group grp = InJvmRendezvous.group(2);
    CompletableFuture<Communicator> c0 = CompletableFuture.supplyAsync(() -> HostCommunicator.create(grp.member(0), opts(30_000)));
    // rank 0 created the file and waits for rank 1: the only time the name exists
    String name = awaitNewSegment(before, 10_000);
    assertNotNull(name, "rank 0 did not create a segment");
    assertTrue(name.matches("sparkcomms-[0-9a-f]{32}"), "not a 128-bit random name: " + name);
    Path p = ShmProbe.SHM.resolve(name);
    assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(p)));
    assertEquals(System.getProperty("user.name"), Files.getOwner(p).getName());
    otherUserCannotOpen(p);
    Communicator c1 = HostCommunicator.create(grp.member(1), opts(30_000));
    Communicator r0 = c0.get(30, TimeUnit.SECONDS);
    assertFalse(Files.exists(p), "the name must be removed once every rank mapped the file");
    // the ranks still share the (now nameless) memory
    CompletableFuture<float[]> f0 = CompletableFuture.supplyAsync(() -> {
      float[] x = {1};
      r0.allReduce(HostTensor.of(x), ReduceOp.SUM);
      return x;
    });
    float[] x1 = {2};
    c1.allReduce(HostTensor.of(x1), ReduceOp.SUM);
    assertEquals(3f, f0.get(30, TimeUnit.SECONDS)[0]);
    assertEquals(3f, x1[0]);
    assertTrue(ShmProbe.segmentMappings() > mappingsBefore, "mapped while open");
    r0.close();
    c1.close();
    assertEquals(mappingsBefore, ShmProbe.segmentMappings(), "mappings left after close");
  }

  /** As root, runs cat as nobody (uid 65534): the 0600 file must not be readable by another user. */
  private static void otherUserCannotOpen(Path p) throws Exception {
    if (!"root".equals(System.getProperty("user.name")) || !Files.isExecutable(Path.of("/usr/bin/setpriv"))) {
      System.out.println("skipping the other-user check: needs root and setpriv");
      return;
    }
    Process q = new ProcessBuilder("/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "cat", p.toString())
        .redirectErrorStream(true).start();
    String out = new String(q.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(q.waitFor(10, TimeUnit.SECONDS));
    assertNotEquals(0, q.exitValue(), "another user could read the segment: " + out);
    assertTrue(out.contains("Permission denied"), out);
  }

  @Test
  void segmentNamesAreDistinctAcrossCommunicators() throws Exception {
    Set<String> names = new HashSet<>();
    for (int i = 0; i < 8; i++) {
      Set<String> before = ShmProbe.segments();
      InJvmRendezvous.Group grp = InJvmRendezvous.group(2);
      CompletableFuture<Communicator> c0 = CompletableFuture.supplyAsync(() -> HostCommunicator.create(grp.member(0), opts(30_000)));
      String name = awaitNewSegment(before, 10_000);
      assertNotNull(name);
      names.add(name);
      HostCommunicator.create(grp.member(1), opts(30_000)).close();
      c0.get(30, TimeUnit.SECONDS).close();
    }
    assertEquals(8, names.size());
  }

  @Test
  void aJobKilledWhileRunningLeavesNothingInDevShm() {
    int n = 3;
    for (int r = 0; r < n; r++) workers.add(Worker.start());
    for (Worker w : workers) assertTrue(w.awaitReady(60_000), w.tail());
    Set<String> before = ShmProbe.segments();
    Path d = FileRendezvous.createDirectory();
    dirs.add(d);
    for (int r = 0; r < n; r++) workers.get(r).send("RUN k " + d + " " + r + " " + n + " ALL_REDUCE AUTO 3 30000 65536 100000 -1");
    String seg = null;
    for (Worker w : workers) {
      Worker.Line l = w.awaitAny(System.nanoTime() + 30_000_000_000L, "SEG k ", "CREATED k ");
      assertNotNull(l, w.tail());
      if (l.text().startsWith("SEG")) {
        seg = l.words()[2];
        assertNotNull(w.await("CREATED k ", System.nanoTime() + 30_000_000_000L), w.tail());
      }
    }
    assertNotNull(seg);
    PauseCorruptDetachTest.sleep(300); // mid-stream of allReduces
    for (Worker w : workers) w.kill();
    for (Worker w : workers) assertTrue(w.waitDead(10_000));
    assertFalse(Files.exists(Path.of(seg)), "segment left behind: " + seg);
    Set<String> now = ShmProbe.segments();
    now.removeAll(before);
    assertTrue(now.isEmpty(), "left in /dev/shm: " + now);
    assertTrue(workers.stream().noneMatch(w -> w.process.isAlive()));
  }

  @Test
  void aCreatorKilledDuringCreationLeavesAStaleFileThatTheNextStartRemoves() throws Exception {
    // rank 0 of 2 alone: it creates the segment and waits (60 s) for a rank 1 that never comes
    Worker w = Worker.start();
    workers.add(w);
    assertTrue(w.awaitReady(60_000), w.tail());
    Path d = FileRendezvous.createDirectory();
    dirs.add(d);
    w.send("RUN s " + d + " 0 2 BARRIER AUTO 1 60000 65536 1 1");
    Worker.Line seg = w.await("SEG s ", System.nanoTime() + 30_000_000_000L);
    assertNotNull(seg, w.tail());
    Path p = Path.of(seg.words()[2]);
    assertTrue(Files.exists(p));
    // while its creator lives, another job's start leaves it alone
    HostCommunicator.create(InJvmRendezvous.group(1).member(0), opts(5_000)).close();
    Internals.awaitSweep();  // a creation starts the sweep and does not wait for it
    assertTrue(Files.exists(p), "a live creator's segment was removed");
    w.kill();
    assertTrue(w.waitDead(10_000));
    assertTrue(Files.exists(p), "expected the crashed creator's file to be left behind");
    // the next communicator created on this host (any job of this user) removes it
    HostCommunicator.create(InJvmRendezvous.group(1).member(0), opts(5_000)).close();
    Internals.awaitSweep();
    assertFalse(Files.exists(p), "stale segment of a crashed job was not cleaned up at the next start");
  }

  @Test
  void theSweepRemovesOnlyFilesOfDeadCreatorsOrUnattributedOldOnes() throws Exception {
    Process gone = new ProcessBuilder("true").start();
    gone.waitFor();
    long deadPid = gone.pid();
    ProcessHandle me = ProcessHandle.current();
    long myStart = me.info().startInstant().map(java.time.Instant::toEpochMilli).orElse(0L);
    Path deadCreator = fakeSegment(deadPid, 0);
    Path liveCreator = fakeSegment(me.pid(), myStart);
    Path reusedPid = fakeSegment(me.pid(), myStart - 3_600_000); // this pid, but a process that started an hour earlier
    // a start time recorded by another JVM may be off by the boot-time rounding: still this process
    Path liveCreatorNear = fakeSegment(me.pid(), myStart + 500);
    Path liveCreatorNoStart = fakeSegment(me.pid(), 0);  // start unknown: judged by pid alone
    // a creator of another PID namespace: its pid means nothing here, so it is never judged
    Path otherNamespace = fakeSegment(deadPid, 0, ProcessId.current().pidNamespace() + 1);
    Path freshNoRecord = fakeSegment(-1, 0);
    Path oldNoRecord = fakeSegment(-1, 0);
    Files.setLastModifiedTime(oldNoRecord, java.nio.file.attribute.FileTime.fromMillis(System.currentTimeMillis() - 60_000));
    // a creator killed but not reaped (a zombie: ProcessHandle still calls it alive) cannot unlink its file
    Process parent = new ProcessBuilder("sh", "-c", "sleep 600 & echo $!; exec sleep 600").redirectErrorStream(true).start();
    Path zombieCreator = null;
    try {
      long zpid = Long.parseLong(new java.io.BufferedReader(new java.io.InputStreamReader(parent.getInputStream())).readLine().trim());
      ProcessHandle z = ProcessHandle.of(zpid).orElseThrow();
      zombieCreator = fakeSegment(zpid, z.info().startInstant().orElseThrow().toEpochMilli());
      // the shell must have become the parent sleep first: a shell that still runs reaps its dead child
      for (long t = System.nanoTime(); System.nanoTime() - t < 5_000_000_000L
          && !parent.info().command().map(c -> c.endsWith("/sleep")).orElse(false); ) {
        Thread.sleep(5);
      }
      z.destroyForcibly();
      long t0 = System.nanoTime();
      while (!ProcessId.zombie(zpid) && System.nanoTime() - t0 < 5_000_000_000L) Thread.sleep(10);
      assertTrue(ProcessId.zombie(zpid), "the killed child is a zombie");
      HostCommunicator.create(InJvmRendezvous.group(1).member(0), opts(5_000)).close(); // the next start sweeps
      Internals.awaitSweep();
      assertFalse(Files.exists(deadCreator), "file of a dead creator kept");
      assertFalse(Files.exists(reusedPid), "file of a creator whose pid was reused kept");
      assertFalse(Files.exists(oldNoRecord), "old file without a creator record kept");
      assertFalse(Files.exists(zombieCreator), "file of a creator that is a zombie kept");
      assertTrue(Files.exists(liveCreator), "file of a live creator removed");
      assertTrue(Files.exists(liveCreatorNear), "file of a live creator (start time 0.5 s off) removed");
      assertTrue(Files.exists(liveCreatorNoStart), "file of a live creator (start time unknown) removed");
      assertTrue(Files.exists(otherNamespace), "file of a creator in another PID namespace removed");
      assertTrue(Files.exists(freshNoRecord), "a file just created (record not yet written) removed");
    } finally {
      parent.destroyForcibly().waitFor(10, TimeUnit.SECONDS);
      for (Path p : java.util.Arrays.asList(deadCreator, liveCreator, reusedPid, liveCreatorNear, liveCreatorNoStart, otherNamespace,
          freshNoRecord, oldNoRecord, zombieCreator)) {
        if (p != null) Files.deleteIfExists(p);
      }
    }
  }

  /** A 0600 sparkcomms-* file with a creator record (pid, start ms, this PID namespace), or an empty one for pid &lt; 0. */
  private static Path fakeSegment(long pid, long startMillis) throws Exception {
    return fakeSegment(pid, startMillis, ProcessId.current().pidNamespace());
  }

  private static Path fakeSegment(long pid, long startMillis, long namespace) throws Exception {
    byte[] token = new byte[16];
    new java.security.SecureRandom().nextBytes(token);
    Path p = ShmProbe.SHM.resolve("sparkcomms-" + java.util.HexFormat.of().formatHex(token));
    Files.createFile(p, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
    if (pid >= 0) {
      java.nio.ByteBuffer b = java.nio.ByteBuffer.allocate(24).order(java.nio.ByteOrder.nativeOrder())
          .putLong(pid).putLong(startMillis).putLong(namespace).flip();
      try (java.nio.channels.FileChannel ch = java.nio.channels.FileChannel.open(p, java.nio.file.StandardOpenOption.WRITE)) {
        ch.write(b, ShmProbe.creatorPidOffset());
      }
    }
    return p;
  }
}
