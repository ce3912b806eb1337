/* congestion.h: the engine's side of congestion control (src/cc). One
 * struct sr_qp_cong per QP holds the reaction point (struct sr_cc: the
 * rate and window the algorithm decides) and the notification point
 * (struct sr_cc_np: when a CE-marked arrival is answered with a CNP).
 *
 * The engine calls in at six places (docs/CONGESTION.md, "Integration"):
 * QP creation and reset (sr_cong_init), the requester's send gate and each
 * packet it sends (sr_cong_gate, sr_cong_sent, sr_cong_window), the
 * completer's progress (sr_cong_acked), a received CNP (sr_cong_cnp_rx), a
 * CE-marked request (sr_cong_ce_rx) and the timer list (sr_cong_deadline,
 * sr_cong_advance). With the algorithm "none" every call returns at its
 * first test, so a device without congestion control behaves as before. */
#ifndef SR_ENGINE_CONGESTION_H
#define SR_ENGINE_CONGESTION_H

#include <stdbool.h>
#include <stdint.h>

#include "sr_cc.h"

struct sr_qp;
struct sr_swqe;
struct sr_pkt;

struct sr_qp_cong {
    struct sr_cc cc;
    struct sr_cc_np np;
    bool on;            /* the device's algorithm is not none */
    uint64_t pace_at;   /* held by the pacer until then; 0: not held */
    uint64_t tx_mark;   /* engine tx_bytes when the gate let a packet through */
    uint64_t cnps_rcvd; /* CNPs that reached this QP */
};

/* (Re)start the QP's controller at line rate (creation, reset to RESET). */
void sr_cong_init(struct sr_qp *qp, uint64_t now_ns);

/* The requester is about to send w's packet at qp->req.cur_psn: true when
 * the pacer holds it (the QP then has a deadline, sr_cong_deadline, and
 * sr_cong_advance runs the requester again when it passes). */
bool sr_cong_gate(struct sr_qp *qp, const struct sr_swqe *w, uint64_t now_ns);
/* The packet the gate let through has left (its bytes: what the engine
 * sent since the gate). */
void sr_cong_sent(struct sr_qp *qp, uint64_t now_ns);
/* The requester's window in packets: the engine's, or the controller's
 * window in path-MTU packets when that is smaller. */
uint32_t sr_cong_window(const struct sr_qp *qp, uint32_t window_pkts);
/* The ACK request cadence for a WQE whose ordinary one is every (packets):
 * fewer packets per request when the pacer spaces them so far apart that
 * every packets would take more than a quarter of the transport timeout. */
uint32_t sr_cong_ack_every(const struct sr_qp *qp, uint32_t every);
/* When the pacer lets the QP's next packet leave (0: it holds none). */
uint64_t sr_cong_paced_until(const struct sr_qp *qp);
/* The completer's progress: acked_pkts PSNs newly acknowledged, rtt_ns the
 * round-trip sample they gave (0: none). */
void sr_cong_acked(struct sr_qp *qp, uint32_t acked_pkts, uint64_t rtt_ns, uint64_t now_ns);
/* A CNP (BTH opcode 0x81) addressed to qp arrived from src_gid. */
void sr_cong_cnp_rx(struct sr_qp *qp, const uint8_t *src_gid, uint64_t now_ns);
/* A request that arrived with ECN CE (RFC 3168) at qp: the notification
 * point may answer with a CNP to the requester's QP. */
void sr_cong_ce_rx(struct sr_qp *qp, const struct sr_pkt *pkt, const uint8_t *src_gid,
                   uint64_t now_ns);
/* The earliest time sr_cong_advance has work (SR_CC_NO_DEADLINE: none). */
uint64_t sr_cong_deadline(const struct sr_qp *qp);
/* Time passed: the controller's timers, and a paced QP resumes. */
void sr_cong_advance(struct sr_qp *qp, uint64_t now_ns);

#endif
