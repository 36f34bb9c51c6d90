package io.sparkcomms.collectives;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * One caller at a time: a second thread that calls a communicator while another thread is inside a
 * call gets an IllegalStateException at once (rather than running after it, in an order its peers
 * cannot know); the first call completes with the right result.
 */
class ConcurrentCallerTest {
  @Test
  void aSecondConcurrentCallerIsRefusedAndTheFirstCallCompletes() throws Exception {
    CommOptions o = CommOptions.builder().backend(CommOptions.Backend.HOST).stagingBytes(64 << 10)
        .timeout(Duration.ofSeconds(60)).build();
    try (RankGroup g = new RankGroup(2, o)) {
      float[] a = {1, 2, 3};
      float[] b = {10, 20, 30};
      // rank 0's first thread enters its call and waits there for rank 1, which joins only after
      // rank 0's second thread was refused
      CompletableFuture<Void> first = new CompletableFuture<>();
      Thread t = new Thread(() -> {
        try {
          g.comm(0).allReduce(HostTensor.of(a), ReduceOp.SUM);
          first.complete(null);
        } catch (Throwable e) {
          first.completeExceptionally(e);
        }
      }, "first-caller");
      t.start();
      // inside the call once the backend's execute is on its stack (after the one-caller check)
      long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
      while (!inBackend(t) && System.nanoTime() < deadline) Thread.sleep(5);
      assertTrue(inBackend(t), "the first caller never reached the backend");
      Object outcome;
      try {
        g.comm(0).barrierAsync();
        outcome = new AssertionError("a call was not refused while another thread is inside a call");
      } catch (IllegalStateException e) {
        outcome = e;
      }
      assertInstanceOf(IllegalStateException.class, outcome, String.valueOf(outcome));
      assertTrue(((Exception) outcome).getMessage().contains("one caller at a time"), ((Exception) outcome).getMessage());
      g.comm(1).allReduce(HostTensor.of(b), ReduceOp.SUM);
      first.get(30, TimeUnit.SECONDS);
      assertArrayEquals(new float[] {11, 22, 33}, a);
      assertArrayEquals(new float[] {11, 22, 33}, b);
      g.assertStillWorks();
    }
  }

  private static boolean inBackend(Thread t) {
    for (StackTraceElement e : t.getStackTrace()) {
      if (e.getClassName().endsWith(".HostCommunicator") && e.getMethodName().equals("execute")) return true;
    }
    return false;
  }
}
