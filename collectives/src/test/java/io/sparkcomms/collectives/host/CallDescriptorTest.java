package io.sparkcomms.collectives.host;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.CommException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.junit.jupiter.api.Test;

/** The call descriptor codec: what a peer publishes is range-checked before it is used. */
class CallDescriptorTest {
  static ByteBuffer slot() { return ByteBuffer.allocate(ShmSegment.DESC_BYTES).order(ByteOrder.nativeOrder()); }

  static CallDescriptor sample(String problem) {
    return new CallDescriptor(12, 0, 0, 5, 0, 0.5, 1000, 4, CallDescriptor.LAYOUT_NONE, 0, problem);
  }

  @Test void roundTripAndComparison() {
    ByteBuffer b = slot();
    sample(null).write(b, 0);
    CallDescriptor d = CallDescriptor.read(b, 0, 1);
    assertEquals(sample(null), d);
    assertTrue(d.sameCall(sample("whatever")), "the problem text is not part of the call");
    assertFalse(d.sameCall(new CallDescriptor(12, 0, 0, 5, 0, 0.25, 1000, 4, 0, 0, null)), "PREMUL factor");
    assertFalse(d.sameCall(new CallDescriptor(12, 0, 0, 5, 0, 0.5, 1000, 4, 0, 77, null)), "per-rank counts");
    assertEquals("#12 allReduce(count=1000, dtype=FLOAT32, op=PREMUL_SUM(0.5), root=0, algo=TREE)", d.describe());
  }

  @Test void problemTextIsCutToTheSlot() {
    ByteBuffer b = slot();
    sample("x".repeat(5000)).write(b, 0);
    assertEquals(CallDescriptor.MAX_TEXT, CallDescriptor.read(b, 0, 0).problem().length());
  }

  @Test void unreadableFieldsAreErrorsNamingTheRank() {
    int[][] bad = {{8, 99}, {12, -1}, {16, -2}, {40, 0}, {48, 3}, {44, CallDescriptor.MAX_TEXT + 1}, {44, -1},
        {44, Integer.MAX_VALUE}, {44, Integer.MIN_VALUE}};
    for (int[] f : bad) {
      ByteBuffer b = slot();
      sample(null).write(b, 0);
      b.putInt(f[0], f[1]);
      CommException e = assertThrows(CommException.class, () -> CallDescriptor.read(b, 0, 3), "offset " + f[0]);
      assertTrue(e.getMessage().startsWith("rank 3 published an unreadable call descriptor"), e.getMessage());
    }
  }
}
