package io.sparkcomms.examples.gpu;

import io.sparkcomms.collectives.rendezvous.FileRendezvous;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The GPU-host programs' rank processes: {@code n} JVMs of this one's class path, rank r running
 * {@code main rank N DIR r [extra...]} with DIR a fresh rendezvous directory; each bounded by 600 s.
 */
final class RankProcesses {
  private RankProcesses() {}

  /** Whether every rank process exited 0 within its bound. */
  static boolean run(Class<?> main, int n, List<String> extra) throws Exception {
    Path dir = FileRendezvous.createDirectory();
    String java = Paths.get(System.getProperty("java.home"), "bin", "java").toString();
    List<Process> ps = new ArrayList<>();
    for (int r = 0; r < n; r++) {
      List<String> cmd = new ArrayList<>(List.of(java, "-cp", System.getProperty("java.class.path"), main.getName(),
          "rank", "" + n, dir.toString(), "" + r));
      cmd.addAll(extra);
      ps.add(new ProcessBuilder(cmd).inheritIO().start());
    }
    boolean ok = true;
    for (Process p : ps) {
      if (!p.waitFor(600, TimeUnit.SECONDS)) {
        p.destroyForcibly();
        ok = false;
      } else if (p.exitValue() != 0) ok = false;
    }
    return ok;
  }
}
