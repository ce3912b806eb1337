/* bulk.h: the engine's internal side of same-host bulk data (sr_bulk.h):
 * what req.c, resp.c, qp.c and engine.c call, each from one spot. */
#ifndef SR_ENGINE_BULK_H
#define SR_ENGINE_BULK_H

#include "sr_bulk.h"

struct sr_qp;
struct sr_swqe;
struct sr_pd;
struct sr_pkt;

/* Per engine. */
struct sr_bulk_state {
    bool rx;             /* the packet being received came as a reference */
    bool tx;             /* the packet being sent is one (sr_tx_pkt.bulk) */
    uint64_t peer;       /* rx: where from */
    uint32_t seg_cnt;    /* rx: the reference, checked (sr_bulk_rx_prepare) */
    uint64_t sink_total; /* rx of a READ request: its sink's length */
    struct sr_bulk_seg seg[SR_MAX_SGE];
    struct sr_bulk_stats stats;
};

/* qp.c, at post: whether w goes by reference (w->bulk, then one PSN). */
void sr_bulk_shape(struct sr_qp *qp, struct sr_swqe *w);
/* req.c: turns the gathered source pieces iov[0..*cnt) of a bulk WQE into
 * its reference, written to ref (SR_MAX_SGE * SR_BULK_SEG_LEN bytes);
 * iov then holds the one piece that is the payload. Returns its length. */
uint32_t sr_bulk_encode(struct sr_iov *iov, uint32_t *cnt, uint8_t *ref);
/* The payload length a bulk WQE's packet is encoded with: the reference's
 * (ref_len), or 0 for a READ request (sr_bulk_tx_fix adds it). */
static inline uint32_t sr_bulk_payload_len(enum sr_wr_opcode op, uint32_t ref_len)
{
    return op == SR_WR_RDMA_READ ? 0 : ref_len;
}
/* engine.c, sending a packet by reference: its payload is all of iov
 * (a READ request's reference was left out of pkt->payload_len, which
 * its headers are encoded with: IBA 9.4.3, a READ request has none). */
void sr_bulk_tx_fix(struct sr_tx_pkt *t);
/* engine.c, for a request received as a reference: checks the reference
 * (opcode, pieces, lengths) and makes pkt describe the message it stands
 * for (payload NULL, payload_len its length). False: drop it. */
bool sr_bulk_rx_prepare(struct sr_engine *e, struct sr_pkt *pkt, int decode_err);
/* resp.c, placing a referenced message: into the checked target of a
 * WRITE, or scattered into a receive WQE's SGEs from byte off (each SGE
 * checked with LOCAL_WRITE; *prot set when one fails). False: not placed
 * (the copy failed, or protection). */
bool sr_bulk_pull(struct sr_engine *e, uint8_t *dst, uint32_t len);
/* resp.c, answering a READ that came with a reference to its sink (also
 * a duplicate): copies [src, src+len) into the sink and sends one READ
 * RESPONSE ONLY without payload. False: the request named no sink (the
 * caller answers it as usual). */
bool sr_bulk_read_respond(struct sr_qp *qp, const uint8_t *src, uint32_t len, uint32_t psn);
/* A READ request being received came with a reference to its sink: it
 * takes one PSN, and one response answers it. */
static inline bool sr_bulk_rx_read(const struct sr_bulk_state *b)
{
    return b->rx && b->sink_total;
}
/* comp.c: pkt, the response to a READ sent by reference, says the data
 * was written into the sink (a READ RESPONSE ONLY without payload that
 * came as a reference, never one from the wire). */
bool sr_bulk_read_landed(const struct sr_engine *e, const struct sr_pkt *pkt);
bool sr_bulk_pull_sge(struct sr_engine *e, struct sr_pd *pd, const struct sr_sge *sge,
                      uint32_t num_sge, uint32_t off, uint32_t len, bool *prot);

#endif
