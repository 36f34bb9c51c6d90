package io.sparkcomms.collectives.host;

import static io.sparkcomms.collectives.host.ShmTestFiles.segmentName;
import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTimeoutPreemptively;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.RankGroup;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.rendezvous.InJvmRendezvous;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * What a peer maps is only the segment rank 0 made: the path in rank 0's rendezvous message is
 * untrusted, and so is every length read from the shared memory. Also: the segment's name is gone as
 * soon as the last peer mapped it.
 */
class ShmSegmentTrustTest {
  /** A bound on calls that must not block (a FIFO opened for reading would block forever), not a measurement. */
  private static final Duration HANG_GUARD = Duration.ofSeconds(60);

  private static final long S = 4096;

  @TempDir Path dir;
  @TempDir Path elsewhere;
  private ShmSegment created;

  @AfterEach void tearDown() {
    if (created != null) {
      created.close();
      created.unlink();
    }
  }

  private Path createSegment() {
    created = ShmSegment.create(dir, 2, S);
    return created.path();
  }

  /** A copy of the segment (same content, size and 0600 mode) at {@code to}. */
  private Path copyOfSegment(Path to) throws Exception {
    return Files.copy(createSegment(), to, StandardCopyOption.COPY_ATTRIBUTES);
  }

  /** Opening {@code p} as a peer must be refused; returns the message, which names the path. */
  private String refused(Path p) {
    IllegalStateException e = assertThrows(IllegalStateException.class, () -> ShmSegment.open(dir, p, 2, S).close());
    assertTrue(e.getMessage().contains(p.toString()), e.getMessage());
    return e.getMessage();
  }

  @Test void aPeerMapsTheSegmentRankZeroCreated() {
    Path p = createSegment();
    try (ShmSegment s = ShmSegment.open(dir, p, 2, S)) {
      assertEquals(2, s.ranks());
    }
  }

  @Test void aSymbolicLinkIsRefused() throws Exception {
    Path link = Files.createSymbolicLink(dir.resolve(segmentName()), createSegment());
    String m = refused(link);
    assertTrue(m.contains("symbolic link"), m);
  }

  @Test void aFileWhoseNameIsNotASegmentNameIsRefused() throws Exception {
    for (String name : new String[] {"evil", "sparkcomms-" + "A".repeat(32), "sparkcomms-" + "0".repeat(31), "sparkcomms-" + "0".repeat(33)}) {
      Path p = copyOfSegment(dir.resolve(name));
      String m = refused(p);
      assertTrue(m.contains("name"), m);
      created.close();
      created.unlink();
      created = null;
    }
  }

  @Test void aFileOutsideTheSegmentDirectoryIsRefused() throws Exception {
    Path p = copyOfSegment(elsewhere.resolve(segmentName()));
    String m = refused(p);
    assertTrue(m.contains("not in " + dir), m);
    // the same directory by another spelling is the same directory, but ".." out of it is not
    Path up = dir.resolve("..").resolve(elsewhere.getFileName()).resolve(p.getFileName());
    assertTrue(refused(up).contains("not in " + dir));
    assertTrue(refused(Paths.get(p.getFileName().toString())).contains("not in " + dir));
  }

  @Test void aFileWithAnyModeButOwnerReadWriteIsRefused() throws Exception {
    Path p = copyOfSegment(dir.resolve(segmentName()));
    for (String mode : new String[] {"rw-r--r--", "rw-rw----", "rw-----w-", "rwx------", "r--------"}) {
      Files.setPosixFilePermissions(p, PosixFilePermissions.fromString(mode));
      String m = refused(p);
      assertTrue(m.contains("mode " + mode), m);
    }
  }

  @Test void aFileOfAnotherUserIsRefused() throws Exception {
    Path p = copyOfSegment(dir.resolve(segmentName()));
    assumeTrue(ShmTestFiles.giveToNobody(p), "cannot give a file to uid 65534 (not root)");
    String m = refused(p);
    assertTrue(m.contains("owned by uid " + ShmTestFiles.NOBODY), m);
  }

  @Test void aFifoIsRefusedWithoutBeingOpened() throws Exception {
    Path fifo = ShmTestFiles.mkfifo(dir.resolve(segmentName()));
    try {
      String m = assertTimeoutPreemptively(HANG_GUARD, () -> refused(fifo));
      assertTrue(m.contains("not a regular file"), m);
    } finally {
      ShmTestFiles.releaseFifo(fifo);
    }
  }

  @Test void aSegmentWithASecondNameIsRefused() throws Exception {
    Path p = createSegment();
    Path link = Files.createLink(dir.resolve(segmentName()), p);
    for (Path q : List.of(p, link)) {
      String m = refused(q);
      assertTrue(m.contains("2 names"), m);
    }
  }

  @Test void aCorruptedAbortReasonLengthGivesAMarkedReasonNotAnError() {
    createSegment();
    created.abort(1, "boom");
    assertEquals("rank 1: boom", created.abortReason());
    for (int bad : new int[] {-1, Integer.MIN_VALUE, ShmSegment.ABORT_TEXT_MAX + 1, 1 << 20, Integer.MAX_VALUE}) {
      created.ctrl.putInt(ShmSegment.ABORT_LEN, bad);
      String r = assertDoesNotThrow(() -> created.abortReason(), "length " + bad);
      assertTrue(r.startsWith("rank 1: "), r);
      assertTrue(r.contains("abort reason length " + bad + " outside 0.." + ShmSegment.ABORT_TEXT_MAX), r);
      assertEquals(bad > 0, r.contains("boom"), r);  // a length too long shows the text cut at the maximum
    }
  }

  @Test void theLastPeerToMapTheSegmentRemovesItsName() {
    created = ShmSegment.create(dir, 3, S);
    Path p = created.path();
    try (ShmSegment one = ShmSegment.open(dir, p, 3, S)) {
      assertTrue(Files.exists(p, LinkOption.NOFOLLOW_LINKS), "one of two peers mapped it: the other still needs the name");
      try (ShmSegment two = ShmSegment.open(dir, p, 3, S)) {
        assertFalse(Files.exists(p, LinkOption.NOFOLLOW_LINKS), "every peer mapped it: its name must be gone");
      }
    }
  }

  @Test void noSegmentFileIsLeftOnceCommunicatorsAreCreated() throws Exception {
    CommOptions o = CommOptions.builder().backend(CommOptions.Backend.HOST).stagingBytes(S).timeout(Duration.ofSeconds(30)).build();
    for (int n : new int[] {1, 3}) {
      InJvmRendezvous.Group g = InJvmRendezvous.group(n);
      List<Object> made = RankGroup.runCatching(n, 60, r -> HostCommunicator.create(g.member(r), o, dir));
      try {
        assertEquals(List.of(), ShmTestFiles.list(dir), n + " rank(s)");
        List<Object> sums = RankGroup.runCatching(n, 60, r -> {
          double[] x = {1};
          ((Communicator) made.get(r)).allReduce(HostTensor.of(x), ReduceOp.SUM);
          return x[0];
        });
        sums.forEach(s -> assertEquals((double) n, s));
      } finally {
        for (Object c : made) if (c instanceof Communicator comm) comm.close();
      }
    }
  }
}
