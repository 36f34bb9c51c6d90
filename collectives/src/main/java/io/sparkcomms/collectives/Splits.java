package io.sparkcomms.collectives;

/**
 * The per-peer sizes of an allToAllV: INT64 tensors of one element per rank. {@code sendOffsets} and
 * {@code recvOffsets} are null for the packed layout (offsets = exclusive prefix sums of the counts).
 * {@code recvCounts} is written by the collective; the others are read.
 */
public record Splits(Tensor sendCounts, Tensor sendOffsets, Tensor recvCounts, Tensor recvOffsets) {
  /** Whether the caller gave offsets (the slot layout) rather than the packed layout. */
  public boolean hasOffsets() { return sendOffsets != null; }
}
