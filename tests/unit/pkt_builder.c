/* pkt_builder.c: see pkt_builder.h. */
#include "pkt_builder.h"

#include "sr_util.h"

#include <stdlib.h>
#include <string.h>

static struct sr_pkt to_wire(const struct pb_pkt *p)
{
    struct sr_pkt w = {0};
    w.bth.opcode = p->opcode;
    w.bth.se = p->se;
    w.bth.pkey = p->pkey ? p->pkey : 0xffff;
    w.bth.dest_qp = p->dest_qp;
    w.bth.ack_req = p->ack_req;
    w.bth.psn = p->psn;
    w.reth = (struct sr_reth){.va = p->va, .rkey = p->rkey, .dma_len = p->dma_len};
    w.atomic = (struct sr_atomic_eth){
        .va = p->va, .rkey = p->rkey, .swap_add = p->swap_add, .compare = p->compare};
    w.aeth = (struct sr_aeth){.syndrome = p->syndrome, .msn = p->msn};
    w.atomic_orig = p->atomic_orig;
    w.imm = p->imm;
    w.ieth_rkey = p->inv_rkey;
    w.deth = (struct sr_deth){.qkey = p->qkey, .src_qp = p->src_qp};
    w.xrc_srqn = p->xrc_srqn;
    w.payload = p->payload;
    w.payload_len = p->payload_len;
    return w;
}

/* The IPv4 + UDP header of the datagram that carries len transport bytes,
 * into ip; its length, or a negative SR_ERR_*. */
static int l3_for(const struct pb_pkt *p, size_t len, uint8_t *ip, size_t cap)
{
    struct sr_l3_addr a = {.src_port = p->sport ? p->sport : SR_ROCE_UDP_PORT,
                           .dst_port = SR_ROCE_UDP_PORT,
                           .ttl = 64};
    /* an IPv4-mapped GID's address is its last 4 bytes */
    memcpy(a.src, p->src_gid + 12, 4);
    memcpy(a.dst, p->dst_gid + 12, 4);
    return sr_l3_encode(&a, len, ip, cap);
}

/* The ICRC of buf[0, len) as the receiver of p's datagram computes it. */
static int icrc_of(const struct pb_pkt *p, const uint8_t *buf, size_t len, uint8_t out[4])
{
    if (len < SR_BTH_LEN + SR_ICRC_LEN)
        return SR_ERR_WIRE_SHORT;
    enum { L3 = SR_IPV4_HDR_LEN + SR_UDP_HDR_LEN };
    uint8_t *dgram = malloc(L3 + len);
    if (!dgram)
        return SR_ERR_NOMEM;
    int n = l3_for(p, len, dgram, L3);
    if (n == L3) {
        memcpy(dgram + L3, buf, len);
        n = sr_icrc_fill(dgram, L3 + len);
        memcpy(out, dgram + L3 + len - SR_ICRC_LEN, SR_ICRC_LEN);
    } else if (n >= 0) {
        n = SR_ERR_WIRE_L3;
    }
    free(dgram);
    return n < 0 ? n : 0;
}

int pb_icrc_fill(const struct pb_pkt *p, uint8_t *buf, size_t len)
{
    uint8_t icrc[SR_ICRC_LEN];
    int err = icrc_of(p, buf, len, icrc);
    if (err)
        return err;
    memcpy(buf + len - SR_ICRC_LEN, icrc, SR_ICRC_LEN);
    return 0;
}

bool pb_icrc_ok(const struct pb_pkt *p, const uint8_t *buf, size_t len)
{
    uint8_t icrc[SR_ICRC_LEN];
    return !icrc_of(p, buf, len, icrc) && !memcmp(buf + len - SR_ICRC_LEN, icrc, SR_ICRC_LEN);
}

int pb_build(const struct pb_pkt *p, uint8_t *out, size_t cap)
{
    struct sr_pkt w = to_wire(p);
    int n = sr_wire_encode(&w, out, cap);
    if (n < 0)
        return n;
    int err = pb_icrc_fill(p, out, (size_t)n);
    return err ? err : n;
}
