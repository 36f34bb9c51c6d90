package io.sparkcomms.collectives.algo;

import io.sparkcomms.collectives.Algorithm;
import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.ReduceOp;

/**
 * The one place that picks the algorithm of a call, from the collective, message bytes, rank count,
 * dtype, op and options. Pure and deterministic: every rank given the same arguments picks the same.
 *
 * <p>Rules, in order:
 * <ol>
 *   <li>BARRIER and BROADCAST, and any call on one rank: FLAT (direct access).</li>
 *   <li>LP when low precision is enabled for the collective (or forced with {@code algorithm=LP}),
 *       the message is at least {@code lpMinBytes} (not checked when forced), dtype is FLOAT32 or
 *       BFLOAT16 and the op is SUM or AVG (allGather and allToAll have no op). Calls that fail these
 *       gates fall through to the rules below, transparently.</li>
 *   <li>A forced FLAT / TREE / VENDOR is honored; VENDOR without a vendor library is an error.
 *       Collectives other than allReduce have one direct algorithm, reported as FLAT.</li>
 *   <li>allReduce under AUTO: FLAT up to {@code flatMaxBytes}, TREE up to {@code treeMaxBytes}, then
 *       VENDOR where available, else TREE. Unset thresholds take the measured defaults of the
 *       backend and rank count ({@link Thresholds}).</li>
 *   <li>Other collectives under AUTO: FLAT, or VENDOR above {@code treeMaxBytes} where available.</li>
 * </ol>
 */
public final class AlgorithmSelector {
  private AlgorithmSelector() {}

  /** Whether the FP8 path can serve this dtype and op (null op: collectives without reduction). */
  public static boolean lowPrecisionEligible(Collective c, DataType dtype, ReduceOp op) {
    if (!c.hasLowPrecision()) return false;
    if (dtype != DataType.FLOAT32 && dtype != DataType.BFLOAT16) return false;
    if (c == Collective.ALL_GATHER || c == Collective.ALL_TO_ALL) return true;
    return op != null && (op.kind() == ReduceOp.Kind.SUM || op.kind() == ReduceOp.Kind.AVG);
  }

  /** What the backend of a call offers. */
  public record Backend(boolean gpu, boolean vendor, boolean lowPrecision) {
    public static final Backend HOST = new Backend(false, false, true);
  }

  /** For the host backend (or any backend without GPU thresholds) with the given vendor availability. */
  public static Algorithm choose(Collective c, long bytes, int ranks, DataType dtype, ReduceOp op,
                                 CommOptions o, boolean vendorAvailable) {
    return choose(c, bytes, ranks, dtype, op, o, new Backend(false, vendorAvailable, true));
  }

  /**
   * The algorithm for one call. A backend without the FP8 path ({@code lowPrecision} false) makes LP
   * requests fall through to the full-precision rules, as for an ineligible dtype.
   */
  public static Algorithm choose(Collective c, long bytes, int ranks, DataType dtype, ReduceOp op,
                                 CommOptions o, Backend b) {
    boolean vendorAvailable = b.vendor();
    boolean lpAvailable = b.lowPrecision();
    if (c == Collective.BARRIER || c == Collective.BROADCAST || ranks == 1) {
      return Algorithm.FLAT;
    }
    Algorithm forced = o.algorithm();
    boolean lpWanted = forced == Algorithm.LP || (forced == Algorithm.AUTO && o.lowPrecisionEnabled(c) && bytes >= o.lpMinBytes());
    // fp32 and bf16 alike: on 2x H200 GPU LP is 1.03-1.88x NCCL for bf16 and 2.0-2.4x for fp32 from
    // 4 MB (bench/gpu-lp-results.md, one-shot kernels; the earlier kernels were slower than NCCL on bf16).
    if (lpWanted && lpAvailable && lowPrecisionEligible(c, dtype, op)) {
      return Algorithm.LP;
    }
    if (forced == Algorithm.VENDOR) {
      if (!vendorAvailable) {
        throw new IllegalArgumentException("algorithm VENDOR needs the GPU backend with NCCL/RCCL loaded; this communicator has none");
      }
      return Algorithm.VENDOR;
    }
    if (forced == Algorithm.FLAT || forced == Algorithm.TREE) {
      return c == Collective.ALL_REDUCE ? forced : Algorithm.FLAT;
    }
    if (c == Collective.ALL_REDUCE) {
      if (bytes <= o.flatMaxBytes(b.gpu(), ranks)) return Algorithm.FLAT;
      if (bytes <= o.treeMaxBytes(b.gpu(), ranks) || !vendorAvailable) return Algorithm.TREE;
      return Algorithm.VENDOR;
    }
    return bytes > o.treeMaxBytes(b.gpu(), ranks) && vendorAvailable ? Algorithm.VENDOR : Algorithm.FLAT;
  }
}
