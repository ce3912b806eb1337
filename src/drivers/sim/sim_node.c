/* sim_node.c: glue between the simulator and an engine: RoCEv2
 * encapsulation and ICRC on the way out, ICRC check and decapsulation on
 * the way in. */
#include "sr_sim_node.h"
#include "sr_util.h"

#include <stdlib.h>

struct sr_sim_node {
    struct sr_sim *sim;
    struct sr_engine *eng;
    int id;
    uint8_t addr[16];
    struct sr_sim_node_stats stats;
    uint8_t buf[SR_IPV6_HDR_LEN + SR_UDP_HDR_LEN + SR_MAX_HDR_LEN + SR_MAX_PMTU + 8];
};

static const uint8_t v4_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

static bool is_v4(const uint8_t *gid)
{
    return memcmp(gid, v4_prefix, 12) == 0;
}

static int node_tx(void *ctx, const struct sr_tx_pkt *t)
{
    struct sr_sim_node *n = ctx;
    size_t tlen = (size_t)t->hdr_len + t->payload_len + t->pad_len + SR_ICRC_LEN;
    struct sr_l3_addr a = {.ipv6 = !(is_v4(n->addr) && is_v4(t->dgid)),
                           .src_port = t->src_port,
                           .ttl = 64,
                           .tos = 0x02 /* ECT(0): DCQCN-capable */};
    if (a.ipv6) {
        memcpy(a.src, n->addr, 16);
        memcpy(a.dst, t->dgid, 16);
    } else {
        memcpy(a.src, n->addr + 12, 4);
        memcpy(a.dst, t->dgid + 12, 4);
    }
    int hl = sr_l3_encode(&a, tlen, n->buf, sizeof(n->buf));
    if (hl < 0 || (size_t)hl + tlen > sizeof(n->buf)) {
        n->stats.tx_errors++;
        return -1;
    }
    uint8_t *p = n->buf + hl;
    memcpy(p, t->hdr, t->hdr_len);
    p += t->hdr_len;
    for (uint32_t i = 0; i < t->iov_cnt; i++) {
        memcpy(p, t->iov[i].base, t->iov[i].len);
        p += t->iov[i].len;
    }
    memset(p, 0, t->pad_len + SR_ICRC_LEN);
    size_t len = (size_t)hl + tlen;
    sr_icrc_fill(n->buf, len);
    n->stats.tx_pkts++;
    if (sr_sim_send(n->sim, n->id, n->buf, len) < 0) {
        n->stats.tx_errors++;
        return -1;
    }
    return 0;
}

static void node_rx(void *ctx, const uint8_t *pkt, size_t len, uint64_t now_ns)
{
    struct sr_sim_node *n = ctx;
    n->stats.rx_pkts++;
    int err = sr_icrc_verify(pkt, len);
    if (err == SR_ERR_WIRE_ICRC) {
        n->stats.rx_icrc_drops++;
        return;
    }
    if (err) {
        n->stats.rx_l3_drops++;
        return;
    }
    uint8_t src[16];
    size_t l3;
    /* the ECN field (RFC 3168 5), the low bits of the TOS or traffic class */
    bool ce = ((pkt[0] >> 4) == 4 ? pkt[1] : pkt[1] >> 4) % 4 == 3;
    if ((pkt[0] >> 4) == 4) {
        memcpy(src, v4_prefix, 12);
        memcpy(src + 12, pkt + 12, 4);
        l3 = SR_IPV4_HDR_LEN;
    } else {
        memcpy(src, pkt + 8, 16);
        l3 = SR_IPV6_HDR_LEN;
    }
    if (sr_get_be16(pkt + l3 + 2) != SR_ROCE_UDP_PORT) {
        n->stats.rx_l3_drops++;
        return;
    }
    l3 += SR_UDP_HDR_LEN;
    sr_engine_rx_ecn(n->eng, pkt + l3, len - l3, src, ce, now_ns);
}

static uint64_t node_deadline(void *ctx)
{
    struct sr_sim_node *n = ctx;
    return sr_engine_next_deadline(n->eng);
}

static void node_advance(void *ctx, uint64_t now_ns)
{
    struct sr_sim_node *n = ctx;
    sr_engine_advance(n->eng, now_ns);
}

static const struct sr_sim_node_ops node_ops = {
    .rx = node_rx,
    .next_deadline = node_deadline,
    .advance = node_advance,
};

int sr_sim_node_create(struct sr_sim *sim, const uint8_t addr[16], const struct sr_engine_cfg *cfg,
                       struct sr_sim_node **out)
{
    struct sr_sim_node *n = calloc(1, sizeof(*n));
    if (!n)
        return SR_ERR_NOMEM;
    n->sim = sim;
    memcpy(n->addr, addr, 16);
    struct sr_engine_cfg c = *cfg;
    memcpy(c.gid, addr, 16);
    c.ops.tx = node_tx;
    c.ops_ctx = n;
    int err = sr_engine_create(&c, &n->eng);
    if (err)
        goto err_free;
    err = sr_sim_add_node(sim, addr, &node_ops, n);
    if (err < 0)
        goto err_engine;
    n->id = err;
    *out = n;
    return 0;

err_engine:
    sr_engine_destroy(n->eng);
err_free:
    free(n);
    return err;
}

void sr_sim_node_destroy(struct sr_sim_node *n)
{
    if (!n)
        return;
    sr_engine_destroy(n->eng);
    free(n);
}

struct sr_engine *sr_sim_node_engine(const struct sr_sim_node *n)
{
    return n->eng;
}
int sr_sim_node_id(const struct sr_sim_node *n)
{
    return n->id;
}
void sr_sim_node_stats(const struct sr_sim_node *n, struct sr_sim_node_stats *out)
{
    *out = n->stats;
}
