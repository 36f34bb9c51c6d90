package io.sparkcomms.collectives.reliability;

import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.Communicator;
import io.sparkcomms.collectives.host.HostCommunicator;
import io.sparkcomms.collectives.rendezvous.InJvmRendezvous;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;

/**
 * Calls abort() and isAborted() from one thread while another closes the communicator, many times.
 * Run in its own JVM by {@code ConcurrentUseTest}: a read of the unmapped segment would crash the JVM
 * (SIGSEGV), which the test sees as a non-zero exit. Prints "OK iterations" on success.
 */
public final class AbortCloseRaceMain {
  private AbortCloseRaceMain() {}

  public static void main(String[] args) throws Exception {
    int iterations = Integer.parseInt(args[0]);
    CommOptions o = CommOptions.builder().backend(CommOptions.Backend.HOST).stagingBytes(4096)
        .timeout(Duration.ofSeconds(10)).build();
    for (int it = 0; it < iterations; it++) {
      Communicator c = HostCommunicator.create(InJvmRendezvous.group(1).member(0), o);
      CountDownLatch go = new CountDownLatch(1);
      final int k = it;
      Thread t = new Thread(() -> {
        go.countDown();
        for (int i = 0; i < 20 + k % 50; i++) c.isAborted();
        c.abort("racing close");
        c.isAborted();
      });
      t.start();
      go.await();
      c.close();
      t.join();
    }
    System.out.println("OK " + iterations);
  }
}
