/* pkt_builder.h: RoCEv2 transport packets for in-process engine tests,
 * built from one flat struct with src/wire's encoder: the BTH and whatever
 * extension headers the opcode carries (RETH, AETH, AtomicETH,
 * AtomicAckETH, DETH, ImmDt, IETH, XRCETH, by the wire's opcode table),
 * the payload, its pad, and an ICRC (IBA Annex A17.3.3) over the IPv4 and
 * UDP headers a datagram between the two GIDs would carry. The result runs
 * from the BTH through the ICRC: what a driver hands to sr_engine_rx.
 * Fields the opcode does not carry are ignored. */
#ifndef PKT_BUILDER_H
#define PKT_BUILDER_H

#include "sr_wire.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pb_pkt {
    uint8_t opcode; /* transport | operation, e.g. SR_OP_RC | SR_OP_WRITE_ONLY */
    uint32_t dest_qp, psn;
    bool ack_req, se;
    uint16_t pkey; /* 0: the default P_Key 0xffff */
    /* RETH, or AtomicETH (va, rkey) */
    uint64_t va;
    uint32_t rkey, dma_len;
    uint64_t swap_add, compare; /* AtomicETH */
    uint8_t syndrome;           /* AETH */
    uint32_t msn;               /* AETH */
    uint64_t atomic_orig;       /* AtomicAckETH */
    uint32_t imm;               /* ImmDt */
    uint32_t inv_rkey;          /* IETH */
    uint32_t qkey, src_qp;      /* DETH */
    uint32_t xrc_srqn;          /* XRCETH */
    const uint8_t *payload;
    uint32_t payload_len;
    /* the datagram's addresses (IPv4-mapped GIDs) and UDP source port, for
     * the ICRC; 0: the RoCEv2 port */
    const uint8_t *src_gid, *dst_gid;
    uint16_t sport;
};

/* Encodes p into out (cap bytes) with its ICRC. Returns the packet's
 * length (BTH through ICRC) or a negative SR_ERR_*. */
int pb_build(const struct pb_pkt *p, uint8_t *out, size_t cap);

/* Recomputes the ICRC of the packet buf[0, len) (after a test changed
 * header bytes), as pb_build would for p's addresses. 0 or SR_ERR_*. */
int pb_icrc_fill(const struct pb_pkt *p, uint8_t *buf, size_t len);

/* Does buf[0, len) carry the ICRC of p's addresses? */
bool pb_icrc_ok(const struct pb_pkt *p, const uint8_t *buf, size_t len);

#endif
