// The inter-GPU barrier: one 64-bit flag per (block, peer), 128-byte aligned, monotonic epochs.
//
// Protocol (per block index b; every rank launches the same grid for the same operation):
//   - Every operation gets the communicator's operation counter `seq` as a kernel argument (the
//     host counts launches; identical on all ranks because all ranks run the same sequence of
//     operations, in stream order).
//     Barrier j of that operation uses epoch = seq * SC_EPOCHS_PER_OP + j + 1, which grows
//     monotonically, so flags are never reset (rule 1: no host reset after handles are shared).
//   - Arrive: thread p (p != rank) stores `epoch` into peer p's flags[b][rank] with a
//     system-scope RELEASE, after a __syncthreads().
//   - Wait:   thread p spins on this rank's own flags[b][p] with a system-scope ACQUIRE load
//     until the value is >= epoch (a peer may already be one barrier ahead: that is fine, its
//     larger epoch implies it passed this one), then __syncthreads().
//   - Every spin has a timeout (globaltimer / wall_clock64); a timeout or a host abort sets an
//     error word in host-mapped memory and makes the kernel return instead of hanging.
//
// Double buffering: staging holds two halves; an operation uses half (seq & 1). An operation's
// writes to a half happen after the previous operation's first barrier was passed, and that
// barrier can only be passed once every peer started the previous operation, i.e. finished
// the one before it (stream order). So nobody can still be reading a half when it is
// overwritten, and no end-of-kernel barrier is needed (each op's release arrive is its "end").
#pragma once

#include "compat.h"

#define SC_MAX_RANKS 8
#define SC_MAX_BLOCKS 256
#define SC_EPOCHS_PER_OP 4

// Error words in host-mapped memory.
#define SC_DEVERR_NONE 0
#define SC_DEVERR_TIMEOUT 1
#define SC_DEVERR_ABORT 2
#define SC_DEVERR_PEER_AHEAD 3  // a peer's flag shows an operation two or more ahead (see sc_barrier_block)
#define SC_DEVERR_MISMATCH 4    // a peer's call header describes another call (see "Call headers" below)
#define SC_DEVERR_PEER_FAILED 5 // a peer's kernel failed and marked this rank (ScSignal::peer_failed)

struct alignas(128) ScFlag {
  uint64_t v;
  uint64_t pad[15];
};

// allToAllV's size row: see dda_alltoallv.cuh.
#define SC_VROW_WORDS (4 + 3 * SC_MAX_RANKS)

// Per-rank signal buffer (IPC-exported). Peers write flags[b][their rank]; the identity and
// probe words serve the connect-time peer read/write check. The v* members belong to allToAllV,
// whose barrier counts its epochs on the device (dda_alltoallv.cuh).
struct ScSignal {
  ScFlag flags[SC_MAX_BLOCKS][SC_MAX_RANKS];
  alignas(128) uint64_t identity;           // written by the owner at create time
  alignas(128) uint64_t probe[SC_MAX_RANKS]; // probe[r] written and read back by rank r
  ScFlag vflags[SC_MAX_BLOCKS][SC_MAX_RANKS]; // allToAllV barrier flags, written by peers
  alignas(128) int64_t vrow[2][SC_VROW_WORDS]; // this rank's size row, by call parity (read by peers)
  alignas(128) uint64_t vepoch[SC_MAX_BLOCKS]; // last allToAllV epoch of block b (owner only)
  uint64_t vcall[SC_MAX_BLOCKS];               // allToAllV calls made by block b (owner only)
  alignas(128) uint32_t failed;                // set by this rank's kernels when a wait fails (sc_report)
  uint32_t peer_failed;                        // a peer's failure: (its code << 8) | (its rank + 1), by that peer (sc_report)
  ScFlag cflags[SC_MAX_RANKS];                 // destroy barrier: cflags[r] written once by rank r
  alignas(128) uint4 hdr[2][SC_MAX_RANKS][2];  // call headers by seq parity: hdr[s & 1][q] written by rank q
};

// Everything a kernel needs, passed by value.
struct ScDevComm {
  char* staging[SC_MAX_RANKS];    // every rank's staging base, as addressable from this GPU
  ScSignal* signal[SC_MAX_RANKS]; // every rank's signal buffer, as addressable from this GPU
  ScSignal* self;                 // == signal[rank]
  volatile int* err;              // host-mapped: [0]=code [1]=block [2]=peer [3]=rank [4..7] peer's call [8..11] ours
  volatile long long* vstatus;    // host-mapped allToAllV status: code, receiver, sender, count, capacity
  const volatile int* abort_flag; // host-mapped, set by sc_comm_abort
  unsigned long long* trace;      // sc_debug_lp_trace timeline (device memory), or null (nearly always)
  uint64_t trace_ops;
  uint64_t timeout_ticks;
  uint32_t call[4];               // this launch's call words (sc_call_words); call[0] == 0: no header
  uint64_t call_seq;              // this launch's operation number (== the kernel's seq argument)
  size_t half_bytes;              // size of one staging half
  size_t lamport_off;             // offset of the Lamport region in every staging allocation (dda_lamport.cuh)
  int rank;
  int nranks;
};

SC_DEV char* sc_half(const ScDevComm& c, int r, uint64_t seq) {
  return c.staging[r] + (seq & 1) * c.half_bytes;
}

// sc_debug_lp_trace: earliest and latest CTA of operation `seq` at `point` (0..3), by the global timer.
SC_DEV void sc_trace(const ScDevComm& c, uint64_t seq, int point) {
  if (c.trace && threadIdx.x == 0) {
    unsigned long long* w = c.trace + ((seq % c.trace_ops) * 4 + (uint64_t)point) * 2;
    const unsigned long long t = sc_now_ticks();
    atomicMin(w, t);
    atomicMax(w + 1, t);
  }
}

SC_DEV void sc_report(const ScDevComm& c, int code, int peer, uint4 peer_call = make_uint4(0, 0, 0, 0)) {
  // Device-side copy for sc_kernel_begin of queued kernels. Never reset: a failed communicator is
  // refused by the host (err[0] stays set) until it is destroyed. Later kernels read it after a
  // kernel boundary (stream order / PDL wait), except a chained LP chunk kernel, which reads it
  // without the PDL wait: for that one, the system fence at the end of this function must make the
  // word visible before this block exits (see sc_kernel_begin). Do not drop that fence.
  *(volatile uint32_t*)&c.self->failed = 1;
  if (c.err[0] == SC_DEVERR_NONE) {
    c.err[1] = blockIdx.x;
    c.err[2] = peer;
    c.err[3] = c.rank;
    c.err[4] = (int)peer_call.x;
    c.err[5] = (int)peer_call.y;
    c.err[6] = (int)peer_call.z;
    c.err[7] = (int)peer_call.w;
    for (int k = 0; k < 4; ++k) c.err[8 + k] = (int)c.call[k];
    sc_fence_system();  // detail words before the code the host polls
    c.err[0] = code;
  }
  // Every peer learns that this rank failed: its waits of this operation stop (sc_spin_until) and
  // its next kernel refuses to start (sc_kernel_begin), so a peer that would otherwise pass this
  // operation and later wait for us fails at once instead of after its timeout. These are stores
  // into peers' memory on a failure path, so only into peers that still have it: not when a peer
  // already failed (it told every rank, and may have freed its memory since: a failed communicator
  // is destroyed without the close barrier), nor into a peer that arrived at its close barrier
  // (cflags: it frees only once that barrier completes, which needs our arrival, or times out,
  // seconds after its arrival, which reached this memory before its free). A peer aborted by its
  // host with no kernel running is not seen here: the one case this store can reach freed memory,
  // like a barrier arrival can. A peer's report of ours (PEER_FAILED) does not echo back.
  if (code != SC_DEVERR_PEER_FAILED && *(const volatile uint32_t*)&c.self->peer_failed == 0) {
    for (int q = 0; q < c.nranks; ++q)
      if (q != c.rank && *(const volatile uint64_t*)&c.self->cflags[q].v == 0)
        *(volatile uint32_t*)&c.signal[q]->peer_failed = ((uint32_t)code << 8) | (uint32_t)(c.rank + 1);
  }
  sc_fence_system();
}

// ---- Call headers ----
// Every kernel that exchanges data (call[0] != 0) publishes what call it belongs to: block 0,
// thread p, writes its four call words into hdr[seq & 1][rank] of peer p, as two LL lines whose
// tag words (sc_call_tag) name the operation. A rank that finds a peer's header of the same
// operation with other words reports SC_DEVERR_MISMATCH; so does every rank, as each reads every
// peer's header:
//   - barrier kernels: block 0 reads the header in sc_barrier_block, after the flag's acquire (the
//     header is written before the flag's release store by the same thread, so it is visible);
//   - the Lamport one-shot, which has no barrier: block 0 at its end (sc_oneshot_check_calls);
//   - the LL one-shot: its line flags are derived from the call words (sc_ll_flag), so units of
//     another call are never taken for ours, and the wait below finds the header;
//   - every wait that lasts (sc_spin_until, every 256 polls) checks every peer's header, so a rank
//     whose peer runs another kernel (another protocol, another grid) stops within microseconds.
// Reuse of hdr[s & 1] at s + 2: a peer pushes it at the start of its kernel s + 2, which starts
// after its kernel s + 1 passed a barrier (or received our data) of s + 1, which needs our kernel
// s + 1 to have started, which starts after our kernel s completed (stream order / PDL wait) or,
// for a chained LP kernel, after our kernel s passed its barrier, where block 0 checked.
SC_DEV uint32_t sc_call_tag(uint64_t seq) { return (uint32_t)(seq * 2 + 1); }  // never 0; s, s + 2 differ

SC_DEV uint4* sc_hdr(ScSignal* s, uint64_t seq, int from) { return s->hdr[seq & 1][from]; }

SC_DEV void sc_push_call(const ScDevComm& c) {
  const int p = threadIdx.x;
  if (c.call[0] == 0 || blockIdx.x != 0 || p >= c.nranks || p == c.rank) return;
  const uint32_t tag = sc_call_tag(c.call_seq);
  uint4* h = sc_hdr(c.signal[p], c.call_seq, c.rank);
  sc_st_ll16(h, make_uint4(c.call[0], tag, c.call[1], tag));
  sc_st_ll16(h + 1, make_uint4(c.call[2], tag, c.call[3], tag));
}

// 1: the lines hold peer's header of this operation and it matches ours; -1: it describes another
// call (reported); 0: not arrived.
SC_DEV int sc_match_call(const ScDevComm& c, uint4 a, uint4 b, int peer) {
  const uint32_t tag = sc_call_tag(c.call_seq);
  if (a.y != tag || a.w != tag || b.y != tag || b.w != tag) return 0;
  if (a.x == c.call[0] && a.z == c.call[1] && b.x == c.call[2] && b.z == c.call[3]) return 1;
  sc_report(c, SC_DEVERR_MISMATCH, peer, make_uint4(a.x, a.z, b.x, b.z));
  return -1;
}

// Slow-path check of every peer's header (sc_spin_until). False after a mismatch (reported).
// A peer's failure mark (ScSignal::peer_failed) as this rank's failure: err[2] names the peer, err[4]
// carries its code (the host says "rank q found a mismatch" or "timed out").
SC_DEV void sc_report_peer_failed(const ScDevComm& c, uint32_t pf) {
  sc_report(c, SC_DEVERR_PEER_FAILED, (int)(pf & 0xffu) - 1, make_uint4(pf >> 8, 0, 0, 0));
}

SC_DEV bool sc_calls_agree(const ScDevComm& c) {
  if (c.call[0] == 0) return true;
  for (int q = 0; q < c.nranks; ++q) {
    if (q == c.rank) continue;
    const uint4* h = sc_hdr(c.self, c.call_seq, q);
    if (sc_match_call(c, sc_ld_ll16(h), sc_ld_ll16(h + 1), q) < 0) return false;
  }
  return true;
}

// Prologue of every collective kernel: wait for the stream's previous kernel (PDL), then stop at
// once if an earlier kernel of this communicator failed. A rank whose collective timed out may still
// have later collectives queued; without this they would push into their peers' staging and arrive,
// and a late peer could take that data for the operation it is in. The earlier kernel's write of
// `failed` is visible here because it completed before this one started (stream order, or the PDL
// wait, which waits for the prerequisite grid's completion and memory flush). One decision per
// block: another block of this same kernel may set `failed` while this block's warps read it, and a
// block whose warps split here would reach its later __syncthreads with some warps gone.
//
// wait = false alone: the DDA one-shot kernels, which did the PDL wait themselves just before
// (sc_load_first in dda_allreduce.cuh); the second sc_pdl_wait on the stop path returns at once.
// trigger = false: the LP one-shot (lp_collectives.cuh), which triggers its dependents only after
// its barrier. With wait = false too: a chunk kernel chained to the previous chunk of the same
// call, which starts before that kernel completed. Its `failed` read is still current: the previous
// kernel triggers only after its barrier, so a block of it that failed there exited instead (PDL
// then counts it as triggered), and sc_report's system fence made `failed` visible before that exit.
// A peer's failure mark (peer_failed) stops the kernel too, reported as SC_DEVERR_PEER_FAILED so the
// host fails the call instead of taking the untouched output for a result.
// Then block 0 publishes the call header (sc_push_call), before any data or flag of this kernel.
SC_DEV bool sc_kernel_begin(const ScDevComm& c, bool wait = true, bool trigger = true) {
  if (wait) sc_pdl_wait();
  uint32_t pf = 0;
  if (__syncthreads_or(threadIdx.x == 0 && (*(const volatile uint32_t*)&c.self->failed ||
                                            (pf = *(const volatile uint32_t*)&c.self->peer_failed) != 0))) {
    if (threadIdx.x == 0 && pf != 0 && blockIdx.x == 0) sc_report_peer_failed(c, pf);
    // A chained kernel that stops must still end after its predecessor: later kernels' PDL waits
    // take "this kernel completed" to mean that every earlier one did.
    if (!wait) sc_pdl_wait();
    return false;
  }
  sc_push_call(c);
  if (trigger) sc_pdl_launch_dependents();
  return true;
}

// The one bounded wait of every kernel: polls ready() (a device lambda that loads and tests) until
// it returns true. Every 256 polls it checks the host's abort flag, another block's failure and
// the timeout, reports (sc_report) and returns false instead of hanging. The first poll runs
// before the clock is read, so a wait that is already satisfied costs one poll.
template <typename Ready>
SC_DEV bool sc_spin_until(const ScDevComm& c, int peer, Ready ready) {
  if (ready()) return true;
  const uint64_t t0 = sc_now_ticks();
  for (unsigned it = 1;; ++it) {
    if (ready()) return true;
    if ((it & 255u) == 0) {
      if (sc_ld_volatile_i32(c.abort_flag)) {
        sc_report(c, SC_DEVERR_ABORT, peer);
        return false;
      }
      if (c.err[0] != SC_DEVERR_NONE) return false;  // another block already failed
      if (!sc_calls_agree(c)) return false;  // before the peers' marks: a rank names the calls itself
      const uint32_t pf = *(const volatile uint32_t*)&c.self->peer_failed;
      if (pf != 0) {
        sc_report_peer_failed(c, pf);
        return false;
      }
      if (sc_now_ticks() - t0 > c.timeout_ticks) {
        sc_report(c, SC_DEVERR_TIMEOUT, peer);
        return false;
      }
    }
  }
}

// Spin until *flag >= target (acquire), bounded by the timeout. Returns false on failure.
// ahead: a flag value at or above it is not an arrival but a failure (SC_DEVERR_PEER_AHEAD).
SC_DEV bool sc_wait_flag(const ScDevComm& c, const uint64_t* flag, uint64_t target, int peer,
                         uint64_t ahead = ~(uint64_t)0) {
  // Spin with relaxed loads (no fence per iteration); the final acquire load below re-reads the
  // flag (monotonic, so still >= target) and pairs with the peer's release store.
  uint64_t f = 0;
  if (!sc_spin_until(c, peer, [&] { return (f = sc_ld_relaxed_sys(flag)) >= target; })) return false;
  if (f >= ahead) {
    sc_report(c, SC_DEVERR_PEER_AHEAD, peer);
    return false;
  }
  (void)sc_ld_acquire_sys(flag);
  return true;
}

// Full barrier of this block with the same block index on every peer. Returns false (in every
// thread of the block) when a wait failed; callers then skip the rest of the operation.
SC_DEV bool sc_barrier_block(const ScDevComm& c, uint64_t epoch) {
  // (1) All of this block's prior global writes (staging pushes, local copies) and reads of
  //     peer memory are complete with respect to the threads that will release below: bar.sync
  //     orders them before the releasing thread's next operations at CTA scope, and the
  //     release is cumulative, so they become visible at system scope no later than the flag.
  __syncthreads();
  int ok = 1;
  const int p = threadIdx.x;
  if (p < c.nranks && p != c.rank) {
    // (2) Arrive on peer p: release store of our epoch into its flag slot for (block, us).
    sc_st_release_sys(&c.signal[p]->flags[blockIdx.x][c.rank].v, epoch);
    // (3) Wait for peer p's arrival on our own (local) slot; the acquire pairs with peer p's
    //     release in its step (2), so its writes before that barrier are visible to this thread.
    //     A healthy peer can be at most one operation ahead here (it cannot pass operation
    //     seq + 1's barriers before we arrive at them), so a flag of operation seq + 2 or later
    //     means the peer failed this operation and kept launching: its later kernels pushed into
    //     the staging half this operation reads. Treated as a failure, never as an arrival.
    //     (epoch = seq * SC_EPOCHS_PER_OP + j + 1, j < SC_EPOCHS_PER_OP: `ahead` is the first epoch
    //     of operation seq + 2.)
    const uint64_t ahead = ((epoch - 1) / SC_EPOCHS_PER_OP + 2) * SC_EPOCHS_PER_OP + 1;
    const uint64_t* flag = &c.self->flags[blockIdx.x][p].v;
    ok = sc_wait_flag(c, flag, epoch, p, ahead) ? 1 : 0;
    // Block 0 also checks peer p's call header (see "Call headers"): the peer wrote it at the start
    // of its kernel, before the flag's release by the same thread, so it is visible after the
    // acquire above. (Loaded here, after the wait: loading it before the wait, or with the flag in
    // its polls, kept its registers live across the spin and made ptxas spill in the flat and tree
    // kernels, sm_90.)
    if (ok && blockIdx.x == 0 && c.call[0] != 0) {
      const uint4* h = sc_hdr(c.self, c.call_seq, p);
      const int m = sc_match_call(c, sc_ld_ll16(h), sc_ld_ll16(h + 1), p);
      if (m == 0) sc_report(c, SC_DEVERR_MISMATCH, p);  // a flag without a header: not a kernel of this build
      ok = m > 0;
    }
  }
  // (4) bar.sync extends what the waiting threads acquired to every thread of the block, and
  //     agrees on success: all threads leave with the same verdict.
  return __syncthreads_and(ok) != 0;
}

// Barrier-only operation (sc_barrier), one block.
__global__ void sc_k_barrier(ScDevComm c, uint64_t seq) {
  if (!sc_kernel_begin(c)) return;
  sc_barrier_block(c, seq * SC_EPOCHS_PER_OP + 1);
}

// Destroy barrier (sc_comm_destroy): nobody may still write into a rank's staging when it is
// freed. It has flags of its own: on the collectives' flags its epoch (the closing rank's next
// seq) would equal the epoch of a collective its peers may be waiting in, and would release
// those peers into reading staging the closing rank never wrote. Written once per communicator
// (epoch 1; signal buffers start zeroed); a peer that never closes makes the wait time out.
__global__ void sc_k_close_barrier(ScDevComm c) {
  sc_pdl_wait();  // launched like the others (PDL): start only after the stream's earlier kernels
  const int p = threadIdx.x;
  if (p < c.nranks && p != c.rank) {
    sc_st_release_sys(&c.signal[p]->cflags[c.rank].v, 1);
    (void)sc_wait_flag(c, &c.self->cflags[p].v, 1, p);
  }
}

// Connect-time check of a peer's memory with real device loads and stores: read the peer's
// identity word, write a pattern into our probe slot in its signal buffer, read it back, and
// read the first word of its staging buffer (the value is not checked: it only must not fault).
__global__ void sc_k_peer_check(ScSignal* peer_sig, const char* peer_staging, int my_rank,
                                uint64_t pattern, uint64_t* out) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  volatile uint64_t* id = &peer_sig->identity;
  out[0] = *id;
  volatile uint64_t* probe = &peer_sig->probe[my_rank];
  *probe = pattern;
  __threadfence_system();
  out[1] = *probe;
  out[2] = *(const volatile uint64_t*)peer_staging;
}
