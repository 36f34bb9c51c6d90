package io.sparkcomms.spark;

/**
 * Makes a GPU the current device of the calling thread (the native {@code sc_set_device}). The
 * executor plugin calls it once at startup (to fail fast on an unusable GPU) and on every task
 * thread in {@code onTaskStart}.
 *
 * <p>The default is {@link #NO_OP} until the GPU backend lands: it provides an implementation
 * through {@link java.util.ServiceLoader} ({@code META-INF/services/io.sparkcomms.spark.DeviceBinder})
 * or installs one with {@link ExecutorGpu#installBinder}.
 */
public interface DeviceBinder {
  /** Records nothing and binds nothing: the host backend needs no device. */
  DeviceBinder NO_OP = new DeviceBinder() {
    @Override public void bind(int device) {}

    @Override public String describe() { return "no-op (no GPU backend loaded)"; }
  };

  /** Binds {@code device} (an ordinal among the devices this process sees) to the calling thread. */
  void bind(int device);

  /** A short description for logs. */
  default String describe() { return getClass().getName(); }
}
