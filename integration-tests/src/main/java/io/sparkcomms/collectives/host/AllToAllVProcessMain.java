package io.sparkcomms.collectives.host;

import io.sparkcomms.collectives.AllToAllVReference;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.host.AllToAllVHarness.Scenario;
import io.sparkcomms.collectives.rendezvous.FileRendezvous;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * One rank of {@code MultiProcessTest.skewedAllToAllVAcrossProcesses} in its own JVM. Args: dir rank size seed timeoutMs.
 * Runs the random skewed matrix (4 KiB staging, so most calls take several rounds), a capacity
 * overflow that every rank must report, and an allReduce after it; every rank derives all ranks'
 * sizes from the seed. Prints "OK allToAllV" and exits 0, or prints the failures and exits 1 (3 on
 * an unexpected exception).
 */
public final class AllToAllVProcessMain {
  public static void main(String[] a) {
    String dir = a[0];
    int rank = Integer.parseInt(a[1]);
    int size = Integer.parseInt(a[2]);
    long seed = Long.parseLong(a[3]);
    Duration timeout = Duration.ofMillis(Long.parseLong(a[4]));
    try {
      CommOptions o = CommOptions.builder().backend(CommOptions.Backend.HOST).stagingBytes(4096).timeout(timeout).build();
      String segDir = System.getProperty(RankProcessMain.SEGMENT_DIR_PROPERTY);
      FileRendezvous rv = new FileRendezvous(Paths.get(dir), rank, size);
      Communicator c = segDir == null ? HostCommunicator.create(rv, o) : HostCommunicator.create(rv, o, Paths.get(segDir));
      List<String> fails = new ArrayList<>();
      for (Scenario s : AllToAllVHarness.skewedMatrix(size, seed, 4000)) fails.addAll(AllToAllVHarness.runAndCheck(c, s));
      // capacity overflow on the last receiver; the harness expects CommCapacityException and no output
      Scenario bad = AllToAllVHarness.packed("overflow", DataType.INT64, AllToAllVHarness.constant(size, 700), 0, seed, true, false);
      bad.outCounts()[size - 1] -= 1;
      if (bad.expected().ok()) fails.add("overflow scenario is valid");
      fails.addAll(AllToAllVHarness.runAndCheck(c, bad));
      double[] x = {rank + 1};
      c.allReduce(HostTensor.of(x), ReduceOp.SUM);
      if (x[0] != size * (size + 1) / 2.0) fails.add("allReduce after the overflow gave " + x[0]);
      fails.addAll(AllToAllVHarness.runAndCheck(c, AllToAllVHarness.slots("after", DataType.BFLOAT16,
          AllToAllVReference.skewedCounts(new long[size], AllToAllVReference.Skew.ZIPF, seed), 2, seed, false, false)));
      c.close();
      if (!fails.isEmpty()) {
        System.out.println("FAILURES seed " + seed + "\n" + String.join("\n", fails));
        System.out.flush();
        System.exit(1);
      }
      System.out.println("OK allToAllV");
      System.exit(0);
    } catch (Throwable t) {
      System.out.println("FAILED " + t.getClass().getName() + ": " + t.getMessage());
      System.out.flush();
      Runtime.getRuntime().halt(3);
    }
  }
}
