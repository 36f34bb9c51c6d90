package io.sparkcomms.benchmarks;

import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.Comms;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.rendezvous.FileRendezvous;
import java.nio.file.Path;
import java.util.Arrays;

/**
 * Host cost of a synchronous host-tensor call on the GPU backend: the wall time of
 * {@code allReduce(HostTensor)} on a one-rank communicator, whose device work is a copy, so what is
 * timed is the staging (copies in and out), the launch and the wait. Public API only, so the same
 * source measures any version of the library.
 *
 * <pre>java -cp ... io.sparkcomms.benchmarks.HostCallOverhead [iterations, default 2000]</pre>
 */
public final class HostCallOverhead {
  public static void main(String[] args) throws Exception {
    int iters = args.length > 0 ? Integer.parseInt(args[0]) : 2000;
    int[] counts = {256, 2048, 16384, 262144};
    Path dir = FileRendezvous.createDirectory();
    CommOptions o = CommOptions.builder().backend(CommOptions.Backend.GPU).vendor(false).build();
    try (Communicator comm = Comms.create(new FileRendezvous(dir, 0, 1), o, 0)) {
      for (int n : counts) {
        float[] x = new float[n];
        HostTensor t = HostTensor.of(x);
        long[] ns = new long[iters];
        for (int i = 0; i < 300; i++) comm.allReduce(t, ReduceOp.SUM);
        for (int i = 0; i < iters; i++) {
          long t0 = System.nanoTime();
          comm.allReduce(t, ReduceOp.SUM);
          ns[i] = System.nanoTime() - t0;
        }
        Arrays.sort(ns);
        System.out.printf("host-tensor allReduce fp32 %7d B: median %.2f us, p10 %.2f, p90 %.2f (%d calls)%n", n * 4,
            ns[iters / 2] / 1e3, ns[iters / 10] / 1e3, ns[iters * 9 / 10] / 1e3, iters);
      }
    }
  }
}
