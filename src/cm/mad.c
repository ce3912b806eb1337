/* mad.c: encode and decode CM MADs (IBA Vol 1 12.6) and the RDMA IP CM
 * header (Annex A11). Field offsets count from the end of the 24-byte MAD
 * header, as the tables of IBA 12.6 do; a field of fewer bits than its
 * container sits in the container's most significant bits. */
#include "scm_mad.h"

#include <string.h>

#include "sr_err.h"

/* Where each message's private data starts and how long it is. */
static const struct {
    uint16_t attr;
    uint8_t off, len;
} priv_tab[] = {
    {SCM_ATTR_REQ, 140, 92},  {SCM_ATTR_MRA, 10, 222},  {SCM_ATTR_REJ, 84, 148},
    {SCM_ATTR_REP, 36, 196},  {SCM_ATTR_RTU, 8, 224},   {SCM_ATTR_DREQ, 12, 220},
    {SCM_ATTR_DREP, 8, 224},  {SCM_ATTR_SIDR_REQ, 16, 216}, {SCM_ATTR_SIDR_REP, 96, 136},
};

static int priv_slot(uint16_t attr)
{
    for (size_t i = 0; i < sizeof(priv_tab) / sizeof(priv_tab[0]); i++)
        if (priv_tab[i].attr == attr)
            return (int)i;
    return -1;
}

size_t scm_mad_priv_len(uint16_t attr_id)
{
    int i = priv_slot(attr_id);
    return i < 0 ? 0 : priv_tab[i].len;
}

const char *scm_attr_name(uint16_t a)
{
    switch (a) {
    case SCM_ATTR_REQ:
        return "REQ";
    case SCM_ATTR_MRA:
        return "MRA";
    case SCM_ATTR_REJ:
        return "REJ";
    case SCM_ATTR_REP:
        return "REP";
    case SCM_ATTR_RTU:
        return "RTU";
    case SCM_ATTR_DREQ:
        return "DREQ";
    case SCM_ATTR_DREP:
        return "DREP";
    case SCM_ATTR_SIDR_REQ:
        return "SIDR_REQ";
    case SCM_ATTR_SIDR_REP:
        return "SIDR_REP";
    }
    return "?";
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static uint16_t get16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}
static uint64_t get64(const uint8_t *p)
{
    return (uint64_t)get32(p) << 32 | get32(p + 4);
}
static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}
static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8), p[1] = (uint8_t)v;
}
static void put64(uint8_t *p, uint64_t v)
{
    put32(p, (uint32_t)(v >> 32)), put32(p + 4, (uint32_t)v);
}
/* the 24 high bits of a 32-bit container, and the byte after them */
static uint32_t get24(const uint8_t *p)
{
    return get32(p) >> 8;
}
static void put24(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 16), p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)v;
}

int scm_mad_decode(const uint8_t *buf, size_t len, struct scm_mad *m)
{
    if (len < SCM_MAD_LEN)
        return SR_ERR_WIRE_SHORT;
    /* IBA 13.4.2: base version 1; the CM class, version 2 (12.6) */
    if (buf[0] != 1 || buf[1] != SCM_MGMT_CLASS || buf[2] != SCM_CLASS_VERSION ||
        buf[3] != SCM_METHOD_SEND)
        return SR_ERR_WIRE_FIELD;
    memset(m, 0, sizeof(*m));
    m->tid = get64(buf + 8);
    m->attr_id = get16(buf + 16);
    int slot = priv_slot(m->attr_id);
    if (slot < 0)
        return SR_ERR_WIRE_OPCODE;
    const uint8_t *d = buf + SCM_MAD_HDR_LEN;
    m->priv_len = priv_tab[slot].len;
    memcpy(m->priv, d + priv_tab[slot].off, m->priv_len);
    switch (m->attr_id) {
    case SCM_ATTR_REQ: /* IBA 12.6.5, Table 106 */
        m->local_comm_id = get32(d);
        m->service_id = get64(d + 8);
        m->ca_guid = get64(d + 16);
        m->qkey = get32(d + 28);
        m->qpn = get24(d + 32);
        m->resp_res = d[35];
        m->init_depth = d[39];
        m->remote_cm_timeout = d[43] >> 3;
        m->transport = (d[43] >> 1) & 3;
        m->flow_ctl = d[43] & 1;
        m->starting_psn = get24(d + 44);
        m->local_cm_timeout = d[47] >> 3;
        m->retry_cnt = d[47] & 7;
        m->pkey = get16(d + 48);
        m->mtu = d[50] >> 4;
        m->rnr_retry = d[50] & 7;
        m->max_cm_retries = d[51] >> 4;
        m->srq = (d[51] >> 3) & 1;
        m->local_lid = get16(d + 52);
        m->remote_lid = get16(d + 54);
        memcpy(m->local_gid, d + 56, 16);
        memcpy(m->remote_gid, d + 72, 16);
        m->flow_label = get32(d + 88) >> 12;
        m->packet_rate = d[91] & 0x3f;
        m->traffic_class = d[92];
        m->hop_limit = d[93];
        m->sl = d[94] >> 4;
        m->subnet_local = (d[94] >> 3) & 1;
        m->ack_timeout = d[95] >> 3;
        break;
    case SCM_ATTR_MRA: /* Table 107 */
        m->local_comm_id = get32(d);
        m->remote_comm_id = get32(d + 4);
        m->msg_kind = d[8] >> 6;
        m->service_timeout = d[9] >> 3;
        break;
    case SCM_ATTR_REJ: /* Table 108 */
        m->local_comm_id = get32(d);
        m->remote_comm_id = get32(d + 4);
        m->msg_kind = d[8] >> 6;
        m->ari_len = d[9] >> 1;
        if (m->ari_len > sizeof(m->ari))
            return SR_ERR_WIRE_FIELD;
        m->reason = get16(d + 10);
        memcpy(m->ari, d + 12, m->ari_len);
        break;
    case SCM_ATTR_REP: /* Table 110 */
        m->local_comm_id = get32(d);
        m->remote_comm_id = get32(d + 4);
        m->qkey = get32(d + 8);
        m->qpn = get24(d + 12);
        m->starting_psn = get24(d + 20);
        m->resp_res = d[24];
        m->init_depth = d[25];
        m->target_ack_delay = d[26] >> 3;
        m->failover = (d[26] >> 1) & 3;
        m->flow_ctl = d[26] & 1;
        m->rnr_retry = d[27] >> 5;
        m->srq = (d[27] >> 4) & 1;
        m->ca_guid = get64(d + 28);
        break;
    case SCM_ATTR_RTU:
    case SCM_ATTR_DREP:
        m->local_comm_id = get32(d);
        m->remote_comm_id = get32(d + 4);
        break;
    case SCM_ATTR_DREQ: /* Table 112 */
        m->local_comm_id = get32(d);
        m->remote_comm_id = get32(d + 4);
        m->qpn = get24(d + 8);
        break;
    case SCM_ATTR_SIDR_REQ: /* Table 119 */
        m->local_comm_id = get32(d);
        m->pkey = get16(d + 4);
        m->service_id = get64(d + 8);
        break;
    case SCM_ATTR_SIDR_REP: /* Table 120 */
        m->local_comm_id = get32(d);
        m->status = d[4];
        m->ari_len = d[5];
        if (m->ari_len > sizeof(m->ari))
            return SR_ERR_WIRE_FIELD;
        m->qpn = get24(d + 8);
        m->service_id = get64(d + 12);
        m->qkey = get32(d + 20);
        memcpy(m->ari, d + 24, m->ari_len);
        break;
    }
    return 0;
}

int scm_mad_encode(const struct scm_mad *m, uint8_t out[SCM_MAD_LEN])
{
    int slot = priv_slot(m->attr_id);
    if (slot < 0)
        return SR_ERR_INVAL;
    if (m->priv_len > priv_tab[slot].len || m->ari_len > sizeof(m->ari))
        return SR_ERR_NOSPACE;
    memset(out, 0, SCM_MAD_LEN);
    out[0] = 1;
    out[1] = SCM_MGMT_CLASS;
    out[2] = SCM_CLASS_VERSION;
    out[3] = SCM_METHOD_SEND;
    put64(out + 8, m->tid);
    put16(out + 16, m->attr_id);
    uint8_t *d = out + SCM_MAD_HDR_LEN;
    memcpy(d + priv_tab[slot].off, m->priv, m->priv_len);
    switch (m->attr_id) {
    case SCM_ATTR_REQ:
        put32(d, m->local_comm_id);
        put64(d + 8, m->service_id);
        put64(d + 16, m->ca_guid);
        put32(d + 28, m->qkey);
        put24(d + 32, m->qpn);
        d[35] = m->resp_res;
        d[39] = m->init_depth;
        d[43] = (uint8_t)((m->remote_cm_timeout & 0x1f) << 3 | (m->transport & 3) << 1 |
                          (m->flow_ctl & 1));
        put24(d + 44, m->starting_psn);
        d[47] = (uint8_t)((m->local_cm_timeout & 0x1f) << 3 | (m->retry_cnt & 7));
        put16(d + 48, m->pkey);
        d[50] = (uint8_t)((m->mtu & 0xf) << 4 | (m->rnr_retry & 7));
        d[51] = (uint8_t)((m->max_cm_retries & 0xf) << 4 | (m->srq & 1) << 3);
        put16(d + 52, m->local_lid);
        put16(d + 54, m->remote_lid);
        memcpy(d + 56, m->local_gid, 16);
        memcpy(d + 72, m->remote_gid, 16);
        put32(d + 88, (m->flow_label & 0xfffff) << 12 | (m->packet_rate & 0x3f));
        d[92] = m->traffic_class;
        d[93] = m->hop_limit;
        d[94] = (uint8_t)((m->sl & 0xf) << 4 | (m->subnet_local & 1) << 3);
        d[95] = (uint8_t)((m->ack_timeout & 0x1f) << 3);
        break;
    case SCM_ATTR_MRA:
        put32(d, m->local_comm_id);
        put32(d + 4, m->remote_comm_id);
        d[8] = (uint8_t)((m->msg_kind & 3) << 6);
        d[9] = (uint8_t)((m->service_timeout & 0x1f) << 3);
        break;
    case SCM_ATTR_REJ:
        put32(d, m->local_comm_id);
        put32(d + 4, m->remote_comm_id);
        d[8] = (uint8_t)((m->msg_kind & 3) << 6);
        d[9] = (uint8_t)(m->ari_len << 1);
        put16(d + 10, m->reason);
        memcpy(d + 12, m->ari, m->ari_len);
        break;
    case SCM_ATTR_REP:
        put32(d, m->local_comm_id);
        put32(d + 4, m->remote_comm_id);
        put32(d + 8, m->qkey);
        put24(d + 12, m->qpn);
        put24(d + 20, m->starting_psn);
        d[24] = m->resp_res;
        d[25] = m->init_depth;
        d[26] = (uint8_t)((m->target_ack_delay & 0x1f) << 3 | (m->failover & 3) << 1 |
                          (m->flow_ctl & 1));
        d[27] = (uint8_t)((m->rnr_retry & 7) << 5 | (m->srq & 1) << 4);
        put64(d + 28, m->ca_guid);
        break;
    case SCM_ATTR_RTU:
    case SCM_ATTR_DREP:
        put32(d, m->local_comm_id);
        put32(d + 4, m->remote_comm_id);
        break;
    case SCM_ATTR_DREQ:
        put32(d, m->local_comm_id);
        put32(d + 4, m->remote_comm_id);
        put24(d + 8, m->qpn);
        break;
    case SCM_ATTR_SIDR_REQ:
        put32(d, m->local_comm_id);
        put16(d + 4, m->pkey);
        put64(d + 8, m->service_id);
        break;
    case SCM_ATTR_SIDR_REP:
        put32(d, m->local_comm_id);
        d[4] = m->status;
        d[5] = m->ari_len;
        put24(d + 8, m->qpn);
        put64(d + 12, m->service_id);
        put32(d + 20, m->qkey);
        memcpy(d + 24, m->ari, m->ari_len);
        break;
    }
    return 0;
}

int scm_iphdr_decode(const uint8_t *priv, size_t len, struct scm_iphdr *h)
{
    if (len < SCM_IPHDR_LEN)
        return SR_ERR_WIRE_SHORT;
    /* A11.2.1: MajV.MinV 0.0; IPV 4 or 6 in the high nibble */
    if (priv[0] != 0)
        return SR_ERR_WIRE_FIELD;
    h->ip_ver = priv[1] >> 4;
    if (h->ip_ver != 4 && h->ip_ver != 6)
        return SR_ERR_WIRE_FIELD;
    h->src_port = get16(priv + 2);
    memcpy(h->src, priv + 4, 16);
    memcpy(h->dst, priv + 20, 16);
    return 0;
}

void scm_iphdr_encode(const struct scm_iphdr *h, uint8_t out[SCM_IPHDR_LEN])
{
    memset(out, 0, SCM_IPHDR_LEN);
    out[1] = (uint8_t)(h->ip_ver << 4);
    put16(out + 2, h->src_port);
    if (h->ip_ver == 4) {
        memcpy(out + 4 + 12, h->src + 12, 4);
        memcpy(out + 20 + 12, h->dst + 12, 4);
    } else {
        memcpy(out + 4, h->src, 16);
        memcpy(out + 20, h->dst, 16);
    }
}
