package io.sparkcomms.collectives;

/** The collective operations; names follow torchcomms. */
public enum Collective {
  ALL_REDUCE("allReduce"),
  ALL_GATHER("allGather"),
  REDUCE_SCATTER("reduceScatter"),
  ALL_TO_ALL("allToAll"),
  /** All-to-all with per-peer counts (and offsets) given as tensors; see {@link Splits}. */
  ALL_TO_ALL_V("allToAllV"),
  BROADCAST("broadcast"),
  BARRIER("barrier");

  private final String apiName;

  Collective(String apiName) { this.apiName = apiName; }

  /** The method name in {@link Communicator}, for messages. */
  public String apiName() { return apiName; }

  /** Whether an FP8 low-precision variant exists. */
  public boolean hasLowPrecision() {
    return this == ALL_REDUCE || this == ALL_GATHER || this == REDUCE_SCATTER || this == ALL_TO_ALL;
  }

  /** Whether the vendor library (NCCL / RCCL) has this collective (it has no allToAll, allToAllV or barrier here). */
  public boolean hasVendorVariant() {
    return this == ALL_REDUCE || this == ALL_GATHER || this == REDUCE_SCATTER || this == BROADCAST;
  }
}
