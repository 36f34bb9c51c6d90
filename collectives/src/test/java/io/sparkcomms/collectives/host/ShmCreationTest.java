package io.sparkcomms.collectives.host;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.sparkcomms.collectives.CommException;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.RankGroup;
import io.sparkcomms.collectives.rendezvous.InJvmRendezvous;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Creating a segment: a size the host backend cannot map is refused before any file exists, the file
 * is backed in full when created (so a full /dev/shm is an error at creation, not a SIGBUS in the first
 * collective), and a failure after the file exists removes it.
 */
class ShmCreationTest {
  @TempDir Path dir;

  @Test void stagingAboveTheMaximumIsRefusedBeforeAnyFileExists() throws Exception {
    long s = 1L << 30;
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> ShmSegment.create(dir, 2, s).close());
    assertTrue(e.getMessage().contains("stagingBytes " + s) && e.getMessage().contains("maximum"), e.getMessage());
    assertEquals(List.of(), ShmTestFiles.list(dir));
  }

  @Test void everyRankReportsTheStagingLimit() throws Exception {
    CommOptions o = CommOptions.builder().backend(CommOptions.Backend.HOST).stagingBytes(1L << 30).timeout(Duration.ofSeconds(30)).build();
    InJvmRendezvous.Group g = InJvmRendezvous.group(2);
    List<Object> res = RankGroup.runCatching(2, 60, r -> HostCommunicator.create(g.member(r), o, dir));
    for (Object x : res) {
      CommException e = assertInstanceOf(CommException.class, x);
      assertTrue(e.getMessage().contains("rank 0 could not create") && e.getMessage().contains("maximum"), e.getMessage());
    }
    assertEquals(List.of(), ShmTestFiles.list(dir));
  }

  @Test void anInterruptedCreationSaysSoAndNothingAboutSpace() throws Exception {
    Thread.currentThread().interrupt();
    try {
      UncheckedIOException e = assertThrows(UncheckedIOException.class, () -> ShmSegment.create(dir, 2, 4096).close());
      assertTrue(e.getMessage().contains("interrupted"), e.getMessage());
      assertFalse(e.getMessage().contains("full") || e.getMessage().contains("space"), e.getMessage());
      assertTrue(Thread.currentThread().isInterrupted(), "the interrupt must stay set");
    } finally {
      Thread.interrupted();
    }
    assertEquals(List.of(), ShmTestFiles.list(dir));
  }

  /** A 1 MiB tmpfs: a segment that does not fit fails at creation and leaves nothing; one that fits is backed in full. */
  @Test void aFullDirectoryIsAnErrorAtCreationAndLeavesNoFile() throws Exception {
    Path mnt = Files.createDirectory(dir.resolve("tmpfs"));
    String why = run("mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", mnt.toString());
    assumeTrue(why == null, "cannot mount a tmpfs (needs root and CAP_SYS_ADMIN): " + why);
    try {
      long need = ShmSegment.totalBytes(2, 1 << 20);
      UncheckedIOException e = assertThrows(UncheckedIOException.class, () -> ShmSegment.create(mnt, 2, 1 << 20).close());
      assertTrue(e.getMessage().contains("not enough space in " + mnt + ": need " + need + " bytes"), e.getMessage());
      assertEquals(List.of(), ShmTestFiles.list(mnt));
      // one that fits takes its whole size from the tmpfs at once, not page by page when first touched
      long free = Files.getFileStore(mnt).getUsableSpace();
      long size = ShmSegment.totalBytes(2, 64 << 10);
      ShmSegment s = ShmSegment.create(mnt, 2, 64 << 10);
      try {
        long used = free - Files.getFileStore(mnt).getUsableSpace();
        assertTrue(used >= size, "the segment of " + size + " bytes took only " + used + " bytes of the tmpfs");
      } finally {
        s.close();
        s.unlink();
      }
    } finally {
      try (var st = Files.list(mnt)) {
        for (Path p : st.toList()) Files.deleteIfExists(p);
      }
      String u = run("umount", mnt.toString());
      if (u != null) run("umount", "-l", mnt.toString());
    }
  }

  /** Runs a command; null when it exited 0, else its output. */
  private static String run(String... cmd) throws Exception {
    Process p;
    try {
      p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
    } catch (IOException e) {
      return e.getMessage();
    }
    String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
    if (!p.waitFor(20, TimeUnit.SECONDS)) {
      p.destroyForcibly();
      return "timed out";
    }
    return p.exitValue() == 0 ? null : "exit " + p.exitValue() + ": " + out;
  }
}
