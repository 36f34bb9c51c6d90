package io.sparkcomms.collectives.rendezvous;

import io.sparkcomms.collectives.CommException;

/** A rendezvous did not complete: a rank never arrived within the timeout, or the channel broke. */
public class RendezvousException extends CommException {
  public RendezvousException(String message) { super(message); }
  public RendezvousException(String message, Throwable cause) { super(message, cause); }
}
