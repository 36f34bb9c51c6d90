package io.sparkcomms.collectives;

/**
 * What a caller may request for a collective ({@link CommOptions#algorithm()}). The backend decides
 * what actually runs, and records that as a {@link Protocol}: AUTO leaves the choice to the backend's
 * policy; a forced value is normalized first, alike on every backend (see
 * {@link io.sparkcomms.collectives.plan.CallPlanner#normalize}).
 */
public enum Algorithm {
  /** The backend's policy: the native library's on the GPU, {@code AlgorithmSelector} on the host. */
  AUTO(0),
  /** DDA one-shot: every rank reads every peer's staging buffer (small messages). allReduce only. */
  FLAT(1),
  /** DDA two-shot: reduce-scatter, then all-gather, through the staging buffers. allReduce only. */
  TREE(2),
  /**
   * Low precision: FP8 with per-block scales on the wire, FP32 accumulation (fp32/bf16, SUM/AVG).
   * allReduce is one-shot (one quantization) up to {@link CommOptions#lpOneShotMaxRanks()} ranks,
   * two-shot (two quantizations) above.
   */
  LP(3),
  /** The vendor library (NCCL / RCCL), GPU backend only. */
  VENDOR(4);

  private final int code;

  Algorithm(int code) { this.code = code; }

  /** The {@code SC_ALGO_*} code of the C ABI. */
  public int code() { return code; }
}
