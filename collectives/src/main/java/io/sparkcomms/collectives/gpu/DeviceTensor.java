package io.sparkcomms.collectives.gpu;

import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.Tensor;
import io.sparkcomms.nativeapi.GpuLibrary;
import io.sparkcomms.nativeapi.SparkCommsNative;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.bytedeco.javacpp.Pointer;

/**
 * A tensor in GPU memory. {@link #allocate} returns an owning tensor: {@link #close()} frees the
 * memory. {@link #wrap} views memory owned by someone else (another GPU library): close() then frees
 * nothing. Copies to and from host tensors are synchronous.
 */
public final class DeviceTensor implements Tensor, AutoCloseable {
  private final DataType dtype;
  private final long count;
  private final int device;
  private final boolean owned;
  private long address;

  private DeviceTensor(DataType dtype, long count, int device, long address, boolean owned) {
    this.dtype = dtype;
    this.count = count;
    this.device = device;
    this.address = address;
    this.owned = owned;
  }

  /** Allocates {@code count} elements on {@code device}; the caller owns the result. */
  public static DeviceTensor allocate(DataType dtype, long count, int device) {
    GpuLibrary.require();
    if (count < 0) throw new IllegalArgumentException("count must be >= 0, got " + count);
    Native.check(SparkCommsNative.sc_set_device(device), "sc_set_device(" + device + ")");
    Pointer p = new Pointer((Pointer) null);
    Native.check(SparkCommsNative.sc_malloc(p, Math.max(1, count * dtype.size())), "sc_malloc(" + count * dtype.size() + " bytes)");
    return new DeviceTensor(dtype, count, device, p.address(), true);
  }

  /** Views device memory at {@code address} (e.g. from another GPU library); not owned, never freed here. */
  public static DeviceTensor wrap(long address, DataType dtype, long count, int device) {
    if (address == 0 && count > 0) throw new IllegalArgumentException("null device address");
    return new DeviceTensor(dtype, count, device, address, false);
  }

  @Override public DataType dtype() { return dtype; }
  @Override public long count() { return count; }
  @Override public boolean isDevice() { return true; }
  public int device() { return device; }
  public boolean isOwned() { return owned; }

  /** The device address; valid until {@link #close()} for owned tensors. */
  public long address() {
    if (address == 0 && owned) throw new IllegalStateException("DeviceTensor was closed");
    return address;
  }

  Pointer pointer() { return new DevicePointer(address()); }

  /** Copies all of {@code src} (same dtype, count <= this count) to the start of this tensor. */
  public void copyFrom(HostTensor src) {
    checkHost(src);
    int n = Math.toIntExact(src.count());
    ByteBuffer staging = ByteBuffer.allocateDirect(Math.max(1, n * dtype.size())).order(ByteOrder.nativeOrder());
    src.copyTo(0, n, staging, 0);
    Native.check(SparkCommsNative.sc_set_device(device), "sc_set_device");
    Native.check(SparkCommsNative.sc_memcpy_htod(pointer(), new Pointer(staging), (long) n * dtype.size(), null), "sc_memcpy_htod");
    Native.check(SparkCommsNative.sc_stream_synchronize(null), "sc_stream_synchronize");
  }

  /** Copies the first {@code dst.count()} elements of this tensor into {@code dst}. */
  public void copyTo(HostTensor dst) {
    checkHost(dst);
    int n = Math.toIntExact(dst.count());
    ByteBuffer staging = ByteBuffer.allocateDirect(Math.max(1, n * dtype.size())).order(ByteOrder.nativeOrder());
    Native.check(SparkCommsNative.sc_set_device(device), "sc_set_device");
    Native.check(SparkCommsNative.sc_memcpy_dtoh(new Pointer(staging), pointer(), (long) n * dtype.size(), null), "sc_memcpy_dtoh");
    Native.check(SparkCommsNative.sc_stream_synchronize(null), "sc_stream_synchronize");
    dst.copyFrom(staging, 0, 0, n);
  }

  /** Sets every byte to {@code value} (tests poison outputs with 0xFF: NaN for floats). */
  public void fillBytes(int value) {
    Native.check(SparkCommsNative.sc_set_device(device), "sc_set_device");
    Native.check(SparkCommsNative.sc_memset(pointer(), value, count * dtype.size(), null), "sc_memset");
    Native.check(SparkCommsNative.sc_stream_synchronize(null), "sc_stream_synchronize");
  }

  private void checkHost(HostTensor h) {
    if (h.dtype() != dtype) throw new IllegalArgumentException("dtype " + h.dtype() + " differs from device tensor's " + dtype);
    if (h.count() > count) throw new IllegalArgumentException("host tensor has " + h.count() + " elements, device tensor " + count);
  }

  /** Frees owned memory; a no-op for wrapped memory. Idempotent. */
  @Override public void close() {
    if (owned && address != 0) {
      SparkCommsNative.sc_set_device(device);
      long a = address;
      address = 0;
      Native.check(SparkCommsNative.sc_free(new DevicePointer(a)), "sc_free");
    }
  }

  @Override public String toString() {
    return "DeviceTensor[" + dtype + " x " + count + ", device " + device + (owned ? ", owned]" : ", wrapped]");
  }
}
