/* codec.c: decode and encode transport packets (BTH + extension headers +
 * payload + pad + ICRC slot) driven by the opcode table. Decode checks
 * lengths before reading anything and rejects each malformed-input class
 * with its own error. */
#include "sr_util.h"
#include "sr_wire.h"

/* BTH byte 1: SE(7) M(6) PadCnt(5:4) TVer(3:0). Byte 4: F(7) B(6) resv6.
 * Byte 8: A(7) resv7. (IBA 9.2; FECN/BECN as RoCEv2 uses them, Annex A17.9.) */
#define BTH_SE      0x80
#define BTH_MIG     0x40
#define BTH_FECN    0x80
#define BTH_BECN    0x40
#define BTH_ACK_REQ 0x80

static void decode_bth(const uint8_t *p, struct sr_bth *bth)
{
    bth->opcode = p[0];
    bth->se = p[1] & BTH_SE;
    bth->migreq = p[1] & BTH_MIG;
    bth->pad_cnt = (p[1] >> 4) & 3;
    bth->tver = p[1] & 0x0f;
    bth->pkey = sr_get_be16(p + 2);
    bth->fecn = p[4] & BTH_FECN;
    bth->becn = p[4] & BTH_BECN;
    bth->dest_qp = sr_get_be24(p + 5);
    bth->ack_req = p[8] & BTH_ACK_REQ;
    bth->resv7 = p[8] & 0x7f;
    bth->psn = sr_get_be24(p + 9);
}

/* AETH syndrome validity (IBA 9.7.5.1 Table 43): type 10 is reserved, and
 * NAK codes above 4 are reserved. Bit 7 is reserved-ignore. */
static bool aeth_syndrome_valid(uint8_t syn)
{
    switch (SR_AETH_TYPE(syn)) {
    case SR_AETH_ACK:
    case SR_AETH_RNR_NAK:
        return true;
    case SR_AETH_NAK:
        return SR_AETH_VALUE(syn) <= SR_NAK_INVALID_RD_REQ;
    default:
        return false;
    }
}

static int check_fields(const struct sr_opcode_info *info, const struct sr_pkt *pkt)
{
    /* Responses never request an acknowledgement (IBA 9.2.4: AckReq is a
     * requester-to-responder bit). */
    if ((info->flags & SR_OPF_RESPONSE) && pkt->bth.ack_req)
        return SR_ERR_WIRE_FIELD;
    if (pkt->hdrs & SR_HDR_BIT(SR_HDR_AETH)) {
        if (!aeth_syndrome_valid(pkt->aeth.syndrome))
            return SR_ERR_WIRE_FIELD;
        /* READ responses and ATOMIC ACKs carry a positive ACK syndrome only
         * (IBA 9.7.5: NAKs travel in the ACKNOWLEDGE opcode). */
        if (SR_OPCODE_OP(pkt->bth.opcode) != SR_OP_ACK &&
            SR_AETH_TYPE(pkt->aeth.syndrome) != SR_AETH_ACK)
            return SR_ERR_WIRE_FIELD;
    }
    return 0;
}

int sr_wire_decode(const uint8_t *buf, size_t len, uint32_t pmtu, struct sr_pkt *pkt)
{
    if (len < SR_BTH_LEN + SR_ICRC_LEN)
        return SR_ERR_WIRE_SHORT;
    const struct sr_opcode_info *info = sr_opcode_info(buf[0]);
    if (!info)
        return SR_ERR_WIRE_OPCODE;
    if (len < (size_t)info->hdr_len + SR_ICRC_LEN)
        return SR_ERR_WIRE_SHORT;

    memset(pkt, 0, sizeof(*pkt));
    decode_bth(buf, &pkt->bth);
    if (pkt->bth.tver != 0) /* IBA 9.2: TVer 0 is the only version; drop others */
        return SR_ERR_WIRE_TVER;

    pkt->hdrs = info->hdrs;
    const uint8_t *p;
    if (info->hdrs & SR_HDR_BIT(SR_HDR_XRCETH))
        pkt->xrc_srqn = sr_get_be24(buf + info->off[SR_HDR_XRCETH] + 1);
    if (info->hdrs & SR_HDR_BIT(SR_HDR_DETH)) {
        p = buf + info->off[SR_HDR_DETH];
        pkt->deth.qkey = sr_get_be32(p);
        pkt->deth.src_qp = sr_get_be24(p + 5);
    }
    if (info->hdrs & SR_HDR_BIT(SR_HDR_RETH)) {
        p = buf + info->off[SR_HDR_RETH];
        pkt->reth.va = sr_get_be64(p);
        pkt->reth.rkey = sr_get_be32(p + 8);
        pkt->reth.dma_len = sr_get_be32(p + 12);
    }
    if (info->hdrs & SR_HDR_BIT(SR_HDR_ATOMIC_ETH)) {
        p = buf + info->off[SR_HDR_ATOMIC_ETH];
        pkt->atomic.va = sr_get_be64(p);
        pkt->atomic.rkey = sr_get_be32(p + 8);
        pkt->atomic.swap_add = sr_get_be64(p + 12);
        pkt->atomic.compare = sr_get_be64(p + 20);
    }
    if (info->hdrs & SR_HDR_BIT(SR_HDR_AETH)) {
        p = buf + info->off[SR_HDR_AETH];
        pkt->aeth.syndrome = p[0];
        pkt->aeth.msn = sr_get_be24(p + 1);
    }
    if (info->hdrs & SR_HDR_BIT(SR_HDR_ATOMIC_ACK_ETH))
        pkt->atomic_orig = sr_get_be64(buf + info->off[SR_HDR_ATOMIC_ACK_ETH]);
    if (info->hdrs & SR_HDR_BIT(SR_HDR_SACKETH)) {
        p = buf + info->off[SR_HDR_SACKETH];
        pkt->sack.flags = p[0];
        pkt->sack.base_psn = sr_get_be24(p + 5);
        pkt->sack.dsack_psn = sr_get_be24(p + 2);
    }
    if (info->hdrs & SR_HDR_BIT(SR_HDR_IMMDT))
        pkt->imm = sr_get_be32(buf + info->off[SR_HDR_IMMDT]);
    if (info->hdrs & SR_HDR_BIT(SR_HDR_IETH))
        pkt->ieth_rkey = sr_get_be32(buf + info->off[SR_HDR_IETH]);
    size_t hl = info->hdr_len;
    if (sr_wire_has_rph(pkt->bth.opcode, pkt->bth.resv7)) {
        if (len < hl + SR_RPETH_LEN + SR_ICRC_LEN)
            return SR_ERR_WIRE_SHORT;
        pkt->hdrs |= SR_HDR_BIT(SR_HDR_RPETH);
        pkt->rph.msg = sr_get_be32(buf + hl);
        pkt->rph.off = sr_get_be32(buf + hl + 4);
        hl += SR_RPETH_LEN;
    }

    /* Payload and pad: the padded payload is a multiple of 4 bytes and the
     * pad is taken from its end (IBA 9.2.1 PadCnt). */
    size_t wire_len = len - hl - SR_ICRC_LEN;
    if (!(info->flags & SR_OPF_PAYLOAD)) {
        if (wire_len != 0)
            return SR_ERR_WIRE_PAYLOAD;
        if (pkt->bth.pad_cnt != 0)
            return SR_ERR_WIRE_PAD;
    } else {
        if (wire_len % 4 != 0 || pkt->bth.pad_cnt > wire_len)
            return SR_ERR_WIRE_PAD;
        /* FIRST and MIDDLE packets carry whole PMTUs, which are multiples
         * of 4: a pad there is malformed whatever the PMTU. */
        if ((info->flags & (SR_OPF_FIRST | SR_OPF_MIDDLE)) && pkt->bth.pad_cnt != 0)
            return SR_ERR_WIRE_PAD;
        pkt->payload = buf + hl;
        pkt->payload_len = (uint32_t)(wire_len - pkt->bth.pad_cnt);
    }

    int err = check_fields(info, pkt);
    if (err)
        return err;

    /* Length checks last: *pkt is complete, so a responder can NAK them. */
    if (pmtu) {
        if (pkt->payload_len > pmtu) /* IBA 9.7.5.1 length check: payload <= PMTU */
            return SR_ERR_WIRE_MTU;
        /* IBA 9.7.5.1 length check: FIRST/MIDDLE carry exactly one PMTU. */
        if ((info->flags & (SR_OPF_FIRST | SR_OPF_MIDDLE)) && pkt->payload_len != pmtu)
            return SR_ERR_WIRE_SEGMENT;
    }
    return (int)hl;
}

/* Three 32-bit words (a byte at a time, the compiler merges them). */
static void encode_bth(const struct sr_pkt *pkt, uint8_t *p)
{
    const struct sr_bth *b = &pkt->bth;
    uint32_t flags = (b->se ? BTH_SE : 0) | (b->migreq ? BTH_MIG : 0) |
                     (sr_wire_pad_len(pkt->payload_len) << 4) | (b->tver & 0x0f);
    uint32_t ecn = (b->fecn ? BTH_FECN : 0) | (b->becn ? BTH_BECN : 0);
    sr_put_be32(p, (uint32_t)b->opcode << 24 | flags << 16 | b->pkey);
    sr_put_be32(p + 4, ecn << 24 | b->dest_qp);
    sr_put_be32(p + 8,
                (uint32_t)((b->ack_req ? BTH_ACK_REQ : 0) | (b->resv7 & 0x7f)) << 24 | b->psn);
}

int sr_wire_encode_hdr(const struct sr_pkt *pkt, uint8_t *buf, size_t cap)
{
    const struct sr_opcode_info *info = sr_opcode_info(pkt->bth.opcode);
    if (!info)
        return SR_ERR_WIRE_OPCODE;
    size_t hl = info->hdr_len;
    bool rph = sr_wire_has_rph(pkt->bth.opcode, pkt->bth.resv7);
    if (rph)
        hl += SR_RPETH_LEN;
    if (cap < hl)
        return SR_ERR_NOSPACE;
    if (pkt->bth.dest_qp > SR_PSN_MASK || pkt->bth.psn > SR_PSN_MASK ||
        pkt->aeth.msn > SR_PSN_MASK || pkt->deth.src_qp > SR_PSN_MASK || pkt->bth.tver > 0x0f ||
        pkt->xrc_srqn > SR_PSN_MASK)
        return SR_ERR_RANGE;
    if (pkt->payload_len && !(info->flags & SR_OPF_PAYLOAD))
        return SR_ERR_RANGE;

    /* Reserved fields and the CNP pad are zero. A length known here is a
     * few vector stores; a variable one is a string instruction whose
     * start-up cost more than the rest of the encoding. */
    if (cap >= SR_MAX_HDR_LEN)
        memset(buf, 0, SR_MAX_HDR_LEN);
    else
        memset(buf, 0, hl);
    encode_bth(pkt, buf);
    uint8_t *p;
    if (info->hdrs & SR_HDR_BIT(SR_HDR_XRCETH))
        sr_put_be24(buf + info->off[SR_HDR_XRCETH] + 1, pkt->xrc_srqn);
    if (info->hdrs & SR_HDR_BIT(SR_HDR_DETH)) {
        p = buf + info->off[SR_HDR_DETH];
        sr_put_be32(p, pkt->deth.qkey);
        sr_put_be24(p + 5, pkt->deth.src_qp);
    }
    if (info->hdrs & SR_HDR_BIT(SR_HDR_RETH)) {
        p = buf + info->off[SR_HDR_RETH];
        sr_put_be64(p, pkt->reth.va);
        sr_put_be32(p + 8, pkt->reth.rkey);
        sr_put_be32(p + 12, pkt->reth.dma_len);
    }
    if (info->hdrs & SR_HDR_BIT(SR_HDR_ATOMIC_ETH)) {
        p = buf + info->off[SR_HDR_ATOMIC_ETH];
        sr_put_be64(p, pkt->atomic.va);
        sr_put_be32(p + 8, pkt->atomic.rkey);
        sr_put_be64(p + 12, pkt->atomic.swap_add);
        sr_put_be64(p + 20, pkt->atomic.compare);
    }
    if (info->hdrs & SR_HDR_BIT(SR_HDR_AETH)) {
        p = buf + info->off[SR_HDR_AETH];
        p[0] = pkt->aeth.syndrome;
        sr_put_be24(p + 1, pkt->aeth.msn);
    }
    if (info->hdrs & SR_HDR_BIT(SR_HDR_ATOMIC_ACK_ETH))
        sr_put_be64(buf + info->off[SR_HDR_ATOMIC_ACK_ETH], pkt->atomic_orig);
    if (info->hdrs & SR_HDR_BIT(SR_HDR_SACKETH)) {
        p = buf + info->off[SR_HDR_SACKETH];
        memset(p, 0, SR_SACKETH_LEN);
        p[0] = pkt->sack.flags;
        sr_put_be24(p + 5, pkt->sack.base_psn & SR_PSN_MASK);
        if (pkt->sack.flags & SR_SACK_F_DSACK)
            sr_put_be24(p + 2, pkt->sack.dsack_psn & SR_PSN_MASK);
    }
    if (info->hdrs & SR_HDR_BIT(SR_HDR_IMMDT))
        sr_put_be32(buf + info->off[SR_HDR_IMMDT], pkt->imm);
    if (info->hdrs & SR_HDR_BIT(SR_HDR_IETH))
        sr_put_be32(buf + info->off[SR_HDR_IETH], pkt->ieth_rkey);
    if (rph) {
        sr_put_be32(buf + info->hdr_len, pkt->rph.msg);
        sr_put_be32(buf + info->hdr_len + 4, pkt->rph.off);
    }
    return (int)hl;
}

size_t sr_wire_pkt_len(uint8_t opcode, uint32_t payload_len)
{
    const struct sr_opcode_info *info = sr_opcode_info(opcode);
    if (!info)
        return 0;
    return (size_t)info->hdr_len + payload_len + sr_wire_pad_len(payload_len) + SR_ICRC_LEN;
}

int sr_wire_encode(const struct sr_pkt *pkt, uint8_t *buf, size_t cap)
{
    size_t total = sr_wire_pkt_len(pkt->bth.opcode, pkt->payload_len);
    if (!total)
        return SR_ERR_WIRE_OPCODE;
    if (sr_wire_has_rph(pkt->bth.opcode, pkt->bth.resv7))
        total += SR_RPETH_LEN;
    if (total > cap)
        return SR_ERR_NOSPACE;
    if (pkt->payload_len && !pkt->payload)
        return SR_ERR_INVAL;
    int hlen = sr_wire_encode_hdr(pkt, buf, cap);
    if (hlen < 0)
        return hlen;
    if (pkt->payload_len)
        memcpy(buf + hlen, pkt->payload, pkt->payload_len);
    /* zero pad and ICRC slot */
    memset(buf + hlen + pkt->payload_len, 0, total - (size_t)hlen - pkt->payload_len);
    return (int)total;
}
