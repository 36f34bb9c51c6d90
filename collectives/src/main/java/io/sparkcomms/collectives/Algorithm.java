package io.sparkcomms.collectives;

/** How a collective is carried out. AUTO lets {@link io.sparkcomms.collectives.algo.AlgorithmSelector} pick. */
public enum Algorithm {
  AUTO(0),
  /** DDA one-shot: every rank reads every peer's staging buffer. Small messages. */
  FLAT(1),
  /** DDA two-shot: reduce-scatter, then all-gather, through the staging buffers. Medium messages. */
  TREE(2),
  /**
   * Low precision: FP8 with per-block scales on the wire, FP32 accumulation. Large messages, opt-in.
   * allReduce is one-shot (one quantization) up to 2 ranks ({@link CommOptions#lpOneShotMaxRanks()}),
   * two-shot (two quantizations) above.
   */
  LP(3),
  /** The vendor library (NCCL / RCCL), GPU backend only. */
  VENDOR(4);

  private final int code;

  Algorithm(int code) { this.code = code; }

  public int code() { return code; }
}
