package io.sparkcomms.spark.gpu;

import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;

/**
 * The driver's record of which executor holds which GPU of which host. Lives as long as the driver
 * plugin (one application); thread-safe.
 *
 * <p>A second executor claiming a GPU of a host that another live executor holds is refused; the
 * holder is marked conflicted too, so its next {@link #check} fails: both executors learn the
 * message naming the host, the GPU and both executor ids. A claim ends with {@link #release} (the
 * executor shut down or was removed).
 *
 * <p>The executor id of every call is the one the driver proved (the sender of an authenticated
 * message, or the executor the cluster manager removed), never a field of the message: an executor
 * can claim only for itself and release only what it holds.
 */
public final class GpuClaimRegistry {
  private record Gpu(String host, String resourceName, String address) {}

  private final Map<Gpu, String> holders = new HashMap<>();
  private final Map<String, String> conflicts = new HashMap<>();

  /**
   * Grants {@code executorId}'s {@code claim} unless another executor holds the same GPU of the same
   * host, or {@code executorId} holds another GPU already (one GPU per executor, which also bounds
   * what the registry keeps by the number of executors). Idempotent.
   */
  public synchronized GpuClaimProtocol.Reply claim(String executorId, GpuClaimProtocol.Claim claim) {
    Gpu gpu = new Gpu(claim.host(), claim.resourceName(), claim.address());
    String holder = holders.get(gpu);
    if (holder == null) {
      for (Map.Entry<Gpu, String> e : holders.entrySet()) {
        if (e.getValue().equals(executorId)) {
          Gpu other = e.getKey();
          return GpuClaimProtocol.Reply.denied("executor " + executorId + " claimed " + gpu.resourceName() + " address "
              + gpu.address() + " on host " + gpu.host() + " but holds " + other.resourceName() + " address "
              + other.address() + " on host " + other.host() + " already; an executor holds one GPU");
        }
      }
    }
    if (holder == null || holder.equals(executorId)) {
      holders.put(gpu, executorId);
      return GpuClaimProtocol.Reply.ok();
    }
    String message = conflictMessage(gpu, holder, executorId);
    conflicts.put(holder, message);
    conflicts.put(executorId, message);
    return GpuClaimProtocol.Reply.denied(message);
  }

  /** Whether {@code executorId}'s claims are uncontested. */
  public synchronized GpuClaimProtocol.Reply check(String executorId) {
    String message = conflicts.get(executorId);
    return message == null ? GpuClaimProtocol.Reply.ok() : GpuClaimProtocol.Reply.denied(message);
  }

  /** Ends every claim of {@code executorId} (and only its own). */
  public synchronized void release(String executorId) {
    for (Iterator<String> it = holders.values().iterator(); it.hasNext(); ) {
      if (it.next().equals(executorId)) it.remove();
    }
    conflicts.remove(executorId);
  }

  /** The executor holding {@code address} of {@code host}, or null. For logs and tests. */
  public synchronized String holder(String host, String resourceName, String address) {
    return holders.get(new Gpu(host, resourceName, address));
  }

  private static String conflictMessage(Gpu gpu, String holder, String claimant) {
    return "GPU conflict on host " + gpu.host() + ": " + gpu.resourceName() + " address " + gpu.address()
        + " is held by executor " + holder + " and was also given to executor " + claimant
        + ". Two processes on one GPU break collectives; both executors stop. Give every executor of a host "
        + "its own GPU (one worker per host, or disjoint spark.worker.resource." + gpu.resourceName()
        + ".discoveryScript / resourcesFile per worker).";
  }
}
