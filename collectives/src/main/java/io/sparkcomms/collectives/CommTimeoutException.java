package io.sparkcomms.collectives;

/** A wait for a peer exceeded the communicator's timeout. The communicator is aborted. */
public class CommTimeoutException extends CommException {
  public CommTimeoutException(String message) { super(message); }
  public CommTimeoutException(String message, Throwable cause) { super(message, cause); }
}
