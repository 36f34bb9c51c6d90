package io.sparkcomms.collectives;

/**
 * An allToAllV whose sizes do not fit: a rank would receive more than its output (or slot) holds, a
 * send block runs outside the input, a count is negative, or receive offsets are out of order. Found
 * by the collective itself (on the device for device-resident counts), raised on every rank at the
 * same call, with no output written; the communicator stays usable.
 */
public class CommCapacityException extends CommMismatchException {
  public CommCapacityException(String message) { super(message); }
  public CommCapacityException(String message, Throwable cause) { super(message, cause); }
}
