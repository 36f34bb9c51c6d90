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
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/**
 * Isolation of a communicator's memory: the segment file is 0600 with a 128-bit random name, another
 * Unix user cannot open it, and it is gone from its directory once every rank mapped it (so nothing can
 * attach afterwards); a crashed job leaves nothing behind, and a creator killed during creation — the
 * only window where the name exists — leaves a stale file that the sweep a later start begins removes.
 *
 * <p>Every communicator here keeps its segments in a directory of the test's own under /dev/shm
 * ({@link ShmProbe#newSegmentDirectory}, through the backend's package-private directory parameter),
 * so each file found there is this test's, whatever other programs on the host do in /dev/shm (their
 * segments come and go there, and their sweeps remove stale files there, not here).
 */
class IsolationTest {
  private final List<Worker> workers = new ArrayList<>();
  private final List<Path> dirs = new ArrayList<>();

  /** A segment directory of this test's own, removed after the test. */
  private Path segmentDirectory() {
    Path d = ShmProbe.newSegmentDirectory("sc-isolation-");
    dirs.add(d);
    return d;
  }

  private static Communicator create(InJvmRendezvous.Group grp, int rank, long timeoutMs, Path dir) {
    return Internals.createHost(grp.member(rank), opts(timeoutMs), dir);
  }

  @AfterEach void tearDown() {
    workers.forEach(Worker::close);
    dirs.forEach(ShmProbe::deleteTree);
  }

  static CommOptions opts(long timeoutMs) {
    return CommOptions.builder().backend(CommOptions.Backend.HOST).stagingBytes(64 << 10)
        .timeout(Duration.ofMillis(timeoutMs)).build();
  }

  /** Waits for a sparkcomms-* entry in {@code dir} that is not in {@code before}. */
  private static String awaitNewSegment(Path dir, Set<String> before, long millis) {
    long until = System.nanoTime() + millis * 1_000_000L;
    while (System.nanoTime() < until) {
      Set<String> now = ShmProbe.segments(dir);
      now.removeAll(before);
      if (!now.isEmpty()) return now.iterator().next();
      LockSupport.parkNanos(2_000_000);
    }
    return null;
  }

  @Test
  void theSegmentIsPrivateUnguessableAndUnlinkedOnceAllRanksMappedIt() throws Exception {
    Path dir = segmentDirectory();
    long mappingsBefore = ShmProbe.segmentMappings();
    InJvmRendezvous.Group grp = InJvmRendezvous.group(2);
    CompletableFuture<Communicator> c0 = CompletableFuture.supplyAsync(() -> create(grp, 0, 30_000, dir));
    // rank 0 created the file and waits for rank 1: the only time the name exists
    String name = awaitNewSegment(dir, Set.of(), 10_000);
    assertNotNull(name, "rank 0 did not create a segment");
    assertTrue(name.matches("sparkcomms-[0-9a-f]{32}"), "not a 128-bit random name: " + name);
    Path p = dir.resolve(name);
    assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(p)));
    assertEquals(System.getProperty("user.name"), Files.getOwner(p).getName());
    Communicator c1 = create(grp, 1, 30_000, dir);
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

  /**
   * Another Unix user cannot read the 0600 segment file while its name exists (rank 0 waiting for rank
   * 1), though it can enter the directory and read a 0644 file there: the refusal is the segment's mode.
   * Runs cat as that user: as root through setpriv (uid and gid 65534), else through sudo -n -u nobody
   * where this user may; skipped, saying why, where neither works.
   */
  @Test
  void anotherUserCannotReadTheSegment() throws Exception {
    List<String> asOther = otherUserCommand();
    Path dir = segmentDirectory();
    Path control = dir.resolve("control");
    Files.writeString(control, "readable\n");
    Files.setPosixFilePermissions(control, PosixFilePermissions.fromString("rw-r--r--"));
    Run ok = runAs(asOther, control);
    assertTrue(ok.exit == 0 && ok.out.contains("readable"),
        "the other user cannot read a 0644 file in the segment directory, so a refusal would prove nothing: " + ok);
    InJvmRendezvous.Group grp = InJvmRendezvous.group(2);
    CompletableFuture<Communicator> c0 = CompletableFuture.supplyAsync(() -> create(grp, 0, 30_000, dir));
    try {
      String name = awaitNewSegment(dir, Set.of("control"), 10_000);
      assertNotNull(name, "rank 0 did not create a segment");
      Run denied = runAs(asOther, dir.resolve(name));
      assertNotEquals(0, denied.exit, "another user could read the segment: " + denied);
      assertTrue(denied.out.contains("Permission denied"), denied.toString());
    } finally {
      create(grp, 1, 30_000, dir).close();
      c0.get(30, TimeUnit.SECONDS).close();
    }
  }

  /** A command's exit status and output. */
  private record Run(int exit, String out) {}

  /** Runs {@code cat file} with the command prefix {@code asOther}. */
  private static Run runAs(List<String> asOther, Path file) throws Exception {
    List<String> cmd = new ArrayList<>(asOther);
    cmd.addAll(List.of("cat", file.toString()));
    Process q = new ProcessBuilder(cmd).redirectErrorStream(true).start();
    String out = new String(q.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(q.waitFor(10, TimeUnit.SECONDS), "timed out: " + cmd);
    return new Run(q.exitValue(), out.trim());
  }

  /**
   * A command prefix that runs a program as another Unix user: as root, setpriv to uid and gid 65534;
   * else (or without setpriv) sudo -n -u nobody, if {@code sudo -n -u nobody true} succeeds. Otherwise
   * the test is skipped, with the reason.
   */
  private static List<String> otherUserCommand() throws Exception {
    int uid = (Integer) Files.getAttribute(Path.of("/proc/self"), "unix:uid");
    boolean setpriv = Files.isExecutable(Path.of("/usr/bin/setpriv"));
    if (uid == 0 && setpriv) return List.of("/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups");
    List<String> sudo = List.of("sudo", "-n", "-u", "nobody");
    String sudoFailure = null;  // why sudo cannot, or null
    try {
      List<String> probe = new ArrayList<>(sudo);
      probe.add("true");
      Process q = new ProcessBuilder(probe).redirectErrorStream(true).start();
      String out = new String(q.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
      if (!q.waitFor(10, TimeUnit.SECONDS)) {
        q.destroyForcibly();
        sudoFailure = "did not finish within 10 s";
      } else if (q.exitValue() != 0) {
        sudoFailure = "exited " + q.exitValue() + (out.isEmpty() ? "" : ": " + out);
      }
    } catch (java.io.IOException e) {
      sudoFailure = "cannot run: " + e.getMessage();
    }
    Assumptions.assumeTrue(sudoFailure == null, "no way to run a command as another user: "
        + (uid == 0 ? "root, but no /usr/bin/setpriv" : "not root (uid " + uid + ")") + "; sudo -n -u nobody true " + sudoFailure);
    return sudo;
  }

  @Test
  void segmentNamesAreDistinctAcrossCommunicators() throws Exception {
    Path dir = segmentDirectory();
    Set<String> names = new HashSet<>();
    for (int i = 0; i < 8; i++) {
      InJvmRendezvous.Group grp = InJvmRendezvous.group(2);
      CompletableFuture<Communicator> c0 = CompletableFuture.supplyAsync(() -> create(grp, 0, 30_000, dir));
      String name = awaitNewSegment(dir, names, 10_000);
      assertNotNull(name);
      names.add(name);
      create(grp, 1, 30_000, dir).close();
      c0.get(30, TimeUnit.SECONDS).close();
    }
    assertEquals(8, names.size());
  }

  @Test
  void aJobKilledWhileRunningLeavesNothingInDevShm() {
    int n = 3;
    Path dir = segmentDirectory();
    for (int r = 0; r < n; r++) workers.add(Worker.start(dir));
    for (Worker w : workers) assertTrue(w.awaitReady(60_000), w.tail());
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
    assertEquals(dir, Path.of(seg).getParent());
    assertFalse(Files.exists(Path.of(seg)), "segment left behind: " + seg);
    Set<String> now = ShmProbe.segments(dir);
    assertTrue(now.isEmpty(), "left in " + dir + ": " + now);
    assertTrue(workers.stream().noneMatch(w -> w.process.isAlive()));
  }

  @Test
  void aCreatorKilledDuringCreationLeavesAStaleFileThatTheNextStartRemoves() throws Exception {
    // rank 0 of 2 alone: it creates the segment and waits (60 s) for a rank 1 that never comes
    Path dir = segmentDirectory();
    Worker w = Worker.start(dir);
    workers.add(w);
    assertTrue(w.awaitReady(60_000), w.tail());
    Path d = FileRendezvous.createDirectory();
    dirs.add(d);
    w.send("RUN s " + d + " 0 2 BARRIER AUTO 1 60000 65536 1 1");
    Worker.Line seg = w.await("SEG s ", System.nanoTime() + 30_000_000_000L);
    assertNotNull(seg, w.tail());
    Path p = Path.of(seg.words()[2]);
    assertEquals(dir, p.getParent());
    assertTrue(Files.exists(p));
    // while its creator lives, another job's start leaves it alone
    create(InJvmRendezvous.group(1), 0, 5_000, dir).close();
    Internals.awaitSweep();  // a creation starts the sweep and does not wait for it
    assertTrue(Files.exists(p), "a live creator's segment was removed");
    w.kill();
    assertTrue(w.waitDead(10_000));
    assertTrue(Files.exists(p), "expected the crashed creator's file to be left behind");
    // the next communicator created in that directory (any job of this user) removes it
    create(InJvmRendezvous.group(1), 0, 5_000, dir).close();
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
    Path dir = segmentDirectory();
    Path deadCreator = fakeSegment(dir, deadPid, 0);
    Path liveCreator = fakeSegment(dir, me.pid(), myStart);
    Path reusedPid = fakeSegment(dir, me.pid(), myStart - 3_600_000); // this pid, but a process that started an hour earlier
    // a start time recorded by another JVM may be off by the boot-time rounding: still this process
    Path liveCreatorNear = fakeSegment(dir, me.pid(), myStart + 500);
    Path liveCreatorNoStart = fakeSegment(dir, me.pid(), 0);  // start unknown: judged by pid alone
    // a creator of another PID namespace: its pid means nothing here, so it is never judged
    Path otherNamespace = fakeSegment(dir, deadPid, 0, ProcessId.current().pidNamespace() + 1);
    Path freshNoRecord = fakeSegment(dir, -1, 0);
    Path oldNoRecord = fakeSegment(dir, -1, 0);
    Files.setLastModifiedTime(oldNoRecord, java.nio.file.attribute.FileTime.fromMillis(System.currentTimeMillis() - 60_000));
    // a creator killed but not reaped (a zombie: ProcessHandle still calls it alive) cannot unlink its file
    Process parent = new ProcessBuilder("sh", "-c", "sleep 600 & echo $!; exec sleep 600").redirectErrorStream(true).start();
    Path zombieCreator = null;
    try {
      long zpid = Long.parseLong(new java.io.BufferedReader(new java.io.InputStreamReader(parent.getInputStream())).readLine().trim());
      ProcessHandle z = ProcessHandle.of(zpid).orElseThrow();
      zombieCreator = fakeSegment(dir, zpid, z.info().startInstant().orElseThrow().toEpochMilli());
      // the shell must have become the parent sleep first: a shell that still runs reaps its dead child
      for (long t = System.nanoTime(); System.nanoTime() - t < 5_000_000_000L
          && !parent.info().command().map(c -> c.endsWith("/sleep")).orElse(false); ) {
        Thread.sleep(5);
      }
      z.destroyForcibly();
      long t0 = System.nanoTime();
      while (!ProcessId.zombie(zpid) && System.nanoTime() - t0 < 5_000_000_000L) Thread.sleep(10);
      assertTrue(ProcessId.zombie(zpid), "the killed child is a zombie");
      create(InJvmRendezvous.group(1), 0, 5_000, dir).close(); // the next start in that directory sweeps it
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

  /** A 0600 sparkcomms-* file in {@code dir} with a creator record (pid, start ms, this PID namespace), or an empty one for pid &lt; 0. */
  private static Path fakeSegment(Path dir, long pid, long startMillis) throws Exception {
    return fakeSegment(dir, pid, startMillis, ProcessId.current().pidNamespace());
  }

  private static Path fakeSegment(Path dir, long pid, long startMillis, long namespace) throws Exception {
    byte[] token = new byte[16];
    new java.security.SecureRandom().nextBytes(token);
    Path p = dir.resolve("sparkcomms-" + java.util.HexFormat.of().formatHex(token));
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
