package io.sparkcomms.spark.gpu;

import io.sparkcomms.nativeapi.GpuLibrary;
import io.sparkcomms.nativeapi.SparkCommsNative;

/**
 * Binds the executor's GPU to the calling thread through the native library ({@code sc_set_device}),
 * when it loads. Found by {@link java.util.ServiceLoader}. Loading the library at executor start is
 * also the "preload": a broken GPU runtime shows up then, with its reason, not in the first task.
 */
public final class NativeDeviceBinder implements DeviceBinder {
  @Override public void bind(int device) {
    GpuLibrary.Status s = GpuLibrary.status();
    if (!s.available()) return; // host backend: nothing to bind; the reason is logged by describe()
    int rc = SparkCommsNative.sc_set_device(device);
    if (rc != SparkCommsNative.SC_OK) {
      throw new IllegalStateException("cannot make GPU " + device + " current: " + SparkCommsNative.sc_last_error());
    }
  }

  @Override public String describe() { return "native sc_set_device (" + GpuLibrary.status() + ")"; }
}
