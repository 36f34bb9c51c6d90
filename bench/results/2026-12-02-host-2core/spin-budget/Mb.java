import io.sparkcomms.collectives.*;
import io.sparkcomms.collectives.rendezvous.FileRendezvous;
import java.nio.file.*;
import java.util.Arrays;
public class Mb {
  public static void main(String[] a) throws Exception {
    int rank = Integer.parseInt(a[0]); Path dir = Paths.get(a[1]); int n = Integer.parseInt(a[2]);
    String what = a.length > 3 ? a[3] : "ar";
    CommOptions o = CommOptions.builder().backend(CommOptions.Backend.HOST).build();
    try (Communicator c = Comms.create(new FileRendezvous(dir, rank, 2), o)) {
      float[] x = new float[n], y = new float[n];
      HostTensor in = HostTensor.of(x), out = HostTensor.of(y);
      int iters = Integer.getInteger("iters", 200000);
      long[] ns = new long[iters];
      for (int rep = 0; rep < 3; rep++) {
        for (int i = 0; i < iters; i++) {
          long t0 = System.nanoTime();
          if (what.equals("bar")) c.barrier(); else c.allReduce(in, out, ReduceOp.SUM);
          ns[i] = System.nanoTime() - t0;
        }
        long[] s = ns.clone(); Arrays.sort(s);
        if (rank == 0) System.out.printf("%s n=%d rep %d: median %.2f us p10 %.2f p90 %.2f p99 %.2f%n", what, n, rep, s[iters/2]/1e3, s[iters/10]/1e3, s[iters*9/10]/1e3, s[iters*99/100]/1e3);
      }
    }
  }
}
