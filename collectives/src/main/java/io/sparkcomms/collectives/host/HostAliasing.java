package io.sparkcomms.collectives.host;

import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.HostTensor.Overlap;
import io.sparkcomms.collectives.plan.PlannedCall;

/**
 * The memory layouts of a host call that its algorithms cannot serve. They copy a chunk of the input
 * into the staging area, then write the chunk's output, then go on to the next chunk; an output that
 * starts where the input does (in place) only overwrites input already staged, but one that partly
 * overlaps the input would overwrite input of a later chunk (or of another rank's slice) before it is
 * read, and give wrong elements without an error. Such a call is a local argument problem: every rank
 * raises (see {@link HostCommunicator}). allToAllV copies its input first when it may overlap its
 * output ({@link HostAllToAllV}), so only its recvCounts, written before any data moves, must not
 * share memory with the data.
 */
final class HostAliasing {
  private HostAliasing() {}

  /** Why this rank cannot run {@code plan} on its tensors, or null. Only for a plan without a problem. */
  static String problem(PlannedCall plan, int rank) {
    Collective k = plan.kind();
    if (k == Collective.BARRIER) return null;
    HostTensor in = (HostTensor) plan.in(), out = (HostTensor) plan.out();
    String name = k.apiName();
    if (k == Collective.ALL_TO_ALL_V) {
      HostTensor rc = (HostTensor) plan.splits().recvCounts();
      if (shares(rc.overlap(in))) return name + ": recvCounts overlaps the input: it is written before the input is read";
      if (shares(rc.overlap(out))) return name + ": recvCounts overlaps the output: the data would overwrite it";
      return null;
    }
    if (k == Collective.BROADCAST && rank != plan.root()) return null;  // a non-root's input is never read
    if (in == null || out == null) return null;  // a rooted call's tensor that this rank does not use
    if (k == Collective.ALL_GATHER_V && in.overlap(out) == Overlap.SAME_START) {
      // rank p's block lands at its start offset, past this rank's input chunks not yet staged
      return name + ": input and output share memory (" + in + ", " + out + "); allGatherV needs disjoint memory";
    }
    if (in.overlap(out) == Overlap.PARTIAL) {
      return name + ": input and output partly overlap (" + in + ", " + out + "); pass the same memory for an in-place call,"
          + " or disjoint memory";
    }
    return null;
  }

  private static boolean shares(Overlap o) { return o == Overlap.SAME_START || o == Overlap.PARTIAL; }
}
