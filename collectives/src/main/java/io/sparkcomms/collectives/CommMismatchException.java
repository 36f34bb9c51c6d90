package io.sparkcomms.collectives;

/**
 * The ranks disagreed on a call (collective, count, dtype, op, root, algorithm) or one rank rejected its
 * arguments. Raised on every rank at the same call; the communicator stays usable.
 */
public class CommMismatchException extends CommException {
  public CommMismatchException(String message) { super(message); }
  public CommMismatchException(String message, Throwable cause) { super(message, cause); }
}
