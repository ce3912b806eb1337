/* ecn.h: the ECN echo between softrdma peers that agreed to selective
 * recovery (docs/WIRE.md, "The ECN echo"). The responder remembers that
 * a CE-marked request (RFC 3168 5) arrived and sets ECE on its next
 * response to that requester: the SACKETH flag SR_SACK_F_ECE on a SACK,
 * SR_BTH_RESV7_ECE beside the agreement bit on any other response (ACK,
 * NAK, READ response, ATOMIC ACKNOWLEDGE). The requester hands it to its
 * controller as sr_cc_on_ack's ecn_echo, with the acknowledgement it came
 * with, or alone when that acknowledged nothing new. A standard peer
 * never advertises the agreement and never gets either bit.
 *
 * This is the transport's analogue of TCP's ECE (RFC 3168 6.1.3), with
 * per-acknowledgement granularity as DCTCP uses it (RFC 8257 3.2): NSCC
 * (UET) reacts to ECN marks the acknowledgements carry, not to CNPs. The
 * DCQCN notification point keeps sending CNPs (congestion.c); the echo
 * adds to them, it does not replace them.
 *
 * The hold report rides the same way: a positive ACK to a requester that
 * agreed says, in Resv7 bits 4..0 (SR_ECN_HOLD_MASK), how long the
 * responder held it after the newest AckReq it acknowledges arrived (as
 * QUIC's ack_delay, RFC 9000 13.2.5), so that nscc can take the hold off
 * its RTT sample. */
#ifndef SR_ENGINE_ECN_H
#define SR_ENGINE_ECN_H

#include <stdbool.h>
#include <stdint.h>

struct sr_qp;
struct sr_pkt;

/* Resv7 bits 4..0 of a positive ACK with the agreement bit: the hold. */
#define SR_ECN_HOLD_MASK 0x1f

/* The 5-bit code of a hold (rounded down, saturated at 448 us), and the
 * hold a code stands for. */
uint8_t sr_ecn_hold_code(uint64_t hold_ns);
uint64_t sr_ecn_hold_ns(uint8_t code);

/* Responder: a request on qp arrived CE-marked. */
void sr_ecn_ce_rx(struct sr_qp *qp);
/* Responder: pkt, a response to a requester that agreed (the agreement bit
 * is being set in hdr, its encoding), leaves: carry a pending echo. */
void sr_ecn_echo_tx(struct sr_qp *qp, const struct sr_pkt *pkt, uint8_t *hdr);
/* Requester: a response arrived; note whether it carries the echo. */
void sr_ecn_echo_rx(struct sr_qp *qp, const struct sr_pkt *pkt);
/* Requester: the echo of the response being processed, once (true at
 * most once per response); congestion.c passes it with the ACK. */
bool sr_ecn_take(struct sr_qp *qp);
/* Requester: the hold the response being processed reports, once (0:
 * none); congestion.c passes it with the ACK. */
uint64_t sr_ecn_take_hold(struct sr_qp *qp);
/* Requester: the hold its controller has taken off RTT samples in all
 * (nscc; 0 for another algorithm). For tests and traces. */
uint64_t sr_ecn_hold_taken_ns(const struct sr_qp *qp);
/* Requester: the response is processed; an echo that came with no new
 * acknowledgement goes to the controller alone. */
void sr_ecn_echo_done(struct sr_qp *qp, uint64_t now_ns);

#endif
