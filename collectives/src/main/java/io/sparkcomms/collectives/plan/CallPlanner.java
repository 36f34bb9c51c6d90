package io.sparkcomms.collectives.plan;

import io.sparkcomms.collectives.Algorithm;
import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.PerRankCounts;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.Splits;
import io.sparkcomms.collectives.Tensor;
import io.sparkcomms.collectives.gpu.DeviceTensor;

/**
 * The planning step every call of every backend takes: the argument checks, the normalization of the
 * requested {@link Algorithm}, and the call's count and bytes. Configured once with what the backend
 * offers ({@link BackendOffer}); pure otherwise, so every rank given the same arguments plans the
 * same call. What a normalized request then runs (the {@code Protocol}) is the backend's decision.
 *
 * <p>Normalization ({@link #normalize}), in order:
 * <ol>
 *   <li>barrier, allToAllV, reduce, gather, scatter, allGatherV, reduceScatterV and any call on one
 *       rank: FLAT (each has one algorithm).</li>
 *   <li>LP: kept when the backend has the FP8 protocols, the collective has an LP form, the dtype is
 *       FLOAT32 or BFLOAT16 and the op SUM or AVG (allGather and allToAll have no op); otherwise the
 *       call falls through to full precision, AUTO.</li>
 *   <li>VENDOR: an argument error without a vendor library; FLAT for a collective the vendor library
 *       does not have (allToAll).</li>
 *   <li>FLAT and TREE choose between the one-shot and the two-shot of allReduce; for every other
 *       collective they mean its one direct algorithm, FLAT.</li>
 *   <li>AUTO stays AUTO: the backend's policy decides.</li>
 * </ol>
 */
public final class CallPlanner {
  private final int size;
  private final CommOptions options;
  private final BackendOffer offer;

  public CallPlanner(int size, CommOptions options, BackendOffer offer) {
    this.size = size;
    this.options = options;
    this.offer = offer;
  }

  public BackendOffer offer() { return offer; }

  /** Whether the FP8 path can serve this dtype and op (null op: collectives without reduction). */
  public static boolean lowPrecisionEligible(Collective c, DataType dtype, ReduceOp op) {
    if (!c.hasLowPrecision()) return false;
    if (dtype != DataType.FLOAT32 && dtype != DataType.BFLOAT16) return false;
    if (c == Collective.ALL_GATHER || c == Collective.ALL_TO_ALL) return true;
    return op != null && (op.kind() == ReduceOp.Kind.SUM || op.kind() == ReduceOp.Kind.AVG);
  }

  /**
   * The request a call of {@code kind} runs with when {@code requested} was asked for (rules in the
   * class comment). Raises {@link IllegalArgumentException} for a request that is an argument error.
   */
  public Algorithm normalize(Collective kind, DataType dtype, ReduceOp op, Algorithm requested) {
    if (kind == Collective.BARRIER || kind == Collective.ALL_TO_ALL_V || size == 1 || hasOneAlgorithm(kind)) return Algorithm.FLAT;
    switch (requested) {
      case LP:
        return offer.lowPrecision() && lowPrecisionEligible(kind, dtype, op) ? Algorithm.LP : Algorithm.AUTO;
      case VENDOR:
        if (!offer.vendor()) {
          throw new IllegalArgumentException("algorithm VENDOR needs the GPU backend with NCCL/RCCL loaded; this communicator has none");
        }
        return kind.hasVendorVariant() ? Algorithm.VENDOR : Algorithm.FLAT;
      case FLAT:
      case TREE:
        return kind == Collective.ALL_REDUCE ? requested : Algorithm.FLAT;
      default:
        return Algorithm.AUTO;
    }
  }

  /** Plans a call with the communicator's requested algorithm. */
  public PlannedCall plan(Collective kind, Tensor in, Tensor out, ReduceOp op, int root) {
    return plan(kind, in, out, op, root, options.algorithm());
  }

  /** Plans a call (any collective but allToAllV) with an explicit request. */
  public PlannedCall plan(Collective kind, Tensor in, Tensor out, ReduceOp op, int root, Algorithm requested) {
    String problem = check(kind, in, out, op, root);
    DataType dtype = dtypeOf(in, out);
    long count = 0;
    long bytes = 0;
    Algorithm request = Algorithm.FLAT;
    if (problem == null) {
      if (kind != Collective.BARRIER) {
        count = switch (kind) {
          case ALL_REDUCE, BROADCAST, ALL_GATHER -> in.count();
          case REDUCE_SCATTER -> out.count();
          case ALL_TO_ALL -> in.count() / size;
          default -> throw new IllegalArgumentException(kind + " has a planning method of its own");
        };
        bytes = Math.max(in.bytes(), out.bytes());
      }
      try {
        request = normalize(kind, dtype, op, requested);
      } catch (IllegalArgumentException e) {
        problem = e.getMessage();
      }
    }
    return new PlannedCall(kind, in, out, op, root, dtype, count, request, bytes, null, null, problem);
  }

  /** reduce, gather, scatter and the per-rank-count collectives: one direct algorithm each. */
  private static boolean hasOneAlgorithm(Collective kind) {
    return kind == Collective.REDUCE || kind == Collective.GATHER || kind == Collective.SCATTER || kind.hasPerRankCounts();
  }

  /**
   * Plans reduce, gather or scatter as rank {@code rank} makes it. The tensor a call does not use on
   * this rank (a non-root's output of reduce and gather, a non-root's input of scatter) may be null
   * and is null in the plan, so no backend can touch it.
   *
   * <p>Shapes: reduce: the root's output holds at least the input's count; gather: the root's output
   * holds {@code size} times the input's count (rank r's input at element r*count); scatter: the
   * root's input holds {@code size} times the output's count (slice r goes to rank r).
   */
  public PlannedCall planRooted(Collective kind, Tensor in, Tensor out, ReduceOp op, int root, int rank) {
    if (!kind.isRooted() || kind == Collective.BROADCAST) throw new IllegalArgumentException(kind + " is not planned by planRooted");
    boolean isRoot = rank == root;
    Tensor useIn = kind == Collective.SCATTER && !isRoot ? null : in;
    Tensor useOut = kind != Collective.SCATTER && !isRoot ? null : out;
    String problem = checkRooted(kind, useIn, useOut, op, root, isRoot);
    DataType dtype = dtypeOf(useIn, useOut);
    long count = 0, bytes = 0;
    if (problem == null) {
      count = kind == Collective.SCATTER ? useOut.count() : useIn.count();
      long elems = kind == Collective.REDUCE ? count : count * size;  // what the call moves, on every rank alike
      bytes = elems * dtype.size();
    }
    return new PlannedCall(kind, useIn, useOut, op, root, dtype, count, Algorithm.FLAT, bytes, null, null, problem);
  }

  /**
   * Plans allGatherV or reduceScatterV as rank {@code rank} makes it. allGatherV: rank r's input has
   * exactly {@code counts[r]} elements and lands at element {@code counts[0] + ... + counts[r-1]} of
   * every rank's output, which holds at least the total; reduceScatterV: every rank's input holds at
   * least the total, and rank r's output receives the reduction of the block of {@code counts[r]}
   * elements that starts at that element of every rank's input.
   */
  public PlannedCall planPerRank(Collective kind, Tensor in, Tensor out, long[] counts, ReduceOp op, int rank) {
    if (!kind.hasPerRankCounts()) throw new IllegalArgumentException(kind + " is not planned by planPerRank");
    String name = kind.apiName();
    PerRankCounts pc = null;
    String problem;
    try {
      pc = PerRankCounts.of(counts, size);
      problem = checkPerRank(kind, in, out, op, pc, rank);
    } catch (IllegalArgumentException e) {
      problem = name + ": " + e.getMessage();
    }
    DataType dtype = dtypeOf(in, out);
    long count = problem == null ? pc.total() : 0;
    long bytes = problem == null ? count * dtype.size() : 0;
    return new PlannedCall(kind, in, out, op, 0, dtype, count, Algorithm.FLAT, bytes, null, problem == null ? pc : null, problem);
  }

  private String checkRooted(Collective kind, Tensor in, Tensor out, ReduceOp op, int root, boolean isRoot) {
    String name = kind.apiName();
    if (root < 0 || root >= size) return name + ": root " + root + " outside 0.." + (size - 1);
    boolean needIn = kind != Collective.SCATTER || isRoot, needOut = kind == Collective.SCATTER || isRoot;
    if (needIn && in == null) return name + ": input tensor is null" + (kind == Collective.SCATTER ? " on the root" : "");
    if (needOut && out == null) return name + ": output tensor is null" + (kind != Collective.SCATTER ? " on the root" : "");
    if (in != null && out != null && in.dtype() != out.dtype()) {
      return name + ": input dtype " + in.dtype() + " differs from output dtype " + out.dtype();
    }
    if (kind == Collective.REDUCE) {
      if (op == null) return name + ": reduce op is null";
      if (!op.supports(in.dtype())) return name + ": " + op + " is not defined for " + in.dtype();
    }
    long n = size;
    if (isRoot) {
      switch (kind) {
        case REDUCE:
          if (out.count() < in.count()) return name + ": output holds " + out.count() + " elements, input has " + in.count();
          break;
        case GATHER:
          if (out.count() / n < in.count()) return name + ": output holds " + out.count() + " elements, needs size*input = " + n * in.count();
          break;
        default:  // SCATTER
          if (in.count() / n < out.count()) return name + ": input holds " + in.count() + " elements, needs size*output = " + n * out.count();
          break;
      }
    }
    if (out instanceof HostTensor h && !h.isWritable()) return name + ": the output buffer is read-only";
    return checkMemory(kind, in != null ? in : out, out != null ? out : in);
  }

  private String checkPerRank(Collective kind, Tensor in, Tensor out, ReduceOp op, PerRankCounts pc, int rank) {
    String name = kind.apiName();
    if (in == null || out == null) return name + ": " + (in == null ? "input" : "output") + " tensor is null";
    if (in.dtype() != out.dtype()) return name + ": input dtype " + in.dtype() + " differs from output dtype " + out.dtype();
    if (kind == Collective.ALL_GATHER_V) {
      if (in.count() != pc.count(rank)) {
        return name + ": rank " + rank + "'s input has " + in.count() + " elements, counts[" + rank + "] says " + pc.count(rank);
      }
      if (out.count() < pc.total()) return name + ": output holds " + out.count() + " elements, the counts add up to " + pc.total();
    } else {
      if (op == null) return name + ": reduce op is null";
      if (!op.supports(in.dtype())) return name + ": " + op + " is not defined for " + in.dtype();
      if (in.count() < pc.total()) return name + ": input holds " + in.count() + " elements, the counts add up to " + pc.total();
      if (out.count() < pc.count(rank)) {
        return name + ": output holds " + out.count() + " elements, counts[" + rank + "] = " + pc.count(rank);
      }
    }
    if (out instanceof HostTensor h && !h.isWritable()) return name + ": the output buffer is read-only";
    return checkMemory(kind, in, out);
  }

  /**
   * Plans an allToAllV. Only the shapes are checked here: the count and offset values may live on the
   * device, so the backend checks them (on every rank, before any data moves: {@link AllToAllVPlan}).
   */
  public PlannedCall planAllToAllV(Tensor in, Tensor out, Splits sp, boolean offsetsForm) {
    String problem = checkV(in, out, sp, offsetsForm);
    long bytes = problem == null ? Math.max(in.bytes(), out.bytes()) : 0;
    return new PlannedCall(Collective.ALL_TO_ALL_V, in, out, null, 0, dtypeOf(in, out), 0, Algorithm.FLAT, bytes, sp, null, problem);
  }

  private static DataType dtypeOf(Tensor in, Tensor out) {
    return in != null ? in.dtype() : out != null ? out.dtype() : DataType.FLOAT32;
  }

  /** Local argument checks of every collective but allToAllV; returns a message or null. */
  private String check(Collective kind, Tensor in, Tensor out, ReduceOp op, int root) {
    if (kind == Collective.BARRIER) return null;
    String name = kind.apiName();
    if (in == null || out == null) return name + ": " + (in == null ? "input" : "output") + " tensor is null";
    if (in.dtype() != out.dtype()) return name + ": input dtype " + in.dtype() + " differs from output dtype " + out.dtype();
    if (kind == Collective.ALL_REDUCE || kind == Collective.REDUCE_SCATTER) {
      if (op == null) return name + ": reduce op is null";
      if (!op.supports(in.dtype())) return name + ": " + op + " is not defined for " + in.dtype();
    }
    long n = size;
    switch (kind) {
      case ALL_REDUCE:
      case BROADCAST:
        if (out.count() < in.count()) return name + ": output holds " + out.count() + " elements, input has " + in.count();
        if (kind == Collective.BROADCAST && (root < 0 || root >= size)) return name + ": root " + root + " outside 0.." + (size - 1);
        break;
      case ALL_GATHER:
        if (out.count() / n < in.count()) return name + ": output holds " + out.count() + " elements, needs size*input = " + n * in.count();
        break;
      case REDUCE_SCATTER:
        if (in.count() / n < out.count()) return name + ": input holds " + in.count() + " elements, needs size*output = " + n * out.count();
        break;
      case ALL_TO_ALL:
        if (in.count() % n != 0) return name + ": input count " + in.count() + " is not a multiple of size " + n;
        if (out.count() < in.count()) return name + ": output holds " + out.count() + " elements, input has " + in.count();
        break;
      default:
        break;
    }
    if (out instanceof HostTensor h && !h.isWritable()) return name + ": the output buffer is read-only";
    return checkMemory(kind, in, out);
  }

  private String checkV(Tensor in, Tensor out, Splits sp, boolean offsetsForm) {
    String name = Collective.ALL_TO_ALL_V.apiName();
    // The offsets select the slot layout: in the six-argument form both must be given (a null would
    // silently mean "packed"); reported like any invalid argument, so every rank raises.
    if (offsetsForm && (sp.sendOffsets() == null || sp.recvOffsets() == null)) {
      return name + ": " + (sp.sendOffsets() == null ? "sendOffsets" : "recvOffsets")
          + " is null (use the four-argument form for the packed layout)";
    }
    if (in == null || out == null) return name + ": " + (in == null ? "input" : "output") + " tensor is null";
    if (in.dtype() != out.dtype()) return name + ": input dtype " + in.dtype() + " differs from output dtype " + out.dtype();
    String[] names = {"sendCounts", "sendOffsets", "recvCounts", "recvOffsets"};
    Tensor[] t = {sp.sendCounts(), sp.sendOffsets(), sp.recvCounts(), sp.recvOffsets()};
    for (int i = 0; i < t.length; i++) {
      if (t[i] == null) {
        if (i == 1 || i == 3) continue;  // packed layout
        return name + ": " + names[i] + " is null";
      }
      if (t[i].dtype() != DataType.INT64) return name + ": " + names[i] + " must be INT64, got " + t[i].dtype();
      if (t[i].count() != size) return name + ": " + names[i] + " has " + t[i].count() + " elements, needs one per rank (" + size + ")";
      if (t[i].isDevice() != in.isDevice()) {
        return name + ": " + names[i] + " must be in the same memory as the data (" + (in.isDevice() ? "device" : "host") + ")";
      }
    }
    if (out instanceof HostTensor h && !h.isWritable()) return name + ": the output buffer is read-only";
    if (sp.recvCounts() instanceof HostTensor h && !h.isWritable()) return name + ": recvCounts is read-only";
    String p = checkMemory(Collective.ALL_TO_ALL_V, in, out);
    if (p == null) p = checkMemory(Collective.ALL_TO_ALL_V, sp.sendCounts(), sp.recvCounts());
    if (p == null && sp.hasOffsets()) p = checkMemory(Collective.ALL_TO_ALL_V, sp.sendOffsets(), sp.recvOffsets());
    return p;
  }

  /** Whether a pair of tensors lives where the backend can use it; returns a message or null. */
  private String checkMemory(Collective kind, Tensor in, Tensor out) {
    boolean host = in instanceof HostTensor && out instanceof HostTensor;
    if (offer.memory() == BackendOffer.Memory.HOST) {
      if (host) return null;
      return kind.apiName() + ": the host backend needs HostTensor inputs and outputs, got "
          + in.getClass().getSimpleName() + " and " + out.getClass().getSimpleName();
    }
    if (host) return null; // staged through the device
    if (!(in instanceof DeviceTensor di) || !(out instanceof DeviceTensor dout)) {
      return kind.apiName() + ": inputs and outputs must be both DeviceTensors or both HostTensors, got "
          + in.getClass().getSimpleName() + " and " + out.getClass().getSimpleName();
    }
    if (di.device() != offer.device() || dout.device() != offer.device()) {
      return kind.apiName() + ": tensors must live on this rank's device " + offer.device();
    }
    return null;
  }
}
