package io.sparkcomms.spark.gpu;

/**
 * The executor-to-driver messages of the GPU claim protocol, sent with {@code PluginContext.ask} as
 * the plugin's authenticated byte messages. An executor sends {@link Claim} once in its plugin's
 * {@code init}, {@link Check} periodically while it runs, and {@link Release} at shutdown; the
 * driver answers {@link Claim} and {@link Check} with a {@link Reply}. No message names an executor:
 * each is about the executor that sent it, which the driver learns from the message's authentication.
 */
public final class GpuClaimProtocol {
  private GpuClaimProtocol() {}

  /** The sending executor, on {@code host}, holds GPU {@code address} of resource {@code resourceName}. */
  public record Claim(String host, String resourceName, String address) {}

  /** Is the sending executor's claim still uncontested? */
  public record Check() {}

  /** The sending executor is going away; its claims end. */
  public record Release() {}

  /** The driver's answer: {@code granted}, or not with a message that says why. */
  public record Reply(boolean granted, String message) {
    public static Reply ok() { return new Reply(true, ""); }

    public static Reply denied(String message) { return new Reply(false, message); }
  }
}
