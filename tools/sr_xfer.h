/* sr_xfer.h: a verified two-node transfer over the deterministic simulator,
 * shared by srdma-sim and the scenario tests.
 *
 * One run builds a simulator, two soft devices (node 0 the requester at
 * 10.0.0.1 or fd00::1, node 1 the responder at 10.0.0.2 or fd00::2; these
 * addresses exist only inside the simulator) joined by a link with the
 * configured rate, delay, queue and faults, connects one QP on each with
 * PSNs just below the 2^24 wrap, and runs `count` messages of one kind,
 * keeping `depth` of them in flight. Everything is checked as it completes:
 * every byte of every destination (each message has its own seeded pattern,
 * and the destination is poisoned with its complement first), a canary
 * after every slot, every work completion's status, opcode, wr_id order,
 * byte_len and immediate, and for atomics every returned original value, the
 * final target and the responder's count of executed atomics.
 *
 * No globals: the whole run lives in one context on sr_xfer_run's stack and
 * heap, so runs may be repeated (same config and seed: the same result,
 * counter for counter) or run side by side in one process.
 */
#ifndef SR_XFER_H
#define SR_XFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sr_engine.h"
#include "sr_sim.h"
#include "sr_sim_node.h"

enum sr_xfer_op {
    SR_XFER_SEND,
    SR_XFER_SEND_IMM,
    SR_XFER_WRITE,
    SR_XFER_WRITE_IMM,
    SR_XFER_READ,
    SR_XFER_CAS, /* a chain: compare = the current value, swap = the next */
    SR_XFER_FAA, /* a distinct addend per message */
    SR_XFER_OP_CNT,
};

/* Optional hook, called for each message just before its destination is
 * verified: dst is the destination (atomics: the 8-byte original value
 * returned), len its length. It exists so tests can prove the verifier is
 * not vacuous by damaging a byte. */
typedef void (*sr_xfer_hook_fn)(void *arg, uint64_t msg, uint8_t *dst, size_t len);

struct sr_xfer_cfg {
    enum sr_xfer_op op;
    enum sr_qp_type qp_type;     /* SR_QPT_RC; SR_QPT_UC for SEND/WRITE (+IMM) on a
                                    fault-free link only: UC drops what it loses */
    uint32_t size;               /* bytes per message (atomics: always 8) */
    uint64_t count;              /* messages */
    uint32_t depth;              /* messages in flight */
    uint32_t mtu;                /* path MTU: 256 .. 4096 */
    struct sr_sim_link_cfg link; /* both directions: rate, delay, queue, faults */
    uint64_t seed;               /* the simulator's faults and the data patterns */
    bool ipv6;
    uint8_t timeout;            /* transport timer exponent: 4.096 us * 2^timeout */
    uint8_t retry_cnt;          /* 0..7 */
    uint8_t rnr_retry;          /* 0..7, 7 = infinite */
    uint8_t min_rnr_timer;      /* IBA Table 45 code */
    uint32_t window_pkts;       /* requester window; 0 = the engine's default */
    bool sack;                  /* both engines: selective recovery (sr_engine_cfg.sack) */
    uint64_t qdelay_ns;         /* both engines: sr_engine_cfg.qdelay_ns (0: no cap) */
    const struct sr_cc_cfg *cc; /* both engines' congestion control; NULL: none */
    uint32_t start_psn;         /* requester's first PSN (the responder's is start_psn + 8) */
    uint64_t time_limit_ns;     /* simulated; 0 = automatic: 1 s + 1000x the ideal time
                                   + 8 full retry budgets */
    sr_xfer_hook_fn before_verify;
    void *hook_arg;
};

struct sr_xfer_result {
    bool ok;
    char error[256];                  /* the first error, "" when ok */
    uint64_t msgs_done;               /* messages completed and verified */
    uint64_t sim_ns;                  /* first post to the last completion, simulated */
    uint64_t end_ns;                  /* simulated time at the end, after the drain */
    uint64_t payload_bytes;           /* msgs_done * size */
    double goodput_bps;               /* payload bits per simulated second */
    struct sr_engine_stats eng[2];    /* [0] requester, [1] responder */
    struct sr_sim_link_stats link[2]; /* [0] requester -> responder, [1] back */
    struct sr_sim_node_stats node[2];
};

/* Defaults: RC SEND, 4096 bytes x 100, depth 16, MTU 4096, 10 Gb/s, 2 us
 * one-way, 16 MiB queue, no faults, seed 1, IPv4, timeout 10 (4.2 ms),
 * retry_cnt 7, rnr_retry 7, min_rnr_timer 1, start_psn 0xfffff0. */
void sr_xfer_cfg_init(struct sr_xfer_cfg *cfg);

/* Run one transfer. Returns 0 when it ran: res->ok says whether every check
 * passed, res->error names the first that did not. SR_ERR_INVAL for a
 * config that cannot run (res->error says why), SR_ERR_NOMEM. res is
 * zeroed first, padding included, so two results compare with memcmp. */
int sr_xfer_run(const struct sr_xfer_cfg *cfg, struct sr_xfer_result *res);

/* "send", "send_imm", "write", "write_imm", "read", "cas", "faa". */
const char *sr_xfer_op_name(enum sr_xfer_op op);
/* 0, or SR_ERR_INVAL for an unknown name. */
int sr_xfer_op_parse(const char *name, enum sr_xfer_op *out);

/* The connected pair under a run, for scenarios that drive the engines
 * themselves (error paths): sim, both nodes, and per node a PD, a send CQ, a
 * receive CQ and one QP in RTS, connected to the other. Uses cfg's qp_type,
 * depth (queue sizes), mtu, link, seed, ipv6, timers and PSNs. */
struct sr_xfer_pair {
    struct sr_sim *sim;
    struct sr_sim_node *node[2];
    struct sr_engine *eng[2];
    struct sr_pd *pd[2];
    struct sr_cq *scq[2], *rcq[2];
    struct sr_qp *qp[2];
};

/* 0 or a negative SR_ERR_*; on failure nothing is left allocated. */
int sr_xfer_pair_create(const struct sr_xfer_cfg *cfg, struct sr_xfer_pair *p);
/* The simulator goes first (it may still hold the nodes' callbacks), then
 * the nodes and with them every engine object. Registered buffers stay the
 * caller's. */
void sr_xfer_pair_destroy(struct sr_xfer_pair *p);

#endif
