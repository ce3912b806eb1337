/* sim.c: the simulator's state and event loop: nodes and their address
 * index, links and their (from, to) index, the per-link serialization queue
 * and fault injection, and the binary min-heap of pending deliveries keyed by
 * (time, sequence number). Modelled on picoquic's sim_link.c and ngtcp2's
 * examples/sim.h: links with rate, delay, queue limit, ECN threshold and
 * seeded faults; the loop jumps to the earliest deadline. */
#include "sr_sim.h"
#include "sr_util.h"
#include "sr_wire.h"

#include <stdlib.h>
#include <string.h>

/* Bounds that keep the integer arithmetic exact: len * 8e9 plus a carried
 * remainder below the rate must fit in 64 bits. */
#define SR_SIM_MAX_RATE  (1ull << 62)
#define SR_SIM_MAX_PKT   (SR_IPV6_HDR_LEN + 0xffffu)
#define SR_SIM_NS_PER_S  1000000000ull
#define SR_SIM_TAB_EMPTY (-1)

struct sr_sim_node {
    uint8_t addr[16];
    struct sr_sim_node_ops ops; /* a copy: the caller's struct may go away */
    void *ctx;
};

/* A packet still being serialized, so the queue length is exact bytes rather
 * than a rate estimate. */
struct sr_sim_onwire {
    uint64_t done_ns;
    uint32_t len;
};

struct sr_sim_link {
    int from, to;
    struct sr_sim_link_cfg cfg;
    struct sr_sim_link_stats st;
    uint64_t rng[4];
    uint64_t busy_until_ns; /* the wire is free from here on */
    /* Serialization time left over below 1 ns, in units of 1/rate_bps ns:
     * carrying it keeps back-to-back packets at exactly rate_bps instead of
     * losing up to 1 ns per packet to rounding. */
    uint64_t busy_rem;
    /* Arrival time of the last packet that was not reordered: keeps the link
     * FIFO even when delay_ns is lowered mid-run. */
    uint64_t last_arrive_ns;
    struct sr_sim_onwire *q; /* ring of packets not yet fully serialized */
    size_t q_head, q_cnt, q_cap;
    uint64_t q_bytes;
};

/* One scheduled copy of a packet; owned by the heap until delivered. */
struct sr_sim_pkt {
    int to;
    uint32_t link;
    uint32_t len;
    uint8_t data[];
};

struct sr_sim_ev {
    uint64_t at_ns;
    uint64_t seq; /* ties at equal time go in scheduling order */
    struct sr_sim_pkt *pkt;
};

struct sr_sim {
    uint64_t now_ns;
    uint64_t seed;
    uint64_t next_seq;
    uint64_t rng[4];
    bool running;

    struct sr_sim_node *nodes;
    size_t node_cnt, node_cap;
    struct sr_sim_link *links;
    size_t link_cnt, link_cap;

    /* Open-addressing indexes (linear probing, load <= 1/2, never shrunk:
     * nodes and links are never removed) holding ids into the arrays above,
     * so routing stays O(1) with thousands of nodes or a full mesh. */
    int32_t *addr_tab;
    size_t addr_tab_cap;
    int32_t *link_tab;
    size_t link_tab_cap;

    struct sr_sim_ev *heap;
    size_t heap_cnt, heap_cap;
};

/* ---- randomness: splitmix64 seeds xoshiro256** (Blackman & Vigna) ---- */

static uint64_t sr_sim_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t sr_sim_splitmix64(uint64_t *x)
{
    *x += 0x9e3779b97f4a7c15ull;
    return sr_sim_mix64(*x);
}

static void sr_sim_rng_seed(uint64_t s[4], uint64_t seed)
{
    /* splitmix64 never yields four zero words from one stream, which is the
     * one state xoshiro cannot leave. */
    for (int i = 0; i < 4; i++)
        s[i] = sr_sim_splitmix64(&seed);
}

static uint64_t sr_sim_rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t sr_sim_rng_next(uint64_t s[4])
{
    uint64_t result = sr_sim_rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = sr_sim_rotl(s[3], 45);
    return result;
}

/* Uniform in [0, 1) with 53 bits, so "u < p" is never true for p == 0 and
 * always true for p == 1. */
static double sr_sim_unit(uint64_t r)
{
    return (double)(r >> 11) * 0x1.0p-53;
}

/* Uniform in [0, n) for n < 2^32 (Lemire's multiply-shift). */
static uint32_t sr_sim_below(uint64_t r, uint32_t n)
{
    return (uint32_t)(((r >> 32) * n) >> 32);
}

uint64_t sr_sim_rand(struct sr_sim *sim)
{
    return sr_sim_rng_next(sim->rng);
}

static uint64_t sr_sim_add_sat(uint64_t a, uint64_t b)
{
    /* UINT64_MAX means "never" to the loop, so an event must stay below it. */
    return a > UINT64_MAX - 1 - b ? UINT64_MAX - 1 : a + b;
}

/* ---- create / destroy ---- */

struct sr_sim *sr_sim_create(uint64_t seed)
{
    struct sr_sim *sim = calloc(1, sizeof(*sim));
    if (!sim)
        return NULL;
    sim->seed = seed;
    sr_sim_rng_seed(sim->rng, seed);
    return sim;
}

void sr_sim_destroy(struct sr_sim *sim)
{
    if (!sim)
        return;
    for (size_t i = 0; i < sim->heap_cnt; i++)
        free(sim->heap[i].pkt);
    for (size_t i = 0; i < sim->link_cnt; i++)
        free(sim->links[i].q);
    free(sim->heap);
    free(sim->link_tab);
    free(sim->addr_tab);
    free(sim->links);
    free(sim->nodes);
    free(sim);
}

uint64_t sr_sim_now(const struct sr_sim *sim)
{
    return sim->now_ns;
}

size_t sr_sim_node_cnt(const struct sr_sim *sim)
{
    return sim->node_cnt;
}

size_t sr_sim_pending(const struct sr_sim *sim)
{
    return sim->heap_cnt;
}

/* Grow *arr to hold at least want elements of size elem, doubling. */
static int sr_sim_grow(void **arr, size_t *cap, size_t want, size_t elem)
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

/* ---- address index ---- */

static uint64_t sr_sim_addr_hash(const uint8_t addr[16])
{
    uint64_t hi, lo;
    memcpy(&hi, addr, 8);
    memcpy(&lo, addr + 8, 8);
    return sr_sim_mix64(hi ^ sr_sim_mix64(lo));
}

/* Slot holding addr, or the empty slot where it would go. */
static size_t sr_sim_addr_slot(const struct sr_sim *sim, const uint8_t addr[16])
{
    size_t mask = sim->addr_tab_cap - 1;
    size_t i = (size_t)sr_sim_addr_hash(addr) & mask;
    while (sim->addr_tab[i] != SR_SIM_TAB_EMPTY &&
           memcmp(sim->nodes[sim->addr_tab[i]].addr, addr, 16) != 0)
        i = (i + 1) & mask;
    return i;
}

int sr_sim_find_node(const struct sr_sim *sim, const uint8_t addr[16])
{
    if (!sim || !addr || !sim->addr_tab_cap)
        return SR_ERR_INVAL;
    int32_t id = sim->addr_tab[sr_sim_addr_slot(sim, addr)];
    return id == SR_SIM_TAB_EMPTY ? SR_ERR_INVAL : id;
}

static int sr_sim_addr_tab_fit(struct sr_sim *sim, size_t cnt)
{
    if (cnt * 2 <= sim->addr_tab_cap)
        return 0;
    size_t ncap = sim->addr_tab_cap ? sim->addr_tab_cap * 2 : 64;
    int32_t *tab = malloc(ncap * sizeof(*tab));
    if (!tab)
        return SR_ERR_NOMEM;
    free(sim->addr_tab);
    sim->addr_tab = tab;
    sim->addr_tab_cap = ncap;
    for (size_t i = 0; i < ncap; i++)
        tab[i] = SR_SIM_TAB_EMPTY;
    for (size_t n = 0; n < sim->node_cnt; n++)
        tab[sr_sim_addr_slot(sim, sim->nodes[n].addr)] = (int32_t)n;
    return 0;
}

int sr_sim_add_node(struct sr_sim *sim, const uint8_t addr[16], const struct sr_sim_node_ops *ops,
                    void *ctx)
{
    if (!sim || !addr || !ops || (!ops->next_deadline != !ops->advance))
        return SR_ERR_INVAL;
    if (sim->node_cnt >= INT32_MAX)
        return SR_ERR_RANGE;
    if (sr_sim_find_node(sim, addr) >= 0)
        return SR_ERR_INVAL;
    int rc =
        sr_sim_grow((void **)&sim->nodes, &sim->node_cap, sim->node_cnt + 1, sizeof(*sim->nodes));
    if (rc < 0)
        return rc;
    rc = sr_sim_addr_tab_fit(sim, sim->node_cnt + 1);
    if (rc < 0)
        return rc;
    struct sr_sim_node *n = &sim->nodes[sim->node_cnt];
    memcpy(n->addr, addr, 16);
    n->ops = *ops;
    n->ctx = ctx;
    sim->addr_tab[sr_sim_addr_slot(sim, addr)] = (int32_t)sim->node_cnt;
    return (int)sim->node_cnt++;
}

/* ---- link index ---- */

static uint64_t sr_sim_link_key(int from, int to)
{
    return (uint64_t)(uint32_t)from << 32 | (uint32_t)to;
}

static size_t sr_sim_link_slot(const struct sr_sim *sim, int from, int to)
{
    size_t mask = sim->link_tab_cap - 1;
    size_t i = (size_t)sr_sim_mix64(sr_sim_link_key(from, to)) & mask;
    for (;;) {
        int32_t id = sim->link_tab[i];
        if (id == SR_SIM_TAB_EMPTY || (sim->links[id].from == from && sim->links[id].to == to))
            return i;
        i = (i + 1) & mask;
    }
}

static int sr_sim_link_find(const struct sr_sim *sim, int from, int to)
{
    if (!sim || !sim->link_tab_cap)
        return SR_ERR_INVAL;
    int32_t id = sim->link_tab[sr_sim_link_slot(sim, from, to)];
    return id == SR_SIM_TAB_EMPTY ? SR_ERR_INVAL : id;
}

static int sr_sim_link_tab_fit(struct sr_sim *sim, size_t cnt)
{
    if (cnt * 2 <= sim->link_tab_cap)
        return 0;
    size_t ncap = sim->link_tab_cap ? sim->link_tab_cap * 2 : 64;
    int32_t *tab = malloc(ncap * sizeof(*tab));
    if (!tab)
        return SR_ERR_NOMEM;
    free(sim->link_tab);
    sim->link_tab = tab;
    sim->link_tab_cap = ncap;
    for (size_t i = 0; i < ncap; i++)
        tab[i] = SR_SIM_TAB_EMPTY;
    for (size_t l = 0; l < sim->link_cnt; l++)
        tab[sr_sim_link_slot(sim, sim->links[l].from, sim->links[l].to)] = (int32_t)l;
    return 0;
}

static int sr_sim_cfg_check(const struct sr_sim_link_cfg *cfg)
{
    if (!cfg)
        return SR_ERR_INVAL;
    /* Written as "in range" so NaN fails too. */
    if (!(cfg->loss >= 0.0 && cfg->loss <= 1.0) || !(cfg->dup >= 0.0 && cfg->dup <= 1.0) ||
        !(cfg->reorder >= 0.0 && cfg->reorder <= 1.0) ||
        !(cfg->corrupt >= 0.0 && cfg->corrupt <= 1.0))
        return SR_ERR_RANGE;
    if (cfg->rate_bps > SR_SIM_MAX_RATE)
        return SR_ERR_RANGE;
    return 0;
}

static void sr_sim_link_init(struct sr_sim *sim, struct sr_sim_link *l, int from, int to,
                             const struct sr_sim_link_cfg *cfg)
{
    memset(l, 0, sizeof(*l));
    l->from = from;
    l->to = to;
    l->cfg = *cfg;
    /* Per-link stream: the fate of packets on a->b depends only on the seed
     * and the packets sent on a->b. */
    sr_sim_rng_seed(l->rng, sim->seed ^ sr_sim_mix64(sr_sim_link_key(from, to)));
}

int sr_sim_connect(struct sr_sim *sim, int a, int b, const struct sr_sim_link_cfg *cfg)
{
    if (!sim || a < 0 || b < 0 || (size_t)a >= sim->node_cnt || (size_t)b >= sim->node_cnt ||
        a == b)
        return SR_ERR_INVAL;
    int rc = sr_sim_cfg_check(cfg);
    if (rc < 0)
        return rc;
    if (sr_sim_link_find(sim, a, b) >= 0)
        return SR_ERR_INVAL;
    if (sim->link_cnt + 2 > INT32_MAX)
        return SR_ERR_RANGE;
    rc = sr_sim_grow((void **)&sim->links, &sim->link_cap, sim->link_cnt + 2, sizeof(*sim->links));
    if (rc < 0)
        return rc;
    rc = sr_sim_link_tab_fit(sim, sim->link_cnt + 2);
    if (rc < 0)
        return rc;
    for (int dir = 0; dir < 2; dir++) {
        int from = dir ? b : a, to = dir ? a : b;
        sr_sim_link_init(sim, &sim->links[sim->link_cnt], from, to, cfg);
        sim->link_tab[sr_sim_link_slot(sim, from, to)] = (int32_t)sim->link_cnt;
        sim->link_cnt++;
    }
    return 0;
}

int sr_sim_set_link(struct sr_sim *sim, int from, int to, const struct sr_sim_link_cfg *cfg)
{
    int id = sr_sim_link_find(sim, from, to);
    if (id < 0)
        return id;
    int rc = sr_sim_cfg_check(cfg);
    if (rc < 0)
        return rc;
    struct sr_sim_link *l = &sim->links[id];
    if (cfg->rate_bps != l->cfg.rate_bps)
        l->busy_rem = 0; /* the remainder is in units of the old rate */
    l->cfg = *cfg;
    return 0;
}

int sr_sim_link_stats(const struct sr_sim *sim, int from, int to, struct sr_sim_link_stats *out)
{
    int id = sr_sim_link_find(sim, from, to);
    if (id < 0)
        return id;
    if (!out)
        return SR_ERR_INVAL;
    *out = sim->links[id].st;
    return 0;
}

/* ---- pending-delivery heap, keyed by (at_ns, seq) ---- */

static bool sr_sim_ev_before(const struct sr_sim_ev *x, const struct sr_sim_ev *y)
{
    return x->at_ns != y->at_ns ? x->at_ns < y->at_ns : x->seq < y->seq;
}

/* Capacity must have been reserved: pushing never fails, so sr_sim_send can
 * commit its state changes only once every allocation has succeeded. */
static void sr_sim_heap_push(struct sr_sim *sim, uint64_t at_ns, struct sr_sim_pkt *pkt)
{
    struct sr_sim_ev ev = {.at_ns = at_ns, .seq = sim->next_seq++, .pkt = pkt};
    size_t i = sim->heap_cnt++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!sr_sim_ev_before(&ev, &sim->heap[parent]))
            break;
        sim->heap[i] = sim->heap[parent];
        i = parent;
    }
    sim->heap[i] = ev;
}

static struct sr_sim_ev sr_sim_heap_pop(struct sr_sim *sim)
{
    struct sr_sim_ev top = sim->heap[0];
    struct sr_sim_ev last = sim->heap[--sim->heap_cnt];
    size_t n = sim->heap_cnt, i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && sr_sim_ev_before(&sim->heap[c + 1], &sim->heap[c]))
            c++;
        if (!sr_sim_ev_before(&sim->heap[c], &last))
            break;
        sim->heap[i] = sim->heap[c];
        i = c;
    }
    if (n)
        sim->heap[i] = last;
    return top;
}

/* ---- IP header handling ---- */

/* Destination as a 16-byte address (IPv4 mapped), after the length checks a
 * wire needs to route: version, header length, and total length == len. */
static int sr_sim_ip_dst(const uint8_t *pkt, size_t len, uint8_t dst[16])
{
    if (len < 1 || len > SR_SIM_MAX_PKT)
        return SR_ERR_WIRE_L3;
    switch (pkt[0] >> 4) {
    case 4: {
        size_t ihl = (size_t)(pkt[0] & 0xf) * 4;
        if (len < SR_IPV4_HDR_LEN || ihl < SR_IPV4_HDR_LEN || ihl > len ||
            sr_get_be16(pkt + 2) != len)
            return SR_ERR_WIRE_L3;
        sr_sim_addr_v4(dst, pkt + 16);
        return 0;
    }
    case 6:
        if (len < SR_IPV6_HDR_LEN || (size_t)sr_get_be16(pkt + 4) + SR_IPV6_HDR_LEN != len)
            return SR_ERR_WIRE_L3;
        memcpy(dst, pkt + 24, 16);
        return 0;
    default:
        return SR_ERR_WIRE_L3;
    }
}

/* Set CE on an ECT(0)/ECT(1) packet (RFC 3168 5: Not-ECT packets are never
 * marked, CE stays CE). Returns whether the packet was changed. */
static bool sr_sim_ecn_mark(uint8_t *ip)
{
    if ((ip[0] >> 4) == 6) {
        unsigned ecn = (ip[1] >> 4) & 3; /* traffic class straddles bytes 0-1 */
        if (ecn != 1 && ecn != 2)
            return false;
        ip[1] |= 0x30;
        return true;
    }
    unsigned ecn = ip[1] & 3;
    if (ecn != 1 && ecn != 2)
        return false;
    uint16_t old_word = sr_get_be16(ip);
    ip[1] |= 3;
    uint16_t new_word = sr_get_be16(ip);
    /* Incremental update (RFC 1624 eqn 3) rather than a recompute, as a
     * router does: a checksum that was already wrong must stay wrong. */
    uint32_t sum = (uint32_t)(uint16_t)~sr_get_be16(ip + 10) + (uint16_t)~old_word + new_word;
    sr_put_be16(ip + 10, sr_inet_csum(ip, 0, sum));
    return true;
}

/* ---- the link: queue, serialization, faults ---- */

static void sr_sim_q_drain(struct sr_sim_link *l, uint64_t now_ns)
{
    while (l->q_cnt && l->q[l->q_head].done_ns <= now_ns) {
        l->q_bytes -= l->q[l->q_head].len;
        l->q_head = (l->q_head + 1) % l->q_cap;
        l->q_cnt--;
    }
}

static int sr_sim_q_reserve(struct sr_sim_link *l)
{
    if (l->q_cnt < l->q_cap)
        return 0;
    size_t ncap = l->q_cap ? l->q_cap * 2 : 16;
    struct sr_sim_onwire *q = malloc(ncap * sizeof(*q));
    if (!q)
        return SR_ERR_NOMEM;
    for (size_t i = 0; i < l->q_cnt; i++)
        q[i] = l->q[(l->q_head + i) % l->q_cap];
    free(l->q);
    l->q = q;
    l->q_cap = ncap;
    l->q_head = 0;
    return 0;
}

static void sr_sim_q_push(struct sr_sim_link *l, uint64_t done_ns, uint32_t len)
{
    l->q[(l->q_head + l->q_cnt) % l->q_cap] = (struct sr_sim_onwire){done_ns, len};
    l->q_cnt++;
    l->q_bytes += len;
}

/* Reserve the wire for len bytes; returns when the last bit leaves. */
static uint64_t sr_sim_serialize(struct sr_sim_link *l, uint64_t now_ns, size_t len)
{
    if (now_ns > l->busy_until_ns) {
        /* Idle wire: transmission starts now. At now == busy_until the
         * previous packet's fractional nanosecond is still running, so the
         * remainder carries. */
        l->busy_until_ns = now_ns;
        l->busy_rem = 0;
    }
    if (l->cfg.rate_bps) {
        uint64_t units = (uint64_t)len * 8 * SR_SIM_NS_PER_S + l->busy_rem;
        l->busy_until_ns = sr_sim_add_sat(l->busy_until_ns, units / l->cfg.rate_bps);
        l->busy_rem = units % l->cfg.rate_bps;
    }
    return l->busy_until_ns;
}

static struct sr_sim_pkt *sr_sim_pkt_new(int to, uint32_t link, const uint8_t *data, size_t len)
{
    struct sr_sim_pkt *p = malloc(sizeof(*p) + len);
    if (!p)
        return NULL;
    p->to = to;
    p->link = link;
    p->len = (uint32_t)len;
    memcpy(p->data, data, len);
    return p;
}

/* The per-packet draws, always all five and always in this order, so one
 * packet's fate never shifts another's with a different fault mix. */
enum { SR_SIM_U_LOSS, SR_SIM_U_CORRUPT, SR_SIM_U_DUP, SR_SIM_U_REORDER, SR_SIM_U_POS, SR_SIM_U_N };

int sr_sim_send(struct sr_sim *sim, int from, const uint8_t *pkt, size_t len)
{
    uint8_t dst[16];
    if (!sim || from < 0 || (size_t)from >= sim->node_cnt || !pkt)
        return SR_ERR_INVAL;
    int rc = sr_sim_ip_dst(pkt, len, dst);
    if (rc < 0)
        return rc;
    int to = sr_sim_find_node(sim, dst);
    if (to < 0)
        return SR_ERR_INVAL;
    int id = sr_sim_link_find(sim, from, to);
    if (id < 0)
        return SR_ERR_INVAL;
    struct sr_sim_link *l = &sim->links[id];
    uint64_t now_ns = sim->now_ns;

    sr_sim_q_drain(l, now_ns);
    l->st.sent++;
    l->st.bytes += len;
    if (l->cfg.queue_bytes && l->q_bytes && l->q_bytes + len > l->cfg.queue_bytes) {
        l->st.queue_drops++;
        return 0;
    }

    uint64_t rng[4], u[SR_SIM_U_N];
    memcpy(rng, l->rng, sizeof(rng));
    for (int i = 0; i < SR_SIM_U_N; i++)
        u[i] = sr_sim_rng_next(rng);
    bool lost = sr_sim_unit(u[SR_SIM_U_LOSS]) < l->cfg.loss;
    bool corrupt = sr_sim_unit(u[SR_SIM_U_CORRUPT]) < l->cfg.corrupt;
    bool dup = sr_sim_unit(u[SR_SIM_U_DUP]) < l->cfg.dup;
    bool reorder = sr_sim_unit(u[SR_SIM_U_REORDER]) < l->cfg.reorder;

    /* Every allocation before any state changes, so a failure leaves the
     * link as it was (bar the offered counters). */
    struct sr_sim_pkt *p1 = NULL, *p2 = NULL;
    rc = sr_sim_q_reserve(l);
    if (rc < 0)
        goto err;
    rc = sr_sim_grow((void **)&sim->heap, &sim->heap_cap, sim->heap_cnt + 2, sizeof(*sim->heap));
    if (rc < 0)
        goto err;
    if (!lost) {
        rc = SR_ERR_NOMEM;
        p1 = sr_sim_pkt_new(to, (uint32_t)id, pkt, len);
        if (!p1)
            goto err;
        if (dup) {
            p2 = malloc(sizeof(*p2) + len);
            if (!p2)
                goto err_free_p1;
        }
    }

    memcpy(l->rng, rng, sizeof(rng));
    /* ECN looks at the queue the packet joins, before it joins. */
    bool congested = l->cfg.ecn_bytes && l->q_bytes > l->cfg.ecn_bytes;
    uint64_t done_ns = sr_sim_serialize(l, now_ns, len);
    if (done_ns > now_ns)
        sr_sim_q_push(l, done_ns, (uint32_t)len);
    if (lost) {
        /* Lost on the wire: it still used its serialization time. */
        l->st.lost++;
        return 0;
    }
    if (congested && sr_sim_ecn_mark(p1->data))
        l->st.ecn_marked++;
    if (corrupt) {
        uint32_t pos = sr_sim_below(u[SR_SIM_U_POS], (uint32_t)len);
        p1->data[pos] ^= (uint8_t)(1u << (u[SR_SIM_U_POS] & 7));
        l->st.corrupted++;
    }
    uint64_t at_ns = sr_sim_add_sat(done_ns, l->cfg.delay_ns);
    if (reorder) {
        uint64_t extra = l->cfg.reorder_ns;
        if (!extra)
            extra = sr_sim_add_sat(sr_sim_add_sat(l->cfg.delay_ns, l->cfg.delay_ns),
                                   sr_sim_add_sat(l->cfg.delay_ns, 1000));
        at_ns = sr_sim_add_sat(at_ns, extra);
        l->st.reordered++;
    } else {
        at_ns = SR_MAX(at_ns, l->last_arrive_ns);
        l->last_arrive_ns = at_ns;
    }
    sr_sim_heap_push(sim, at_ns, p1);
    if (dup) {
        /* An exact copy of what the wire delivered, corruption included. */
        memcpy(p2, p1, sizeof(*p1) + len);
        sr_sim_heap_push(sim, at_ns, p2);
        l->st.duplicated++;
    }
    return 0;

err_free_p1:
    free(p1);
err:
    return rc;
}

/* ---- the event loop ---- */

static void sr_sim_deliver(struct sr_sim *sim)
{
    struct sr_sim_ev ev = sr_sim_heap_pop(sim);
    struct sr_sim_pkt *p = ev.pkt;
    sim->links[p->link].st.delivered++;
    /* Copy what the callback needs: it may add nodes, and the nodes array
     * may move under it. */
    void (*rx)(void *, const uint8_t *, size_t, uint64_t) = sim->nodes[p->to].ops.rx;
    void *ctx = sim->nodes[p->to].ctx;
    if (rx)
        rx(ctx, p->data, p->len, sim->now_ns);
    free(p);
}

int sr_sim_run(struct sr_sim *sim, uint64_t until_ns, bool (*stop)(void *arg), void *arg)
{
    if (!sim || sim->running)
        return SR_ERR_INVAL;
    sim->running = true;
    int ret;
    for (;;) {
        uint64_t t_pkt = sim->heap_cnt ? sim->heap[0].at_ns : UINT64_MAX;
        uint64_t t_node = UINT64_MAX;
        size_t node = 0;
        /* O(nodes) per step. For thousands of nodes with busy timers, a heap
         * of (deadline, node id) refreshed after each callback of a node
         * would replace this scan. */
        for (size_t i = 0; i < sim->node_cnt; i++) {
            if (!sim->nodes[i].ops.next_deadline)
                continue;
            uint64_t d = sim->nodes[i].ops.next_deadline(sim->nodes[i].ctx);
            if (d != UINT64_MAX && d < sim->now_ns)
                d = sim->now_ns; /* overdue fires now, after deliveries due now */
            if (d < t_node) {
                t_node = d;
                node = i;
            }
        }
        uint64_t t = SR_MIN(t_pkt, t_node);
        if (t == UINT64_MAX) {
            ret = SR_SIM_IDLE;
            break;
        }
        if (t > until_ns) {
            sim->now_ns = SR_MAX(sim->now_ns, until_ns);
            ret = SR_SIM_UNTIL;
            break;
        }
        sim->now_ns = t;
        if (t_pkt <= t_node) {
            sr_sim_deliver(sim);
        } else {
            void (*advance)(void *, uint64_t) = sim->nodes[node].ops.advance;
            advance(sim->nodes[node].ctx, t);
        }
        if (stop && stop(arg)) {
            ret = SR_SIM_STOPPED;
            break;
        }
    }
    sim->running = false;
    return ret;
}
