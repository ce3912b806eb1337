/* vt.h: the harness shared by the verbs tests. It uses only the public
 * <infiniband/verbs.h> API, so the tests say what any application sees.
 *
 * Shape of a test case: a supervisor forks a case process (its own process
 * group, so a hang is killed as a whole); the case process creates a
 * socketpair and forks the peer. Each side opens its own device context
 * after the fork (verbs objects never cross a fork). The socketpair carries
 * the out-of-band exchange (QPN, PSN, GID, rkey, address) and, for most
 * cases, requests to an "agent": a passive peer that performs remote-side
 * actions (fill or compare memory, post and poll receives, send, query its
 * QP) when the driving side asks, and reports what it saw.
 *
 * Checks count failures and go on; VT_REQUIRE ends the process. A case
 * fails when either process reports a failure or does not finish by its
 * deadline. Every wait is bounded. */
#ifndef VT_H
#define VT_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
    VT_POLL_MS = 10000, /* default deadline for a completion */
    VT_OOB_MS = 30000,  /* deadline for an out-of-band reply */
    VT_CASE_S = 90,     /* a whole case, both processes (ctest TIMEOUT is 120 s) */
    VT_MAX_SGE = 8,
    VT_AGENT_QPS = 4,
    VT_AGENT_MRS = 4,
    VT_AGENT_MR_LEN = (4 << 20) + (64 << 10), /* agent MR 0: 1 MiB ops plus room */
};

/* ---- checks ---- */
extern int vt_failures;
extern const char *vt_role; /* "parent", "child" or "supervisor" */
extern const char *vt_ctx;  /* the table row being run, for messages */

bool vt_check(bool ok, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
bool vt_check_eq(long long got, long long want, const char *file, int line, const char *got_s,
                 const char *want_s);
bool vt_check_eqx(uint64_t got, uint64_t want, const char *file, int line, const char *got_s,
                  const char *want_s);
_Noreturn void vt_fatal(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void vt_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A check disabled because it exposes a reported library bug: printed so
 * the skip is visible in every run. */
void vt_known_bug(const char *id, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define VT_CHECK(c)       vt_check((c), __FILE__, __LINE__, "%s", #c)
#define VT_CHECKF(c, ...) vt_check((c), __FILE__, __LINE__, __VA_ARGS__)
/* Integers and enums, printed signed / as hex. */
#define VT_EQ(got, want)                                                                           \
    vt_check_eq((long long)(got), (long long)(want), __FILE__, __LINE__, #got, #want)
#define VT_EQX(got, want)                                                                          \
    vt_check_eqx((uint64_t)(got), (uint64_t)(want), __FILE__, __LINE__, #got, #want)
#define VT_REQUIRE(c)                                                                              \
    do {                                                                                           \
        if (!(c))                                                                                  \
            vt_fatal(__FILE__, __LINE__, "required: %s", #c);                                      \
    } while (0)

/* ---- cases ---- */
struct vt_case {
    const char *name;
    void (*parent)(int fd, const void *arg);
    void (*child)(int fd, const void *arg); /* NULL: vt_agent_serve */
    const void *arg;
};
/* Runs the case named by argv[1], or every case. Exit status for ctest. */
int vt_main(int argc, char **argv, const struct vt_case *cases, size_t n_cases);
/* Reaps the peer early (for cases where it exits on purpose); true if it
 * exited with status 0. The case end skips a reaped peer. */
bool vt_wait_child(int timeout_ms);

uint64_t vt_now_ms(void);
void vt_sleep_ms(int ms);

/* ---- out of band ---- */
void vt_send(int fd, const void *p, size_t len);
void vt_recv(int fd, void *p, size_t len, int timeout_ms);
void vt_sync(int fd); /* both sides have reached this point */

/* ---- memory patterns: byte at stream position pos of stream seed ---- */
/* Streams whose seeds differ modulo 256 differ in every byte, so a check
 * of even one byte tells old content from new. */
uint8_t vt_pat(uint32_t seed, uint64_t pos);
void vt_pat_fill(void *p, size_t len, uint32_t seed, uint64_t pos);
/* Offset of the first byte that differs, or -1. */
long long vt_pat_diff(const void *p, size_t len, uint32_t seed, uint64_t pos);

/* ---- device, memory, queue pairs ---- */
struct vt_dev {
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_device_attr attr;
    struct ibv_port_attr port;
    union ibv_gid gid;
};
void vt_dev_open(struct vt_dev *d);
void vt_dev_close(struct vt_dev *d); /* checks every destroy succeeds */

struct vt_buf {
    uint8_t *p;
    size_t len;
    struct ibv_mr *mr;
};
void vt_buf_alloc(struct vt_dev *d, struct vt_buf *b, size_t len, int access);
void vt_buf_free(struct vt_buf *b);
enum {
    VT_ACCESS_ALL = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                    IBV_ACCESS_REMOTE_ATOMIC,
};

struct vt_qp_caps {
    uint32_t max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline;
    int cqe;        /* for CQs the QP creates itself */
    int sq_sig_all; /* 1: every send WR completes */
    bool qp_ex;     /* ibv_create_qp_ex with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS */
    bool share_cq;  /* one CQ for both queues */
};
void vt_caps_default(struct vt_qp_caps *c);

struct vt_qp {
    struct ibv_qp *qp;
    struct ibv_qp_ex *qpx; /* caps.qp_ex only */
    struct ibv_cq *scq, *rcq;
    bool own_scq, own_rcq;
    uint32_t psn;
};
/* scq/rcq/srq may be NULL: the QP gets its own CQs, and its own RQ. */
void vt_qp_create(struct vt_dev *d, struct vt_qp *q, const struct vt_qp_caps *c, struct ibv_cq *scq,
                  struct ibv_cq *rcq, struct ibv_srq *srq);
void vt_qp_destroy(struct vt_qp *q);

struct vt_qp_info {
    uint32_t qpn, psn;
    uint8_t gid[16];
};
void vt_qp_info(const struct vt_dev *d, const struct vt_qp *q, struct vt_qp_info *out);

/* Path and reliability parameters of the RESET -> INIT -> RTR -> RTS walk. */
struct vt_conn {
    int access; /* qp_access_flags */
    enum ibv_mtu mtu;
    uint8_t timeout, retry_cnt, rnr_retry, min_rnr_timer;
    uint8_t max_rd_atomic;
};
void vt_conn_default(const struct vt_dev *d, struct vt_conn *c);
/* 0, or the errno of the failing ibv_modify_qp. */
int vt_qp_connect(struct vt_qp *q, const struct vt_qp_info *remote, const struct vt_conn *c);
enum ibv_qp_state vt_qp_state(struct ibv_qp *qp);

/* ---- completions ---- */
/* Polls until n completions or the deadline; returns how many arrived. */
int vt_poll(struct ibv_cq *cq, int n, struct ibv_wc *wc, int timeout_ms);
/* Polls for ms and returns the number of completions that showed up
 * (printed: the callers expect none). */
int vt_poll_none(struct ibv_cq *cq, int ms);
/* One completion: checks it arrived with wr_id and status. */
bool vt_expect_wc(struct ibv_cq *cq, uint64_t wr_id, enum ibv_wc_status status, struct ibv_wc *out);

/* ---- the agent ---- */
struct vt_remote_mr {
    uint64_t addr;
    uint32_t rkey;
    uint32_t slot;
    uint64_t len;
};
struct vt_sge {
    uint32_t mr; /* agent MR slot */
    uint32_t len;
    uint64_t off; /* from the start of that MR */
};
struct vt_send_req {
    enum ibv_wr_opcode opcode;
    unsigned int send_flags;
    uint32_t imm_data; /* network order, as in ibv_send_wr */
    uint64_t remote_addr;
    uint32_t rkey;
    uint32_t nsge;
    struct vt_sge sge[VT_MAX_SGE];
};

void vt_agent_serve(int fd, const void *arg); /* the child side */

/* Parent side. Agent MR 0 (VT_AGENT_MR_LEN, every access) exists from the start. */
void vt_agent_hello(int fd, struct vt_remote_mr *mr0);
void vt_agent_qp_create(int fd, uint32_t slot, const struct vt_qp_caps *c, struct vt_qp_info *out);
int vt_agent_qp_connect(int fd, uint32_t slot, const struct vt_qp_info *remote,
                        const struct vt_conn *c);
void vt_agent_qp_destroy(int fd, uint32_t slot);
enum ibv_qp_state vt_agent_qp_state(int fd, uint32_t slot);
/* NULL-mr result: errno of ibv_reg_mr returned. */
int vt_agent_mr_reg(int fd, uint64_t len, int access, struct vt_remote_mr *out);
void vt_agent_mr_dereg(int fd, uint32_t slot);
void vt_agent_fill(int fd, uint32_t mr, uint64_t off, uint64_t len, uint32_t seed, uint64_t pos);
/* Offset of the first mismatch, or -1. */
long long vt_agent_diff(int fd, uint32_t mr, uint64_t off, uint64_t len, uint32_t seed,
                        uint64_t pos);
uint64_t vt_agent_get_u64(int fd, uint32_t mr, uint64_t off);
void vt_agent_set_u64(int fd, uint32_t mr, uint64_t off, uint64_t v);
int vt_agent_post_recv(int fd, uint32_t slot, uint64_t wr_id, uint32_t nsge,
                       const struct vt_sge *sge);
/* true if a receive completion arrived within timeout_ms */
bool vt_agent_poll_recv(int fd, uint32_t slot, int timeout_ms, struct ibv_wc *wc);
/* Posts one signaled WR and waits for its completion; returns the post
 * errno (then wc is untouched) or 0 with the completion in wc (status
 * IBV_WC_GENERAL_ERR with wr_id 0 if none came). */
int vt_agent_post_send(int fd, uint32_t slot, const struct vt_send_req *r, struct ibv_wc *wc);
/* The agent closes its device and exits; the parent reaps it. */
void vt_agent_exit(int fd);

/* Connects a local QP to agent QP slot (created here with rcaps). */
void vt_agent_pair(int fd, struct vt_dev *d, struct vt_qp *q, uint32_t slot,
                   const struct vt_qp_caps *rcaps, const struct vt_conn *lconn,
                   const struct vt_conn *rconn, struct vt_qp_info *rinfo);

#endif
