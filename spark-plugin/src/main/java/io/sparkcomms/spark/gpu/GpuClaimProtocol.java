package io.sparkcomms.spark.gpu;

import java.io.Serializable;

/**
 * The executor-to-driver messages of the GPU claim protocol, sent with {@code PluginContext.ask}.
 * An executor sends {@link Claim} once in its plugin's {@code init}, {@link Check} periodically while
 * it runs, and {@link Release} at shutdown; the driver answers {@link Claim} and {@link Check} with a
 * {@link Reply}.
 */
public final class GpuClaimProtocol {
  private GpuClaimProtocol() {}

  /** Executor {@code executorId} on {@code host} holds GPU {@code address} of resource {@code resourceName}. */
  public record Claim(String host, String resourceName, String address, String executorId) implements Serializable {}

  /** Is the claim of {@code executorId} still uncontested? */
  public record Check(String executorId) implements Serializable {}

  /** {@code executorId} is going away; its claims end. */
  public record Release(String executorId) implements Serializable {}

  /** The driver's answer: {@code granted}, or not with a message that says why. */
  public record Reply(boolean granted, String message) implements Serializable {
    public static Reply ok() { return new Reply(true, ""); }

    public static Reply denied(String message) { return new Reply(false, message); }
  }
}
