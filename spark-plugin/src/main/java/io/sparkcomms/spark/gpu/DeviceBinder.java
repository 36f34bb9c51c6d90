package io.sparkcomms.spark.gpu;

/**
 * Makes a GPU the current device of the calling thread (the native {@code sc_set_device}). The
 * executor plugin calls it once at startup (to fail fast on an unusable GPU) and on every task
 * thread in {@code onTaskStart}.
 *
 * <p>{@link ExecutorGpu#binder()} uses the binder installed with {@link ExecutorGpu#installBinder},
 * else the first one {@link java.util.ServiceLoader} finds
 * ({@code META-INF/services/io.sparkcomms.spark.gpu.DeviceBinder}; the plugin jar registers
 * {@link NativeDeviceBinder}), else {@link #NO_OP}.
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
