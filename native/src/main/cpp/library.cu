// The sparkcomms GPU library (include/sparkcomms.h), one translation unit.
//
// The device headers (device/) define their non-template kernels with external linkage, and the
// typed launchers instantiate every kernel template; compiling all of it once keeps each kernel in
// one place and its code independent of how the host side is laid out. The host side is split by
// responsibility into the parts included below, in dependency order; the pure C++ pieces
// (core/status.cc, core/param.cc) are their own translation units.
#include "core/comm.h"
#include "core/launch.h"

#include "device/dda_allreduce.cuh"
#include "device/dda_lamport.cuh"
#include "device/dda_collectives.cuh"
#include "device/dda_alltoallv.cuh"
#include "device/lp_collectives.cuh"
#include "device/dense_math.cuh"

#include "runtime.cu"  // devices, memory, streams, events, graphs
#include "vendor.cu"   // NCCL / RCCL: dlopen, vendor communicator, teardown, VENDOR collectives
#include "vgroup.cu"   // vendor groups (NCCL / RCCL over any ranks) and sc_divide
#include "comm.cu"     // create / export / connect / options / abort / destroy
#include "enqueue.cu"  // argument checks, the protocol policy (sc_plan), DDA dispatch
#include "lp.cu"       // low-precision collectives and the FP8 codec
#include "math.cu"     // dense math: vendor BLAS (dlopen) and element-wise kernels
#if SC_DEBUG_HOOKS
#include "debug.cu"    // sc_debug_* test hooks
#endif
