/*
 * sparkcomms C ABI — the only surface Java (JavaCPP) and C programs see.
 *
 * Conventions
 *  - Every function returns an int status: SC_OK (0) or one of the SC_ERR_* codes below.
 *    On error, sc_last_error() returns a human-readable text for the calling thread.
 *  - Handles are opaque pointers; streams and events are passed as void* (cudaStream_t /
 *    hipStream_t, cudaEvent_t / hipEvent_t). A NULL stream is the device's default stream.
 *  - Collectives on one communicator must be issued in the same order on every rank and be
 *    ordered on the device (one stream, or streams ordered by events), as with NCCL.
 *  - Kernels never hang: every device-side wait has the communicator's timeout. A timeout or an
 *    abort sets a flag in host-mapped memory; sc_comm_check() reports it, and the communicator
 *    then refuses further collectives (destroy it and create a new one).
 */
#ifndef SPARKCOMMS_H
#define SPARKCOMMS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SC_ABI_VERSION 1

#if defined(__GNUC__)
#define SC_API __attribute__((visibility("default")))
#else
#define SC_API
#endif

/* ---- status codes ---- */
#define SC_OK 0
#define SC_ERR_INVALID_ARG 1 /* bad argument (null pointer, unknown code, mismatch) */
#define SC_ERR_RUNTIME 2     /* a CUDA/HIP runtime call failed */
#define SC_ERR_UNSUPPORTED 3 /* valid request this build cannot serve (e.g. algo LP, PREMUL on ints) */
#define SC_ERR_TIMEOUT 4     /* a device-side wait timed out (a peer did not arrive) */
#define SC_ERR_ABORTED 5     /* the communicator was aborted */
#define SC_ERR_PEER 6        /* peer memory could not be opened or failed the read/write check */
#define SC_ERR_VENDOR 7      /* a vendor library (NCCL/RCCL, cuBLAS/hipBLAS) missing or failed */
#define SC_ERR_STATE 8       /* call not valid in the communicator's state (not connected, in error) */
#define SC_ERR_NO_DEVICE 9   /* no GPU, or the GPU runtime is unusable */
#define SC_ERR_MISMATCH 10   /* the ranks made different calls (collective, type, op, count, root, protocol) */

/* ---- data types ---- */
#define SC_FLOAT32 0
#define SC_BFLOAT16 1
#define SC_FLOAT16 2
#define SC_FLOAT64 3
#define SC_INT32 4
#define SC_INT64 5

/* ---- reduce ops ---- */
#define SC_SUM 0
#define SC_AVG 1
#define SC_MIN 2
#define SC_MAX 3
#define SC_PRODUCT 4
#define SC_PREMUL_SUM 5 /* sum of factor*x; floating-point types only */

/* ---- FP8 formats of the low-precision (LP) path (numbers = Java Fp8Format.ordinal()) ---- */
#define SC_FP8_E4M3FN 0   /* OCP, max 448: NVIDIA and gfx950 default */
#define SC_FP8_E4M3FNUZ 1 /* max 240: gfx942 (MI300) default */

/* ---- algorithms ---- */
#define SC_ALGO_AUTO 0   /* the library's policy (sc_plan) */
#define SC_ALGO_FLAT 1   /* one-shot */
#define SC_ALGO_TREE 2   /* two-shot: reduce-scatter + all-gather */
#define SC_ALGO_LP 3     /* FP8 on the wire, per-block scales (fp32/bf16, SUM/AVG; else SC_ERR_UNSUPPORTED) */
#define SC_ALGO_VENDOR 4 /* NCCL / RCCL through sc_vendor_comm_init */

typedef struct sc_comm* sc_comm_t;

/* ---- errors ---- */
SC_API const char* sc_last_error(void);  /* thread-local text of the last failure on this thread */
SC_API const char* sc_status_name(int status);

/* ---- runtime ---- */
/* Writes e.g. "cuda devices=2 arch=sm_90 name=NVIDIA H200" (or "hip ... arch=gfx942"). */
SC_API int sc_runtime_info(char* buf, int len);
SC_API int sc_device_count(int* count);
SC_API int sc_set_device(int device);
SC_API int sc_device_synchronize(void);
SC_API int sc_malloc(void** ptr, size_t bytes);
SC_API int sc_free(void* ptr);
/* Leak check: counts[3] = {live communicators, open IPC mappings of peers' memory, sc_malloc
 * allocations not yet freed} of this process. */
SC_API int sc_live_resources(long long* counts);
/* Pinned (page-locked) host memory: staging for copies of host data that the caller reuses. */
SC_API int sc_malloc_host(void** ptr, size_t bytes);
SC_API int sc_free_host(void* ptr);
SC_API int sc_memcpy_htod(void* dst, const void* src, size_t bytes, void* stream);
SC_API int sc_memcpy_dtoh(void* dst, const void* src, size_t bytes, void* stream);
SC_API int sc_memcpy_dtod(void* dst, const void* src, size_t bytes, void* stream);
SC_API int sc_memset(void* dst, int value, size_t bytes, void* stream);
SC_API int sc_stream_create(void** stream);
SC_API int sc_stream_destroy(void* stream);
SC_API int sc_stream_synchronize(void* stream);
SC_API int sc_event_create(void** event);
SC_API int sc_event_record(void* event, void* stream);
SC_API int sc_event_query(void* event, int* done); /* *done = 1 when completed, 0 when pending */
SC_API int sc_event_synchronize(void* event);
SC_API int sc_event_elapsed_ms(void* start, void* end, float* ms);
SC_API int sc_event_destroy(void* event);
/* Enqueues a device-side busy wait of `microseconds` (benchmarks: lets the host queue work
 * behind it so back-to-back launches are timed, not the host's launch rate). */
SC_API int sc_stream_delay(void* stream, double microseconds);
/* Stream capture into a graph (CUDA/HIP graphs), for work that must replay without host launches:
 * begin on a non-default stream, enqueue, end -> an instantiated graph, launch it any number of
 * times, destroy. Of the communicator's collectives only sc_alltoallv can be captured. */
SC_API int sc_graph_capture_begin(void* stream);
SC_API int sc_graph_capture_end(void* stream, void** graph_exec);
SC_API int sc_graph_launch(void* graph_exec, void* stream);
SC_API int sc_graph_destroy(void* graph_exec);

/* ---- communicator ---- */
/* staging_bytes: per-rank registered buffer (0 = default 64 MiB); must be equal on all ranks.
 * timeout_seconds: device-side wait limit (<= 0 = default 300 s). */
SC_API int sc_comm_create(int rank, int nranks, int device, size_t staging_bytes,
                   double timeout_seconds, sc_comm_t* out);
SC_API size_t sc_comm_export_size(void);
/* Writes this rank's blob (IPC handles of staging + signal buffers and identity). */
SC_API int sc_comm_export(sc_comm_t comm, void* buf, size_t len);
/* all_ranks_blobs: nranks blobs of blob_len bytes each, in rank order (own blob included).
 * Opens peers' memory (IPC, or direct pointers for ranks of this process) and checks it with a
 * real device read and write. */
SC_API int sc_comm_connect(sc_comm_t comm, const void* all_ranks_blobs, size_t blob_len);
SC_API int sc_comm_abort(sc_comm_t comm);   /* wakes and fails every pending wait of this rank */
SC_API int sc_comm_check(sc_comm_t comm);   /* SC_OK, or SC_ERR_TIMEOUT / SC_ERR_ABORTED / SC_ERR_MISMATCH with text */
/* The timeout (seconds, > 0, at most 1e7) of every wait of the kernels launched from now on, e.g. one
 * call's own; sc_comm_create's is the default, and setting it back restores it. A kernel keeps the
 * timeout it was launched with. */
SC_API int sc_comm_set_timeout(sc_comm_t comm, double seconds);
/* Final barrier (bounded by the timeout, on flags of its own), then frees. The caller's streams must
 * be idle: the barrier runs on the communicator's internal stream, not after work queued elsewhere. */
SC_API int sc_comm_destroy(sc_comm_t comm);
/* Options: every GPU knob of a communicator is one entry of the parameter table (core/params.def;
 * the reference is docs/configuration.md): a key such as "flat_max_bytes", its environment variable
 * (read at sc_comm_create), a kind (size, flag, count, enum), a default per rank count and a range.
 * Sizes in the environment take K/M/G suffixes (powers of 1024), flags 0/1/true/false/on/off;
 * anything else makes sc_comm_create fail naming the variable. Settings marked "agree" must be
 * equal on every rank whenever a collective runs: sc_comm_connect compares them, so set them before
 * sc_comm_export, or alike on every rank between collectives. Unknown keys and values outside the
 * range are SC_ERR_INVALID_ARG. */
SC_API int sc_comm_set_option(sc_comm_t comm, const char* key, long long value);
SC_API int sc_comm_get_option(sc_comm_t comm, const char* key, long long* value);

/* ---- call planning: which protocol a call runs ---- */
#define SC_COLL_ALLREDUCE 0
#define SC_COLL_ALLGATHER 1
#define SC_COLL_REDUCESCATTER 2
#define SC_COLL_ALLTOALL 3
#define SC_COLL_BROADCAST 4
#define SC_COLL_ALLTOALLV 5
#define SC_COLL_BARRIER 6

#define SC_PROTO_LAMPORT 1 /* one-shot, Lamport protocol: data words double as flags (fp32/bf16/fp16) */
#define SC_PROTO_LL 2      /* one-shot, LL protocol: a flag beside every data word */
#define SC_PROTO_FLAT 3    /* one-shot through staging, barrier-synchronized (and every non-allreduce DDA call) */
#define SC_PROTO_TREE 4    /* two-shot: reduce-scatter + all-gather through staging */
#define SC_PROTO_LP 5      /* FP8 on the wire */
#define SC_PROTO_VENDOR 6  /* NCCL / RCCL */

/* The protocol that `collective` with this count (the collective's own count argument: count,
 * count_per_rank, recv_count, count_per_peer), dtype, op and algo (SC_ALGO_*) runs on this
 * communicator: the same decision the collective itself makes, so it can be recorded. */
SC_API int sc_plan(sc_comm_t comm, int collective, size_t count, int dtype, int op, int algo, int* protocol);
/* "lamport", "ll", "flat", "tree", "lp", "vendor" (or "unknown"). */
SC_API const char* sc_protocol_name(int protocol);

/* ---- collectives (asynchronous on `stream`) ----
 * algo: SC_ALGO_AUTO (the library's policy: sc_plan says what it picks) or a forced algorithm; the
 * explicit _lp and sc_vendor_ forms below are the same protocols called directly. */
SC_API int sc_allreduce(sc_comm_t comm, const void* send, void* recv, size_t count, int dtype, int op,
                 double premul_factor, int algo, void* stream);
SC_API int sc_allgather(sc_comm_t comm, const void* send, void* recv, size_t count_per_rank, int dtype,
                 int algo, void* stream);
SC_API int sc_reducescatter(sc_comm_t comm, const void* send, void* recv, size_t recv_count, int dtype,
                     int op, double premul_factor, int algo, void* stream);
SC_API int sc_alltoall(sc_comm_t comm, const void* send, void* recv, size_t count_per_peer, int dtype,
                int algo, void* stream);
SC_API int sc_broadcast(sc_comm_t comm, const void* send, void* recv, size_t count, int dtype, int root,
                 int algo, void* stream);
/* allToAllV with device-resident sizes (AllToAllvDynamic). send_counts[j] (device, int64, nranks
 * elements) elements of `send` go to rank j, from send_offsets[j] (device; NULL = packed: exclusive
 * prefix sums of send_counts). Blocks received land in `recv` in source-rank order, packed from 0
 * (recv_offsets NULL), or at recv_offsets[q] (device) with slot q ending at recv_offsets[q+1] (or
 * recv_capacity). recv_counts[q] (device) is written with what rank q sent here. One kernel launch,
 * no host synchronization, capturable into a graph. The sizes are checked on the device on every
 * rank before any data moves; when they do not fit (see SC_A2AV_*), recv_counts are written,
 * nothing else, and the communicator's allToAllV status records the first problem:
 * read it with sc_alltoallv_status after the stream work completed (one record per communicator:
 * read it after each call when several could fail). Capacities are in elements. Not in place: send
 * and recv must not overlap, nor recv_counts any other argument (SC_ERR_INVALID_ARG). */
SC_API int sc_alltoallv(sc_comm_t comm, const void* send, size_t send_capacity, const int64_t* send_counts,
                 const int64_t* send_offsets, void* recv, size_t recv_capacity, int64_t* recv_counts,
                 const int64_t* recv_offsets, int dtype, void* stream);
/* allToAllV status codes */
#define SC_A2AV_OK 0
#define SC_A2AV_OVERFLOW 1     /* a block larger than the receiver's output (packed) or slot */
#define SC_A2AV_NEGATIVE 2     /* a negative count */
#define SC_A2AV_SEND_RANGE 3   /* a send block outside the sender's input */
#define SC_A2AV_RECV_OFFSETS 4 /* receive offsets decreasing or outside the output */
#define SC_A2AV_MISMATCH 5     /* ranks disagree on dtype or layout (packed vs offsets) */
/* Reads the first allToAllV problem since the last read into status[5] = {code, receiver, sender,
 * count, capacity} (code SC_A2AV_OK: none; MISMATCH: receiver = the disagreeing rank) and clears it.
 * Call after the stream work completed. */
SC_API int sc_alltoallv_status(sc_comm_t comm, long long* status);
SC_API int sc_barrier(sc_comm_t comm, void* stream);
/* An allGather of `words` INT64 words per rank whose call header carries `tag` (1..255) in its root
 * field, which no sc_allgather call has (its root is 0): a rank that runs it while a peer runs any other call fails
 * with SC_ERR_MISMATCH on both. For a caller's own agreement round ahead of a call composed from
 * others (the Java backend's reduce, gather, scatter and per-rank-count collectives). */
SC_API int sc_agree(sc_comm_t comm, const void* send, void* recv, size_t words, int tag, void* stream);
/* This rank refuses its own arguments of a call of `collective` (SC_COLL_*) that its peers make:
 * a barrier kernel whose call header says so makes their kernels fail with SC_ERR_MISMATCH at once
 * instead of waiting for this rank until their timeout. The entry points do this themselves for the
 * arguments they check; a binding that checks arguments before calling them calls this. The
 * communicator is unusable afterwards, as after any mismatch. SC_OK when nothing needed telling (not
 * connected, one rank, already failed, stream capturing). */
SC_API int sc_comm_refuse(sc_comm_t comm, int collective, void* stream);

/* ---- test hooks: only in test builds of the library (compiled with SC_DEBUG_HOOKS); through the
 * Java dispatcher a library without them answers SC_ERR_UNSUPPORTED ---- */
/* FOR FAULT-INJECTION TESTS ONLY; never call it otherwise: it breaks the communicator on purpose.
 * Overwrites with `value` the barrier flags that rank `peer` reads to learn of this rank's arrivals:
 * the words this rank's arrivals write into peer's signal buffer (flags[b][this rank] of the
 * collectives and vflags[b][this rank] of allToAllV, every block b), as a corrupted word would. A value
 * two operations (allToAllV: two barriers) or more ahead of peer's wait makes it fail with
 * "already at a later operation" (never an arrival); a value behind makes it wait, so it times out
 * unless this rank's next arrival overwrites the word first. A plain host-to-device copy on a stream
 * of its own, so it may be called from another thread while collectives are in flight, but not
 * concurrently with or after sc_comm_destroy. SC_ERR_INVALID_ARG for a peer outside 0..nranks-1 or
 * this rank itself; SC_ERR_STATE before sc_comm_connect. */
SC_API int sc_debug_corrupt_flag(sc_comm_t comm, int peer, uint64_t value);

/* Timing hook (benchmark tools only): Device-side timeline of the one-shot LP allreduce's chunk kernels. ops > 0 with out == NULL: start
 * recording (device memory, kept until ops == 0 or sc_comm_destroy). Each kernel then records,
 * for its operation seq, the earliest and latest CTA to reach four points — start (after the PDL
 * wait / fail-fast check), pushed (its run quantized and pushed), synced (past its barrier), done —
 * as the device's global timer (CUDA: ns; HIP: wall_clock64 ticks), at index ((seq % ops) * 4 +
 * point) * 2 (+1 for the latest). out != NULL: wait for all work on this communicator's device, copy
 * ops * 8 words into out and clear them (earliest = ~0, latest = 0). ops == 0: stop. SC_ERR_STATE
 * before connect. */
SC_API int sc_debug_lp_trace(sc_comm_t comm, uint64_t* out, size_t ops);

/* ---- low precision (FP8 on the wire; fp32 / bf16 in and out, SUM / AVG) ----
 * Explicit LP forms of allgather / reducescatter / alltoall (allreduce: algo SC_ALGO_LP). One
 * quantization per element (allreduce: one when one-shot, up to "lp_oneshot_max_ranks" ranks;
 * two when two-shot, the reduced slice is requantized once), FP32
 * accumulation in rank order (identical bits on every rank), bf16 output rounded to nearest even.
 * Other dtypes / ops: SC_ERR_UNSUPPORTED. */
SC_API int sc_allgather_lp(sc_comm_t comm, const void* send, void* recv, size_t count_per_rank, int dtype,
                    void* stream);
SC_API int sc_reducescatter_lp(sc_comm_t comm, const void* send, void* recv, size_t recv_count, int dtype,
                        int op, void* stream);
SC_API int sc_alltoall_lp(sc_comm_t comm, const void* send, void* recv, size_t count_per_peer, int dtype,
                   void* stream);
/* The communicator's LP settings (block size, SC_FP8_* format). */
SC_API int sc_comm_lp_config(sc_comm_t comm, int* block_size, int* fp8_format);
/* Codec entry points, bit-exact with the Java BlockQuantizer / Fp8Codec (device buffers):
 * sc_quantize writes sc_lp_encoded_bytes(count, block_size) bytes: count codes, zero pad to a
 * multiple of 4, ceil(count / block_size) little-endian float32 power-of-two scales.
 * dtype: SC_FLOAT32 or SC_BFLOAT16 (bf16 in: exact widening; bf16 out: rounded to nearest even). */
SC_API size_t sc_lp_encoded_bytes(size_t count, int block_size);
SC_API int sc_quantize(const void* src, size_t count, int dtype, int fp8_format, int block_size, void* dst,
                void* stream);
SC_API int sc_dequantize(const void* src, size_t count, int fp8_format, int block_size, void* dst, int dtype,
                  void* stream);
/* Raw scalar codec, no scaling: codes[i] = encode(float src[i]); out[i] = decode(codes[i]). */
SC_API int sc_fp8_encode(const void* src_f32, size_t count, int fp8_format, void* dst_codes, void* stream);
SC_API int sc_fp8_decode(const void* src_codes, size_t count, int fp8_format, void* dst_f32, void* stream);

/* ---- dense float32 math on the device, for the models around the collectives ----
 * GEMM, AXPY and SCAL through the vendor BLAS (cuBLAS on CUDA, hipBLAS on HIP), loaded with dlopen on
 * first use like the collective library ($SPARKCOMMS_BLAS_LIB names another file), so this library
 * links against neither; and element-wise kernels of this library for what BLAS lacks. Everything is
 * asynchronous on the handle's (or the given) stream. Sizes are ints, as in BLAS: a negative size,
 * or a null buffer where there are elements, is SC_ERR_INVALID_ARG. */
typedef struct sc_blas* sc_blas_t;
SC_API int sc_blas_available(void); /* 1 if the BLAS library loads, else 0 (reason in sc_last_error) */
/* A BLAS handle on the current device whose calls run on `stream`; SC_ERR_VENDOR when no BLAS library loads. */
SC_API int sc_blas_create(void* stream, sc_blas_t* out);
SC_API int sc_blas_destroy(sc_blas_t blas);
/* Column-major as in BLAS: C (m x n) = alpha op(A) op(B) + beta C, op(X) = X (trans 0) or X^T (trans 1),
 * in FP32 (the library's default math mode: no reduced-precision tensor-core mode). */
SC_API int sc_blas_sgemm(sc_blas_t blas, int trans_a, int trans_b, int m, int n, int k, float alpha, const void* a,
                  int lda, const void* b, int ldb, float beta, void* c, int ldc);
SC_API int sc_blas_saxpy(sc_blas_t blas, int n, float alpha, const void* x, void* y); /* y += alpha x */
SC_API int sc_blas_sscal(sc_blas_t blas, int n, float alpha, void* x);                /* x *= alpha */
/* activations (numbers = Java Activation.ordinal()) */
#define SC_ACT_IDENTITY 0
#define SC_ACT_RELU 1
#define SC_ACT_TANH 2
#define SC_ACT_SIGMOID 3
/* Row-major y (rows x cols, float32): y[r][c] = act(y[r][c] + bias[c]); bias NULL: no bias. */
SC_API int sc_math_bias_activation(void* y, const void* bias, int rows, int cols, int act, void* stream);
/* grad[i] *= act'(x_i), through the activation's output out[i] = act(x_i) (relu: out > 0, tanh: 1 - out^2,
 * sigmoid: out (1 - out)). */
SC_API int sc_math_activation_backward(void* grad, const void* out, int n, int act, void* stream);
/* out[c] = alpha * (sum of x[r][c] over r, added in row order): a bias gradient. */
SC_API int sc_math_column_sums(const void* x, int rows, int cols, float alpha, void* out, void* stream);
/* Binary cross-entropy of logits z against labels y (n > 0 elements): grad[i] = (sigmoid(z_i) - y_i) / n and
 * loss[0] = the mean of log(1 + e^z_i) - y_i z_i (computed without overflow); one block, a fixed order of sums. */
SC_API int sc_math_sigmoid_xent(const void* logits, const void* labels, int n, void* grad, void* loss, void* stream);

/* ---- vendor library (NCCL on CUDA, RCCL on HIP), loaded with dlopen ---- */
SC_API int sc_vendor_available(void);              /* 1 if loadable, else 0 (reason in sc_last_error) */
SC_API int sc_vendor_version(int* version);
SC_API int sc_vendor_unique_id_size(void);         /* 128 */
SC_API int sc_vendor_unique_id(void* buf, int len); /* rank 0 makes it, all ranks pass it to init */
SC_API int sc_vendor_comm_init(sc_comm_t comm, const void* id); /* collective over the ranks */
/* The same collectives through the vendor communicator (what algo=VENDOR runs). */
SC_API int sc_vendor_allgather(sc_comm_t comm, const void* send, void* recv, size_t count_per_rank,
                        int dtype, void* stream);
SC_API int sc_vendor_reducescatter(sc_comm_t comm, const void* send, void* recv, size_t recv_count,
                            int dtype, int op, double premul_factor, void* stream);
SC_API int sc_vendor_broadcast(sc_comm_t comm, const void* send, void* recv, size_t count, int dtype,
                        int root, void* stream);
/* Baseline for sc_alltoallv (packed layout): counts exchanged by grouped send/recv, copied to the
 * host and waited for, then grouped send/recv of the data. Negative counts or more than recv_capacity
 * elements to receive fail before any data is queued (on the rank that sees it only). */
SC_API int sc_vendor_alltoallv(sc_comm_t comm, const void* send, const int64_t* send_counts, void* recv,
                        size_t recv_capacity, int64_t* recv_counts, int dtype, void* stream);

/* ---- vendor groups: a vendor communicator of its own over any ranks (no DDA part) ----
 * E.g. the ranks of one local rank on every node of a communicator that spans nodes. Non-blocking
 * inside (NCCL >= 2.14 or RCCL): creation, each enqueue and the teardown wait at most the group's
 * timeout; sc_vgroup_abort (any thread) ends this rank's kernels of the group that wait on a peer.
 * A peer that fails or is gone shows in sc_vgroup_check (the vendor's asynchronous error); the
 * kernels of a group never time out by themselves, so a caller that waits for one bounds the wait
 * and aborts. id: sc_vendor_unique_id of one member, the same on every member. */
typedef struct sc_vgroup* sc_vgroup_t;
SC_API int sc_vgroup_create(int rank, int nranks, int device, const void* id, int id_len, double timeout_seconds,
                     sc_vgroup_t* out);
SC_API int sc_vgroup_check(sc_vgroup_t group);   /* SC_OK, SC_ERR_VENDOR (a peer failed) or SC_ERR_ABORTED */
SC_API int sc_vgroup_abort(sc_vgroup_t group);   /* immediate; the group refuses every later call */
SC_API int sc_vgroup_destroy(sc_vgroup_t group); /* collective when not aborted (finalize, bounded); frees */
SC_API int sc_vgroup_allreduce(sc_vgroup_t group, const void* send, void* recv, size_t count, int dtype, int op,
                        double premul_factor, void* stream);
SC_API int sc_vgroup_allgather(sc_vgroup_t group, const void* send, void* recv, size_t count_per_rank, int dtype,
                        void* stream);
SC_API int sc_vgroup_reducescatter(sc_vgroup_t group, const void* send, void* recv, size_t recv_count, int dtype,
                            int op, double premul_factor, void* stream);
SC_API int sc_vgroup_broadcast(sc_vgroup_t group, const void* send, void* recv, size_t count, int dtype, int root,
                        void* stream);
SC_API int sc_vgroup_alltoall(sc_vgroup_t group, const void* send, void* recv, size_t count_per_peer, int dtype,
                       void* stream);
/* A group of point-to-point operations, issued together (as ncclGroupStart/End): operation i sends
 * (kinds[i] 0) or receives (1) bytes[i] bytes at device address addresses[i] to or from member
 * peers[i]. Between two members the k-th send of one matches the k-th receive of the other. Every
 * operation is checked before any is queued. */
SC_API int sc_vgroup_batch(sc_vgroup_t group, int ops, const int* kinds, const int* peers, const long long* addresses,
                    const long long* bytes, void* stream);
/* data[i] /= divisor (>= 1) on the device, as the DDA kernels finish an AVG: integers widened to int64
 * and truncated toward zero, bf16/fp16 divided in fp32 and rounded to nearest even. */
SC_API int sc_divide(void* data, size_t count, int dtype, long long divisor, void* stream);
/* y[i] += x[i] on the device (integers wrap, bf16/fp16 added in fp32 and rounded to nearest even). */
SC_API int sc_add(const void* x, void* y, size_t count, int dtype, void* stream);
/* dst[i] = src[i] converted between SC_FLOAT32, SC_BFLOAT16 and SC_FLOAT16 (widening is exact, narrowing
 * rounds to nearest even); source and destination must not overlap. */
SC_API int sc_convert(const void* src, int src_dtype, void* dst, int dst_dtype, size_t count, void* stream);

#ifdef __cplusplus
}
#endif
#endif /* SPARKCOMMS_H */
