package io.sparkcomms.collectives.rendezvous;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class FileRendezvousTest {
  private static byte[] b(String s) { return s.getBytes(StandardCharsets.UTF_8); }

  @Test void exchangesRoundsInOrderAndCleansThePreviousRound() throws Exception {
    Path dir = FileRendezvous.createDirectory();
    FileRendezvous r0 = new FileRendezvous(dir, 0, 2);
    FileRendezvous r1 = new FileRendezvous(dir, 1, 2);
    Duration t = Duration.ofSeconds(20);
    for (int k = 0; k < 3; k++) {
      String s0 = "a" + k, s1 = "b" + k;
      CompletableFuture<byte[][]> f = CompletableFuture.supplyAsync(() -> r1.allGather(b(s1), t));
      byte[][] got0 = r0.allGather(b(s0), t);
      byte[][] got1 = f.get(30, TimeUnit.SECONDS);
      assertArrayEquals(b(s0), got0[0]);
      assertArrayEquals(b(s1), got0[1]);
      assertArrayEquals(b(s0), got1[0]);
      assertArrayEquals(b(s1), got1[1]);
    }
    // each rank removed its round-1 file after it saw all of round 2
    assertFalse(Files.exists(dir.resolve("round-1.rank-0")));
    assertFalse(Files.exists(dir.resolve("round-1.rank-1")));
  }

  /**
   * Rank 0 gives up on round 0; rank 1 arrives after that, finds rank 0's file, and times out in round
   * 1: its error says it arrived late, and after whom.
   */
  @Test void aRankThatArrivesAfterThePeerGaveUpSaysSo() throws Exception {
    Path dir = FileRendezvous.createDirectory();
    Duration t = Duration.ofMillis(300);
    RendezvousException early = assertThrows(RendezvousException.class, () -> new FileRendezvous(dir, 0, 2).allGather(b("x"), t));
    assertTrue(early.getMessage().contains("rank(s) 1 did not arrive within 300 ms"), early.getMessage());
    assertFalse(early.getMessage().contains("arrived late"), early.getMessage());
    Thread.sleep(200);  // rank 1 writes its round-0 file > 300 ms after rank 0 wrote its own
    FileRendezvous late = new FileRendezvous(dir, 1, 2);
    late.allGather(b("y"), t);  // rank 0's file is still there
    RendezvousException e = assertThrows(RendezvousException.class, () -> late.allGather(b("z"), t));
    assertTrue(e.getMessage().contains("rendezvous round 1"), e.getMessage());
    assertTrue(e.getMessage().contains("this rank arrived late: in round 0 it came"), e.getMessage());
    assertTrue(e.getMessage().contains("after rank 0"), e.getMessage());
  }

  /** Whoever can write the directory can write rank 0's message (the segment path), so only a private one is taken. */
  @Test void aDirectoryThatOthersCanWriteIsRefused() throws Exception {
    Path dir = FileRendezvous.createDirectory();
    try {
      for (String mode : new String[] {"rwxrwx---", "rwx----wx", "rwxrwxrwx", "rwx-w----"}) {
        Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString(mode));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> new FileRendezvous(dir, 0, 2), mode);
        assertTrue(e.getMessage().contains(dir + " is refused: other users can write it (mode " + mode), e.getMessage());
      }
      Files.setPosixFilePermissions(dir, PosixFilePermissions.fromString("rwxr-xr-x"));
      new FileRendezvous(dir, 0, 2);  // others may read and enter; only writing matters
    } finally {
      Files.delete(dir);
    }
  }

  @Test void aDirectoryOfAnotherUserOrASymbolicLinkIsRefused(@TempDir Path tmp) throws Exception {
    Path dir = FileRendezvous.createDirectory();
    try {
      Path link = Files.createSymbolicLink(tmp.resolve("link"), dir);
      IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> new FileRendezvous(link, 0, 2));
      assertTrue(e.getMessage().contains(link + " is refused: it is a symbolic link"), e.getMessage());
      boolean given;
      try {
        Files.setAttribute(dir, "unix:uid", 65534, LinkOption.NOFOLLOW_LINKS);
        given = (int) Files.getAttribute(dir, "unix:uid", LinkOption.NOFOLLOW_LINKS) == 65534;
      } catch (Exception x) {
        given = false;
      }
      assumeTrue(given, "cannot give a directory to uid 65534 (not root)");
      e = assertThrows(IllegalArgumentException.class, () -> new FileRendezvous(dir, 0, 2));
      assertTrue(e.getMessage().contains(dir + " is refused: it is owned by uid 65534"), e.getMessage());
    } finally {
      Files.delete(dir);
    }
  }

  /** An interrupt ends the wait at once, says so, and leaves the interrupt set; before the call too. */
  @Test void anInterruptEndsTheWaitAtOnce() throws Exception {
    Path dir = FileRendezvous.createDirectory();
    for (boolean before : new boolean[] {false, true}) {
      FileRendezvous r0 = new FileRendezvous(dir, 0, 2);
      AtomicBoolean stillInterrupted = new AtomicBoolean();
      CompletableFuture<Throwable> f = new CompletableFuture<>();
      Thread t = new Thread(() -> {
        if (before) Thread.currentThread().interrupt();
        try {
          r0.allGather(b("x"), Duration.ofSeconds(60));
          f.complete(null);
        } catch (Throwable e) {
          stillInterrupted.set(Thread.currentThread().isInterrupted());
          f.complete(e);
        }
      });
      t.start();
      if (!before) {
        Thread.sleep(200);  // waiting for rank 1, which never comes
        t.interrupt();
      }
      Throwable e = f.get(5, TimeUnit.SECONDS);
      assertTrue(e instanceof RendezvousException, String.valueOf(e));
      assertTrue(e.getMessage().contains("interrupted") && e.getMessage().contains(dir.toString()), e.getMessage());
      assertTrue(stillInterrupted.get(), "the interrupt must stay set");
      t.join(5_000);
      dir = FileRendezvous.createDirectory();  // a fresh round 0
    }
  }
}
