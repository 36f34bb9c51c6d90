package io.sparkcomms.collectives.host;

import io.sparkcomms.collectives.Algorithm;
import io.sparkcomms.collectives.CollectiveChecker;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.rendezvous.FileRendezvous;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;

/**
 * One rank in its own JVM, for the multi-process tests. Args: dir rank size mode seed timeoutMs.
 * Modes: {@code matrix} (the full checked matrix), {@code loop} (allReduce forever, printing READY
 * after the first — the parent kills a rank), {@code batch-loop} (the same with batches of a send to
 * rank+1 and a receive from rank-1), {@code exit-after-one} (one allReduce, then halt).
 * Exit 0 on success; prints the exception class and message on failure and exits 3.
 */
public final class RankProcessMain {
  /** System property: the directory of the segment files (default: the backend's, /dev/shm). */
  public static final String SEGMENT_DIR_PROPERTY = "sparkcomms.test.segmentDir";

  private static HostCommunicator create(FileRendezvous rv, CommOptions o) {
    String d = System.getProperty(SEGMENT_DIR_PROPERTY);
    return d == null ? HostCommunicator.create(rv, o) : HostCommunicator.create(rv, o, Paths.get(d));
  }

  public static void main(String[] a) {
    String dir = a[0];
    int rank = Integer.parseInt(a[1]);
    int size = Integer.parseInt(a[2]);
    String mode = a[3];
    long seed = Long.parseLong(a[4]);
    Duration timeout = Duration.ofMillis(Long.parseLong(a[5]));
    Map<Algorithm, Communicator> comms = new EnumMap<>(Algorithm.class);
    try {
      if (mode.equals("matrix")) {
        for (Algorithm al : new Algorithm[] {Algorithm.FLAT, Algorithm.TREE, Algorithm.LP}) {
          CommOptions o = CommOptions.builder().backend(CommOptions.Backend.HOST).algorithm(al)
              .stagingBytes(256 << 10).timeout(timeout).build();
          java.nio.file.Path sub = java.nio.file.Files.createDirectories(Paths.get(dir, al.name())); // one directory per communicator
          comms.put(al, create(new FileRendezvous(sub, rank, size), o));
        }
        List<String> fails = CollectiveChecker.runMatrix(comms::get, seed, new int[] {1, 7, 1023, (1 << 20) + 3});
        if (!fails.isEmpty()) {
          System.out.println("FAILURES " + String.join("\n", fails));
          System.exit(1);
        }
        System.out.println("OK matrix");
      } else {
        CommOptions o = CommOptions.builder().backend(CommOptions.Backend.HOST).timeout(timeout).build();
        Communicator c = create(new FileRendezvous(Paths.get(dir), rank, size), o);
        comms.put(Algorithm.AUTO, c);
        float[] x = new float[1 << 16];
        c.allReduce(HostTensor.of(x), ReduceOp.SUM);
        if (mode.equals("batch-loop")) {
          // batches forever: each rank sends to rank+1 and receives from rank-1 (channels built by the first)
          int right = (rank + 1) % size, left = (rank - 1 + size) % size;
          float[] got = new float[x.length];
          c.batch().send(HostTensor.of(x), right).recv(HostTensor.of(got), left).issue().waitFor();
          System.out.println("READY");
          System.out.flush();
          for (long i = 0; ; i++) c.batch().send(HostTensor.of(x), right).recv(HostTensor.of(got), left).issue().waitFor();
        }
        System.out.println("READY");
        System.out.flush();
        if (mode.equals("exit-after-one") && rank == size - 1) Runtime.getRuntime().halt(0);
        List<Long> times = new ArrayList<>();
        for (long i = 0; ; i++) {
          long t0 = System.nanoTime();
          c.allReduce(HostTensor.of(x), ReduceOp.SUM);
          if (i < 3) times.add(System.nanoTime() - t0);
        }
      }
      comms.values().forEach(Communicator::close);
      System.exit(0);
    } catch (Throwable t) {
      System.out.println("FAILED " + t.getClass().getName() + ": " + t.getMessage());
      System.out.flush();
      Runtime.getRuntime().halt(3);
    }
  }
}
