package io.sparkcomms.collectives.host;

import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.CommAbortedException;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.RankGroup;
import io.sparkcomms.collectives.ReduceOp;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** An Error inside a host collective (here the InternalError of a SIGBUS) aborts the communicator before it propagates. */
class HostErrorAbortTest {
  @TempDir Path dir;

  @Test void anErrorInACallAbortsTheCommunicatorSoPeersStopWaiting() throws Exception {
    // In compiled code HotSpot raises the InternalError of a fault in an unsafe copy asynchronously, at a
    // later safepoint, which can come after the call's last barrier or after the call returned: then the
    // call returns on every rank and nothing is aborted (README, known limitations). Checked here: the
    // case where the fault surfaces inside the call, in the first of up to 10 trials where it does so
    // (skipped, not passed, if it never does).
    for (int trial = 0; trial < 10; trial++) {
      List<Object> res = oneTrial(trial);
      if ("returned".equals(res.get(0))) continue;
      assertInstanceOf(InternalError.class, res.get(0), String.valueOf(res.get(0)));
      if ("returned".equals(res.get(1))) continue;  // raised on rank 0 after rank 1 passed the last barrier
      CommAbortedException e = assertInstanceOf(CommAbortedException.class, res.get(1), String.valueOf(res.get(1)));
      assertTrue(e.getMessage().contains("rank 0") && e.getMessage().contains("InternalError"), e.getMessage());
      return;
    }
    Assumptions.abort("in 10 trials the fault never surfaced inside the call on both ranks");
  }

  /** One 2-rank allReduce whose rank 0 input is a mapping of a truncated file; returns each rank's outcome. */
  private List<Object> oneTrial(int trial) throws Exception {
    // reading a mapping of a file truncated after mapping raises SIGBUS, which the JVM turns into an InternalError
    MappedByteBuffer gone;
    try (FileChannel ch = FileChannel.open(dir.resolve("input-" + trial), StandardOpenOption.CREATE_NEW,
        StandardOpenOption.READ, StandardOpenOption.WRITE)) {
      ch.write(ByteBuffer.allocate(1 << 16), 0);
      gone = ch.map(FileChannel.MapMode.READ_WRITE, 0, 1 << 16);
      ch.truncate(0);
    }
    CommOptions o = CommOptions.builder().backend(CommOptions.Backend.HOST).stagingBytes(64 << 10)
        .timeout(Duration.ofMillis(8_000)).build();
    try (RankGroup g = new RankGroup(2, o)) {
      List<Object> res = g.run(r -> {
        try {
          HostTensor in = r == 0 ? HostTensor.wrap(gone, DataType.FLOAT32) : HostTensor.of(new float[1 << 14]);
          g.comm(r).allReduce(in, HostTensor.of(new float[1 << 14]), ReduceOp.SUM);
          return "returned";
        } catch (Throwable t) {
          return t;
        }
      });
      if (res.get(1) instanceof CommAbortedException) assertTrue(g.comm(0).isAborted() && g.comm(1).isAborted());
      return res;
    }
  }
}
