package io.sparkcomms.collectives.objects;

import io.sparkcomms.collectives.CommException;

/**
 * An object collective could not move its objects: a rank could not serialize its object, an object
 * was over the size limit, a peer's header was out of range (all raised on every rank, before any
 * payload moves), or this rank could not deserialize what it received (raised on this rank only). The
 * communicator stays usable in every case: both rounds of the call completed or neither payload round
 * ran.
 */
public class CommObjectException extends CommException {
  /**
   * @param message what failed, naming the rank, the object's class and the reason
   */
  public CommObjectException(String message) { super(message); }

  /**
   * @param message what failed, naming the rank, the object's class and the reason
   * @param cause the codec's exception on this rank
   */
  public CommObjectException(String message, Throwable cause) { super(message, cause); }
}
