package io.sparkcomms.collectives.host;

import io.sparkcomms.collectives.Collective;
import io.sparkcomms.collectives.DataType;
import io.sparkcomms.collectives.HostTensor;
import io.sparkcomms.collectives.Protocol;
import io.sparkcomms.collectives.ReduceOp;
import io.sparkcomms.collectives.plan.PlannedCall;

/**
 * One call as the host algorithms run it: the planned call, the protocol the host policy chose, and
 * its tensors as host tensors (null when the call has a local problem: its tensors are then unused).
 */
record HostCall(PlannedCall plan, Protocol protocol, HostTensor in, HostTensor out) {
  Collective kind() { return plan.kind(); }
  DataType dtype() { return plan.dtype(); }
  ReduceOp op() { return plan.op(); }
  long count() { return plan.count(); }
  int root() { return plan.root(); }
  /** This rank's argument problem, or null. */
  String problem() { return plan.problem(); }
  String name() { return plan.kind().apiName(); }
}
