package io.sparkcomms.spark.gpu;

import java.util.Arrays;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.ServiceLoader;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.spark.resource.ResourceInformation;

/**
 * The GPU this executor process owns, and which task threads have it bound.
 *
 * <p>Lifecycle: the executor plugin {@link #install installs} it in {@code init} (at most one per
 * JVM), binds it on every task thread in {@code onTaskStart} ({@link #bindCurrentThread}) and
 * {@link #uninstall uninstalls} it in {@code shutdown}. In local mode and on executors without a GPU
 * nothing is installed and {@link #current()} is empty. If the driver reports that another executor
 * of the host claims the same GPU, the GPU is {@link #markConflicted marked conflicted} and
 * {@link #current()} raises the conflict message.
 */
public final class ExecutorGpu {
  private static final AtomicReference<ExecutorGpu> CURRENT = new AtomicReference<>();
  private static final AtomicReference<DeviceBinder> BINDER = new AtomicReference<>();
  private static final ThreadLocal<Integer> BOUND = new ThreadLocal<>();

  private final String resourceName;
  private final String address;
  private final int ordinal;
  private final String host;
  private final String executorId;
  private volatile String conflict;

  ExecutorGpu(String resourceName, String address, int ordinal, String host, String executorId) {
    this.resourceName = resourceName;
    this.address = address;
    this.ordinal = ordinal;
    this.host = host;
    this.executorId = executorId;
  }

  /**
   * This executor's GPU, or empty when it has none (local mode, CPU executors, plugin not enabled).
   *
   * @throws IllegalStateException when another executor of the host claims the same GPU
   */
  public static Optional<ExecutorGpu> current() {
    ExecutorGpu g = CURRENT.get();
    if (g != null && g.conflict != null) throw new IllegalStateException(g.conflict);
    return Optional.ofNullable(g);
  }

  /** This executor's device ordinal, or -1 without a GPU (the form {@code Comms.create} takes). */
  public static int currentOrdinal() { return current().map(ExecutorGpu::ordinal).orElse(-1); }

  /** The device bound to the calling thread by {@code onTaskStart}, if any. */
  public static OptionalInt boundDevice() {
    Integer d = BOUND.get();
    return d == null ? OptionalInt.empty() : OptionalInt.of(d);
  }

  /**
   * This executor's GPU from the resources Spark assigned it: empty without {@code resourceName}.
   *
   * @throws IllegalStateException with more than one address (one GPU per executor), or an address
   *     that is not a device ordinal
   */
  public static Optional<ExecutorGpu> fromResources(Map<String, ResourceInformation> resources, String resourceName,
      String host, String executorId) {
    ResourceInformation info = resources.get(resourceName);
    if (info == null || info.addresses().length == 0) return Optional.empty();
    String[] addresses = info.addresses();
    if (addresses.length > 1) {
      throw new IllegalStateException("sparkcomms: executor " + executorId + " on host " + host + " was given "
          + addresses.length + " '" + resourceName + "' addresses " + Arrays.toString(addresses)
          + "; sparkcomms needs exactly one GPU per executor. Set spark.executor.resource." + resourceName
          + ".amount=1 and spark.task.resource." + resourceName + ".amount=1 (one executor per GPU).");
    }
    String address = addresses[0].trim();
    int ordinal;
    try {
      ordinal = Integer.parseInt(address);
    } catch (NumberFormatException e) {
      ordinal = -1;
    }
    if (ordinal < 0) {
      throw new IllegalStateException("sparkcomms: executor " + executorId + " on host " + host + " was given '"
          + resourceName + "' address '" + address + "', which is not a device ordinal; use a discovery script "
          + "that prints ordinals (spark-plugin/bin/discover-gpus.sh or io.sparkcomms.spark.GpuDiscoveryPlugin)");
    }
    return Optional.of(new ExecutorGpu(resourceName, address, ordinal, host, executorId));
  }

  /** Replaces the device binder (the GPU backend's hook). Null restores the default. */
  public static void installBinder(DeviceBinder binder) { BINDER.set(binder); }

  /** The installed binder, else the first {@link ServiceLoader} one, else {@link DeviceBinder#NO_OP}. */
  public static DeviceBinder binder() {
    DeviceBinder b = BINDER.get();
    if (b != null) return b;
    for (DeviceBinder found : ServiceLoader.load(DeviceBinder.class, ExecutorGpu.class.getClassLoader())) {
      BINDER.compareAndSet(null, found);
      return BINDER.get();
    }
    return DeviceBinder.NO_OP;
  }

  public String resourceName() { return resourceName; }

  /** The address Spark assigned (a string as printed by discovery). */
  public String address() { return address; }

  /** The device ordinal the address stands for. */
  public int ordinal() { return ordinal; }

  public String host() { return host; }

  public String executorId() { return executorId; }

  /** Binds the GPU to the calling thread with the current {@link #binder()} and records it. */
  public void bindCurrentThread() {
    if (conflict != null) throw new IllegalStateException(conflict);
    binder().bind(ordinal);
    BOUND.set(ordinal);
  }

  /** Forgets the calling thread's binding (after a task). */
  public static void unbindCurrentThread() { BOUND.remove(); }

  /** Marks the GPU unusable: {@link #current()} raises {@code message} from now on. */
  public void markConflicted(String message) { this.conflict = message; }

  /** The conflict message, or null. */
  String conflict() { return conflict; }

  /** Makes {@code gpu} this JVM's executor GPU (the executor plugin's {@code init}); at most one at a time. */
  public static void install(ExecutorGpu gpu) {
    if (!CURRENT.compareAndSet(null, gpu)) {
      throw new IllegalStateException("an executor GPU is already installed in this JVM: " + CURRENT.get());
    }
  }

  /** Forgets {@code gpu} if it is the installed one (the executor plugin's {@code shutdown}). */
  public static void uninstall(ExecutorGpu gpu) { CURRENT.compareAndSet(gpu, null); }

  @Override public String toString() {
    return "ExecutorGpu{" + resourceName + " " + address + " (ordinal " + ordinal + ") of executor " + executorId
        + " on " + host + (conflict != null ? ", CONFLICTED" : "") + "}";
  }
}
