/* sc_int.h: srccl's internal interfaces. Layers, bottom up:
 *   config.c     environment -> struct sc_config, parsed once per communicator
 *   error.c      result strings, the communicator's and the thread's last error
 *   reduce.c     reduction kernels per (datatype, op), float16/bfloat16 conversion
 *   bootstrap.c  TCP rendezvous at the root: unique id, allgather of records, barrier
 *   transport.c  verbs: one RC QP per peer, registered slots, WRITE_WITH_IMM + credits;
 *                a non-blocking interface (tx slot / post, rx peek / release, progress)
 *   prims.c      the blocking primitives collectives are written in (send, recv,
 *                recv-reduce-send, recv-reduce-copy-send, recv-copy-send, ...)
 *   algos.c      ring, recursive doubling, Bruck and binomial trees over the primitives
 *   comm.c       the public API: argument checks, communicators, dispatch
 *   sched.c      each communicator's queue of requests (non-blocking calls, groups,
 *                blocking calls behind them): collectives as coroutines, fused
 *                point-to-point windows, srcclTest / srcclWait / srcclGroupEnd
 *   split.c      srcclCommSplit: new QPs exchanged over the parent communicator
 *   shm.c        ranks all on one host: the collectives but all-to-all through shared memory
 *                segments srccl itself creates (one per rank, mapped by its peers)
 * Only <infiniband/verbs.h> is used below (and, in shm.c, POSIX shared memory and
 * futexes between srccl's own ranks): srccl must run on any libibverbs. */
#ifndef SC_INT_H
#define SC_INT_H

#include "srccl.h"

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SC_EXPORT       __attribute__((visibility("default")))
#define SC_MIN(a, b)    ((a) < (b) ? (a) : (b))
#define SC_MAX(a, b)    ((a) > (b) ? (a) : (b))
#define SC_PRINTF(f, a) __attribute__((format(printf, f, a)))

/* ---- config.c ---- */
enum sc_algo {
    SC_ALGO_AUTO = 0,
    SC_ALGO_RING, /* ring / chain, pipelined in chunks: bandwidth */
    SC_ALGO_RD,   /* recursive doubling, Bruck, binomial trees: latency */
    SC_ALGO_SHM,  /* auto, and all-reduce / barrier through shared memory on one host */
};

enum sc_env_source { SC_ENV_NONE = 0, SC_ENV_SRCCL, SC_ENV_TORCH, SC_ENV_OMPI, SC_ENV_SLURM };

struct sc_config {
    uint64_t timeout_ns;  /* SRCCL_TIMEOUT: deadline of every wait */
    enum sc_algo algo;    /* SRCCL_ALGO */
    size_t rd_max_len;    /* SRCCL_RD_MAX_BYTES: rd up to this size, whatever nranks; 0: model */
    size_t ab_len;        /* SRCCL_AB_BYTES: latency x bandwidth of one step, for the model */
    size_t slot_len;      /* SRCCL_CHUNK_BYTES: one RDMA WRITE, one pipeline step */
    uint32_t slot_cnt;    /* SRCCL_SLOTS: chunks in flight per peer and direction */
    uint64_t spin_ns;     /* SRCCL_SPIN_US: poll this long before sleeping on the channel */
    bool spin_set;        /* SRCCL_SPIN_US given: else chosen from the ranks per CPU */
    int debug;            /* SRCCL_DEBUG */
    bool simd;            /* SRCCL_SIMD: 0 forces the scalar kernels */
    char ib_dev[64];      /* SRCCL_IB_DEV: device name; first device if empty */
    uint8_t ib_port;      /* SRCCL_IB_PORT */
    uint8_t gid_index;    /* SRCCL_IB_GID_INDEX */
    uint8_t ib_timeout;   /* SRCCL_IB_TIMEOUT: local ACK timeout exponent (4.096 us * 2^x) */
    uint8_t ib_retry_cnt; /* SRCCL_IB_RETRY_CNT */
    bool shm;             /* SRCCL_SHM: the shared-memory path when all ranks share a host */
    size_t shm_small_len; /* SRCCL_SHM_SMALL: one-phase all-reduce up to this size */
    size_t shm_loop_len;  /* SRCCL_SHM_BYTES: each rank's input per loop of the two-phase one */
    uint64_t shm_spin_ns; /* SRCCL_SHM_SPIN_US: poll a peer's step this long, then sleep */
    /* srcclCommInitFromEnv only */
    enum sc_env_source source;
    int rank, nranks;
    char root_host[256];
    uint16_t root_port;
    uint64_t job_hash; /* nonce shared by the job's ranks */
};

/* Reads SRCCL_* tuning variables. */
srcclResult_t sc_config_load(struct sc_config *cfg, char *err, size_t err_len);
/* Reads the launcher's variables (rank, size, root address). */
srcclResult_t sc_config_launch(struct sc_config *cfg, char *err, size_t err_len);
uint64_t sc_now_ns(void);

/* ---- reduce.c ---- */
typedef void (*sc_reduce_fn)(void *dst, const void *a, const void *b, size_t cnt);
typedef void (*sc_scale_fn)(void *buf, size_t cnt, int divisor);

struct sc_kernels {
    sc_reduce_fn reduce[srcclNumOps][srcclNumTypes]; /* avg reduces as sum */
    sc_scale_fn div[srcclNumTypes];                  /* avg's final division */
    const char *isa;
};

size_t sc_type_size(srcclDataType_t dt);
const char *sc_type_name(srcclDataType_t dt);
const char *sc_op_name(srcclRedOp_t op);
/* Fills k with the scalar kernels, or the AVX2 ones when the CPU has them
 * and allow_simd. */
void sc_kernels_init(struct sc_kernels *k, bool allow_simd);
/* reduce_avx2.c: overrides the entries it vectorizes (CPU checked by the caller). */
void sc_kernels_avx2(struct sc_kernels *k);
float sc_f16_to_f32(uint16_t h);
uint16_t sc_f32_to_f16(float f);
float sc_bf16_to_f32(uint16_t h);
uint16_t sc_f32_to_bf16(float f);

/* ---- bootstrap.c ---- */
struct sc_boot {
    int listen_fd; /* root only */
    int *fds;      /* root: one socket per rank (-1 for itself); others: fds[0] */
    int nranks, rank;
    bool is_root;
};

struct sc_id {
    uint32_t magic;
    uint32_t pid;      /* the process that serves the rendezvous */
    int32_t listen_fd; /* its listening socket, valid in that process */
    uint32_t addr;     /* IPv4, network order */
    uint16_t port;     /* network order */
    uint16_t pad;
    uint64_t nonce;
};

srcclResult_t sc_boot_make_id(struct sc_id *id, const char *host, uint16_t port, uint64_t nonce,
                              char *err, size_t err_len);
/* Makes this process the root of id: listens on its address and port
 * (ephemeral if 0, then written back into id). */
srcclResult_t sc_boot_listen(struct sc_id *id, char *err, size_t err_len);
/* Allgather of fixed-size records through the root: all = nranks * rec_len. */
srcclResult_t sc_boot_exchange(struct sc_boot *b, const struct sc_id *id, int rank, int nranks,
                               const void *rec, size_t rec_len, void *all, uint64_t timeout_ns,
                               char *err, size_t err_len);
srcclResult_t sc_boot_barrier(struct sc_boot *b, uint64_t timeout_ns, char *err, size_t err_len);
void sc_boot_close(struct sc_boot *b);

/* ---- transport.c ---- */
/* One direction pair with one peer over one RC QP. The receiver owns
 * slot_cnt slots of slot_len bytes per peer; the sender writes chunk s into
 * the receiver's slot s % slot_cnt with RDMA WRITE WITH IMMEDIATE (imm = s),
 * from its own registered copy of the same slot. The receiver returns
 * credits (the count of chunks consumed) with its own chunks to the
 * sender, or in a SEND WITH IMMEDIATE of their own (transport.c says when).
 * A sender may reuse slot s % slot_cnt once the peer has consumed chunk
 * s - slot_cnt (credit) and the local WRITE of that chunk has completed. */
struct sc_peer {
    int rank;
    struct ibv_qp *qp;
    uint8_t *tx, *rx; /* our slots for this peer, each slot_cnt * slot_len */
    uint64_t raddr;   /* the peer's rx slots for us */
    uint32_t rkey;
    uint64_t tx_head;    /* chunks posted */
    uint64_t tx_credit;  /* chunks the peer has consumed */
    uint64_t tx_done;    /* chunk WRITEs completed locally */
    uint64_t rx_arrived; /* chunks arrived */
    uint64_t rx_consumed;
    uint64_t rx_credited; /* consumed count last sent back (own SEND or with a chunk) */
    size_t rx_owed_len;   /* bytes consumed since */
    uint32_t credit_inflight;
    bool credit_wanted; /* a flush found the credits in flight full */
    uint32_t *rx_len;   /* byte length of each arrived slot */
};

/* What each rank publishes through the rendezvous (host order). */
struct sc_wire_peer {
    uint32_t qpn, psn;
    uint64_t raddr;
};
struct sc_wire_rank {
    uint32_t magic, rank, nranks, rkey;
    uint32_t slot_len, slot_cnt;
    uint8_t gid[16];
    uint16_t lid;
    uint8_t link_layer, mtu;
    uint32_t host;         /* hash of host name and boot id: ranks sharing CPUs */
    uint32_t pid;          /* the rank's process */
    uint32_t shm_tag;      /* its shared-memory segment's name (with pid); 0: none */
    uint32_t shm_loop_len; /* the segment's geometry (SRCCL_SHM_BYTES, _SMALL) */
    uint32_t shm_small_len;
    struct sc_wire_peer peer[]; /* nranks entries, ours unused */
};

srcclResult_t sc_tp_open(srcclComm_t comm, struct sc_wire_rank *mine);
srcclResult_t sc_tp_connect(srcclComm_t comm, const uint8_t *all, size_t rec_len);
void sc_tp_close(srcclComm_t comm);
/* Non-blocking interface. */
void *sc_tp_tx_slot(srcclComm_t comm, int peer);
srcclResult_t sc_tp_tx_post(srcclComm_t comm, int peer, size_t len);
const void *sc_tp_rx_peek(srcclComm_t comm, int peer, size_t *len);
/* Consumes the chunk; its credit goes back with our next chunk to that peer,
 * or on its own once every slot or half a slot's bytes are owed (or at
 * sc_tp_flush). */
srcclResult_t sc_tp_rx_release(srcclComm_t comm, int peer);
/* Returns the consumed chunks' credits now: to every peer (all: before
 * the application gets control back), or to the peers whose every slot
 * is taken (before sleeping). */
srcclResult_t sc_tp_flush(srcclComm_t comm, bool all);
/* Polls completions; srcclSuccess or the (sticky) error. *progressed > 0 if
 * anything happened. */
srcclResult_t sc_tp_progress(srcclComm_t comm, int *progressed);
/* Polls, then sleeps on the completion channel, until something happens
 * or the deadline; len: the bytes whose arrival (or consumption) is
 * awaited, which lengthens the spin. */
srcclResult_t sc_tp_wait(srcclComm_t comm, uint64_t deadline_ns, const char *what, int peer,
                         size_t len);
/* The same wait without an error at the deadline: returns after a
 * completion, an event, 100 ms or until_ns, whichever comes first. */
srcclResult_t sc_tp_idle(srcclComm_t comm, uint64_t until_ns);
/* Arms the completion channel if it is not; *progressed > 0 if completions
 * were polled meanwhile (then do not sleep). */
srcclResult_t sc_tp_arm(srcclComm_t comm, int *progressed);
/* After the channel's fd polled readable: consumes the event. */
void sc_tp_ack(srcclComm_t comm);
/* Records the timeout of a wait "for data from" / "for credit from" peer. */
srcclResult_t sc_tp_timeout(srcclComm_t comm, const char *what, int peer);

/* ---- the communicator ---- */
struct srcclComm {
    uint32_t magic;
    int rank, nranks;
    struct sc_config cfg;
    struct sc_kernels kern;
    srcclResult_t async_err; /* sticky: set by transport failures and timeouts */
    char last_err[512];
    /* verbs */
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_comp_channel *channel;
    struct ibv_cq *cq;
    struct ibv_mr *mr;
    uint8_t *mem;
    size_t mem_len;
    int cq_len;
    uint32_t sq_len, rq_len;
    bool cq_armed;
    enum ibv_mtu mtu;
    uint8_t link_layer;
    union ibv_gid gid;
    uint16_t lid;
    struct sc_peer *peers; /* nranks entries; peers[rank] has no QP */
    int local_ranks;       /* ranks on this host (ourselves included) */
    bool spin_per_byte;    /* waits spin 1 ns longer per byte awaited (sc_tp_wait) */
    bool spin_yield;       /* more ranks here than CPUs: spinning waits yield the CPU */
    /* scratch for algorithms that need a temporary (grown on demand) */
    void *scratch;
    size_t scratch_len;
    uint64_t ops; /* collectives called, for messages */
    /* sched.c: requests in call order; the head runs, a run of
     * point-to-point requests at the head runs together */
    struct srcclRequest *q_head, *q_tail;
    struct sc_co *co;      /* the coroutine collectives run in when queued */
    bool in_co;            /* executing on the coroutine's stack */
    uint64_t p2p_since_ns; /* the point-to-point window's last progress */
    uint64_t left_ns;      /* returned to the application with requests queued */
    uint64_t away_ns;      /* total time so spent: it does not count toward timeouts */
    uint8_t *p2p_busy;     /* nranks x 2: a peer's direction taken in this pass */
    struct sc_shm *shm;    /* shm.c: the intra-host path, NULL when off */
};

#define SC_COMM_MAGIC 0x5343434cu /* "SCCL" */

/* Records a failure on the communicator (and the thread) and returns r. */
srcclResult_t sc_fail(srcclComm_t comm, srcclResult_t r, const char *fmt, ...) SC_PRINTF(3, 4);
void sc_set_thread_error(const char *fmt, ...) SC_PRINTF(1, 2);
/* Format a message into buf (len bytes) and return r: for the helpers that
 * report into a caller's buffer before a communicator exists. */
srcclResult_t sc_msg(char *buf, size_t len, srcclResult_t r, const char *fmt, ...) SC_PRINTF(4, 5);
void sc_debug(srcclComm_t comm, const char *fmt, ...) SC_PRINTF(2, 3);
void *sc_scratch(srcclComm_t comm, size_t len);

srcclComm_t sc_comm_alloc(int nranks, int rank, const struct sc_config *cfg);
void sc_comm_free(srcclComm_t comm);

/* ---- sched.c ---- */
enum sc_op_kind {
    SC_OP_ALLREDUCE,
    SC_OP_BROADCAST,
    SC_OP_REDUCE,
    SC_OP_ALLGATHER,
    SC_OP_REDUCE_SCATTER,
    SC_OP_ALLTOALL,
    SC_OP_BARRIER,
    SC_OP_SEND,
    SC_OP_RECV,
};

/* One call, arguments checked: what a request or a group entry holds. */
struct sc_op {
    enum sc_op_kind kind;
    const char *fn; /* the public call, for messages */
    const void *send;
    void *recv;
    size_t cnt;
    srcclDataType_t dt;
    srcclRedOp_t op;
    int root; /* root, or the peer of a send / receive */
};

/* comm.c: runs a call to completion on the caller's stack or, when
 * comm->in_co, on the coroutine's (its waits then yield). */
srcclResult_t sc_op_run(srcclComm_t comm, const struct sc_op *op);
/* Runs, queues (request != NULL: non-blocking) or adds to the thread's
 * open group. */
srcclResult_t sc_submit(srcclComm_t comm, const struct sc_op *op, srcclRequest_t *request);
/* Inside a coroutine: polls once, then yields to the scheduler until the
 * next pass; srcclTimeout once *deadline_ns has passed. The time the
 * application spends outside srccl meanwhile moves *deadline_ns on. */
srcclResult_t sc_co_block(srcclComm_t comm, uint64_t *deadline_ns, const char *what, int peer);
/* Completes every queued request (destroy), or fails them (abort). */
srcclResult_t sc_sched_finish(srcclComm_t comm);
void sc_sched_abort(srcclComm_t comm);
bool sc_in_group(void);
/* A call made inside a group failed with r: srcclGroupEnd will run
 * nothing and return the first such failure. Returns r. */
srcclResult_t sc_group_note(srcclResult_t r);

/* ---- prims.c ---- */
/* One primitive moves one chunk (<= slot_len bytes) between this rank and
 * its recv/send peers; every wait inside has the communicator's deadline. */
struct sc_prims {
    srcclComm_t comm;
    int recv_peer, send_peer;
    srcclDataType_t dt;
    size_t esize;
    sc_reduce_fn reduce;
    sc_scale_fn post; /* non-NULL: divide by nranks (avg) where postop is asked */
};

void sc_prims_init(struct sc_prims *p, srcclComm_t comm, int recv_peer, int send_peer,
                   srcclDataType_t dt, srcclRedOp_t op);
size_t sc_prims_chunk_cnt(const struct sc_prims *p); /* elements per chunk */
srcclResult_t sc_send(struct sc_prims *p, const void *src, size_t cnt);
srcclResult_t sc_recv(struct sc_prims *p, void *dst, size_t cnt);
/* dst = op(recv, src) and the result sent on */
srcclResult_t sc_recv_reduce_send(struct sc_prims *p, const void *src, size_t cnt);
/* dst = op(recv, src) [/ nranks if postop], stored and sent on */
srcclResult_t sc_recv_reduce_copy_send(struct sc_prims *p, const void *src, void *dst, size_t cnt,
                                       bool postop);
/* dst = op(recv, src) [/ nranks if postop] */
srcclResult_t sc_recv_reduce_copy(struct sc_prims *p, const void *src, void *dst, size_t cnt,
                                  bool postop);
/* dst = recv, and sent on */
srcclResult_t sc_recv_copy_send(struct sc_prims *p, void *dst, size_t cnt);
/* Whole messages of any length, chunk by chunk, sending before receiving
 * (exchange with one partner or a shifted pair of peers). */
srcclResult_t sc_send_msg(struct sc_prims *p, const void *src, size_t cnt);
srcclResult_t sc_recv_msg(struct sc_prims *p, void *dst, size_t cnt);
srcclResult_t sc_sendrecv_msg(struct sc_prims *p, const void *src, void *dst, size_t cnt,
                              bool reduce);

/* ---- algos.c ---- */
srcclResult_t sc_allreduce(srcclComm_t c, const void *s, void *r, size_t cnt, srcclDataType_t dt,
                           srcclRedOp_t op, enum sc_algo algo);
srcclResult_t sc_broadcast(srcclComm_t c, const void *s, void *r, size_t cnt, srcclDataType_t dt,
                           int root, enum sc_algo algo);
srcclResult_t sc_reduce(srcclComm_t c, const void *s, void *r, size_t cnt, srcclDataType_t dt,
                        srcclRedOp_t op, int root, enum sc_algo algo);
srcclResult_t sc_allgather(srcclComm_t c, const void *s, void *r, size_t cnt, srcclDataType_t dt,
                           enum sc_algo algo);
srcclResult_t sc_reduce_scatter(srcclComm_t c, const void *s, void *r, size_t cnt,
                                srcclDataType_t dt, srcclRedOp_t op, enum sc_algo algo);
srcclResult_t sc_alltoall(srcclComm_t c, const void *s, void *r, size_t cnt, srcclDataType_t dt);
srcclResult_t sc_barrier(srcclComm_t c);
const char *sc_algo_name(enum sc_algo a);
enum sc_coll { SC_ALLREDUCE, SC_BROADCAST, SC_REDUCE, SC_ALLGATHER, SC_REDUCE_SCATTER };
/* SRCCL_ALGO, else SRCCL_RD_MAX_BYTES, else the cost model (algos.c). */
enum sc_algo sc_algo_pick(srcclComm_t c, enum sc_coll coll, size_t bytes);

/* ---- shm.c ---- */
/* In sc_tp_open: creates this rank's segment (unless SRCCL_SHM=0 or an
 * algorithm is forced) and names it in the record; failing to is not an
 * error (the record then says "none"). */
srcclResult_t sc_shm_open(srcclComm_t comm, struct sc_wire_rank *mine);
/* In sc_tp_connect: all ranks on this host and all with segments: maps
 * the peers' segments; else drops ours. Every rank decides alike. */
srcclResult_t sc_shm_connect(srcclComm_t comm, const uint8_t *all, size_t rec_len);
/* After the barrier that follows connect: unlinks our segment's name. */
void sc_shm_ready(srcclComm_t comm);
void sc_shm_close(srcclComm_t comm);
bool sc_shm_on(srcclComm_t comm);
/* Runs o through shared memory (*took), or leaves it to the QPs (!*took:
 * sends, receives, all-to-all, an unusual overlap). */
srcclResult_t sc_shm_run(srcclComm_t comm, const struct sc_op *o, bool *took);
/* A queued collective is waiting on a peer's step: sc_shm_idle sleeps on
 * it (until until_ns, 50 ms at most) instead of on the completion channel. */
bool sc_shm_blocked(srcclComm_t comm);
void sc_shm_idle(srcclComm_t comm, uint64_t until_ns);

#endif /* SC_INT_H */
