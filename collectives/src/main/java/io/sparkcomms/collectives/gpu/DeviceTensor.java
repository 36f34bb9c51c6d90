package io.sparkcomms.collectives.gpu;

import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.Tensor;
import io.sparkcomms.nativeapi.SparkCommsNative;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Objects;
import org.bytedeco.javacpp.Pointer;

/**
 * A view of elements in GPU memory; it never owns or frees memory. Views come from a
 * {@link DeviceBuffer} ({@link DeviceBuffer#view()}: valid until the buffer is closed) or from
 * {@link #wrap} (memory of another GPU library, valid as long as that owner keeps it). Copies to
 * and from host tensors are synchronous.
 */
public final class DeviceTensor implements Tensor {
  /** Largest host-side buffer one copy window uses. */
  private static final int COPY_WINDOW = 32 << 20;

  private final DataType dtype;
  private final long count;
  private final int device;
  private final long address;
  private final DeviceBuffer owner;  // null for wrapped memory

  DeviceTensor(DataType dtype, long count, int device, long address, DeviceBuffer owner) {
    this.dtype = dtype;
    this.count = count;
    this.device = device;
    this.address = address;
    this.owner = owner;
  }

  /**
   * Views device memory at {@code address} owned by someone else (e.g. another GPU library). Raises
   * {@link IllegalArgumentException} for a negative count, a size that does not fit in a long, a
   * negative device or a null address with elements.
   */
  public static DeviceTensor wrap(long address, DataType dtype, long count, int device) {
    Objects.requireNonNull(dtype, "dtype");
    bytesOf(dtype, count);
    if (device < 0) throw new IllegalArgumentException("device must be >= 0, got " + device);
    if (address == 0 && count > 0) throw new IllegalArgumentException("null device address");
    return new DeviceTensor(dtype, count, device, address, null);
  }

  /** {@code count * dtype.size()}, checked: a negative count or one whose bytes overflow a long is an argument error. */
  static long bytesOf(DataType dtype, long count) {
    if (count < 0) throw new IllegalArgumentException("count must be >= 0, got " + count);
    try {
      return Math.multiplyExact(count, (long) dtype.size());
    } catch (ArithmeticException e) {
      throw new IllegalArgumentException(count + " elements of " + dtype + " do not fit in 2^63 bytes");
    }
  }

  @Override public DataType dtype() { return dtype; }
  @Override public long count() { return count; }
  @Override public boolean isDevice() { return true; }
  public int device() { return device; }

  /** The device address; raises {@link IllegalStateException} when the buffer it views was closed. */
  public long address() {
    if (owner != null && owner.isClosed()) throw new IllegalStateException("the DeviceBuffer of this view was closed");
    return address;
  }

  Pointer pointer() { return new AddressPointer(address()); }

  /** Copies all of {@code src} (same dtype, {@code count <= this count}) to the start of this tensor. */
  public void copyFrom(HostTensor src) {
    checkHost(src);
    copyWindows(src, src.count(), true);
  }

  /** Copies the first {@code dst.count()} elements of this tensor into {@code dst}. */
  public void copyTo(HostTensor dst) {
    checkHost(dst);
    copyWindows(dst, dst.count(), false);
  }

  /** Copies the first {@code n} elements of {@code src} into the first {@code n} of this tensor. */
  public void copyFrom(HostTensor src, long n) {
    checkPrefix(src, n);
    copyWindows(src, n, true);
  }

  /** Copies the first {@code n} elements of this tensor into the first {@code n} of {@code dst}. */
  public void copyTo(HostTensor dst, long n) {
    checkPrefix(dst, n);
    copyWindows(dst, n, false);
  }

  private void checkPrefix(HostTensor h, long n) {
    if (h.dtype() != dtype) throw new IllegalArgumentException("dtype " + h.dtype() + " differs from device tensor's " + dtype);
    if (n < 0 || n > h.count() || n > count) throw new IllegalArgumentException("copy of " + n + " elements between " + h + " and " + this);
  }

  /** Host-device copies of the first {@code total} elements through a direct buffer of at most {@link #COPY_WINDOW} bytes. */
  private void copyWindows(HostTensor h, long total, boolean toDevice) {
    int es = dtype.size();
    int per = COPY_WINDOW / es;
    ByteBuffer staging = ByteBuffer.allocateDirect((int) Math.max(1, Math.min(total, per) * es)).order(ByteOrder.nativeOrder());
    Pointer host = new Pointer(staging);
    long base = address();
    Native.check(SparkCommsNative.sc_set_device(device), "sc_set_device");
    for (long off = 0; off < total; off += per) {
      int n = (int) Math.min(per, total - off);
      long bytes = (long) n * es;
      Pointer dev = new AddressPointer(base + off * es);
      if (toDevice) {
        h.copyTo(off, n, staging, 0);
        Native.check(SparkCommsNative.sc_memcpy_htod(dev, host, bytes, null), "sc_memcpy_htod");
        Native.check(SparkCommsNative.sc_stream_synchronize(null), "sc_stream_synchronize");
      } else {
        Native.check(SparkCommsNative.sc_memcpy_dtoh(host, dev, bytes, null), "sc_memcpy_dtoh");
        Native.check(SparkCommsNative.sc_stream_synchronize(null), "sc_stream_synchronize");
        h.copyFrom(staging, 0, off, n);
      }
    }
  }

  /** Sets every byte to {@code value} (tests poison outputs with 0xFF: NaN for floats). */
  public void fillBytes(int value) {
    Pointer p = pointer();
    Native.check(SparkCommsNative.sc_set_device(device), "sc_set_device");
    Native.check(SparkCommsNative.sc_memset(p, value, bytes(), null), "sc_memset");
    Native.check(SparkCommsNative.sc_stream_synchronize(null), "sc_stream_synchronize");
  }

  private void checkHost(HostTensor h) {
    if (h.dtype() != dtype) throw new IllegalArgumentException("dtype " + h.dtype() + " differs from device tensor's " + dtype);
    if (h.count() > count) throw new IllegalArgumentException("host tensor has " + h.count() + " elements, device tensor " + count);
  }

  @Override public String toString() {
    return "DeviceTensor[" + dtype + " x " + count + ", device " + device + (owner != null ? ", view of a DeviceBuffer]" : ", wrapped]");
  }
}
