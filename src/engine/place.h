/* place.h: direct placement of out-of-order RDMA WRITE pieces, and of
 * SEND pieces that name their receive WQE (an RPETH, docs/WIRE.md), by the
 * responder (place.c, used by the out-of-order store ooo.c).
 *
 * A WRITE piece that arrives past a hole and whose target is known (its
 * own RETH, or the RETH of its message's FIRST, seen in order or out of
 * order) is checked as in-order processing would check it and written to
 * memory at once; the store keeps only its headers, and the drain runs it
 * through the responder without copying the payload again. */
#ifndef SR_PLACE_H
#define SR_PLACE_H

#include <stdbool.h>
#include <stdint.h>

struct sr_qp;
struct sr_pkt;

/* WRITE FIRSTs seen out of order, whose MIDDLEs may be placed. */
enum { SR_PLACE_FIRSTS = 4 };

struct sr_place_first {
    bool valid;
    uint32_t psn;  /* the FIRST's PSN */
    uint32_t rkey; /* its RETH */
    uint64_t va;
    uint32_t len;
};

/* The host address pkt (a request past the expected PSN) is placed at, or
 * NULL when it is not placed (kept as a copy and handled in order).
 * firsts: the store's FIRSTs seen out of order; a FIRST that passes its
 * checks is recorded there. Writes nothing. */
uint8_t *sr_place_target(struct sr_qp *qp, const struct sr_pkt *pkt,
                         struct sr_place_first firsts[SR_PLACE_FIRSTS]);

/* Scatters pkt (a SEND past the expected PSN with an RPETH) into the
 * receive WQE and offset its RPETH names, and returns true; false when it
 * is not placed (no RPETH, a shared receive queue, that WQE not posted,
 * the piece beyond it, a key that fails): kept as a copy and handled in
 * order. */
bool sr_place_send(struct sr_qp *qp, const struct sr_pkt *pkt);
/* Write len bytes of a request at psn to dst, leaving alone the bytes that
 * a request placed already at a later PSN covers (ooo.c): the later
 * request wins, as in PSN order. */
void sr_ooo_write(struct sr_qp *qp, uint32_t psn, uint8_t *dst, const uint8_t *src, uint32_t len);

/* The SACK coalesced to the end of the receive pass (ooo.c): when it is
 * due (SR_NO_DEADLINE: none), and sending it from sr_engine_advance. */
uint64_t sr_ooo_deadline(const struct sr_qp *qp);
/* An acknowledgement is owed while requests are kept (sr_ooo_sack_due):
 * a SACK now, or none while the drain runs (it acknowledges at its end). */
void sr_ooo_ack_owed(struct sr_qp *qp);
void sr_ooo_advance(struct sr_qp *qp, uint64_t now_ns);

#endif
