/* ooo.c: the responder's out-of-order store (sack.h, docs/WIRE.md).
 *
 * Standard RC drops every request past a hole and NAKs the hole once
 * (IBA 9.7.5.1.2), so one loss costs everything in flight behind it. To a
 * requester that advertised SR_BTH_RESV7_SACK, this responder instead
 * keeps a copy of each request whose PSN lies within its window past the
 * expected PSN, and tells the requester what it holds with a SACK
 * (cumulative PSN plus a bitmap). When the hole fills, the kept requests
 * that follow it run through the ordinary responder state machine in PSN
 * order (resp.c), as if they had just arrived: SEND, WRITE, READ, atomics
 * and RNR keep their IBA semantics, an atomic executes once, and a WRITE's
 * last byte is never written before the bytes before it.
 *
 * Bounds: per QP, the PSNs [epsn + 1, epsn + win) (win: cfg.ooo_pkts
 * rounded up to a power of two, at most SR_OOO_MAX_PKTS) and one copy per
 * PSN; per device, cfg.ooo_bytes of slots, in use or free in the pool.
 * What does not fit is treated as standard: a sequence NAK and a drop. The
 * store is allocated at the first packet kept, and freed when the QP
 * errors, resets or is destroyed.
 *
 * Slots come from a per-device pool of fixed sizes (headers only, for a
 * placed request; headers and a payload of 256 to 4096 bytes, for a
 * copy): under
 * loss nearly every request takes this path, and a malloc and free per
 * packet cost the responder more than the store's own work. A slot freed
 * goes back to its free list; the pool grows while its slots, in use and
 * free together, fit the device's budget, and gives free slots of other
 * sizes back to the allocator when a slot of one size must grow it past
 * the budget. */
#include "engine_int.h"
#include "place.h"

#include <stdlib.h>

struct sr_ooo_slot {
    struct sr_ooo_slot *next_free; /* in the pool's free list */
    struct sr_pkt pkt;
    uint32_t span;  /* PSNs it takes: a READ request takes its responses' */
    uint8_t cls;    /* its size class in the pool */
    bool placed;    /* its payload is in memory already (place.c) */
    uint8_t *dst;   /* where, for a WRITE piece; NULL for a SEND's (scattered) */
    uint8_t data[]; /* the payload, when not placed */
};

/* The pool's slot sizes: headers only (a placed request), or headers and
 * a payload of 256 << (cls - 1) bytes, up to one PMTU of 4096 (the
 * decoder refuses more, and such a request is not kept). A copy takes the
 * smallest class that holds it, so a device at MTU 1024 keeps 1 KiB, not
 * 4 KiB, per copy. */
enum { SR_OOO_CLASSES = 6 };

struct sr_ooo_pool {
    struct sr_ooo_slot *free[SR_OOO_CLASSES];
    uint64_t bytes; /* every slot allocated, in use or free */
};

static uint8_t slot_class(uint32_t payload_len, bool placed)
{
    uint8_t c = 1;
    if (placed)
        return 0;
    while (c < SR_OOO_CLASSES - 1 && payload_len > (256u << (c - 1)))
        c++;
    return c;
}

static size_t slot_size(uint8_t cls)
{
    return sizeof(struct sr_ooo_slot) + (cls ? 256u << (cls - 1) : 0);
}

static uint64_t ooo_cap(const struct sr_engine *e)
{
    return e->cfg.ooo_bytes ? e->cfg.ooo_bytes : SR_OOO_DEF_BYTES;
}

static struct sr_ooo_slot *pool_get(struct sr_engine *e, uint8_t cls)
{
    struct sr_ooo_pool *p = e->ooo_pool;
    if (!p && !(p = e->ooo_pool = calloc(1, sizeof(*p))))
        return NULL;
    struct sr_ooo_slot *s = p->free[cls];
    if (s) {
        /* the next slot's link is read at the next call: a slot freed a
         * hole ago is out of the cache by now */
        if ((p->free[cls] = s->next_free))
            __builtin_prefetch(p->free[cls], 1);
        return s;
    }
    size_t size = slot_size(cls);
    /* free slots of the other sizes make room within the budget */
    for (uint8_t c = 0; c < SR_OOO_CLASSES && p->bytes + size > ooo_cap(e); c++) {
        while (p->free[c] && p->bytes + size > ooo_cap(e)) {
            struct sr_ooo_slot *f = p->free[c];
            p->free[c] = f->next_free;
            p->bytes -= slot_size(c);
            free(f);
        }
    }
    if (p->bytes + size > ooo_cap(e) || !(s = malloc(size)))
        return NULL;
    p->bytes += size;
    s->cls = cls;
    e->stats.ooo_slot_allocs++;
    return s;
}

static void pool_put(struct sr_engine *e, struct sr_ooo_slot *s)
{
    struct sr_ooo_pool *p = e->ooo_pool;
    s->next_free = p->free[s->cls];
    p->free[s->cls] = s;
}

/* SACKs while requests are kept: one when the store opens, then at the
 * end of the receive pass (a deadline of now, sr_engine_advance) once
 * SR_SACK_DUPTHRESH requests past the newest hole are kept, for a new
 * hole, for a request with AckReq, and after every SR_OOO_SACK_EVERY
 * requests kept otherwise. */
/* Every 4th, not fewer: with D-SACKs and probes that a SACK's new
 * deliveries rearm (sack.c), one SACK per 16 or 64 kept let the
 * requester's probe fire in the middle of recoveries; in srdma-sim, 150
 * WRITEs of 1 MiB at 5% loss then resent 14 to 340 times what was lost
 * (0.7 to 7.0 Gb/s of 10), against about 0.6 times (8.6 Gb/s) with 4.
 * One per 8 sends 40% fewer SACKs at 1% loss (27% at 5%, 18% at 10%)
 * for the same goodput at 1%, but 2.5 to 4% less at 5 and 10% (medians
 * of bench/sack_sim.sh's seeds, 64 KiB and 1 MiB). */
enum { SR_OOO_SACK_EVERY = 4 };
/* A receive pass under a steady stream can run for thousands of packets
 * before sr_engine_advance: a SACK that fell due leaves inline once this
 * many more requests were kept, so the requester still learns of a loss
 * within a few dozen packets. */
enum { SR_OOO_SACK_LATE = 16 };

struct sr_ooo {
    uint32_t win; /* a power of two */
    uint32_t cnt;
    uint32_t hi;         /* one past the highest PSN a kept request takes */
    uint32_t since_sack; /* requests kept since the last SACK */
    uint32_t fresh;      /* requests kept since the newest hole opened */
    bool sack_pending;   /* a SACK leaves at sack_at (the end of the pass) */
    uint64_t sack_at;
    uint32_t seen;      /* epsn when the store last looked for stale requests */
    bool draining;      /* sr_ooo_drain is running: no nested drain */
    uint32_t placed;    /* kept WRITE pieces placed already (place.c) */
    uintptr_t plo, phi; /* host addresses they cover lie in [plo, phi) */
    struct sr_place_first firsts[SR_PLACE_FIRSTS];
    uint64_t *held;             /* win bits by PSN & (win - 1): the PSNs kept requests take */
    struct sr_ooo_slot *slot[]; /* by PSN & (win - 1) */
};

/* The held bits of the PSNs [psn, psn + n). */
static void held_set(struct sr_ooo *o, uint32_t psn, uint32_t n, bool on)
{
    for (uint32_t k = 0; k < n; k++) {
        uint32_t b = (psn + k) & (o->win - 1);
        if (on)
            o->held[b >> 6] |= 1ull << (b & 63);
        else
            o->held[b >> 6] &= ~(1ull << (b & 63));
    }
}

/* 64 held bits from position pos on, wrapping around the window. */
static uint64_t held_word(const struct sr_ooo *o, uint32_t pos)
{
    uint32_t nw = o->win / 64, w = (pos & (o->win - 1)) >> 6, sh = pos & 63;
    uint64_t v = o->held[w] >> sh;
    if (sh)
        v |= o->held[(w + 1) % nw] << (64 - sh);
    return v;
}

static uint32_t ooo_win(const struct sr_engine *e)
{
    uint32_t want = e->cfg.ooo_pkts ? e->cfg.ooo_pkts : SR_OOO_DEF_PKTS;
    uint32_t w = 64;
    while (w < want && w < SR_OOO_MAX_PKTS)
        w <<= 1;
    return w;
}

/* A slot leaves the store (drained or freed): its placed range with it. */
static void slot_gone(struct sr_ooo *o, const struct sr_ooo_slot *s)
{
    if (s->dst && !--o->placed) /* o->placed counts WRITE pieces */
        o->plo = o->phi = 0;
}

static void slot_free(struct sr_qp *qp, struct sr_ooo *o, uint32_t i)
{
    struct sr_ooo_slot *s = o->slot[i];
    if (!s)
        return;
    qp->eng->ooo_bytes -= slot_size(s->cls);
    held_set(o, s->pkt.bth.psn, s->span, false);
    o->slot[i] = NULL;
    o->cnt--;
    slot_gone(o, s);
    pool_put(qp->eng, s);
}

void sr_ooo_free(struct sr_qp *qp)
{
    struct sr_ooo *o = qp->resp.ooo;
    if (!o)
        return;
    for (uint32_t i = 0; i < o->win && o->cnt; i++)
        slot_free(qp, o, i);
    free(o->held);
    free(o);
    qp->resp.ooo = NULL;
}

bool sr_ooo_sack_due(const struct sr_qp *qp)
{
    return qp->resp.ooo && qp->resp.ooo->cnt && qp->resp.peer_sack;
}

static uint8_t resp_base(const struct sr_qp *qp)
{
    return qp->type == SR_QPT_XRC_RECV ? SR_OP_XRC : SR_OP_RC;
}

void sr_ooo_send_sack(struct sr_qp *qp)
{
    struct sr_ooo *o = qp->resp.ooo;
    uint32_t epsn = qp->resp.epsn;
    uint32_t base = sr_psn_add(epsn, 1);
    struct sr_engine *e = qp->eng;
    if (!e->sack_ring && !(e->sack_ring = malloc((size_t)SR_SACK_RING * SR_SACK_MAX_BITS / 8)))
        return; /* no SACK this time; the requester's probe covers it */
    uint8_t *bm = e->sack_ring + (size_t)e->sack_ring_at * (SR_SACK_MAX_BITS / 8);
    e->sack_ring_at = (e->sack_ring_at + 1) % SR_SACK_RING;
    /* bits [0, top): the PSNs from base up to the highest one held */
    int32_t reach = sr_psn_diff(o->hi, base);
    uint32_t top = reach <= 0 ? 0 : SR_MIN((uint32_t)reach, SR_MIN(o->win - 1, SR_SACK_MAX_BITS));
    /* A power of two of words, the bits past top clear: SACKs then come
     * in six lengths, not 32, so the driver's per-length ICRC terms and
     * its same-length trains (src/drivers/udp) serve them, where one
     * length per SACK made it recompute its terms for most datagrams. */
    uint32_t words = 1;
    while (words * 64 < top)
        words <<= 1;
    for (uint32_t j = 0; j < words; j++) {
        uint64_t v = held_word(o, base + j * 64);
        uint32_t left = top - j * 64;
        if (top <= j * 64)
            v = 0;
        else if (left < 64)
            v &= (1ull << left) - 1;
        for (int k = 0; k < 8; k++)
            bm[j * 8 + k] = (uint8_t)(v >> (8 * k)); /* LSB first (docs/WIRE.md) */
    }
    struct sr_pkt p = {0};
    p.bth.opcode = SR_OP_SACK;
    p.bth.pkey = 0xffff;
    p.bth.dest_qp = qp->attr.dest_qp_num;
    p.bth.psn = sr_psn_add(epsn, SR_PSN_MASK); /* cumulative: everything before epsn */
    p.aeth.syndrome = SR_AETH_ACK | SR_AETH_NO_CREDIT_LIMIT;
    p.aeth.msn = qp->resp.msn & SR_PSN_MASK;
    p.sack.base_psn = base;
    p.sack.flags = SR_SACK_F_RPH; /* SENDs with an RPETH are placed (place.c) */
    p.payload_len = words * 8;
    struct sr_iov iov = {.base = bm, .len = p.payload_len};
    e->stats.sacks_sent++;
    o->since_sack = 0;
    o->sack_pending = false;
    if (e->sack_ring_at) {
        sr_engine_tx(e, qp, &p, &iov, 1, qp->attr.dgid);
        return;
    }
    /* The ring wraps: every SACK queued so far leaves before its bitmap
     * is reused (the flush flag, or the fence, sr_engine_ops). */
    sr_engine_tx_flush(e, qp, &p, &iov, 1, qp->attr.dgid);
    if (e->cfg.ops.tx_fence) {
        e->fence_due = false;
        e->cfg.ops.tx_fence(e->cfg.ops_ctx);
    }
}

bool sr_ooo_answers_sack(const struct sr_engine *e, const struct sr_pkt *pkt)
{
    const struct sr_opcode_info *info = sr_opcode_info(pkt->bth.opcode);
    return e->cfg.sack && info && (info->flags & SR_OPF_RESPONSE);
}

void sr_ooo_engine_fini(struct sr_engine *e)
{
    free(e->sack_ring);
    e->sack_ring = NULL;
    struct sr_ooo_pool *p = e->ooo_pool;
    if (!p)
        return;
    for (uint8_t c = 0; c < SR_OOO_CLASSES; c++) {
        while (p->free[c]) {
            struct sr_ooo_slot *s = p->free[c];
            p->free[c] = s->next_free;
            free(s);
        }
    }
    free(p);
    e->ooo_pool = NULL;
}

/* The plain cumulative ACK after a drain emptied the store (IBA 9.7.5.1.1
 * lets the responder acknowledge at any time). */
static void send_plain_ack(struct sr_qp *qp)
{
    struct sr_pkt p = {0};
    p.bth.opcode = resp_base(qp) | SR_OP_ACK;
    p.bth.pkey = 0xffff;
    p.bth.dest_qp = qp->attr.dest_qp_num;
    p.bth.psn = sr_psn_add(qp->resp.epsn, SR_PSN_MASK);
    p.aeth.syndrome = SR_AETH_ACK | SR_AETH_NO_CREDIT_LIMIT;
    p.aeth.msn = qp->resp.msn & SR_PSN_MASK;
    sr_engine_tx(qp->eng, qp, &p, NULL, 0, qp->attr.dgid);
}

/* The SACK leaves at the end of this receive pass (sr_ooo_advance). */
static void sack_later(struct sr_qp *qp)
{
    struct sr_ooo *o = qp->resp.ooo;
    if (o->sack_pending)
        return;
    o->sack_pending = true;
    o->sack_at = qp->eng->now_ns;
    sr_engine_activate(qp->eng, qp); /* sr_ooo_deadline */
}

bool sr_ooo_store(struct sr_qp *qp, const struct sr_pkt *pkt, int decode_err)
{
    struct sr_engine *e = qp->eng;
    /* A same-host reference (sr_bulk.h) is not kept: its payload means
     * something only during the call that delivered it, with its peer. */
    if (!e->cfg.sack || !qp->resp.peer_sack || decode_err || e->bulk.rx)
        return false;
    uint32_t win = qp->resp.ooo ? qp->resp.ooo->win : ooo_win(e);
    int32_t d = sr_psn_diff(pkt->bth.psn, qp->resp.epsn);
    uint32_t span = 1;
    if (pkt->hdrs & SR_HDR_BIT(SR_HDR_RETH) && SR_OPCODE_OP(pkt->bth.opcode) == SR_OP_READ_REQ) {
        uint32_t pmtu = sr_qp_pmtu(qp);
        span = pkt->reth.dma_len ? (uint32_t)(((uint64_t)pkt->reth.dma_len + pmtu - 1) / pmtu) : 1;
    }
    if (d < 1 || (uint64_t)d + span > win) {
        e->stats.ooo_overflow++;
        return false;
    }
    struct sr_ooo *o = qp->resp.ooo;
    if (!o) {
        o = calloc(1, sizeof(*o) + win * sizeof(o->slot[0]));
        if (o)
            o->held = calloc(win / 64, sizeof(uint64_t));
        if (!o || !o->held) {
            free(o);
            e->stats.ooo_overflow++;
            return false;
        }
        o->win = win;
        qp->resp.ooo = o;
    }
    if (!o->cnt) {
        /* (re)opened: an empty store stays allocated until the QP errors,
         * resets or is destroyed, so that a hole costs no allocation */
        memset(o->firsts, 0, sizeof(o->firsts));
        o->seen = qp->resp.epsn;
        o->sack_pending = false;
    }
    uint32_t i = pkt->bth.psn & (win - 1);
    struct sr_ooo_slot *s = o->slot[i];
    if (s && s->pkt.bth.psn == pkt->bth.psn) {
        /* a copy of one kept already: it answers a probe like a duplicate */
        e->stats.ooo_dup++;
        sr_dsack_send(qp, pkt->bth.psn); /* D-SACK (dsack.c) */
        if (pkt->bth.ack_req)
            sack_later(qp);
        return true;
    }
    slot_free(qp, o, i); /* a stale request left behind by a jump of epsn */
    uint8_t *dst = sr_place_target(qp, pkt, o->firsts);
    /* A SEND is scattered before its slot is taken: if none is left, the
     * request is dropped and sent again, and in order it writes the same
     * bytes to the same place. */
    bool sent = !dst && sr_place_send(qp, pkt);
    uint8_t cls = slot_class(pkt->payload_len, dst || sent);
    if (pkt->payload_len > SR_MAX_PMTU || !(s = pool_get(e, cls))) {
        e->stats.ooo_overflow++;
        return false;
    }
    s->pkt = *pkt;
    s->span = span;
    s->placed = dst || sent;
    s->dst = dst;
    if (sent) {
        s->pkt.payload = NULL;
    } else if (dst) {
        /* written now, except what a request placed at a later PSN holds
         * already; only the headers are kept */
        sr_engine_fence(e);
        SR_DMA_BEGIN();
        sr_ooo_write(qp, pkt->bth.psn, dst, pkt->payload, pkt->payload_len);
        SR_DMA_END();
        s->pkt.payload = NULL;
        uintptr_t a = (uintptr_t)dst, b = a + pkt->payload_len;
        o->plo = o->placed && o->plo < a ? o->plo : a;
        o->phi = o->placed && o->phi > b ? o->phi : b;
        o->placed++;
        e->stats.ooo_placed++;
    } else {
        if (pkt->payload_len)
            memcpy(s->data, pkt->payload, pkt->payload_len);
        s->pkt.payload = s->data;
        e->stats.ooo_stored++;
    }
    o->slot[i] = s;
    held_set(o, pkt->bth.psn, span, true);
    bool opened = !o->cnt++;
    if (opened)
        o->hi = qp->resp.epsn;
    bool hole = !opened && sr_psn_lt(o->hi, pkt->bth.psn); /* a new gap past the others */
    bool fill = !opened && sr_psn_lt(pkt->bth.psn, o->hi); /* into a gap between kept ones */
    uint32_t end = sr_psn_add(pkt->bth.psn, span);
    if (sr_psn_lt(o->hi, end))
        o->hi = end;
    e->ooo_bytes += slot_size(cls);
    if (e->ooo_bytes > e->stats.ooo_peak_bytes)
        e->stats.ooo_peak_bytes = e->ooo_bytes;
    /* SACK the first hole at once. After it, what the requester needs is
     * DupThresh requests past each hole (RFC 6675 IsLost counts them from
     * the bitmap, not from the number of SACKs) and an answer to AckReq:
     * one SACK at the end of the receive pass carries all that arrived in
     * the pass, as coalesced ACKs do (ack.c), instead of one per few
     * requests (RFC 5681 4.2 lets TCP's ACKs cover two segments). */
    if (opened) {
        o->fresh = 1; /* the first request past the hole counts */
        sr_ooo_send_sack(qp);
        return true;
    }
    if (hole)
        o->fresh = 0;
    o->fresh++;
    o->since_sack++;
    if (o->sack_pending && o->since_sack >= SR_OOO_SACK_LATE) {
        sr_ooo_send_sack(qp);
        return true;
    }
    /* A request that fills a gap is SACKed in this pass too (RFC 5681
     * 4.2: a segment that fills a gap is acknowledged at once): the
     * requester waits on exactly that news, a late original or a resend.
     * A requester whose window is full sends nothing new after it, so
     * counted with the others it would go unreported until its resend's
     * D-SACK, which would also date the original (sack.c) by the
     * resend's answer. */
    if (hole || fill || pkt->bth.ack_req || o->fresh == SR_SACK_DUPTHRESH ||
        o->since_sack >= SR_OOO_SACK_EVERY)
        sack_later(qp);
    return true;
}

void sr_ooo_ack_owed(struct sr_qp *qp)
{
    /* Requests run by the drain ask for ACKs one after another; the one
     * acknowledgement after the drain covers them all (IBA 9.7.5.1.1: an
     * ACK acknowledges everything up to its PSN). */
    if (qp->resp.ooo->draining)
        return;
    /* An in-order request's or a duplicate's acknowledgement leaves at
     * once: deferring it to the pass's end slowed the simulated recovery
     * at 5% loss by a fifth (bench/sack_sim.sh), for reasons not
     * established. */
    sr_ooo_send_sack(qp);
}

uint64_t sr_ooo_deadline(const struct sr_qp *qp)
{
    const struct sr_ooo *o = qp->resp.ooo;
    return o && o->sack_pending ? o->sack_at : SR_NO_DEADLINE;
}

void sr_ooo_advance(struct sr_qp *qp, uint64_t now_ns)
{
    struct sr_ooo *o = qp->resp.ooo;
    if (!o || !o->sack_pending || o->sack_at > now_ns)
        return;
    /* a held ACK goes first; while requests are kept it leaves as this
     * SACK (resp.c emit_ack) */
    sr_resp_ack_first(qp, SR_ACK_EV_RESPONSE, now_ns);
    if ((o = qp->resp.ooo) && o->sack_pending) {
        if (sr_ooo_sack_due(qp))
            sr_ooo_send_sack(qp);
        o->sack_pending = false;
    }
}

/* What sr_ooo_write leaves to write: pieces of [0, len) of the request. */
enum { SR_OOO_SEGS = 32 };

void sr_ooo_write(struct sr_qp *qp, uint32_t psn, uint8_t *dst, const uint8_t *src, uint32_t len)
{
    struct sr_ooo *o = qp->resp.ooo;
    uintptr_t a = (uintptr_t)dst, b = a + len;
    if (!o || !o->placed || b <= o->plo || a >= o->phi) {
        memcpy(dst, src, len);
        return;
    }
    /* Requests placed at later PSNs wrote these bytes already: in PSN
     * order they write after this one (IBA 9.5: RDMA WRITEs and SENDs
     * execute in order), so their bytes stay. */
    struct {
        uint32_t off, len;
    } seg[SR_OOO_SEGS] = {{0, len}};
    uint32_t n = 1;
    int32_t reach = sr_psn_diff(o->hi, psn);
    for (int32_t k = 1; k < reach && k < (int32_t)o->win && n; k++) {
        uint32_t p = sr_psn_add(psn, (uint32_t)k);
        const struct sr_ooo_slot *s = o->slot[p & (o->win - 1)];
        if (!s || !s->dst || s->pkt.bth.psn != p)
            continue;
        uintptr_t x = (uintptr_t)s->dst, y = x + s->pkt.payload_len;
        if (y <= a || x >= b)
            continue;
        for (uint32_t j = 0; j < n;) {
            uintptr_t sa = a + seg[j].off, sb = sa + seg[j].len;
            if (y <= sa || x >= sb) {
                j++;
            } else if (x > sa && y < sb) {
                /* split; with no room left the piece is written whole
                 * (only overlapping placements this fragmented) */
                if (n < SR_OOO_SEGS) {
                    seg[n].off = (uint32_t)(y - a);
                    seg[n].len = (uint32_t)(sb - y);
                    n++;
                    seg[j].len = (uint32_t)(x - sa);
                }
                j++;
            } else if (x > sa) {
                seg[j++].len = (uint32_t)(x - sa);
            } else if (y < sb) {
                seg[j].off = (uint32_t)(y - a);
                seg[j++].len = (uint32_t)(sb - y);
            } else {
                seg[j] = seg[--n]; /* all of it is newer already */
            }
        }
    }
    for (uint32_t j = 0; j < n; j++)
        memcpy(dst + seg[j].off, src + seg[j].off, seg[j].len);
}

static bool resp_alive(const struct sr_qp *qp)
{
    enum sr_qp_state s = qp->attr.qp_state;
    return s == SR_QPS_RTR || s == SR_QPS_RTS || s == SR_QPS_SQD;
}

void sr_ooo_drain(struct sr_qp *qp, const uint8_t *src_gid, uint64_t now_ns)
{
    struct sr_ooo *o = qp->resp.ooo;
    if (!o || !o->cnt || o->draining)
        return;
    o->draining = true;
    bool ran = false;
    /* The packets kept are plain copies, even when the one that filled the
     * hole came as a same-host reference (sr_bulk.h). */
    bool bulk_rx = qp->eng->bulk.rx;
    qp->eng->bulk.rx = false;
    while ((o = qp->resp.ooo) && o->cnt && resp_alive(qp)) {
        uint32_t i = qp->resp.epsn & (o->win - 1);
        struct sr_ooo_slot *s = o->slot[i];
        if (!s || s->pkt.bth.psn != qp->resp.epsn)
            break;
        /* the slots were written a round trip ago: the next one's headers
         * load while this one runs */
        const struct sr_ooo_slot *next = o->slot[(i + 1) & (o->win - 1)];
        if (next) {
            __builtin_prefetch(next);
            __builtin_prefetch((const uint8_t *)next + 64);
            __builtin_prefetch((const uint8_t *)next + 128);
        }
        o->slot[i] = NULL;
        o->cnt--;
        qp->eng->ooo_bytes -= slot_size(s->cls);
        held_set(o, s->pkt.bth.psn, s->span, false);
        slot_gone(o, s);
        qp->eng->stats.ooo_drained++;
        ran = true;
        /* a placed request runs every in-order step but the copy */
        qp->resp.placed_run = s->placed;
        sr_resp_rx(qp, &s->pkt, 0, src_gid, now_ns);
        qp->resp.placed_run = false;
        pool_put(qp->eng, s);
    }
    qp->eng->bulk.rx = bulk_rx;
    o = qp->resp.ooo; /* an error on the way freed it */
    if (o) {
        o->draining = false;
        /* Requests epsn passed without running them (inside a READ's
         * PSNs, sent by no correct requester) are stale: dropped, so that
         * their bits never alias PSNs a window ahead. */
        int32_t passed = sr_psn_diff(qp->resp.epsn, o->seen);
        for (int32_t k = 0; k < passed && k < (int32_t)o->win && o->cnt; k++) {
            uint32_t p = sr_psn_add(o->seen, (uint32_t)k);
            struct sr_ooo_slot *s = o->slot[p & (o->win - 1)];
            if (s && s->pkt.bth.psn == p)
                slot_free(qp, o, p & (o->win - 1));
        }
        o->seen = qp->resp.epsn;
        if (!o->cnt)
            o->sack_pending = false; /* nothing left to SACK */
    }
    if (!ran || !resp_alive(qp))
        return;
    /* The requester is recovering and waits for this answer; a held ACK
     * leaves first so that acknowledgements stay in order. */
    sr_resp_ack_first(qp, SR_ACK_EV_RESPONSE, now_ns);
    if (sr_ooo_sack_due(qp))
        sr_ooo_send_sack(qp);
    else
        send_plain_ack(qp);
}
