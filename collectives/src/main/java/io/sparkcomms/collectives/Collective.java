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
  BARRIER("barrier"),
  /** Element-wise reduction of every rank's input into the root's output. */
  REDUCE("reduce"),
  /** Every rank's input, in rank order, into the root's output. */
  GATHER("gather"),
  /** Slice r of the root's input into rank r's output. */
  SCATTER("scatter"),
  /** allGather with a count per rank ({@link PerRankCounts}). */
  ALL_GATHER_V("allGatherV"),
  /** reduceScatter with a count per rank ({@link PerRankCounts}). */
  REDUCE_SCATTER_V("reduceScatterV"),
  /** A tensor to one peer (point-to-point; matched by that peer's {@link #RECV}). */
  SEND("send"),
  /** A tensor from one peer (point-to-point; matched by that peer's {@link #SEND}). */
  RECV("recv"),
  /** A set of sends and receives that run together ({@link BatchSendRecv}). */
  BATCH("batch");

  private final String apiName;

  Collective(String apiName) { this.apiName = apiName; }

  /** The method name in {@link Communicator}, for messages. */
  public String apiName() { return apiName; }

  /** Whether the call has a root rank whose tensors differ in shape from the others'. */
  public boolean isRooted() { return this == BROADCAST || this == REDUCE || this == GATHER || this == SCATTER; }

  /** Whether the call takes a count per rank ({@link PerRankCounts}). */
  public boolean hasPerRankCounts() { return this == ALL_GATHER_V || this == REDUCE_SCATTER_V; }

  /** Whether the call involves the caller and its peers only, not every rank ({@link PointToPoint}). */
  public boolean isPointToPoint() { return this == SEND || this == RECV || this == BATCH; }

  /** Whether an FP8 low-precision variant exists. */
  public boolean hasLowPrecision() {
    return this == ALL_REDUCE || this == ALL_GATHER || this == REDUCE_SCATTER || this == ALL_TO_ALL;
  }

  /** Whether the vendor library (NCCL / RCCL) has this collective (it has no allToAll, allToAllV or barrier here). */
  public boolean hasVendorVariant() {
    return this == ALL_REDUCE || this == ALL_GATHER || this == REDUCE_SCATTER || this == BROADCAST;
  }
}
