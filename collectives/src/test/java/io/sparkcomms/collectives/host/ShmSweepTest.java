package io.sparkcomms.collectives.host;

import static io.sparkcomms.collectives.host.ShmTestFiles.segmentName;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The removal of stale segment files looks only at regular files of this user with mode 0600, never
 * opens anything else, examines a bounded number of entries, and runs beside segment creation, not in it.
 */
class ShmSweepTest {
  /** A bound on calls that must not block (a FIFO opened for reading would block forever), not a measurement. */
  private static final Duration HANG_GUARD = Duration.ofSeconds(60);

  @TempDir Path dir;
  @TempDir Path elsewhere;

  private static boolean exists(Path p) { return Files.exists(p, LinkOption.NOFOLLOW_LINKS); }

  @Test void theSweepLeavesFifosLinksAndOthersFilesAloneAndDoesNotBlock() throws Exception {
    long dead = ShmTestFiles.deadPid();
    Path fifo = ShmTestFiles.mkfifo(dir.resolve(segmentName()));
    try {
      Path target = ShmTestFiles.fakeSegment(elsewhere.resolve(segmentName()), dead, "rw-------");
      Path link = Files.createSymbolicLink(dir.resolve(segmentName()), target);
      Path readableByAll = ShmTestFiles.fakeSegment(dir.resolve(segmentName()), dead, "rw-r--r--");
      Path executable = ShmTestFiles.fakeSegment(dir.resolve(segmentName()), dead, "rwx------");
      Path othersFile = ShmTestFiles.fakeSegment(dir.resolve(segmentName()), dead, "rw-------");
      boolean foreign = ShmTestFiles.giveToNobody(othersFile);
      Path notASegmentName = ShmTestFiles.fakeSegment(dir.resolve("sparkcomms-rv-notes"), dead, "rw-------");
      Path stale = ShmTestFiles.fakeSegment(dir.resolve(segmentName()), dead, "rw-------");
      ShmFiles.Sweep sw = assertTimeoutPreemptively(HANG_GUARD, () -> ShmFiles.sweepStale(dir));
      assertFalse(exists(stale), "the file of a dead creator (regular, this user's, 0600) was kept");
      assertEquals(1, sw.removed(), sw.toString());
      for (Path p : List.of(fifo, link, target, readableByAll, executable, notASegmentName)) assertTrue(exists(p), "removed: " + p);
      if (foreign) assertTrue(exists(othersFile), "another user's file was removed");
    } finally {
      ShmTestFiles.releaseFifo(fifo);
    }
  }

  @Test void aSweepExaminesABoundedNumberOfEntries() throws Exception {
    long me = ProcessHandle.current().pid();
    List<Path> planted = new ArrayList<>();
    for (int i = 0; i < 3 * ShmFiles.MAX_SWEEP_ENTRIES; i++) {
      planted.add(ShmTestFiles.fakeSegment(dir.resolve(segmentName()), me, "rw-------"));  // a live creator: kept
    }
    ShmFiles.Sweep sw = ShmFiles.sweepStale(dir);
    assertEquals(ShmFiles.MAX_SWEEP_ENTRIES, sw.examined(), sw.toString());
    assertEquals(0, sw.removed(), sw.toString());
    for (Path p : planted) assertTrue(exists(p));
  }

  @Test void creationDoesNotWaitForTheSweepWhichStillRemovesStaleFiles() throws Exception {
    Path fifo = ShmTestFiles.mkfifo(dir.resolve(segmentName()));
    try {
      Path stale = ShmTestFiles.fakeSegment(dir.resolve(segmentName()), ShmTestFiles.deadPid(), "rw-------");
      ShmSegment s = assertTimeoutPreemptively(HANG_GUARD, () -> ShmSegment.create(dir, 2, 4096));
      s.close();
      s.unlink();
      long until = System.nanoTime() + 10_000_000_000L;
      while (exists(stale) && System.nanoTime() < until) LockSupport.parkNanos(10_000_000);
      assertFalse(exists(stale), "the sweep a creation starts did not remove the stale file");
      assertTrue(exists(fifo));
    } finally {
      ShmTestFiles.releaseFifo(fifo);
    }
  }
}
