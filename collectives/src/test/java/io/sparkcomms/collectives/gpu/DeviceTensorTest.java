package io.sparkcomms.collectives.gpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.sparkcomms.collectives.DataType;
import org.junit.jupiter.api.Test;

/** The argument checks of device memory, which run before any GPU library is needed. */
class DeviceTensorTest {
  @Test void wrapRejectsNegativeCountsAndSizesThatOverflow() {
    assertThrows(IllegalArgumentException.class, () -> DeviceTensor.wrap(0x1000, DataType.FLOAT32, -1, 0));
    IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> DeviceTensor.wrap(0x1000, DataType.FLOAT64, 1L << 62, 0));
    assertTrue(e.getMessage().contains("2^63"), e.getMessage());
    assertThrows(IllegalArgumentException.class, () -> DeviceTensor.wrap(0, DataType.FLOAT32, 1, 0), "null address");
    assertThrows(IllegalArgumentException.class, () -> DeviceTensor.wrap(0x1000, DataType.FLOAT32, 1, -1), "negative device");
    DeviceTensor t = DeviceTensor.wrap(0x1000, DataType.BFLOAT16, (1L << 62) - 1, 3);
    assertEquals(((1L << 62) - 1) * 2, t.bytes());
    assertEquals(0x1000, t.address());
    assertEquals(3, t.device());
    assertEquals(0, DeviceTensor.wrap(0, DataType.INT64, 0, 0).bytes(), "an empty view may have no address");
  }

  @Test void allocateRejectsBadSizesBeforeTouchingTheDevice() {
    assertThrows(IllegalArgumentException.class, () -> DeviceBuffer.allocate(DataType.FLOAT32, 1L << 62, 0),
        "1L << 62 floats are 2^64 bytes");
    assertThrows(IllegalArgumentException.class, () -> DeviceBuffer.allocate(DataType.FLOAT32, -1, 0));
    assertThrows(IllegalArgumentException.class, () -> DeviceBuffer.allocate(DataType.FLOAT32, 8, -1));
  }
}
