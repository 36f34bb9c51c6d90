package io.sparkcomms.collectives.plan;

import io.sparkcomms.collectives.Algorithm;
import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.CommOptions;
import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.HostTensor;
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
 *   <li>barrier, allToAllV and any call on one rank: FLAT (each has one algorithm).</li>
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
    if (kind == Collective.BARRIER || kind == Collective.ALL_TO_ALL_V || size == 1) return Algorithm.FLAT;
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
          default -> throw new IllegalArgumentException(kind + " is planned by planAllToAllV");
        };
        bytes = Math.max(in.bytes(), out.bytes());
      }
      try {
        request = normalize(kind, dtype, op, requested);
      } catch (IllegalArgumentException e) {
        problem = e.getMessage();
      }
    }
    return new PlannedCall(kind, in, out, op, root, dtype, count, request, bytes, null, problem);
  }

  /**
   * Plans an allToAllV. Only the shapes are checked here: the count and offset values may live on the
   * device, so the backend checks them (on every rank, before any data moves: {@link AllToAllVPlan}).
   */
  public PlannedCall planAllToAllV(Tensor in, Tensor out, Splits sp, boolean offsetsForm) {
    String problem = checkV(in, out, sp, offsetsForm);
    long bytes = problem == null ? Math.max(in.bytes(), out.bytes()) : 0;
    return new PlannedCall(Collective.ALL_TO_ALL_V, in, out, null, 0, dtypeOf(in, out), 0, Algorithm.FLAT, bytes, sp, problem);
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
