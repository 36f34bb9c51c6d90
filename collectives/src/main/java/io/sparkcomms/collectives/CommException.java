package io.sparkcomms.collectives;

/** A collective failed on this rank or on a peer. The communicator is unusable afterwards unless stated. */
public class CommException extends RuntimeException {
  public CommException(String message) { super(message); }
  public CommException(String message, Throwable cause) { super(message, cause); }
}
