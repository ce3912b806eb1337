/* fabric.c: the fabric simulator: topology construction, per-hop
 * forwarding (ECMP, ECN, drop-tail, trimming, random loss), link failure
 * schedule, the hosts' engines and RoCEv2 encapsulation, flows and
 * collective steps (WRITEs with immediate started by arrivals), and the
 * event loop over three sources: packet arrivals (per-link FIFOs under a
 * heap of links, keyed by time and sequence), host engine deadlines (an
 * indexed min-heap, so a step costs O(log hosts) rather than a scan) and
 * control events (flow starts, link changes). Workloads are in
 * fabric_workload.c, metrics in fabric_metrics.c, the pcap tap in
 * fabric_pcap.c. */
#include "fabric_int.h"
#include "sr_engine.h"
#include "sr_util.h"
#include "sr_wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAB_NS_PER_S     1000000000ull
#define FAB_MAX_PORTS    1024
#define FAB_DEF_WINDOW   64
#define FAB_DEF_TIMEOUT  8
#define FAB_DEF_HEADROOM (64u * 1024)
#define FAB_RECV_WR_ID   UINT64_MAX
#define FAB_CONN_DEPTH   16 /* send and receive WQEs of a collective's QP */

/* ---- randomness: splitmix64 seeding xoshiro256** (Blackman & Vigna) ---- */

static void fab_rng_seed(uint64_t s[4], uint64_t seed)
{
    for (int i = 0; i < 4; i++) {
        seed += 0x9e3779b97f4a7c15ull;
        s[i] = fab_mix64(seed);
    }
}

static uint64_t fab_rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t fab_rng_next(uint64_t s[4])
{
    uint64_t result = fab_rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = fab_rotl(s[3], 45);
    return result;
}

static double fab_unit(uint64_t r)
{
    return (double)(r >> 11) * 0x1.0p-53;
}

/* ---- small helpers ---- */

static struct fab_pkt *fab_pkt_alloc(struct sr_fabric *f, size_t stored)
{
    struct fab_pkt *p;
    if (sizeof(*p) + stored > FAB_SMALL_PKT) {
        p = malloc(sizeof(*p) + stored);
        if (p)
            p->pooled = false;
        return p;
    }
    if (f->pool) {
        p = f->pool;
        memcpy(&f->pool, p, sizeof(void *));
        f->pool_cnt--;
    } else {
        p = malloc(FAB_SMALL_PKT);
        if (!p)
            return NULL;
    }
    p->pooled = true;
    return p;
}

static void fab_pkt_free(struct sr_fabric *f, struct fab_pkt *p)
{
    if (!p->pooled || f->pool_cnt >= FAB_POOL_MAX) {
        free(p);
        return;
    }
    memcpy(p, &f->pool, sizeof(void *));
    f->pool = p;
    f->pool_cnt++;
}

static uint64_t fab_add_sat(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - 1 - b ? UINT64_MAX - 1 : a + b;
}

static int fab_grow(void **arr, size_t *cap, size_t want, size_t elem)
{
    if (want <= *cap)
        return 0;
    size_t ncap = *cap ? *cap : 16;
    while (ncap < want) {
        if (ncap > SIZE_MAX / 2 / elem)
            return SR_ERR_NOMEM;
        ncap *= 2;
    }
    void *p = realloc(*arr, ncap * elem);
    if (!p)
        return SR_ERR_NOMEM;
    *arr = p;
    *cap = ncap;
    return 0;
}

static void fab_host_addr(uint32_t h, uint8_t gid[16])
{
    /* 10.0.0.0/8 holds 2^24 hosts; host id = the low 24 bits. */
    const uint8_t v4[4] = {10, (uint8_t)(h >> 16), (uint8_t)(h >> 8), (uint8_t)h};
    memset(gid, 0, 10);
    gid[10] = gid[11] = 0xff;
    memcpy(gid + 12, v4, 4);
}

static uint32_t fab_addr_host(const uint8_t *v4)
{
    return (uint32_t)v4[1] << 16 | (uint32_t)v4[2] << 8 | v4[3];
}

/* ---- packet arrivals: per-link FIFOs under a heap of links ----
 *
 * A link delivers in the order it accepted (serialization is FIFO and its
 * delay is fixed), so only each link's oldest packet can be next: the heap
 * holds busy links keyed by their head, not every packet in flight, which
 * keeps it small (links, not packets) and its entries hot in cache. */

static bool fab_k_before(const struct fab_lkey *x, const struct fab_lkey *y)
{
    return x->at_ns != y->at_ns ? x->at_ns < y->at_ns : x->seq < y->seq;
}

/* A 4-ary heap: half the depth of a binary one, and the four children of
 * a node share two cache lines, which matters once the heap (one entry
 * per busy link) outgrows the caches. */
#define FAB_HEAP_D 4

static void fab_l_up(struct sr_fabric *f, uint32_t i, struct fab_lkey k)
{
    while (i > 0) {
        uint32_t p = (i - 1) / FAB_HEAP_D;
        if (!fab_k_before(&k, &f->heap[p]))
            break;
        f->heap[i] = f->heap[p];
        i = p;
    }
    f->heap[i] = k;
}

static void fab_l_down(struct sr_fabric *f, uint32_t i, struct fab_lkey k)
{
    for (;;) {
        uint32_t c = FAB_HEAP_D * i + 1;
        if (c >= f->heap_cnt)
            break;
        uint32_t end = SR_MIN(c + FAB_HEAP_D, f->heap_cnt);
        for (uint32_t j = c + 1; j < end; j++)
            if (fab_k_before(&f->heap[j], &f->heap[c]))
                c = j;
        if (!fab_k_before(&f->heap[c], &k))
            break;
        f->heap[i] = f->heap[c];
        i = c;
    }
    f->heap[i] = k;
}

/* Room for one more packet on link id's FIFO, so the push cannot fail. */
static int fab_fly_reserve(struct fab_link *l)
{
    if (l->fly_cnt < l->fly_cap)
        return 0;
    uint32_t ncap = l->fly_cap ? l->fly_cap * 2 : 16;
    struct fab_ev *q = malloc((size_t)ncap * sizeof(*q));
    if (!q)
        return SR_ERR_NOMEM;
    for (uint32_t i = 0; i < l->fly_cnt; i++)
        q[i] = l->fly[(l->fly_head + i) & (l->fly_cap - 1)];
    free(l->fly);
    l->fly = q;
    l->fly_cap = ncap;
    l->fly_head = 0;
    return 0;
}

static void fab_fly_push(struct sr_fabric *f, uint32_t id, uint64_t at_ns, struct fab_pkt *pkt)
{
    struct fab_link *l = &f->links[id];
    struct fab_ev ev = {.at_ns = at_ns, .seq = f->seq++, .pkt = pkt, .len = pkt->len};
    l->fly[(l->fly_head + l->fly_cnt) & (l->fly_cap - 1)] = ev;
    l->q_cnt++;
    l->q_bytes += pkt->len;
    f->pending++;
    if (l->fly_cnt++ == 0)
        fab_l_up(f, f->heap_cnt++, (struct fab_lkey){ev.at_ns, ev.seq, pkt, id});
}

static uint64_t fab_fly_next(const struct sr_fabric *f)
{
    return f->heap_cnt ? f->heap[0].at_ns : UINT64_MAX;
}

static struct fab_ev fab_fly_pop(struct sr_fabric *f)
{
    uint32_t id = f->heap[0].link;
    struct fab_link *l = &f->links[id];
    struct fab_ev ev = l->fly[l->fly_head];
    if (sr_unlikely(l->watch))
        fab_watch_catch_up(l, f->now_ns); /* before the queue loses ev */
    if (l->q_cnt == l->fly_cnt) {
        /* Arrived, so serialized long ago; the lazy drain had not seen it. */
        l->q_cnt--;
        l->q_bytes -= ev.len;
    }
    l->fly_head = (l->fly_head + 1) & (l->fly_cap - 1);
    f->pending--;
    if (--l->fly_cnt) {
        const struct fab_ev *h = &l->fly[l->fly_head];
        fab_l_down(f, 0, (struct fab_lkey){h->at_ns, h->seq, h->pkt, id});
    } else if (--f->heap_cnt) {
        fab_l_down(f, 0, f->heap[f->heap_cnt]);
    }
    return ev;
}

/* ---- host deadline heap (indexed: a host's key changes after each call
 * into its engine), ties broken by host id for determinism ---- */

static bool fab_h_before(const struct sr_fabric *f, uint32_t a, uint32_t b)
{
    const struct fab_host *x = &f->hosts[a], *y = &f->hosts[b];
    return x->key != y->key ? x->key < y->key : a < b;
}

static void fab_h_set(struct sr_fabric *f, uint32_t pos, uint32_t h)
{
    f->hheap[pos] = h;
    f->hosts[h].hpos = pos;
}

static void fab_h_fix(struct sr_fabric *f, uint32_t h)
{
    uint32_t i = f->hosts[h].hpos;
    while (i > 0) {
        uint32_t p = (i - 1) / 2;
        if (!fab_h_before(f, h, f->hheap[p]))
            break;
        fab_h_set(f, i, f->hheap[p]);
        i = p;
    }
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= f->hheap_cnt)
            break;
        if (c + 1 < f->hheap_cnt && fab_h_before(f, f->hheap[c + 1], f->hheap[c]))
            c++;
        if (!fab_h_before(f, f->hheap[c], h))
            break;
        fab_h_set(f, i, f->hheap[c]);
        i = c;
    }
    fab_h_set(f, i, h);
}

static void fab_host_refresh(struct sr_fabric *f, struct fab_host *h)
{
    uint64_t k = sr_engine_next_deadline(h->eng);
    if (k != h->key) {
        h->key = k;
        fab_h_fix(f, h->id);
    }
}

/* ---- links ---- */

void fab_q_drain(struct fab_link *l, uint64_t now_ns)
{
    if (sr_unlikely(l->watch))
        fab_watch_catch_up(l, now_ns);
    fab_q_drain_raw(l, now_ns);
}

void fab_q_drain_raw(struct fab_link *l, uint64_t now_ns)
{
    /* Idle since the last packet finished: all of the queue has left,
     * without reading the ring (whose entries are long out of cache). */
    if (l->busy_until_ns <= now_ns) {
        l->q_cnt = 0;
        l->q_bytes = 0;
        return;
    }
    uint32_t mask = l->fly_cap - 1;
    while (l->q_cnt) {
        const struct fab_ev *e = &l->fly[(l->fly_head + l->fly_cnt - l->q_cnt) & mask];
        if (e->at_ns - l->cfg.delay_ns > now_ns)
            break;
        l->q_bytes -= e->len;
        l->q_cnt--;
    }
}

static uint64_t fab_serialize(struct fab_link *l, uint64_t now_ns, uint32_t len)
{
    if (now_ns > l->busy_until_ns) {
        l->busy_until_ns = now_ns;
        l->busy_rem = 0;
    }
    /* Remainder carried in units of 1/rate ns, so back-to-back packets run
     * at exactly the rate. */
    uint64_t units = (uint64_t)len * 8 * FAB_NS_PER_S + l->busy_rem;
    l->busy_until_ns = fab_add_sat(l->busy_until_ns, units / l->cfg.rate_bps);
    l->busy_rem = units % l->cfg.rate_bps;
    return l->busy_until_ns;
}

/* Set CE on an ECT IPv4 packet (RFC 3168: Not-ECT is never marked), with
 * the incremental checksum update of RFC 1624 as a router does it. */
static bool fab_ecn_mark(uint8_t *ip)
{
    unsigned ecn = ip[1] & 3;
    if (ecn != 1 && ecn != 2)
        return false;
    uint16_t old_word = sr_get_be16(ip);
    ip[1] |= 3;
    uint16_t new_word = sr_get_be16(ip);
    uint32_t sum = (uint32_t)(uint16_t)~sr_get_be16(ip + 10) + (uint16_t)~old_word + new_word;
    sr_put_be16(ip + 10, sr_inet_csum(ip, 0, sum));
    return true;
}

static bool fab_ecn_due(struct sr_fabric *f, struct fab_link *l)
{
    const struct sr_fabric_cfg *c = &f->cfg;
    if (!c->kmax_bytes || l->q_bytes <= c->kmin_bytes)
        return false;
    if (l->q_bytes >= c->kmax_bytes)
        return true;
    double p =
        c->pmax * (double)(l->q_bytes - c->kmin_bytes) / (double)(c->kmax_bytes - c->kmin_bytes);
    return fab_unit(fab_rng_next(l->rng)) < p;
}

/* Offer pkt to link id at now. Takes ownership: the packet is queued (and
 * its arrival scheduled) or freed. Returns whether it was accepted. */
static bool fab_link_send(struct sr_fabric *f, uint32_t id, struct fab_pkt *p, bool is_switch)
{
    struct fab_link *l = &f->links[id];
    uint64_t now = f->now_ns;
    fab_q_drain(l, now);
    if (!l->up) {
        l->st.down_drops++;
        fab_pkt_free(f, p);
        return false;
    }
    /* A host's own NIC queue never drops: the engine's window bounds it,
     * as a real NIC's send queue is bounded by backpressure. */
    uint64_t limit = is_switch ? l->cfg.buffer_bytes : 0;
    if (limit && l->q_bytes && l->q_bytes + p->len > limit) {
        uint64_t room = f->cfg.trim_headroom ? f->cfg.trim_headroom : FAB_DEF_HEADROOM;
        if (!f->cfg.trim || p->trimmed || p->hdr_len >= p->len ||
            l->q_bytes + p->hdr_len > limit + room) {
            l->st.drops++;
            if (sr_unlikely(l->watch))
                fab_watch_drop(l);
            fab_pkt_free(f, p);
            return false;
        }
        /* Cut the payload, keep the headers: the receiver learns of the
         * loss at once instead of by timeout (UET trimming). */
        p->len = p->hdr_len;
        p->stored = SR_MIN(p->stored, p->hdr_len);
        p->trimmed = true;
        sr_put_be16(p->data + 2, (uint16_t)p->len);
        sr_put_be16(p->data + SR_IPV4_HDR_LEN + 4, (uint16_t)(p->len - SR_IPV4_HDR_LEN));
        sr_put_be16(p->data + 10, 0);
        sr_put_be16(p->data + 10, sr_inet_csum(p->data, SR_IPV4_HDR_LEN, 0));
        l->st.trimmed++;
    }
    bool marked = is_switch && fab_ecn_due(f, l) && fab_ecn_mark(p->data);
    l->st.ecn_marked += marked;
    uint64_t first_bit = SR_MAX(now, l->busy_until_ns);
    uint64_t done = fab_serialize(l, now, p->len);
    if (fab_fly_reserve(l) < 0) {
        /* Out of memory: treat as a buffer drop so counters still add up. */
        l->st.drops++;
        fab_pkt_free(f, p);
        return false;
    }
    if ((int)id == f->tap_link)
        f->tap_fn(f->tap_ctx, first_bit, p->data, p->stored, p->len);
    uint64_t at = fab_add_sat(done, l->cfg.delay_ns);
    if (l->hold_ns && at % l->hold_ns)
        at = fab_add_sat(at, l->hold_ns - at % l->hold_ns); /* monotone: FIFO kept */
    fab_fly_push(f, id, at, p);
    p->link = id;
    p->epoch = l->epoch;
    l->st.tx_pkts++;
    l->st.tx_bytes += p->len;
    if (l->q_bytes > l->st.max_q_bytes)
        l->st.max_q_bytes = l->q_bytes;
    if (sr_unlikely(l->watch))
        fab_watch_enq(l, marked);
    return true;
}

/* ---- topology ---- */

static int fab_link_new(struct sr_fabric *f, int a, int b, const struct sr_fabric_link_cfg *cfg)
{
    for (int dir = 0; dir < 2; dir++) {
        struct fab_link *l = &f->links[f->link_cnt];
        memset(l, 0, sizeof(*l));
        l->from = dir ? b : a;
        l->to = dir ? a : b;
        l->cfg = *cfg;
        l->up = l->route_up = true;
        l->st.from = l->from;
        l->st.to = l->to;
        l->st.rate_bps = cfg->rate_bps;
        fab_rng_seed(l->rng, f->cfg.seed ^ fab_mix64((uint64_t)f->link_cnt + 1));
        struct fab_node *n = &f->nodes[l->from];
        n->ports[n->port_cnt++] = f->link_cnt++;
    }
    return 0;
}

/* Ports are added in the order the routing functions index them: a leaf
 * or edge has its hosts first, then its uplinks; an agg its edges, then its
 * cores; a spine or core one port per leaf or pod. */
static int fab_build(struct sr_fabric *f)
{
    const struct sr_fabric_cfg *c = &f->cfg;
    uint32_t sw, links;
    uint32_t *deg;
    if (c->topo == SR_FABRIC_LEAF_SPINE) {
        f->host_cnt = c->leaves * c->hosts_per_leaf;
        sw = c->leaves + c->spines;
        links = 2 * (f->host_cnt + c->leaves * c->spines);
    } else {
        uint32_t h = c->k / 2;
        f->half = h;
        f->host_cnt = c->k * h * h;
        sw = c->k * c->k + h * h;
        links = 2 * 3 * f->host_cnt;
    }
    f->node_cnt = f->host_cnt + sw;
    f->nodes = calloc(f->node_cnt, sizeof(*f->nodes));
    f->links = calloc(links, sizeof(*f->links));
    f->hosts = calloc(f->host_cnt, sizeof(*f->hosts));
    deg = calloc(f->node_cnt, sizeof(*deg));
    if (!f->nodes || !f->links || !f->hosts || !deg) {
        free(deg);
        return SR_ERR_NOMEM;
    }
    uint32_t H = f->host_cnt;
    for (uint32_t i = 0; i < H; i++)
        deg[i] = 1;
    if (c->topo == SR_FABRIC_LEAF_SPINE) {
        for (uint32_t l = 0; l < c->leaves; l++) {
            deg[H + l] = c->hosts_per_leaf + c->spines;
            f->nodes[H + l].kind = SR_FABRIC_LEAF;
        }
        for (uint32_t s = 0; s < c->spines; s++) {
            deg[H + c->leaves + s] = c->leaves;
            f->nodes[H + c->leaves + s].kind = SR_FABRIC_SPINE;
        }
    } else {
        for (uint32_t i = H; i < f->node_cnt; i++)
            deg[i] = c->k;
        for (uint32_t i = 0; i < c->k * f->half; i++) {
            f->nodes[H + i].kind = SR_FABRIC_LEAF;
            f->nodes[H + c->k * f->half + i].kind = SR_FABRIC_AGG;
        }
        for (uint32_t i = 0; i < f->half * f->half; i++)
            f->nodes[H + c->k * c->k + i].kind = SR_FABRIC_CORE;
    }
    for (uint32_t i = 0; i < f->node_cnt; i++) {
        f->nodes[i].ports = calloc(deg[i], sizeof(uint32_t));
        if (!f->nodes[i].ports) {
            free(deg);
            return SR_ERR_NOMEM;
        }
        f->nodes[i].salt = fab_mix64(c->seed ^ fab_mix64(0x5a17ull + i));
    }
    free(deg);
    if (c->topo == SR_FABRIC_LEAF_SPINE) {
        uint32_t P = c->hosts_per_leaf, L = c->leaves;
        for (uint32_t h = 0; h < H; h++)
            fab_link_new(f, (int)h, (int)(H + h / P), &c->host_link);
        for (uint32_t l = 0; l < L; l++)
            for (uint32_t s = 0; s < c->spines; s++)
                fab_link_new(f, (int)(H + l), (int)(H + L + s), &c->fabric_link);
    } else {
        uint32_t k = c->k, h = f->half;
        uint32_t edge0 = H, agg0 = H + k * h, core0 = H + k * k;
        for (uint32_t i = 0; i < H; i++)
            fab_link_new(f, (int)i, (int)(edge0 + i / h), &c->host_link);
        for (uint32_t p = 0; p < k; p++)
            for (uint32_t e = 0; e < h; e++)
                for (uint32_t a = 0; a < h; a++)
                    fab_link_new(f, (int)(edge0 + p * h + e), (int)(agg0 + p * h + a),
                                 &c->fabric_link);
        /* Agg a of every pod reaches cores a*h .. a*h + h - 1; adding them
         * core by core in pod order gives each core its pods in order. */
        for (uint32_t a = 0; a < h; a++)
            for (uint32_t j = 0; j < h; j++)
                for (uint32_t p = 0; p < k; p++)
                    fab_link_new(f, (int)(agg0 + p * h + a), (int)(core0 + a * h + j),
                                 &c->fabric_link);
    }
    return 0;
}

/* ---- routing: the live next hops toward dst; ECMP picks one by hash ---- */

static bool fab_ok(const struct sr_fabric *f, const struct fab_node *n, uint32_t port)
{
    return f->links[n->ports[port]].route_up;
}

static const struct fab_node *fab_peer(const struct sr_fabric *f, const struct fab_node *n,
                                       uint32_t port)
{
    return &f->nodes[f->links[n->ports[port]].to];
}

/* Fat-tree: can agg (pod p, index a) still reach host dst? */
static bool fab_ft_agg_reach(const struct sr_fabric *f, uint32_t agg, uint32_t dst)
{
    uint32_t h = f->half, hp = h * h;
    uint32_t H = f->host_cnt, k = f->cfg.k;
    const struct fab_node *n = &f->nodes[agg];
    uint32_t p = (agg - H - k * h) / h, a = (agg - H - k * h) % h;
    uint32_t dp = dst / hp, de = (dst / h) % h;
    if (dp == p)
        return fab_ok(f, n, de);
    for (uint32_t j = 0; j < h; j++) {
        if (!fab_ok(f, n, h + j))
            continue;
        const struct fab_node *core = fab_peer(f, n, h + j);
        if (!fab_ok(f, core, dp))
            continue;
        uint32_t agg2 = H + k * h + dp * h + a;
        if (fab_ok(f, &f->nodes[agg2], de))
            return true;
    }
    return false;
}

/* Fills cand with the port numbers that lead to dst; returns the count. */
static uint32_t fab_route(const struct sr_fabric *f, uint32_t node, uint32_t dst, uint32_t *cand)
{
    const struct sr_fabric_cfg *c = &f->cfg;
    const struct fab_node *n = &f->nodes[node];
    uint32_t H = f->host_cnt, cnt = 0;
    if (c->topo == SR_FABRIC_LEAF_SPINE) {
        uint32_t P = c->hosts_per_leaf, L = c->leaves, dl = dst / P;
        if (n->kind == SR_FABRIC_SPINE) {
            if (fab_ok(f, n, dl))
                cand[cnt++] = dl;
            return cnt;
        }
        if (node - H == dl) {
            if (fab_ok(f, n, dst % P))
                cand[cnt++] = dst % P;
            return cnt;
        }
        for (uint32_t s = 0; s < c->spines; s++)
            if (fab_ok(f, n, P + s) && fab_ok(f, &f->nodes[H + L + s], dl))
                cand[cnt++] = P + s;
        return cnt;
    }
    uint32_t h = f->half, k = c->k;
    uint32_t dp = dst / (h * h), de = (dst / h) % h;
    switch (n->kind) {
    case SR_FABRIC_LEAF: {
        uint32_t idx = node - H;
        if (idx == dp * h + de) {
            if (fab_ok(f, n, dst % h))
                cand[cnt++] = dst % h;
            return cnt;
        }
        for (uint32_t a = 0; a < h; a++)
            if (fab_ok(f, n, h + a) && fab_ft_agg_reach(f, f->links[n->ports[h + a]].to, dst))
                cand[cnt++] = h + a;
        return cnt;
    }
    case SR_FABRIC_AGG: {
        uint32_t p = (node - H - k * h) / h, a = (node - H - k * h) % h;
        if (p == dp) {
            if (fab_ok(f, n, de))
                cand[cnt++] = de;
            return cnt;
        }
        for (uint32_t j = 0; j < h; j++) {
            if (!fab_ok(f, n, h + j))
                continue;
            const struct fab_node *core = fab_peer(f, n, h + j);
            if (fab_ok(f, core, dp) && fab_ok(f, &f->nodes[H + k * h + dp * h + a], de))
                cand[cnt++] = h + j;
        }
        return cnt;
    }
    default: /* core */
        if (fab_ok(f, n, dp))
            cand[cnt++] = dp;
        return cnt;
    }
}

/* fab_route while routing believes every link is up: the candidates are
 * then always the contiguous ports [*base, *base + count), the same set
 * fab_route would list, without checking each onward path. */
static uint32_t fab_route_all_up(const struct sr_fabric *f, uint32_t node, uint32_t dst,
                                 uint32_t *base)
{
    const struct sr_fabric_cfg *c = &f->cfg;
    const struct fab_node *n = &f->nodes[node];
    uint32_t H = f->host_cnt;
    if (c->topo == SR_FABRIC_LEAF_SPINE) {
        uint32_t P = c->hosts_per_leaf, dl = dst / P;
        if (n->kind == SR_FABRIC_SPINE)
            *base = dl;
        else if (node - H == dl)
            *base = dst % P;
        else
            return *base = P, c->spines;
        return 1;
    }
    uint32_t h = f->half, k = c->k;
    uint32_t dp = dst / (h * h), de = (dst / h) % h;
    switch (n->kind) {
    case SR_FABRIC_LEAF:
        if (node - H == dp * h + de) {
            *base = dst % h;
            return 1;
        }
        *base = h;
        return h;
    case SR_FABRIC_AGG:
        if ((node - H - k * h) / h == dp) {
            *base = de;
            return 1;
        }
        *base = h;
        return h;
    default:
        *base = dp;
        return 1;
    }
}

static void fab_switch_rx(struct sr_fabric *f, uint32_t node, struct fab_pkt *p)
{
    struct fab_node *n = &f->nodes[node];
    n->in++;
    if (!f->routes_down) {
        uint32_t base, cnt = fab_route_all_up(f, node, p->dst, &base);
        uint32_t pick = cnt == 1 ? 0 : (uint32_t)(fab_mix64(p->flow_hash ^ n->salt) % cnt);
        if (!fab_link_send(f, n->ports[base + pick], p, true))
            n->dropped++;
        return;
    }
    uint32_t cand[FAB_MAX_PORTS];
    uint32_t cnt = fab_route(f, node, p->dst, cand);
    if (!cnt) {
        n->noroute++;
        n->dropped++;
        fab_pkt_free(f, p);
        return;
    }
    uint32_t pick = cnt == 1 ? 0 : (uint32_t)(fab_mix64(p->flow_hash ^ n->salt) % cnt);
    if (!fab_link_send(f, n->ports[cand[pick]], p, true))
        n->dropped++;
}

/* ---- hosts ---- */

static int fab_host_tx(void *ctx, const struct sr_tx_pkt *t)
{
    struct fab_host *h = ctx;
    struct sr_fabric *f = h->f;
    size_t tlen = (size_t)t->hdr_len + t->payload_len + t->pad_len + SR_ICRC_LEN;
    struct sr_l3_addr a = {.src_port = t->src_port, .ttl = 64, .tos = 0x02 /* ECT(0) */};
    fab_host_addr(h->id, a.src);
    memcpy(a.src, a.src + 12, 4);
    memcpy(a.dst, t->dgid + 12, 4);
    uint32_t dst = fab_addr_host(t->dgid + 12);
    if (dst >= f->host_cnt || dst == h->id)
        return -1;
    uint8_t l3[SR_IPV6_HDR_LEN + SR_UDP_HDR_LEN];
    int hl = sr_l3_encode(&a, tlen, l3, sizeof(l3));
    if (hl != FAB_L3_LEN || (size_t)hl + tlen > FAB_PKT_MAX)
        return -1;
    size_t len = (size_t)hl + tlen;
    size_t hdr = (size_t)hl + t->hdr_len;
    /* Header-only mode drops payload that is data; a SACK's bitmap is
     * control (docs/WIRE.md), which the requester reads: it travels whole. */
    bool full = f->cfg.mode == SR_FABRIC_VERIFIED || t->hdr[0] == SR_OP_SACK;
    size_t stored = full ? len : hdr;
    struct fab_pkt *p = fab_pkt_alloc(f, stored);
    if (!p)
        return -1;
    memcpy(p->data, l3, (size_t)hl);
    memcpy(p->data + hl, t->hdr, t->hdr_len);
    if (full) {
        uint8_t *q = p->data + hdr;
        for (uint32_t i = 0; i < t->iov_cnt; i++) {
            memcpy(q, t->iov[i].base, t->iov[i].len);
            q += t->iov[i].len;
        }
        memset(q, 0, t->pad_len + SR_ICRC_LEN);
        sr_icrc_fill(p->data, len);
    }
    p->len = (uint32_t)len;
    p->stored = (uint32_t)stored;
    p->hdr_len = (uint32_t)hdr;
    p->dst = dst;
    p->trimmed = false;
    /* The 5-tuple: addresses, protocol (always UDP) and both ports. */
    uint64_t w0 = (uint64_t)sr_get_be32(p->data + 12) << 32 | sr_get_be32(p->data + 16);
    uint64_t w1 = (uint64_t)p->data[9] << 32 | sr_get_be32(p->data + SR_IPV4_HDR_LEN);
    p->flow_hash = fab_mix64(w0 ^ fab_mix64(w1));
    h->tx++;
    if (f->cfg.host_series && f->cfg.sample_ns)
        fab_series_add(f, &h->sent, len);
    fab_link_send(f, f->nodes[h->id].ports[0], p, false);
    return 0;
}

static void fab_host_poll(struct sr_fabric *f, struct fab_host *h);

static uint64_t fab_discards(const struct sr_engine_stats *s)
{
    return s->rx_drop_malformed + s->rx_drop_no_qp + s->rx_drop_bad_peer + s->rx_drop_other +
           s->rx_duplicate + s->seq_naks_sent + s->rnr_naks_sent + s->err_naks_sent;
}

static void fab_sample(struct sr_fabric *f, uint64_t bytes)
{
    size_t i = (size_t)(f->now_ns / f->cfg.sample_ns);
    if (i >= f->series_cnt) {
        if (fab_grow((void **)&f->series, &f->series_cap, i + 1, sizeof(*f->series)) < 0)
            return;
        memset(f->series + f->series_cnt, 0, (i + 1 - f->series_cnt) * sizeof(*f->series));
        f->series_cnt = i + 1;
    }
    f->series[i] += bytes;
}

static void fab_host_rx(struct sr_fabric *f, struct fab_host *h, struct fab_pkt *p)
{
    h->rx++;
    if (p->trimmed) {
        /* The engine has no trim handling yet: the header is counted as
         * the loss signal it would be and discarded. */
        h->rx_trimmed++;
        return;
    }
    const uint8_t *pkt = p->data;
    if (f->cfg.mode == SR_FABRIC_VERIFIED) {
        if (sr_icrc_verify(p->data, p->len) != 0) {
            h->rx_bad++;
            return;
        }
    } else {
        /* The payload bytes are whatever earlier headers left in the
         * scratch: nobody checks them, and they are deterministic. */
        memcpy(f->rx_buf, p->data, p->stored);
        pkt = f->rx_buf;
    }
    uint8_t src[16];
    fab_host_addr(fab_addr_host(pkt + 12), src);
    /* CE (RFC 3168 5) in the IPv4 TOS: DCQCN's notification point */
    bool ce = (pkt[1] & 3) == 3;
    uint32_t payload = p->len - p->hdr_len;
    if (f->cfg.sample_ns && payload > SR_ICRC_LEN && pkt[FAB_L3_LEN] != SR_OP_SACK) {
        /* Delivered = the engine kept it: none of its discard counters
         * (out of sequence after a NAK, duplicate, ...) moved. */
        struct sr_engine_stats a, b;
        sr_engine_stats(h->eng, &a);
        sr_engine_rx_ecn(h->eng, pkt + FAB_L3_LEN, p->len - FAB_L3_LEN, src, ce, f->now_ns);
        sr_engine_stats(h->eng, &b);
        if (fab_discards(&a) == fab_discards(&b)) {
            fab_sample(f, payload - SR_ICRC_LEN);
            uint32_t from = fab_addr_host(pkt + 12);
            if (f->cfg.host_series && from < f->host_cnt)
                fab_series_add(f, &f->hosts[from].got, payload - SR_ICRC_LEN);
        }
    } else {
        sr_engine_rx_ecn(h->eng, pkt + FAB_L3_LEN, p->len - FAB_L3_LEN, src, ce, f->now_ns);
    }
    fab_host_poll(f, h);
    fab_host_refresh(f, h);
}

static int fab_flow_start(struct sr_fabric *f, uint32_t id);
static int fab_post_recv(struct fab_conn *c);
static void fab_conn_sent(struct sr_fabric *f, struct fab_conn *c);

static void fab_flow_verify(struct sr_fabric *f, struct fab_flow *fl)
{
    if (f->cfg.mode != SR_FABRIC_VERIFIED)
        return;
    const uint8_t *s = f->hosts[fl->src].src_buf;
    const uint8_t *d = f->hosts[fl->dst].dst_buf + fl->dst_off;
    if (memcmp(s, d, fl->bytes) != 0) {
        fl->ok = false;
        fl->bad = true;
    }
}

/* A step's data is in place at its receiver: verify it, account the
 * collective, and start the steps that waited for it (their source is this
 * receiver). */
static void fab_flow_arrived(struct sr_fabric *f, uint32_t id)
{
    struct fab_flow *fl = &f->flows[id];
    if (fl->arrive_ns != UINT64_MAX)
        return;
    fl->arrive_ns = f->now_ns;
    fab_flow_verify(f, fl);
    struct fab_coll *c = &f->colls[fl->coll - 1];
    c->arrived++;
    if (c->arrived == c->flows)
        c->end_ns = f->now_ns;
    for (int32_t s = fl->succ; s >= 0; s = f->flows[s].sib) {
        f->flows[s].start_ns = f->now_ns;
        fab_flow_start(f, (uint32_t)s);
    }
}

static void fab_host_poll(struct sr_fabric *f, struct fab_host *h)
{
    if (!h->flows_out && !h->imm_in)
        return;
    struct sr_wc wc[16];
    int n;
    while ((n = sr_cq_poll(h->cq, 16, wc)) > 0) {
        for (int i = 0; i < n; i++) {
            if (wc[i].wr_id == FAB_RECV_WR_ID) {
                /* The immediate names the step (fab_flow_start); a flushed
                 * receive carries none. */
                if (wc[i].status == SR_WC_SUCCESS && wc[i].opcode == SR_WC_RECV_RDMA_WITH_IMM &&
                    wc[i].imm < f->flow_cnt && f->flows[wc[i].imm].coll &&
                    f->flows[wc[i].imm].dst == h->id) {
                    struct fab_conn *c = &f->conns[f->flows[wc[i].imm].conn];
                    if (c->recv_posted < c->recvs)
                        fab_post_recv(c);
                    fab_flow_arrived(f, wc[i].imm);
                }
                continue;
            }
            if (wc[i].wr_id >= f->flow_cnt)
                continue;
            struct fab_flow *fl = &f->flows[wc[i].wr_id];
            if (fl->done)
                continue;
            fl->done = true;
            fl->end_ns = f->now_ns;
            /* A step was verified when its data arrived. */
            fl->ok = wc[i].status == SR_WC_SUCCESS && !fl->bad;
            if (fl->ok && !fl->coll)
                fab_flow_verify(f, fl);
            f->flows_done++;
            fab_conn_sent(f, &f->conns[fl->conn]);
        }
    }
}

/* Source pattern of host s: differs between hosts and offsets so a
 * misplaced or cross-delivered write is caught; one hash per 8 bytes. */
static void fab_pattern_fill(uint8_t *buf, uint64_t len, uint32_t s)
{
    for (uint64_t i = 0; i < len; i += 8) {
        uint64_t m = fab_mix64((uint64_t)s << 40 ^ (i >> 3));
        uint64_t n = SR_MIN(8, len - i);
        for (uint64_t j = 0; j < n; j++)
            buf[i + j] = (uint8_t)(m >> (8 * j));
    }
}

static int fab_host_init(struct sr_fabric *f, struct fab_host *h)
{
    struct sr_engine_cfg ec = {0};
    fab_host_addr(h->id, ec.gid);
    ec.max_qp = h->flows_out + h->flows_in + 4;
    ec.max_cq = 4;
    ec.max_mr = 4;
    ec.max_cqe = h->cqe;
    ec.window_pkts = f->cfg.window_pkts ? f->cfg.window_pkts : FAB_DEF_WINDOW;
    ec.port_mtu = f->cfg.mtu ? f->cfg.mtu : 4096;
    ec.ops.tx = fab_host_tx;
    ec.ops_ctx = h;
    if (f->cfg.engine_cfg)
        f->cfg.engine_cfg(f->cfg.engine_cfg_ctx, h->id, &ec);
    int err = sr_engine_create(&ec, &h->eng);
    if (err)
        return err;
    err = sr_pd_alloc(h->eng, &h->pd);
    if (err)
        return err;
    err = sr_cq_create(h->eng, h->cqe, &h->cq);
    if (err)
        return err;
    uint32_t acc = SR_ACCESS_LOCAL_WRITE | SR_ACCESS_REMOTE_WRITE;
    if (f->cfg.mode == SR_FABRIC_VERIFIED) {
        if (h->flows_out) {
            h->src_buf = malloc(f->max_bytes);
            if (!h->src_buf)
                return SR_ERR_NOMEM;
            fab_pattern_fill(h->src_buf, f->max_bytes, h->id);
        }
        if (h->dst_len) {
            h->dst_buf = calloc(1, h->dst_len);
            if (!h->dst_buf)
                return SR_ERR_NOMEM;
        }
    } else {
        h->src_buf = f->shared_src;
        h->dst_buf = f->shared_dst;
    }
    if (h->flows_out) {
        err = sr_mr_reg(h->pd, h->src_buf, f->max_bytes, 0, acc, &h->src_mr);
        if (err)
            return err;
    }
    if (h->flows_in) {
        uint64_t len = f->cfg.mode == SR_FABRIC_VERIFIED ? h->dst_len : f->max_bytes;
        err = sr_mr_reg(h->pd, h->dst_buf, len, 0, acc, &h->dst_mr);
        if (err)
            return err;
    }
    return 0;
}

static int fab_qp_up(struct sr_fabric *f, struct sr_qp *qp, struct sr_qp *peer, uint32_t peer_host)
{
    struct sr_qp_attr a = {
        .qp_state = SR_QPS_INIT,
        .port_num = 1,
        .qp_access_flags = SR_ACCESS_LOCAL_WRITE | SR_ACCESS_REMOTE_WRITE,
    };
    int err =
        sr_qp_modify(qp, &a, SR_QP_STATE | SR_QP_PKEY_INDEX | SR_QP_PORT | SR_QP_ACCESS_FLAGS, 0);
    if (err)
        return err;
    a.qp_state = SR_QPS_RTR;
    a.path_mtu = f->cfg.mtu ? f->cfg.mtu : 4096;
    a.dest_qp_num = sr_qp_num(peer);
    a.rq_psn = 0;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 1;
    fab_host_addr(peer_host, a.dgid);
    err = sr_qp_modify(qp, &a,
                       SR_QP_STATE | SR_QP_AV | SR_QP_PATH_MTU | SR_QP_DEST_QPN | SR_QP_RQ_PSN |
                           SR_QP_MAX_DEST_RD_ATOMIC | SR_QP_MIN_RNR_TIMER,
                       0);
    if (err)
        return err;
    a.qp_state = SR_QPS_RTS;
    a.sq_psn = 0;
    a.timeout = f->cfg.timeout ? f->cfg.timeout : FAB_DEF_TIMEOUT;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    return sr_qp_modify(qp, &a,
                        SR_QP_STATE | SR_QP_SQ_PSN | SR_QP_TIMEOUT | SR_QP_RETRY_CNT |
                            SR_QP_RNR_RETRY | SR_QP_MAX_QP_RD_ATOMIC,
                        0);
}

/* A collective's steps between two hosts share one connection, found by
 * (src, dst, coll) in an open-addressing table. */
static int fab_conns_build(struct sr_fabric *f)
{
    size_t cap = 16, conn_cap = 0;
    while (cap < 2 * (size_t)f->flow_cnt)
        cap *= 2;
    uint32_t *tab = malloc(cap * sizeof(*tab));
    if (!tab)
        return SR_ERR_NOMEM;
    memset(tab, 0xff, cap * sizeof(*tab));
    int err = 0;
    for (uint32_t i = 0; i < f->flow_cnt && !err; i++) {
        struct fab_flow *fl = &f->flows[i];
        size_t slot = SIZE_MAX;
        if (fl->coll) {
            uint64_t k = (uint64_t)fl->src << 40 ^ (uint64_t)fl->dst << 16 ^ fl->coll;
            slot = fab_mix64(k) & (cap - 1);
            while (tab[slot] != UINT32_MAX) {
                const struct fab_conn *c = &f->conns[tab[slot]];
                if (c->src == fl->src && c->dst == fl->dst && c->coll == fl->coll)
                    break;
                slot = (slot + 1) & (cap - 1);
            }
            if (tab[slot] != UINT32_MAX) {
                fl->conn = tab[slot];
                f->conns[fl->conn].sends++;
                f->conns[fl->conn].recvs++;
                continue;
            }
        }
        err = fab_grow((void **)&f->conns, &conn_cap, (size_t)f->conn_cnt + 1, sizeof(*f->conns));
        if (err)
            break;
        f->conns[f->conn_cnt] = (struct fab_conn){.src = fl->src,
                                                  .dst = fl->dst,
                                                  .coll = fl->coll,
                                                  .sends = 1,
                                                  .recvs = fl->coll ? 1 : 0,
                                                  .wait_head = -1,
                                                  .wait_tail = -1};
        fl->conn = f->conn_cnt++;
        if (slot != SIZE_MAX)
            tab[slot] = fl->conn;
    }
    free(tab);
    return err;
}

static int fab_post_recv(struct fab_conn *c)
{
    struct sr_recv_wr rw = {.wr_id = FAB_RECV_WR_ID, .sg_list = NULL, .num_sge = 0};
    int err = sr_qp_post_recv(c->qp[1], &rw);
    if (!err)
        c->recv_posted++;
    return err;
}

/* Engines, memory and QPs, once the flows are known. */
static int fab_setup(struct sr_fabric *f)
{
    if (f->cfg.mode != SR_FABRIC_VERIFIED && f->max_bytes) {
        f->shared_src = calloc(1, f->max_bytes);
        f->shared_dst = calloc(1, f->max_bytes);
        if (!f->shared_src || !f->shared_dst)
            return SR_ERR_NOMEM;
    }
    for (uint32_t i = 0; i < f->flow_cnt; i++) {
        struct fab_flow *fl = &f->flows[i];
        f->hosts[fl->src].flows_out++;
        f->hosts[fl->dst].flows_in++;
        f->hosts[fl->dst].imm_in += fl->coll != 0;
        fl->dst_off = f->hosts[fl->dst].dst_len;
        f->hosts[fl->dst].dst_len += fl->bytes;
    }
    int err = fab_conns_build(f);
    if (err)
        return err;
    /* Completions are polled after every call into an engine, so a CQ
     * holds at most what its QPs have outstanding: a plain flow's WRITE,
     * or a collective QP's queue of sends or of receives. */
    for (uint32_t i = 0; i < f->host_cnt; i++)
        f->hosts[i].cqe = 16;
    for (uint32_t i = 0; i < f->conn_cnt; i++) {
        const struct fab_conn *c = &f->conns[i];
        f->hosts[c->src].cqe += c->coll ? SR_MIN(c->sends, FAB_CONN_DEPTH) : c->sends;
        f->hosts[c->dst].cqe += SR_MIN(c->recvs, FAB_CONN_DEPTH);
    }
    for (uint32_t i = 0; i < f->host_cnt; i++) {
        err = fab_host_init(f, &f->hosts[i]);
        if (err)
            return err;
    }
    for (uint32_t i = 0; i < f->conn_cnt; i++) {
        struct fab_conn *c = &f->conns[i];
        uint32_t ends[2] = {c->src, c->dst};
        /* A plain flow posts one WRITE; a collective's sends beyond the
         * queue wait in the simulator (wait_head), and receives are
         * replenished as they complete, so a long collective does not
         * hold thousands of WQEs per QP. */
        c->sq_depth = SR_MIN(c->sends, FAB_CONN_DEPTH);
        uint32_t rq = SR_MAX(1, SR_MIN(c->recvs, FAB_CONN_DEPTH));
        for (int e = 0; e < 2; e++) {
            struct fab_host *h = &f->hosts[ends[e]];
            struct sr_qp_init_attr ia = {
                .qp_type = SR_QPT_RC,
                .send_cq = h->cq,
                .recv_cq = h->cq,
                .cap = {.max_send_wr = SR_MAX(4, c->sq_depth),
                        .max_recv_wr = rq,
                        .max_send_sge = 1,
                        .max_recv_sge = 1},
            };
            err = sr_qp_create(h->pd, &ia, &c->qp[e]);
            if (err)
                return err;
        }
        for (int e = 0; e < 2; e++) {
            err = fab_qp_up(f, c->qp[e], c->qp[1 - e], ends[1 - e]);
            if (err)
                return err;
        }
        while (c->recv_posted < SR_MIN(c->recvs, rq))
            if ((err = fab_post_recv(c)) != 0)
                return err;
    }
    f->hheap = malloc(f->host_cnt * sizeof(*f->hheap));
    if (!f->hheap)
        return SR_ERR_NOMEM;
    for (uint32_t i = 0; i < f->host_cnt; i++) {
        f->hosts[i].key = sr_engine_next_deadline(f->hosts[i].eng);
        f->hheap[i] = i;
        f->hosts[i].hpos = i;
    }
    f->hheap_cnt = f->host_cnt;
    for (uint32_t i = f->host_cnt / 2; i-- > 0;)
        fab_h_fix(f, f->hheap[i]);
    return 0;
}

static void fab_flow_fail(struct sr_fabric *f, struct fab_flow *fl)
{
    fl->done = true;
    fl->ok = false;
    fl->end_ns = f->now_ns;
    f->flows_done++;
}

static void fab_flow_post(struct sr_fabric *f, uint32_t id)
{
    struct fab_flow *fl = &f->flows[id];
    struct fab_conn *c = &f->conns[fl->conn];
    struct fab_host *s = &f->hosts[fl->src], *d = &f->hosts[fl->dst];
    uint64_t dst_va = f->cfg.mode == SR_FABRIC_VERIFIED ? fl->dst_off : 0;
    struct sr_sge sge = {.addr = 0, .length = (uint32_t)fl->bytes, .lkey = sr_mr_lkey(s->src_mr)};
    /* A step announces its arrival with an immediate naming it: a WRITE
     * with immediate consumes a receive WQE at its last packet and
     * completes it at the responder once the data is placed (the engine's
     * resp.c), which is what the next step waits for. */
    struct sr_send_wr wr = {
        .wr_id = id,
        .sg_list = &sge,
        .num_sge = 1,
        .opcode = fl->coll ? SR_WR_RDMA_WRITE_WITH_IMM : SR_WR_RDMA_WRITE,
        .send_flags = SR_SEND_SIGNALED,
        .imm = id,
        .remote_addr = dst_va,
        .rkey = sr_mr_rkey(d->dst_mr),
    };
    c->outstanding++;
    if (sr_qp_post_send(c->qp[0], &wr, f->now_ns) != 0) {
        c->outstanding--;
        fab_flow_fail(f, fl);
    }
}

static int fab_flow_start(struct sr_fabric *f, uint32_t id)
{
    struct fab_flow *fl = &f->flows[id];
    struct fab_conn *c = &f->conns[fl->conn];
    if (c->outstanding >= c->sq_depth) {
        fl->qnext = -1;
        if (c->wait_tail >= 0)
            f->flows[c->wait_tail].qnext = (int32_t)id;
        else
            c->wait_head = (int32_t)id;
        c->wait_tail = (int32_t)id;
        return 0;
    }
    fab_flow_post(f, id);
    fab_host_refresh(f, &f->hosts[fl->src]);
    return 0;
}

/* A send completed on c: the next waiting step takes its place. */
static void fab_conn_sent(struct sr_fabric *f, struct fab_conn *c)
{
    c->outstanding--;
    if (c->wait_head < 0)
        return;
    uint32_t id = (uint32_t)c->wait_head;
    c->wait_head = f->flows[id].qnext;
    if (c->wait_head < 0)
        c->wait_tail = -1;
    fab_flow_post(f, id);
}

/* ---- public: create, workload, schedule ---- */

struct sr_fabric *sr_fabric_create(const struct sr_fabric_cfg *cfg, int *err)
{
    int dummy;
    if (!err)
        err = &dummy;
    *err = SR_ERR_INVAL;
    if (!cfg || !cfg->host_link.rate_bps || !cfg->fabric_link.rate_bps ||
        cfg->host_link.rate_bps > (1ull << 62) || cfg->fabric_link.rate_bps > (1ull << 62) ||
        !(cfg->pmax >= 0.0 && cfg->pmax <= 1.0) || cfg->kmin_bytes > cfg->kmax_bytes ||
        (cfg->mtu && (cfg->mtu < 256 || cfg->mtu > 4096 || (cfg->mtu & (cfg->mtu - 1)))))
        return NULL;
    uint64_t hosts;
    if (cfg->topo == SR_FABRIC_LEAF_SPINE) {
        if (!cfg->leaves || !cfg->spines || !cfg->hosts_per_leaf ||
            cfg->hosts_per_leaf + cfg->spines > FAB_MAX_PORTS || cfg->leaves > FAB_MAX_PORTS)
            return NULL;
        hosts = (uint64_t)cfg->leaves * cfg->hosts_per_leaf;
    } else if (cfg->topo == SR_FABRIC_FAT_TREE) {
        if (cfg->k < 2 || (cfg->k & 1) || cfg->k > FAB_MAX_PORTS)
            return NULL;
        hosts = (uint64_t)cfg->k * cfg->k * cfg->k / 4;
    } else {
        return NULL;
    }
    if (hosts < 2 || hosts >= (1u << 24))
        return NULL;
    struct sr_fabric *f = calloc(1, sizeof(*f));
    if (!f) {
        *err = SR_ERR_NOMEM;
        return NULL;
    }
    f->cfg = *cfg;
    f->tap_link = -1;
    fab_rng_seed(f->rng, cfg->seed);
    fab_rng_seed(f->loss_rng, fab_mix64(cfg->seed ^ 0x1055ull));
    *err = fab_build(f);
    if (!*err) {
        f->heap = malloc(f->link_cnt * sizeof(*f->heap));
        if (!f->heap)
            *err = SR_ERR_NOMEM;
    }
    if (*err) {
        sr_fabric_destroy(f);
        return NULL;
    }
    for (uint32_t i = 0; i < f->host_cnt; i++) {
        f->hosts[i].f = f;
        f->hosts[i].id = i;
        f->hosts[i].key = UINT64_MAX;
    }
    return f;
}

void sr_fabric_destroy(struct sr_fabric *f)
{
    if (!f)
        return;
    for (uint32_t i = 0; f->hosts && i < f->host_cnt; i++) {
        struct fab_host *h = &f->hosts[i];
        if (h->eng)
            sr_engine_destroy(h->eng);
        if (f->cfg.mode == SR_FABRIC_VERIFIED) {
            free(h->src_buf);
            free(h->dst_buf);
        }
    }
    for (uint32_t i = 0; f->links && i < f->link_cnt; i++) {
        struct fab_link *l = &f->links[i];
        for (uint32_t j = 0; j < l->fly_cnt; j++)
            fab_pkt_free(f, l->fly[(l->fly_head + j) & (l->fly_cap - 1)].pkt);
        free(l->fly);
    }
    for (uint32_t i = 0; f->nodes && i < f->node_cnt; i++)
        free(f->nodes[i].ports);
    while (f->pool) {
        void *next;
        memcpy(&next, f->pool, sizeof(next));
        free(f->pool);
        f->pool = next;
    }
    fab_watch_free(f);
    free(f->shared_src);
    free(f->shared_dst);
    free(f->hheap);
    free(f->heap);
    free(f->ctl);
    free(f->flows);
    free(f->conns);
    free(f->colls);
    free(f->series);
    free(f->hosts);
    free(f->links);
    free(f->nodes);
    free(f);
}

uint32_t sr_fabric_host_cnt(const struct sr_fabric *f)
{
    return f->host_cnt;
}
uint32_t sr_fabric_node_cnt(const struct sr_fabric *f)
{
    return f->node_cnt;
}
uint32_t sr_fabric_link_cnt(const struct sr_fabric *f)
{
    return f->link_cnt;
}
uint32_t sr_fabric_flow_cnt(const struct sr_fabric *f)
{
    return f->flow_cnt;
}
size_t sr_fabric_pending(const struct sr_fabric *f)
{
    return f->pending;
}
uint64_t sr_fabric_now(const struct sr_fabric *f)
{
    return f->now_ns;
}

enum sr_fabric_node_kind sr_fabric_node_kind(const struct sr_fabric *f, int node)
{
    return f->nodes[node].kind;
}

void sr_fabric_node_name(const struct sr_fabric *f, int node, char *buf, size_t cap)
{
    uint32_t H = f->host_cnt, n = (uint32_t)node, h = f->half, k = f->cfg.k;
    if (node < 0 || n >= f->node_cnt)
        snprintf(buf, cap, "?");
    else if (n < H)
        snprintf(buf, cap, "h%u", n);
    else if (f->cfg.topo == SR_FABRIC_LEAF_SPINE)
        snprintf(buf, cap, n - H < f->cfg.leaves ? "leaf%u" : "spine%u",
                 n - H < f->cfg.leaves ? n - H : n - H - f->cfg.leaves);
    else if (n - H < k * h)
        snprintf(buf, cap, "edge%u.%u", (n - H) / h, (n - H) % h);
    else if (n - H < 2 * k * h)
        snprintf(buf, cap, "agg%u.%u", (n - H - k * h) / h, (n - H - k * h) % h);
    else
        snprintf(buf, cap, "core%u", n - H - 2 * k * h);
}

int sr_fabric_find_node(const struct sr_fabric *f, const char *name)
{
    char buf[32];
    if (!f || !name)
        return SR_ERR_INVAL;
    for (uint32_t i = 0; i < f->node_cnt; i++) {
        sr_fabric_node_name(f, (int)i, buf, sizeof(buf));
        if (!strcmp(buf, name))
            return (int)i;
    }
    return SR_ERR_INVAL;
}

int sr_fabric_find_link(const struct sr_fabric *f, int from, int to)
{
    if (!f || from < 0 || (uint32_t)from >= f->node_cnt)
        return SR_ERR_INVAL;
    const struct fab_node *n = &f->nodes[from];
    for (uint32_t i = 0; i < n->port_cnt; i++)
        if (f->links[n->ports[i]].to == to)
            return (int)n->ports[i];
    return SR_ERR_INVAL;
}

static int fab_flow_add(struct sr_fabric *f, uint32_t coll, uint32_t src, uint32_t dst,
                        uint64_t bytes, int after, uint64_t start_ns)
{
    if (!f || f->started || src >= f->host_cnt || dst >= f->host_cnt || src == dst || !bytes ||
        bytes > UINT32_MAX || f->flow_cnt >= INT32_MAX - 1)
        return SR_ERR_INVAL;
    if (after >= (int)f->flow_cnt || (after >= 0 && f->flows[after].dst != src) ||
        (after >= 0 && !f->flows[after].coll))
        return SR_ERR_INVAL;
    if (after < 0 && f->flow_cnt && f->last_start > start_ns)
        return SR_ERR_INVAL;
    size_t cap = f->flow_cap;
    if (fab_grow((void **)&f->flows, &cap, (size_t)f->flow_cnt + 1, sizeof(*f->flows)) < 0)
        return SR_ERR_NOMEM;
    f->flow_cap = (uint32_t)cap;
    uint32_t id = f->flow_cnt;
    f->flows[id] = (struct fab_flow){.src = src,
                                     .dst = dst,
                                     .bytes = bytes,
                                     .start_ns = after < 0 ? start_ns : UINT64_MAX,
                                     .end_ns = UINT64_MAX,
                                     .arrive_ns = UINT64_MAX,
                                     .coll = coll,
                                     .after = after,
                                     .succ = -1,
                                     .sib = -1,
                                     .qnext = -1};
    if (after >= 0) {
        f->flows[id].sib = f->flows[after].succ;
        f->flows[after].succ = (int32_t)id;
    } else {
        f->last_start = start_ns;
    }
    if (coll) {
        struct fab_coll *c = &f->colls[coll - 1];
        c->flows++;
        if (after < 0 && start_ns < c->start_ns)
            c->start_ns = start_ns;
    }
    f->max_bytes = SR_MAX(f->max_bytes, bytes);
    f->flow_cnt++;
    return (int)id;
}

int sr_fabric_add_flow(struct sr_fabric *f, uint32_t src, uint32_t dst, uint64_t bytes,
                       uint64_t start_ns)
{
    return fab_flow_add(f, 0, src, dst, bytes, -1, start_ns);
}

int sr_fabric_coll_new(struct sr_fabric *f)
{
    if (!f || f->started || f->coll_cnt >= INT32_MAX - 1)
        return SR_ERR_INVAL;
    if (fab_grow((void **)&f->colls, &f->coll_cap, f->coll_cnt + 1, sizeof(*f->colls)) < 0)
        return SR_ERR_NOMEM;
    f->colls[f->coll_cnt] = (struct fab_coll){.start_ns = UINT64_MAX, .end_ns = UINT64_MAX};
    return (int)f->coll_cnt++;
}

int sr_fabric_add_step(struct sr_fabric *f, int coll, uint32_t src, uint32_t dst, uint64_t bytes,
                       int after, uint64_t start_ns)
{
    if (!f || coll < 0 || (size_t)coll >= f->coll_cnt)
        return SR_ERR_INVAL;
    if (after >= 0 && after < (int)f->flow_cnt && f->flows[after].coll != (uint32_t)coll + 1)
        return SR_ERR_INVAL;
    return fab_flow_add(f, (uint32_t)coll + 1, src, dst, bytes, after, start_ns);
}

int sr_fabric_set_tap(struct sr_fabric *f, int link, sr_fabric_tap_fn fn, void *ctx)
{
    if (!f || link >= (int)f->link_cnt || (link >= 0 && !fn))
        return SR_ERR_INVAL;
    f->tap_link = link < 0 ? -1 : link;
    f->tap_fn = fn;
    f->tap_ctx = ctx;
    return 0;
}

static bool fab_ctl_before(const struct fab_ctl *x, const struct fab_ctl *y)
{
    return x->at_ns != y->at_ns ? x->at_ns < y->at_ns : x->seq < y->seq;
}

static int fab_ctl_add(struct sr_fabric *f, struct fab_ctl c)
{
    if (fab_grow((void **)&f->ctl, &f->ctl_cap, f->ctl_cnt + 1, sizeof(*f->ctl)) < 0)
        return SR_ERR_NOMEM;
    c.seq = f->seq++;
    /* Insertion into the pending tail, kept sorted. */
    size_t i = f->ctl_cnt++;
    while (i > f->ctl_next && fab_ctl_before(&c, &f->ctl[i - 1])) {
        f->ctl[i] = f->ctl[i - 1];
        i--;
    }
    f->ctl[i] = c;
    return 0;
}

int sr_fabric_set_link_delay(struct sr_fabric *f, int link, uint64_t delay_ns, uint64_t hold_ns)
{
    if (!f || f->started || link < 0 || (uint32_t)link >= f->link_cnt)
        return SR_ERR_INVAL;
    struct fab_link *l = &f->links[link];
    /* The hold stretches a packet's time on the link past its
     * serialization, which a switch port's queue (drop-tail, ECN) would
     * count as backlog: only a host's own uplink, never limited, may hold. */
    if (hold_ns && f->nodes[l->from].kind != SR_FABRIC_HOST)
        return SR_ERR_INVAL;
    l->cfg.delay_ns = delay_ns;
    l->hold_ns = hold_ns;
    return 0;
}

int sr_fabric_schedule_link(struct sr_fabric *f, int a, int b, uint64_t at_ns, bool up)
{
    if (sr_fabric_find_link(f, a, b) < 0 || at_ns < f->now_ns)
        return SR_ERR_INVAL;
    int err = fab_ctl_add(
        f, (struct fab_ctl){.at_ns = at_ns, .a = a, .b = b, .kind = FAB_CTL_PHYS, .up = up});
    if (err)
        return err;
    return fab_ctl_add(f, (struct fab_ctl){.at_ns = fab_add_sat(at_ns, f->cfg.detect_ns),
                                           .a = a,
                                           .b = b,
                                           .kind = FAB_CTL_ROUTE,
                                           .up = up});
}

static void fab_ctl_apply(struct sr_fabric *f, const struct fab_ctl *c)
{
    int ids[2] = {sr_fabric_find_link(f, c->a, c->b), sr_fabric_find_link(f, c->b, c->a)};
    for (int i = 0; i < 2; i++) {
        struct fab_link *l = &f->links[ids[i]];
        if (c->kind == FAB_CTL_ROUTE) {
            if (l->route_up != c->up)
                f->routes_down += c->up ? -1 : 1;
            l->route_up = c->up;
        } else if (l->up != c->up) {
            l->up = c->up;
            if (!c->up)
                l->epoch++;
        }
    }
}

/* ---- the event loop ---- */

/* The packet about to be popped (prefetched, with its link, one event
 * ago) goes next to a switch port or a host: start fetching that while
 * the pop reorders the heap. Only a hint: the route is computed again. */
static void fab_lookahead(struct sr_fabric *f)
{
    const struct fab_lkey *k = &f->heap[0];
    uint32_t to = (uint32_t)f->links[k->link].to;
    if (to < f->host_cnt) {
        __builtin_prefetch(&f->hosts[to]);
        return;
    }
    if (f->routes_down)
        return;
    const struct fab_node *n = &f->nodes[to];
    uint32_t base, cnt = fab_route_all_up(f, to, k->pkt->dst, &base);
    uint32_t pick = cnt == 1 ? 0 : (uint32_t)(fab_mix64(k->pkt->flow_hash ^ n->salt) % cnt);
    const char *ol = (const char *)&f->links[n->ports[base + pick]];
    __builtin_prefetch(ol);
    __builtin_prefetch(ol + 64);
    __builtin_prefetch(ol + 128);
}

static void fab_deliver(struct sr_fabric *f)
{
    fab_lookahead(f);
    struct fab_ev ev = fab_fly_pop(f);
    struct fab_pkt *p = ev.pkt;
    /* The next packet was written long ago and is out of cache: fetch it
     * while this one goes through a switch or an engine. */
    if (f->heap_cnt) {
        /* ... and the link it arrives over, whose ring and counters the
         * pop and the arrival touch (three lines of struct fab_link). */
        const char *nl = (const char *)&f->links[f->heap[0].link];
        __builtin_prefetch(f->heap[0].pkt);
        __builtin_prefetch(nl);
        __builtin_prefetch(nl + 64);
        __builtin_prefetch(nl + 128);
    }
    struct fab_link *l = &f->links[p->link];
    f->events++;
    if (!l->up || l->epoch != p->epoch) {
        l->st.wire_drops++;
        fab_pkt_free(f, p);
        return;
    }
    if (f->cfg.loss > 0 && fab_unit(fab_rng_next(f->loss_rng)) < f->cfg.loss) {
        l->st.loss_drops++;
        fab_pkt_free(f, p);
        return;
    }
    l->st.arrived++;
    if ((uint32_t)l->to < f->host_cnt) {
        fab_host_rx(f, &f->hosts[l->to], p);
        fab_pkt_free(f, p);
    } else {
        fab_switch_rx(f, (uint32_t)l->to, p);
    }
}

int sr_fabric_run(struct sr_fabric *f, uint64_t until_ns)
{
    if (!f)
        return SR_ERR_INVAL;
    if (!f->started) {
        f->started = true;
        int err = fab_setup(f);
        if (err)
            return err;
    }
    for (;;) {
        if (f->flow_cnt && f->flows_done == f->flow_cnt)
            return SR_FABRIC_DONE;
        uint64_t t_ctl = f->ctl_next < f->ctl_cnt ? f->ctl[f->ctl_next].at_ns : UINT64_MAX;
        /* Steps that wait for an arrival start from fab_flow_arrived. */
        while (f->flow_next < f->flow_cnt && f->flows[f->flow_next].after >= 0)
            f->flow_next++;
        uint64_t t_flow = f->flow_next < f->flow_cnt ? f->flows[f->flow_next].start_ns : UINT64_MAX;
        uint64_t t_pkt = fab_fly_next(f);
        uint64_t t_host = f->hheap_cnt ? f->hosts[f->hheap[0]].key : UINT64_MAX;
        if (t_host != UINT64_MAX && t_host < f->now_ns)
            t_host = f->now_ns;
        /* At equal times: link changes, flow starts, arrivals, then timers. */
        uint64_t t = SR_MIN(SR_MIN(t_ctl, t_flow), SR_MIN(t_pkt, t_host));
        if (t == UINT64_MAX)
            return f->flows_done == f->flow_cnt ? SR_FABRIC_DONE : SR_FABRIC_IDLE;
        if (t > until_ns) {
            f->now_ns = SR_MAX(f->now_ns, until_ns);
            return SR_FABRIC_UNTIL;
        }
        f->now_ns = SR_MAX(f->now_ns, t);
        if (t_ctl == t) {
            fab_ctl_apply(f, &f->ctl[f->ctl_next++]);
        } else if (t_flow == t) {
            fab_flow_start(f, f->flow_next++);
        } else if (t_pkt == t) {
            fab_deliver(f);
        } else {
            struct fab_host *h = &f->hosts[f->hheap[0]];
            sr_engine_advance(h->eng, f->now_ns);
            fab_host_poll(f, h);
            fab_host_refresh(f, h);
        }
    }
}

uint64_t fab_rand(struct sr_fabric *f)
{
    return fab_rng_next(f->rng);
}
