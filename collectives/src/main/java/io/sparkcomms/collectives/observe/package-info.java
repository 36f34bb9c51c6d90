/**
 * What a communicator shows of its calls: pre and post hooks ({@link io.sparkcomms.collectives.observe.CallHook}),
 * the flight record of its last calls ({@link io.sparkcomms.collectives.observe.FlightRecorder}, dumped into
 * timeouts, mismatches and aborts as {@link io.sparkcomms.collectives.observe.FlightRecordDump}), and the
 * optional NaN check of inputs ({@link io.sparkcomms.collectives.observe.NanCheck}). Both backends get them
 * from {@code AbstractCommunicator} through {@link io.sparkcomms.collectives.observe.CallObserver}.
 */
package io.sparkcomms.collectives.observe;
