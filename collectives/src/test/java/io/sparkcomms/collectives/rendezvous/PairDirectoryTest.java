package io.sparkcomms.collectives.rendezvous;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The point-to-point meeting directory: rank 0's text checked, names per pair, planted directories and bases refused. */
class PairDirectoryTest {
  @TempDir Path dir;

  @Test void theTextRoundTripsAndMalformedTextIsRefused() {
    PairDirectory p = PairDirectory.fresh(dir);
    assertEquals(p.of(0, 1), PairDirectory.decode(p.encode()).of(0, 1));
    String id = p.encode().substring(4, 36);
    for (String bad : new String[] {null, "", "p2p ", "p2p 0123 /tmp", "p2p " + id.toUpperCase() + " /tmp", "p2p " + id + " relative/dir",
        "p2p " + id + " /tmp/../etc", "p2p " + id + " /tmp\n/x", "x2p " + id + " /tmp", "p2p " + id + "/tmp", "p2p " + id + " " + "/a".repeat(600)}) {
      assertThrows(IllegalArgumentException.class, () -> PairDirectory.decode(bad), String.valueOf(bad));
    }
  }

  @Test void eachPairHasItsOwnNameAndNoneShowsTheId() {
    PairDirectory p = PairDirectory.fresh(dir);
    String id = p.encode().substring(4, 36);
    assertNotEquals(p.of(0, 1), p.of(0, 2));
    assertNotEquals(p.of(0, 2), p.of(1, 2));
    assertEquals(dir.toAbsolutePath(), p.of(2, 5).getParent().toAbsolutePath());
    for (int hi = 1; hi < 8; hi++) assertFalse(p.of(0, hi).toString().contains(id.substring(0, 8)), "the name shows the id");
    assertNotEquals(p.of(0, 1), PairDirectory.fresh(dir).of(0, 1), "two communicators' pairs");
    assertThrows(IllegalArgumentException.class, () -> p.of(1, 1));
    assertThrows(IllegalArgumentException.class, () -> p.of(-1, 2));
  }

  @Test void theLowerRankCreatesAPrivateDirectoryAndRefusesOneThatExists() throws IOException {
    PairDirectory p = PairDirectory.fresh(dir);
    Path made = p.create(0, 3);
    assertTrue(p.exists(0, 3));
    assertEquals("rwx------", PosixFilePermissions.toString(Files.getPosixFilePermissions(made)));
    IOException again = assertThrows(IOException.class, () -> p.create(0, 3));
    assertTrue(again.getMessage().contains("exists already"), again.getMessage());
    // a link planted where the higher rank looks is not a directory to it, and FileRendezvous refuses it
    Path target = Files.createDirectory(dir.resolve("elsewhere"));
    Files.createSymbolicLink(p.of(1, 2), target);
    assertFalse(p.exists(1, 2));
    assertThrows(IllegalArgumentException.class, () -> new FileRendezvous(p.of(1, 2), 1, 2));
  }

  @Test void aBaseOthersCanWriteIsRefusedUnlessSticky() throws IOException {
    Path open = Files.createDirectory(dir.resolve("open"));
    Files.setPosixFilePermissions(open, PosixFilePermissions.fromString("rwxrwxrwx"));
    PairDirectory p = PairDirectory.fresh(open);
    assertTrue(p.baseProblem() != null && p.baseProblem().contains("not sticky"), p.baseProblem());
    IOException e = assertThrows(IOException.class, () -> p.create(0, 1));
    assertTrue(e.getMessage().contains("refused"), e.getMessage());
    assertNull(PairDirectory.fresh(dir).baseProblem());
    Path file = Files.createFile(dir.resolve("file"));
    assertTrue(PairDirectory.decode("p2p " + "0".repeat(32) + " " + file).baseProblem().contains("not a directory"));
  }
}
