package io.sparkcomms.collectives.observe;

import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.Tensor;
import io.sparkcomms.collectives.plan.PlannedCall;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The NaN check of {@code CommOptions.nanCheck()} (as {@code TORCH_NCCL_NAN_CHECK}): before an
 * collective other than barrier and allToAllV (of a broadcast and a scatter the root's input only:
 * the others' is not read), the input of a call on {@link HostTensor}s is scanned, and a NaN in a FLOAT32,
 * FLOAT64, BFLOAT16 or FLOAT16 element becomes this rank's argument problem
 * ({@link PlannedCall#problem()}). So it is not raised here but fed into the call, and every rank
 * fails it: the host backend tells the peers at the call's first barrier, then this rank raises
 * {@link IllegalArgumentException} and its peers {@code CommMismatchException} ("rank r rejected its
 * arguments: ..."), and the communicator stays usable; the GPU backend refuses the call
 * ({@code sc_comm_refuse}), this rank raises {@link IllegalArgumentException}, its peers' kernels
 * fail with a mismatch, and the communicator is unusable afterwards on every rank.
 *
 * <p>Device tensor inputs are not scanned (that would copy them to the host); the first such call
 * logs that once. Cost: one pass over the input per call, on the calling thread.
 */
public final class NanCheck {
  private static final System.Logger LOG = System.getLogger(NanCheck.class.getName());
  private final int rank;
  private final AtomicBoolean deviceLogged = new AtomicBoolean();

  /** The check of rank {@code rank}'s calls. */
  public NanCheck(int rank) { this.rank = rank; }

  /** {@code p}, or {@code p} with this rank's problem when its input holds a NaN. */
  public PlannedCall check(PlannedCall p) {
    if (p.problem() != null || !scanned(p.kind()) || !p.dtype().isFloating()) return p;
    if (p.kind() == Collective.BROADCAST && p.root() != rank) return p;
    Tensor in = p.in();
    if (!(in instanceof HostTensor h)) {
      if (in != null && in.isDevice() && deviceLogged.compareAndSet(false, true)) {
        LOG.log(System.Logger.Level.INFO, "rank " + rank + ": nanCheck is on, but inputs in device memory are not"
            + " scanned (that would copy them to the host); only host tensor inputs are");
      }
      return p;
    }
    long i = firstNaN(h);
    if (i < 0) return p;
    return p.withProblem(p.kind().apiName() + ": input element " + i + " of rank " + rank + " is NaN (nanCheck is on)");
  }

  private static boolean scanned(Collective c) {
    // every collective that moves data but allToAllV; a scatter's non-root has no input in its plan
    return c != Collective.BARRIER && c != Collective.ALL_TO_ALL_V;
  }

  /** The index of the first NaN element of {@code t}, or -1 (always -1 for integer types). */
  public static long firstNaN(HostTensor t) {
    if (!t.dtype().isFloating()) return -1;
    Object a = t.array();
    int n = (int) t.count();
    if (a instanceof float[] f) {
      for (int i = 0; i < n; i++) if (f[i] != f[i]) return i;
      return -1;
    }
    if (a instanceof double[] d) {
      for (int i = 0; i < n; i++) if (d[i] != d[i]) return i;
      return -1;
    }
    if (a instanceof short[] s) {
      boolean bf16 = t.dtype() == io.sparkcomms.collectives.DataType.BFLOAT16;
      for (int i = 0; i < n; i++) if (bf16 ? isBf16NaN(s[i]) : isFp16NaN(s[i])) return i;
      return -1;
    }
    for (int i = 0; i < n; i++) if (Double.isNaN(t.getDouble(i))) return i;  // a direct buffer
    return -1;
  }

  /** A bfloat16 bit pattern is NaN: all-ones exponent, non-zero mantissa (as {@code HalfFloats.bf16ToFloat} decodes it). */
  static boolean isBf16NaN(short bits) { return (bits & 0x7FFF) > 0x7F80; }

  /** An IEEE binary16 bit pattern is NaN: all-ones exponent, non-zero mantissa (as {@code HalfFloats.fp16ToFloat} decodes it). */
  static boolean isFp16NaN(short bits) { return (bits & 0x7FFF) > 0x7C00; }
}
