/* scm.h: softrdma's librdmacm: the objects behind the public rdma_cm ABI
 * (<rdma/rdma_cma.h>, the system header, is the contract) and what the
 * library's files share. One CM service per process, as librdmacm's
 * own is: it owns the device's GSI QP (QP1) and a thread that receives
 * MADs and fires the CM's timers. */
#ifndef SCM_H
#define SCM_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <stdbool.h>
#include <stdint.h>

#include "scm_mad.h"
#include "softrdma_priv.h"

#define SCM_EXPORT __attribute__((visibility("default")))

/* Connection states (IBA 12.9.6, Figure 146), plus the address and route
 * steps the RDMA CM adds before a connection. */
enum scm_state {
    SCM_IDLE,
    SCM_ADDR_BOUND,
    SCM_ADDR_RESOLVED,
    SCM_ROUTE_RESOLVED,
    SCM_LISTEN,
    SCM_REQ_SENT,
    SCM_REQ_RCVD, /* CONNECT_REQUEST delivered, the consumer decides */
    SCM_REP_SENT,
    SCM_REP_RCVD, /* CONNECT_RESPONSE delivered to an id without a QP */
    SCM_ESTABLISHED,
    SCM_DREQ_SENT,
    SCM_TIMEWAIT,
    SCM_SIDR_REQ_SENT,
    SCM_SIDR_REQ_RCVD,
    SCM_CLOSED, /* rejected, timed out or disconnected for good */
};

struct scm_event {
    struct rdma_cm_event ev;
    struct scm_event *next;
    uint8_t priv[224];
};

struct scm_channel {
    struct rdma_event_channel ch; /* ch.fd: readable while events wait */
    int wfd;
    bool signaled;
    struct scm_event *head, *tail;
};

struct scm_id {
    struct rdma_cm_id id;
    struct scm_id *next;
    enum scm_state state;
    bool sync;               /* created without a channel: calls block (rdma_create_ep) */
    struct scm_channel *own; /* the channel of a synchronous id */
    struct scm_id *listener; /* a connection request's listening id */
    bool passive;            /* made for a request: its port is its listener's */
    struct scm_id *reqs;     /* synchronous listener: requests for rdma_get_request */
    bool bound_any;          /* bound to the wildcard address */
    char dir_path[128];      /* listener's directory entry, if any */
    uint8_t peer_gid[16];    /* the peer's GID: where its QP1 is */
    uint32_t local_comm_id, remote_comm_id;
    uint32_t local_psn, remote_psn, remote_qpn, remote_qkey;
    uint8_t resp_res, init_depth, retry_cnt, rnr_retry, mtu, ack_timeout;
    uint8_t tos;
    bool tos_set, reuseaddr, afonly;
    uint8_t timeout_exp; /* the peer's CM response timeout, 4.096 us * 2^exp */
    uint8_t max_retries; /* resends before giving up: ours, or the REQ's Max CM Retries */
    uint8_t retries_left;
    int backlog;               /* listener: CONNECT_REQUESTs it may leave unread */
    uint64_t ka_next_ns;       /* established: when the next liveness probe goes */
    uint8_t ka_missed;         /* probes unanswered in a row */
    bool ka_seen;              /* the peer answered a probe: its silence means something */
    uint64_t deadline_ns;      /* 0: none */
    uint8_t last[SCM_MAD_LEN]; /* the MAD a timer resends */
    struct ibv_sa_path_rec path;
    struct ibv_qp_init_attr *qp_attr; /* rdma_create_ep listener: for each request */
    uint32_t sidr_req_id;             /* SIDR: the requester's Request ID (IBA 12.11) */
    bool await_listener;              /* REQ or SIDR REQ held: no listener known yet */
    uint64_t await_until_ns;
};

/* The process's CM service. All fields under lock. */
/* A REQ that found no listener, held a while before its REJ (cm.c) */
enum { SCM_HELD_MAX = 32 };
struct scm_held {
    uint64_t until_ns; /* 0: a free slot */
    uint8_t sgid[16];
    uint32_t len;
    uint8_t mad[SCM_MAD_LEN];
};

struct scm_svc {
    pthread_mutex_t lock;
    bool up;
    int err;
    struct ibv_context *verbs;
    struct ibv_pd *pd;
    struct ibv_xrcd *xrcd; /* opened on the first XRC id */
    struct ibv_comp_channel *cch;
    struct ibv_cq *cq;  /* QP1's receives, on cch */
    struct ibv_cq *scq; /* QP1's sends (scm_svc_tx_reap) */
    struct ibv_qp *gsi;
    struct ibv_mr *mr;
    uint8_t *buf;                /* receive slots, then send slots */
    uint32_t tx_posted, tx_done; /* MADs handed to QP1, and their completions */
    uint8_t gid[16];
    uint64_t guid;
    uint8_t max_resp_res, max_init_depth; /* the device's RDMA read/atomic depths */
    unsigned long netns;
    int wake[2];
    pthread_t thread;
    struct scm_id *ids;
    uint32_t next_comm_id;
    uint16_t next_port;
    bool trace; /* SOFTRDMA_CM_TRACE: each MAD on stderr */
    /* from the environment, once (scm_cm_config; docs/CM.md) */
    uint8_t cm_timeout;    /* SOFTRDMA_CM_TIMEOUT: our CM response timeout exponent */
    uint8_t cm_retries;    /* SOFTRDMA_CM_RETRIES: Max CM Retries */
    uint64_t keepalive_ns; /* SOFTRDMA_CM_KEEPALIVE_MS: probe interval, 0 off */
    int max_backlog;       /* SOFTRDMA_CM_MAX_BACKLOG */
    struct scm_held held[SCM_HELD_MAX];
};

extern struct scm_svc scm_svc;

#endif
