/* sv.h: softrdma's libibverbs (the "verbs" layer): objects that embed the
 * ABI structs of the system <infiniband/verbs.h>, and the helpers the
 * verbs files share. Errors at this boundary follow the verbs convention:
 * a positive errno returned, or NULL with errno set. */
#ifndef SV_H
#define SV_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <sys/types.h>

#include "sr_cc.h"
#include "sr_engine.h"
#include "sr_nic.h"
#include "sr_util.h"

#define SV_EXPORT __attribute__((visibility("default")))

enum {
    SV_HCA_CLOCK_KHZ = 1000000,       /* timestamps are nanoseconds */
    SV_MAX_DM_SIZE = 4 * 1024 * 1024, /* device memory: host memory in fact */
};

/* Environment, parsed once (SOFTRDMA_*). */
struct sv_config {
    uint8_t addr[16]; /* SOFTRDMA_ADDR, IPv4-mapped or IPv6; zero = auto loopback */
    bool addr_set;
    uint32_t mtu;              /* SOFTRDMA_MTU: active MTU in bytes */
    struct sr_fault_cfg fault; /* SOFTRDMA_FAULT */
    bool stats;                /* SOFTRDMA_STATS: counters on stderr at close */
    bool no_gso;               /* SOFTRDMA_GSO=0: one send per datagram */
    bool whole_writes;         /* SOFTRDMA_WRITE_ONLY=0: WRITEs as FIRST/MIDDLE/LAST over UDP */
    bool no_sack;              /* SOFTRDMA_SACK=0: a standard go-back-N device (docs/WIRE.md) */
    uint32_t qdelay_us; /* SOFTRDMA_QDELAY_US: queueing the requester may build (qcap.h); 0: none */
    uint32_t ack_delay_us; /* SOFTRDMA_ACK_DELAY_US: how long an ACK may wait for a reply */
    uint32_t handoff_us;   /* SOFTRDMA_HANDOFF_US: NIC thread off the socket after inline polls */
    bool no_shm;           /* SOFTRDMA_SHM=0, or SOFTRDMA_FAULT set: UDP to same-host peers too */
    uint8_t paths;         /* SOFTRDMA_PATHS: entropy values (UDP source ports) per QP */
    uint8_t path_policy;   /* SOFTRDMA_PATH_POLICY: spray (1) or adaptive (2) */
    bool path_reorder;     /* SOFTRDMA_PATH_REORDER=1: spray to any peer (experiments) */
    uint8_t path_burst;    /* SOFTRDMA_PATH_BURST: new packets per choice of path */
    uint32_t shm_bulk;     /* SOFTRDMA_SHM_BULK: smallest message by reference; 0: none */
    bool shm_bulk_read;    /* SOFTRDMA_SHM_BULK_READ=1: READs by reference too */
    struct sr_cc_cfg cc;   /* SOFTRDMA_CC (docs/CONGESTION.md) */
};

/* live.c: the set of live objects by address, so that the control path
 * answers EINVAL for NULL and for destroyed objects instead of reading
 * freed memory. Every creator enters its object (sv_live_add) before
 * returning it; every destroyer checks it (sv_live_is) first and removes
 * it (sv_live_del) before freeing it. */
enum sv_kind {
    SV_K_CTX = 1,
    SV_K_PD,
    SV_K_MR,
    SV_K_CHANNEL,
    SV_K_CQ,
    SV_K_SRQ,
    SV_K_QP,
    SV_K_AH,
    SV_K_XRCD,
    SV_K_MW,
    SV_K_DM,
};
struct sv_live_slot {
    uintptr_t obj; /* 0: empty */
    enum sv_kind kind;
};
struct sv_live {
    pthread_mutex_t lock;
    struct sv_live_slot *slot;
    uint32_t cap, cnt;
    bool off; /* the table could not grow: every pointer passes */
};
void sv_live_add(const void *obj, enum sv_kind kind);
void sv_live_del(const void *obj);
bool sv_live_is(const void *obj, enum sv_kind kind);
/* The first live object of that kind that match accepts, or NULL. match
 * runs under the table's lock: it may read objects, not call sv_live_*. */
void *sv_live_find(enum sv_kind kind, bool (*match)(const void *obj, const void *arg),
                   const void *arg);
/* NULL, or a live object of that kind (optional arguments) */
static inline bool sv_live_opt(const void *obj, enum sv_kind kind)
{
    return !obj || sv_live_is(obj, kind);
}

/* The device: one per process (the verbs API's device list is process
 * wide). Its NIC is opened by the first ibv_open_device and shared. */
struct sv_device {
    struct ibv_device ibdev;
    void *after_ibdev; /* vendor libraries read the word after ibv_device */
    struct sv_config cfg;
    pthread_mutex_t lock;
    struct sr_nic *nic;
    int nic_refs;
    uint8_t gid[16]; /* bound address, known once the NIC is open */
    uint64_t guid;   /* network order */
    struct sv_live live;
    uint32_t last_handle; /* PD, MR and DM handles, unique on the device (atomic) */
};

/* A new object handle (ibv_pd.handle, ibv_mr.handle, ibv_dm.handle): what
 * ibv_import_pd/_mr/_dm name an object by. Never 0. */
static inline uint32_t sv_handle_new(struct sv_device *dev)
{
    uint32_t h;
    do
        h = __atomic_add_fetch(&dev->last_handle, 1, __ATOMIC_RELAXED);
    while (!h);
    return h;
}

/* An event queue behind a file descriptor (evq.c). */
struct sv_ev {
    int type;
    void *obj;
};
struct sv_evq {
    int rfd, wfd;
    pthread_mutex_t lock;
    struct sv_ev *ev;
    uint32_t cap, head, cnt;
};
int sv_evq_init(struct sv_evq *q);
void sv_evq_fini(struct sv_evq *q);
void sv_evq_post(struct sv_evq *q, int type, void *obj);
int sv_evq_get(struct sv_evq *q, struct sv_ev *out);
void sv_evq_purge(struct sv_evq *q, const void *obj);

struct sv_context {
    struct verbs_context vctx; /* ends with struct ibv_context */
    struct sv_device *dev;
    struct sr_nic *nic;
    struct sv_evq async; /* async events; async.rfd is context->async_fd */
    /* cmd_fd's file: a context imported from a dup of another's cmd_fd
     * (ibv_import_device) shares it, and with it the PDs, MRs and DMs
     * that ibv_import_pd/_mr/_dm may name */
    dev_t cmd_dev;
    ino_t cmd_ino;
};

/* A protection domain, or a parent domain (pd_ex.c): one over a PD, with
 * its engine PD (so every object made on it is one on the PD), an
 * optional thread domain, and the application's allocators, through
 * which the engine allocates the rings of QPs, SRQs and CQs made on it. */
struct sv_pd {
    struct ibv_pd ibpd;
    struct sr_pd *pd;
    struct sv_pd *parent_of; /* a parent domain's PD; NULL for a PD */
    uint32_t children;       /* a PD: the parent domains over it (atomic) */
    struct ibv_td *td;
    struct sr_alloc alloc; /* alloc.alloc NULL: no allocators */
    uint32_t alloc_out;    /* rings taken from them and not yet returned (atomic) */
    void *(*u_alloc)(struct ibv_pd *pd, void *pd_context, size_t size, size_t alignment,
                     uint64_t resource_type);
    void (*u_free)(struct ibv_pd *pd, void *pd_context, void *ptr, uint64_t resource_type);
    void *pd_context;
    bool imported; /* ibv_import_pd: a wrapper; the original owns pd */
};

struct sv_dm;
struct sv_mr {
    struct ibv_mr ibmr;
    struct sr_mr *mr;
    struct sv_dm *dm;    /* a device-memory MR's DM, else NULL */
    unsigned int access; /* IBV_ACCESS_* as registered */
    uint64_t iova;
    bool imported; /* ibv_import_mr: a wrapper; the original owns mr */
};

struct sv_channel {
    struct ibv_comp_channel ch; /* ch.fd is evq.rfd */
    struct sv_evq evq;          /* completion events: obj is the struct sv_cq */
};

struct sv_cq {
    /* ibv_cq_ex begins with the fields of ibv_cq (ibv_cq_ex_to_cq is a
     * cast): every CQ has room for the extended one */
    union {
        struct ibv_cq ibcq;
        struct ibv_cq_ex ibcqx;
    };
    struct sr_cq *cq;
    /* ibv_create_cq_ex: the completion that ibv_start_poll/ibv_next_poll
     * took, read by the ibv_wc_read_* accessors */
    struct sr_wc cur;
};

struct sv_srq {
    struct ibv_srq ibsrq;
    struct sr_srq *srq;
};

struct sv_xrcd {
    struct ibv_xrcd ibxrcd;
    struct sr_xrcd *xrcd;
};

struct sv_ah {
    struct ibv_ah ibah;
    uint8_t dgid[16];
};

struct sv_qp {
    struct ibv_qp_ex qpex; /* starts with struct ibv_qp */
    struct sr_qp *qp;
    /* ibv_wr_* API: work requests staged between wr_start and wr_complete,
     * as many as the send queue holds (allocated at the first wr_start) */
    struct sr_send_wr *wr;
    struct sr_sge *sge;    /* wr_cap x SR_MAX_SGE */
    uint8_t *inline_stage; /* wr_cap x max_inline_data */
    uint32_t wr_cap, inline_cap, inline_used;
    uint32_t nwr;
    int wr_err;
};

static inline struct sv_context *sv_ctx(struct ibv_context *c)
{
    return sr_container_of(sr_container_of(c, struct verbs_context, context), struct sv_context,
                           vctx);
}
static inline struct sv_pd *sv_pd(struct ibv_pd *p)
{
    return sr_container_of(p, struct sv_pd, ibpd);
}
static inline struct sv_cq *sv_cq(struct ibv_cq *c)
{
    return sr_container_of(c, struct sv_cq, ibcq);
}
static inline struct sv_qp *sv_qp(struct ibv_qp *q)
{
    return sr_container_of(q, struct sv_qp, qpex.qp_base);
}
static inline struct sv_srq *sv_srq(struct ibv_srq *s)
{
    return sr_container_of(s, struct sv_srq, ibsrq);
}

/* poll_cq's work for any output form: drain (NIC lock held) takes up to n
 * completions into out; when there are none the NIC runs inline once, and
 * the progress layer learns what the poll found (sr_nic_polled). Inlined into
 * each caller, so ibv_poll_cq pays no indirect call.
 * more: the poll continues a batch (ibv_next_poll). On an armed CQ it then
 * takes only what is there: an inline pass could add a completion, fire
 * the armed event for it and hand it over at once, and an application
 * that polls once per event (ibv_rc_pingpong -t -e) would find nothing
 * behind that event. */
static inline __attribute__((always_inline)) int
sv_cq_poll_with(struct sv_cq *c, int num_entries, void *out,
                int (*drain)(struct sv_cq *c, int n, void *out), bool more)
{
    struct sr_nic *nic = sv_ctx(c->ibcq.context)->nic;
    sr_nic_lock(nic);
    int got = drain(c, num_entries, out);
    bool ran = false;
    if (!got && num_entries > 0 && !(more && sr_cq_armed(c->cq))) {
        /* Nothing yet: drive the NIC inline once, for latency. */
        sr_nic_progress(nic);
        got = drain(c, num_entries, out);
        ran = true;
    }
    struct sr_progress_poll poll = {
        .wanted = num_entries > 0,
        .ran = ran,
        .found = got != 0,
        .armed = !got && sr_cq_armed(c->cq),
    };
    bool nap = sr_nic_polled(nic, &poll);
    sr_nic_unlock(nic);
    if (nap)
        sr_nic_app_nap();
    return got;
}

/* the same cmd_fd file: objects of one may be imported into the other */
static inline bool sv_ctx_shares(const struct ibv_context *a, const struct ibv_context *b)
{
    const struct sv_context *x = sv_ctx((struct ibv_context *)a);
    const struct sv_context *y = sv_ctx((struct ibv_context *)b);
    return x->cmd_dev == y->cmd_dev && x->cmd_ino == y->cmd_ino;
}

/* errno for an SR_ERR_* code */
int sv_errno(int err);

/* device.c */
struct sv_device *sv_device_get(void);
int sv_device_nic_get(struct sv_device *dev, struct sv_context *ctx, struct sr_nic **out);
void sv_device_nic_put(struct sv_device *dev);
void sv_async_post(struct sv_context *ctx, enum ibv_event_type type, void *obj);
/* a GID index a QP may use as its source: one carrying the device address */
bool sv_gid_index_usable(const struct sv_device *d, uint32_t index);

/* Our one device: anything else given as a device is EINVAL. */
static inline bool sv_is_device(const struct ibv_device *d)
{
    return d && d == &sv_device_get()->ibdev;
}

/* objects.c: the context's ops and extended ops */
void sv_init_ops(struct sv_context *ctx);
void sv_engine_cq_event(void *ctx, struct sr_cq *cq, bool solicited);
void sv_engine_async_event(void *ctx, enum sr_event_type type, void *obj);
int sv_post_send_one(struct sv_qp *q, const struct sr_send_wr *wr);

/* pd_ex.c: parent and thread domains */
void sv_pd_ex_init_ops(struct sv_context *ctx);
/* pd as a parent domain, or NULL when it is a plain PD */
struct sv_pd *sv_parent_domain(struct ibv_pd *pd);
/* the allocator the engine uses for rings of objects made on pd, or NULL */
const struct sr_alloc *sv_pd_alloc(struct ibv_pd *pd);
/* ibv_dealloc_pd of a parent domain, or of a PD with parent domains over it */
int sv_pd_ex_dealloc(struct sv_pd *p);

/* cq_ex.c */
void sv_cq_ex_init_ops(struct sv_context *ctx);

/* mw.c: memory windows */
void sv_mw_init_ops(struct sv_context *ctx);
/* Fills s (opcode already set) for a bind of mw under the new rkey. */
int sv_mw_bind_wr(struct ibv_mw *mw, uint32_t rkey, const struct ibv_mw_bind_info *info,
                  struct sr_send_wr *s);

/* objects.c: ibv_reg_mr and family */
struct ibv_mr *sv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
                         unsigned int access);

/* mr_ex.c */
bool sv_mem_ok(const void *addr, uint64_t len, bool write);
void sv_mr_ex_init_ops(struct sv_context *ctx);
void sv_mr_ex_dereg(struct sv_mr *m);
/* The ibv_wr_* operations a QP type can carry (rxe's per-type sets):
 * ibv_create_qp_ex asking for any other is EOPNOTSUPP. */
static inline uint64_t sv_send_ops_for(enum ibv_qp_type t)
{
    const uint64_t send = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
    const uint64_t uc = send | IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
                        IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV;
    const uint64_t rc = uc | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
                        IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_SEND_WITH_INV;
    switch (t) {
    case IBV_QPT_RC:
        return rc | IBV_QP_EX_WITH_ATOMIC_WRITE; /* IBA 1.5: an RC opcode only */
    case IBV_QPT_XRC_SEND:
        return rc;
    case IBV_QPT_UC:
        return uc;
    case IBV_QPT_UD:
        return send;
    default:
        return 0;
    }
}

/* qp_ex.c */
void sv_qp_ex_init(struct sv_qp *q, uint64_t send_ops_flags);
void sv_qp_ex_free(struct sv_qp *q);

#endif
