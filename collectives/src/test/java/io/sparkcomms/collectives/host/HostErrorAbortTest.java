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
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** An Error inside a host collective (here the InternalError of a SIGBUS) aborts the communicator before it propagates. */
class HostErrorAbortTest {
  @TempDir Path dir;

  @Test void anErrorInACallAbortsTheCommunicatorSoPeersStopWaiting() throws Exception {
    // rank 0's input is a mapping of a file truncated after mapping: reading it raises SIGBUS, which the
    // JVM turns into an InternalError
    MappedByteBuffer gone;
    try (FileChannel ch = FileChannel.open(dir.resolve("input"), StandardOpenOption.CREATE_NEW, StandardOpenOption.READ,
        StandardOpenOption.WRITE)) {
      ch.write(ByteBuffer.allocate(1 << 16), 0);
      gone = ch.map(FileChannel.MapMode.READ_WRITE, 0, 1 << 16);
      ch.truncate(0);
    }
    long timeoutMs = 8_000;
    CommOptions o = CommOptions.builder().backend(CommOptions.Backend.HOST).stagingBytes(64 << 10)
        .timeout(Duration.ofMillis(timeoutMs)).build();
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
      assertInstanceOf(InternalError.class, res.get(0), String.valueOf(res.get(0)));
      // In compiled code HotSpot raises the InternalError of a fault in an unsafe copy asynchronously, at a
      // later safepoint, which can come after the call's last barrier or after the call returned: then rank
      // 1's call has returned and nothing is aborted (README, known limitations). Checked here: the case
      // where the fault surfaces inside the call.
      if ("returned".equals(res.get(1))) return;
      CommAbortedException e = assertInstanceOf(CommAbortedException.class, res.get(1), String.valueOf(res.get(1)));
      assertTrue(e.getMessage().contains("rank 0") && e.getMessage().contains("InternalError"), e.getMessage());
      assertTrue(g.comm(0).isAborted() && g.comm(1).isAborted());
    }
  }
}
