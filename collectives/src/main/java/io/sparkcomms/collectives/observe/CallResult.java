package io.sparkcomms.collectives.observe;

import io.sparkcomms.collectives.Protocol;

/**
 * One collective call as the hooks see it after it ran.
 *
 * @param call          what was called
 * @param protocol      the protocol that ran, or null when the call failed before the backend chose one
 * @param durationNanos from just before the backend started the call to its completion as seen here
 *                      (a synchronous call: its return; an async host call: from its submission, time
 *                      queued behind earlier async calls included; an async GPU call: until its Work
 *                      was first seen complete)
 * @param failure       what the call raised, or null on success
 */
public record CallResult(CallInfo call, Protocol protocol, long durationNanos, Throwable failure) {
  /** Whether the call succeeded. */
  public boolean ok() { return failure == null; }
}
