/* paths.c: per-packet entropy policies, and the engine's calls into them
 * (sr_paths_qp_*, sr_qp_reorder_ok); both declared in paths.h. */
#include "paths.h"

#include <stdlib.h>
#include <string.h>

#include "engine_int.h"

enum {
    /* Avoidance, in round trips of the QP's smallest RTT (paths.h). */
    AVOID_MARK_RTTS = 8,
    AVOID_LOST_RTTS = 32,
    AVOID_SLOW_RTTS = 4,
};
#define RTT_DEFAULT_NS 100000ull /* before any sample */
#define RTT_FLOOR_NS   10000ull  /* a loopback RTT must not make avoidance vanish */
#define SLOW_SLACK_NS  50000ull  /* scheduling noise a round trip may carry */

/* An odd stride spreads the values of one QP over the 14 free bits of the
 * dynamic range, distinct for every i < 2^14. */
uint16_t sr_paths_port(uint16_t base_port, uint32_t i)
{
    if (i == 0)
        return base_port;
    return (uint16_t)(0xc000 | ((base_port + i * 0x9e5u) & 0x3fff));
}

void sr_paths_init(struct sr_paths *p, enum sr_paths_policy policy, uint32_t n, uint16_t base_port,
                   uint64_t seed)
{
    memset(p, 0, sizeof(*p));
    if (policy != SR_PATHS_SPRAY && policy != SR_PATHS_ADAPTIVE)
        policy = SR_PATHS_SINGLE;
    if (policy == SR_PATHS_SINGLE || n == 0)
        n = 1;
    if (n > SR_PATHS_MAX)
        n = SR_PATHS_MAX;
    p->n = (uint8_t)n;
    p->policy = (uint8_t)policy;
    p->burst = 1;
    /* splitmix64 of the seed: any seed, including 0, gives a live state */
    uint64_t z = seed + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    p->rng = (z ^ (z >> 31)) | 1;
    for (uint32_t i = 0; i < n; i++)
        p->path[i].port = sr_paths_port(base_port, i);
}

void sr_paths_set_burst(struct sr_paths *p, uint32_t burst)
{
    p->burst = (uint8_t)(burst == 0 ? 1 : burst > 255 ? 255 : burst);
    p->burst_left = 0;
}

static uint64_t rng_next(struct sr_paths *p)
{
    uint64_t x = p->rng; /* xorshift64* */
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    p->rng = x;
    return x * 0x2545f4914f6cdd1dull;
}

static struct sr_paths_rec *rec_of(struct sr_paths *p, uint32_t psn)
{
    struct sr_paths_rec *r = &p->rec[psn & (SR_PATHS_REC - 1)];
    return r->valid && r->psn == psn ? r : NULL;
}

int sr_paths_of(const struct sr_paths *p, uint32_t psn)
{
    const struct sr_paths_rec *r = &p->rec[psn & (SR_PATHS_REC - 1)];
    return r->valid && r->psn == psn ? r->path : -1;
}

bool sr_paths_avoided(const struct sr_paths *p, uint8_t i, uint64_t now_ns)
{
    return i < p->n && p->path[i].avoid_until > now_ns;
}

static uint64_t rtt_ref(const struct sr_paths *p)
{
    uint64_t r = p->min_rtt_ns ? p->min_rtt_ns : RTT_DEFAULT_NS;
    return r < RTT_FLOOR_NS ? RTT_FLOOR_NS : r;
}

static void tok_push(struct sr_paths *p, uint8_t i)
{
    if (p->tok_cnt == SR_PATHS_TOK) { /* the oldest news goes first */
        p->tok_head = (p->tok_head + 1) & (SR_PATHS_TOK - 1);
        p->tok_cnt--;
    }
    p->tok[(p->tok_head + p->tok_cnt) & (SR_PATHS_TOK - 1)] = i;
    p->tok_cnt++;
}

static int tok_pop(struct sr_paths *p)
{
    if (!p->tok_cnt)
        return -1;
    uint8_t i = p->tok[p->tok_head];
    p->tok_head = (p->tok_head + 1) & (SR_PATHS_TOK - 1);
    p->tok_cnt--;
    return i;
}

static void bad(struct sr_paths *p, uint8_t i, uint32_t rtts, uint64_t now_ns)
{
    struct sr_path *x = &p->path[i];
    uint64_t until = now_ns + rtts * rtt_ref(p);
    x->bad_at = now_ns;
    if (until > x->avoid_until)
        x->avoid_until = until;
}

/* ADAPTIVE's choice (paths.h, rules 1-3); never excl when another value
 * is usable. */
static uint8_t adaptive(struct sr_paths *p, int excl, uint64_t now_ns)
{
    for (uint8_t i = 0; i < p->n; i++) {
        struct sr_path *x = &p->path[i];
        if (x->avoid_until && x->avoid_until <= now_ns && i != excl) {
            x->avoid_until = 0; /* tried once; good ACKs bring it back */
            return i;
        }
    }
    /* A good value left out of the recycling (nothing of it was in
     * flight when the tokens went round) is used again, so that every
     * good value stays in rotation. */
    for (uint8_t i = 0; i < p->n; i++)
        if (i != excl && p->seq - p->path[i].last_seq > 4u * p->n &&
            !sr_paths_avoided(p, i, now_ns))
            return i;
    /* Bounded: each turn consumes a recycled value. */
    for (int t; (t = tok_pop(p)) >= 0;)
        if (t < p->n && t != excl && !sr_paths_avoided(p, (uint8_t)t, now_ns))
            return (uint8_t)t;
    uint8_t ok[SR_PATHS_MAX];
    uint32_t cnt = 0;
    for (uint8_t i = 0; i < p->n; i++)
        if (i != excl && !sr_paths_avoided(p, i, now_ns))
            ok[cnt++] = i;
    if (cnt)
        return ok[rng_next(p) % cnt];
    if (excl >= 0 && !sr_paths_avoided(p, (uint8_t)excl, now_ns))
        return (uint8_t)excl;
    uint8_t best = 0;
    for (uint8_t i = 1; i < p->n; i++)
        if (p->path[i].avoid_until < p->path[best].avoid_until && i != excl)
            best = i;
    return best;
}

uint8_t sr_paths_choose(struct sr_paths *p, uint32_t psn, uint64_t now_ns)
{
    if (p->n <= 1)
        return 0;
    struct sr_paths_rec *r = &p->rec[psn & (SR_PATHS_REC - 1)];
    bool resend = r->valid && r->psn == psn;
    int excl = resend ? r->path : -1;
    uint8_t i;
    if (!resend && p->burst_left && !sr_paths_avoided(p, p->cur, now_ns)) {
        p->burst_left--; /* the run goes on */
        i = p->cur;
    } else {
        if (p->policy == SR_PATHS_ADAPTIVE) {
            i = adaptive(p, excl, now_ns);
        } else {
            i = p->rr;
            if (i == excl)
                i = (uint8_t)((i + 1) % p->n);
            p->rr = (uint8_t)((i + 1) % p->n);
        }
        if (!resend) { /* a new run; a resend leaves the run alone */
            p->cur = i;
            p->burst_left = (uint8_t)(p->burst - 1);
        }
    }
    *r = (struct sr_paths_rec){
        .psn = psn, .path = i, .valid = true, .resent = resend, .sent_ns = now_ns};
    p->path[i].st.sent++;
    p->path[i].last_seq = ++p->seq;
    return i;
}

void sr_paths_rtt(struct sr_paths *p, uint8_t i, uint64_t rtt_ns, uint64_t now_ns)
{
    if (i >= p->n)
        return;
    struct sr_path *x = &p->path[i];
    x->srtt_ns = x->srtt_ns ? x->srtt_ns - x->srtt_ns / 8 + rtt_ns / 8 : rtt_ns;
    /* Slow against the QP's round trip over all its values, judged before
     * this sample joins it: delay every path shares (the sender's own
     * queue, the receiver's) marks none of them. */
    if (p->srtt_ns && rtt_ns > 2 * p->srtt_ns + SLOW_SLACK_NS) {
        x->st.slow++;
        bad(p, i, AVOID_SLOW_RTTS, now_ns);
    }
    p->srtt_ns = p->srtt_ns ? p->srtt_ns - p->srtt_ns / 8 + rtt_ns / 8 : rtt_ns;
    if (!p->min_rtt_ns || rtt_ns < p->min_rtt_ns)
        p->min_rtt_ns = rtt_ns;
}

void sr_paths_acked(struct sr_paths *p, uint32_t from, uint32_t to, uint64_t now_ns)
{
    if (p->n <= 1)
        return;
    uint32_t cnt = (uint32_t)sr_psn_diff(to, from);
    if ((int32_t)cnt <= 0)
        return;
    if (cnt > SR_PATHS_REC) { /* the older ones are no longer remembered */
        from = sr_psn_add(to, (uint32_t)-SR_PATHS_REC & SR_PSN_MASK);
        cnt = SR_PATHS_REC;
    }
    uint32_t last = sr_psn_add(to, SR_PSN_MASK);
    struct sr_paths_rec *lr = rec_of(p, last);
    if (lr && !lr->resent && now_ns >= lr->sent_ns)
        sr_paths_rtt(p, lr->path, now_ns - lr->sent_ns, now_ns);
    for (uint32_t k = 0; k < cnt; k++) {
        struct sr_paths_rec *r = rec_of(p, sr_psn_add(from, k));
        if (!r)
            continue;
        struct sr_path *x = &p->path[r->path];
        r->valid = false;
        x->st.good++;
        /* Sent after the last bad mark: the value carries well again. */
        if (p->policy == SR_PATHS_ADAPTIVE && (!x->bad_at || r->sent_ns > x->bad_at) &&
            !sr_paths_avoided(p, r->path, now_ns))
            tok_push(p, r->path);
    }
}

void sr_paths_lost(struct sr_paths *p, uint32_t psn, uint64_t now_ns)
{
    struct sr_paths_rec *r = p->n > 1 ? rec_of(p, psn) : NULL;
    if (!r)
        return;
    p->path[r->path].st.lost++;
    if (p->policy == SR_PATHS_ADAPTIVE)
        bad(p, r->path, AVOID_LOST_RTTS, now_ns);
}

void sr_paths_marked(struct sr_paths *p, uint32_t psn, uint64_t now_ns)
{
    struct sr_paths_rec *r = p->n > 1 ? rec_of(p, psn) : NULL;
    if (!r)
        return;
    p->path[r->path].st.marked++;
    if (p->policy == SR_PATHS_ADAPTIVE)
        bad(p, r->path, AVOID_MARK_RTTS, now_ns);
}

/* ---- the engine's side ---- */

bool sr_qp_reorder_ok(const struct sr_qp *qp)
{
    /* A go-back-N responder answers a packet that overtakes another with
     * a PSN sequence NAK and a rewind (IBA 9.7.5.1.2): spray only to a
     * peer whose responses say it keeps out-of-order requests and SACKs
     * them (docs/WIRE.md), or when an experiment asks regardless. */
    return qp->eng->cfg.paths_reorder || (qp->eng->cfg.sack && qp->comp.peer_sack);
}

/* Multipath for qp's requests, set up on its first request: RC and XRC
 * initiators only (UC drops a message on any gap, UD has one packet per
 * message and a destination per WR). NULL: single path. */
static struct sr_paths *qp_paths(struct sr_qp *qp)
{
    const struct sr_engine_cfg *c = &qp->eng->cfg;
    if (qp->paths || c->paths <= 1 || qp->paths_off)
        return qp->paths;
    if ((qp->type != SR_QPT_RC && qp->type != SR_QPT_XRC_SEND) ||
        (c->path_policy != SR_PATHS_SPRAY && c->path_policy != SR_PATHS_ADAPTIVE)) {
        qp->paths_off = true;
        return NULL;
    }
    /* Not latched: the first requests leave before the peer's first
     * response can say it takes reordering; spraying starts after it. */
    if (!sr_qp_reorder_ok(qp))
        return NULL;
    qp->paths = malloc(sizeof(*qp->paths));
    if (!qp->paths) {
        qp->paths_off = true; /* single path is always correct */
        return NULL;
    }
    sr_paths_init(qp->paths, (enum sr_paths_policy)c->path_policy, c->paths, qp->src_port,
                  c->paths_seed ^ ((uint64_t)qp->qpn << 32));
    sr_paths_set_burst(qp->paths, c->path_burst);
    return qp->paths;
}

uint16_t sr_paths_qp_tx(struct sr_qp *qp, const struct sr_pkt *pkt, uint8_t *path)
{
    *path = 0;
    const struct sr_opcode_info *info = sr_opcode_info(pkt->bth.opcode);
    if (!info || !(info->flags & SR_OPF_REQUEST))
        return qp->src_port; /* responses and ACKs stay on the QP's port */
    struct sr_paths *p = qp_paths(qp);
    if (!p)
        return qp->src_port;
    *path = sr_paths_choose(p, pkt->bth.psn, qp->eng->now_ns);
    return p->path[*path].port;
}

void sr_paths_qp_acked(struct sr_qp *qp, uint32_t old_psn, uint64_t now_ns)
{
    if (qp->paths)
        sr_paths_acked(qp->paths, old_psn, qp->comp.psn, now_ns);
}

void sr_paths_qp_lost(struct sr_qp *qp, uint32_t psn, uint64_t now_ns)
{
    if (qp->paths)
        sr_paths_lost(qp->paths, psn, now_ns);
}

void sr_paths_qp_cnp(struct sr_qp *qp, uint64_t now_ns)
{
    /* A RoCEv2 CNP names the QP, not the packet that was marked: the oldest unacknowledged packet
     * has waited longest, so it is the likeliest to sit in the marking queue. */
    if (qp->paths && qp->comp.psn != qp->req.max_sent)
        sr_paths_marked(qp->paths, qp->comp.psn, now_ns);
}

void sr_paths_qp_free(struct sr_qp *qp)
{
    free(qp->paths);
    qp->paths = NULL;
    qp->paths_off = false;
}

const struct sr_paths *sr_qp_paths(const struct sr_qp *qp)
{
    return qp->paths;
}
