package io.sparkcomms.collectives.gpu;

import io.sparkcomms.collectives.CommAbortedException;
import io.sparkcomms.collectives.CommException;
import io.sparkcomms.collectives.CommMismatchException;
import io.sparkcomms.collectives.CommTimeoutException;
import io.sparkcomms.nativeapi.SparkCommsNative;

/** Turns C ABI status codes into exceptions carrying {@code sc_last_error()}. */
final class Native {
  private Native() {}

  static void check(int status, String what) {
    if (status == SparkCommsNative.SC_OK) return;
    String msg = what + " failed: " + SparkCommsNative.sc_status_name(status) + ": " + SparkCommsNative.sc_last_error();
    switch (status) {
      case SparkCommsNative.SC_ERR_TIMEOUT: throw new CommTimeoutException(msg);
      case SparkCommsNative.SC_ERR_ABORTED: throw new CommAbortedException(msg);
      case SparkCommsNative.SC_ERR_MISMATCH: throw new CommMismatchException(msg);
      case SparkCommsNative.SC_ERR_INVALID_ARG: throw new IllegalArgumentException(msg);
      default: throw new CommException(msg);
    }
  }

  /** null for SC_OK, else the failure as text (for setup steps whose outcome every rank must learn). */
  static String failure(int status, String what) {
    return status == SparkCommsNative.SC_OK ? null
        : what + " failed: " + SparkCommsNative.sc_status_name(status) + ": " + SparkCommsNative.sc_last_error();
  }
}
