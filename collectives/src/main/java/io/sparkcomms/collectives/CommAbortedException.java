package io.sparkcomms.collectives;

/** Another rank (or this one) aborted the communicator; the message carries the first reason. */
public class CommAbortedException extends CommException {
  public CommAbortedException(String message) { super(message); }
  public CommAbortedException(String message, Throwable cause) { super(message, cause); }
}
