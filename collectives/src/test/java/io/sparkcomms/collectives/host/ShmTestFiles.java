package io.sparkcomms.collectives.host;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.sparkcomms.collectives.liveness.ProcessId;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.concurrent.TimeUnit;

/** Files that tests plant in a segment directory of their own. */
final class ShmTestFiles {
  private ShmTestFiles() {}

  static final int NOBODY = 65534;

  /** A fresh name of the form segments have: sparkcomms- and 32 hex digits. */
  static String segmentName() {
    byte[] token = new byte[16];
    new SecureRandom().nextBytes(token);
    return "sparkcomms-" + HexFormat.of().formatHex(token);
  }

  /** The pid of a process that has exited. */
  static long deadPid() throws Exception {
    Process p = new ProcessBuilder("true").start();
    p.waitFor();
    return p.pid();
  }

  /** A file with a creator record (pid, start time 0: unknown, this PID namespace) and mode {@code perms}. */
  static Path fakeSegment(Path p, long pid, String perms) throws IOException {
    Files.createFile(p, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
    ByteBuffer b = ByteBuffer.allocate(24).order(ByteOrder.nativeOrder())
        .putLong(pid).putLong(0).putLong(Math.max(0, ProcessId.current().pidNamespace())).flip();
    try (FileChannel ch = FileChannel.open(p, StandardOpenOption.WRITE)) {
      ch.write(b, ShmSegment.CREATOR_PID);
    }
    Files.setPosixFilePermissions(p, PosixFilePermissions.fromString(perms));
    return p;
  }

  /** Makes a FIFO at {@code p} (mkfifo); skips the test where that is not possible. */
  static Path mkfifo(Path p) throws Exception {
    Process q;
    try {
      q = new ProcessBuilder("mkfifo", p.toString()).redirectErrorStream(true).start();
    } catch (IOException e) {
      assumeTrue(false, "no mkfifo here: " + e.getMessage());
      throw e;
    }
    assumeTrue(q.waitFor(10, TimeUnit.SECONDS) && q.exitValue() == 0, "mkfifo " + p + " failed");
    return p;
  }

  /**
   * Opens the FIFO read-write and closes it: a thread blocked opening it for reading then returns (so a
   * test that found the code under test blocked there does not leave that thread behind).
   */
  static void releaseFifo(Path p) {
    try (FileChannel ch = FileChannel.open(p, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
      // opened
    } catch (IOException | RuntimeException e) {
      // gone already
    }
  }

  /** Gives {@code p} to uid 65534 (needs root); false where this process may not. */
  static boolean giveToNobody(Path p) {
    try {
      Files.setAttribute(p, "unix:uid", NOBODY, LinkOption.NOFOLLOW_LINKS);
      return (int) Files.getAttribute(p, "unix:uid", LinkOption.NOFOLLOW_LINKS) == NOBODY;
    } catch (IOException | RuntimeException e) {
      return false;
    }
  }

  /** The entries of {@code dir}, by name. */
  static java.util.List<String> list(Path dir) throws IOException {
    try (java.util.stream.Stream<Path> s = Files.list(dir)) {
      return s.map(x -> x.getFileName().toString()).sorted().toList();
    }
  }
}
