package io.sparkcomms.collectives.gpu;

import io.sparkcomms.collectives.DataType;
import io.sparkcomms.nativeapi.GpuLibrary;
import io.sparkcomms.nativeapi.SparkCommsNative;
import java.util.Objects;
import org.bytedeco.javacpp.Pointer;

/**
 * Device memory this object owns: {@link #allocate} takes it, {@link #close()} frees it. Collectives
 * take {@link DeviceTensor} views of it ({@link #view()}); a view of a closed buffer refuses to give
 * its address, so it cannot reach freed memory through this library.
 */
public final class DeviceBuffer implements AutoCloseable {
  private final DataType dtype;
  private final long count;
  private final int device;
  private final long bytes;
  private long address;       // 0 once closed; guarded by this
  private volatile boolean closed;

  private DeviceBuffer(DataType dtype, long count, int device, long bytes, long address) {
    this.dtype = dtype;
    this.count = count;
    this.device = device;
    this.bytes = bytes;
    this.address = address;
  }

  /**
   * Allocates {@code count} elements of {@code dtype} on {@code device}. Raises
   * {@link IllegalArgumentException} for a negative count or a size that does not fit in a long.
   */
  public static DeviceBuffer allocate(DataType dtype, long count, int device) {
    Objects.requireNonNull(dtype, "dtype");
    long bytes = DeviceTensor.bytesOf(dtype, count);
    if (device < 0) throw new IllegalArgumentException("device must be >= 0, got " + device);
    GpuLibrary.require();
    Native.check(SparkCommsNative.sc_set_device(device), "sc_set_device(" + device + ")");
    Pointer p = new Pointer((Pointer) null);
    Native.check(SparkCommsNative.sc_malloc(p, Math.max(1, bytes)), "sc_malloc(" + bytes + " bytes)");
    return new DeviceBuffer(dtype, count, device, bytes, p.address());
  }

  public DataType dtype() { return dtype; }
  public long count() { return count; }
  public long bytes() { return bytes; }
  public int device() { return device; }
  public boolean isClosed() { return closed; }

  /** A view of the whole buffer. */
  public DeviceTensor view() { return view(0, count); }

  /** A view of elements [offset, offset + count) of the buffer. */
  public DeviceTensor view(long offset, long count) {
    if (offset < 0 || count < 0 || offset > this.count || count > this.count - offset) {
      throw new IllegalArgumentException("view [" + offset + ", +" + count + ") outside the buffer's " + this.count + " elements");
    }
    return viewBytes(offset * dtype.size(), dtype, count);
  }

  /** A view of {@code count} elements of {@code type} from byte {@code byteOffset} (in range: the caller's duty). */
  DeviceTensor viewBytes(long byteOffset, DataType type, long count) {
    return new DeviceTensor(type, count, device, address() + byteOffset, this);
  }

  /** The device address; raises {@link IllegalStateException} once closed. */
  synchronized long address() {
    if (address == 0) throw new IllegalStateException("DeviceBuffer was closed");
    return address;
  }

  /** Frees the memory. Idempotent. The caller makes sure no queued device work still uses it. */
  @Override public void close() {
    long a;
    synchronized (this) {
      if (address == 0) return;
      a = address;
      address = 0;
      closed = true;
    }
    SparkCommsNative.sc_set_device(device);
    Native.check(SparkCommsNative.sc_free(new AddressPointer(a)), "sc_free");
  }

  @Override public String toString() {
    return "DeviceBuffer[" + dtype + " x " + count + ", device " + device + (closed ? ", closed]" : "]");
  }
}
