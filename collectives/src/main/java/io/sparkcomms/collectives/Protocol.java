package io.sparkcomms.collectives;

/**
 * What a collective call ran: the protocol the backend executed, recorded per call in
 * {@link CommStats}. A caller requests an {@link Algorithm}; the backend decides the protocol (the GPU
 * backend asks the native library, whose {@code sc_plan} answers with the {@code SC_PROTO_*} codes
 * below; the host backend asks {@link io.sparkcomms.collectives.algo.AlgorithmSelector}).
 */
public enum Protocol {
  /** One-shot allReduce whose data words double as arrival flags (GPU, fp32/bf16/fp16, small messages). */
  LAMPORT(1),
  /** One-shot allReduce with a flag beside every data word (GPU, small messages). */
  LL(2),
  /**
   * One-shot through the staging buffers, barrier-synchronized: every rank reads every peer's
   * staging. Also every direct (non-allReduce) collective: allGather, reduceScatter, allToAll,
   * allToAllV, broadcast, barrier.
   */
  FLAT(3),
  /** Two-shot allReduce: reduce-scatter, then all-gather, through the staging buffers. */
  TREE(4),
  /** FP8 with per-block scales on the wire, FP32 accumulation. */
  LP(5),
  /** The vendor library (NCCL / RCCL). */
  VENDOR(6);

  private final int code;

  Protocol(int code) { this.code = code; }

  /** The {@code SC_PROTO_*} code of the C ABI. */
  public int code() { return code; }

  /** The protocol of an {@code SC_PROTO_*} code; null for a code outside the ABI's. */
  public static Protocol ofCode(long code) {
    for (Protocol p : values()) if (p.code == code) return p;
    return null;
  }
}
