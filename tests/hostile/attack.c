/* attack.c: the packet classes of hostile.forged_packets (the tables),
 * how a row becomes a RoCEv2 packet with the project's codec, and how
 * what the victim answers is checked against the row; also the bulk
 * classes (random bytes, lengths), the victim as requester facing a
 * hostile responder, READ-then-WRITE ordering, and the fuzz. */
#include "attack.h"
#include "sr_util.h"

#include <errno.h>
#include <infiniband/verbs.h> /* enum values only: the attacker does not link verbs */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

static const struct row barrier_row = {"barrier", HX_T_PING, RC(WRITE_ONLY), 0, VA_ABS, 0, KEY_BAD,
                                       0,         0,         .exp = X_ACK};

void hx_fail(struct att *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("hx attacker: FAIL [%s]: ", a->row ? a->row : "-");
    vprintf(fmt, ap);
    putchar('\n');
    fflush(stdout);
    va_end(ap);
    a->failures++;
}

static void fill_pat(uint8_t *p, uint32_t len, uint32_t seed, uint64_t pos)
{
    for (uint32_t i = 0; i < len; i++)
        p[i] = hx_pat(seed, pos + i);
}

static void declare(struct att *a, uint32_t area, uint32_t off, uint32_t len, uint32_t seed)
{
    if (a->done.n_decl >= HX_MAX_DECL) {
        hx_fail(a, "too many declared writes");
        return;
    }
    a->done.decl[a->done.n_decl++] = (struct hx_decl){area, off, len, seed};
}

static void declare_atomic(struct att *a, uint32_t off, uint64_t value)
{
    for (uint32_t i = 0; i < a->done.n_atomic; i++)
        if (a->done.atomic[i].off == off) {
            a->done.atomic[i].value = value;
            return;
        }
    if (a->done.n_atomic >= HX_MAX_ATOMIC) {
        hx_fail(a, "too many atomics");
        return;
    }
    a->done.atomic[a->done.n_atomic++] = (struct hx_atomic){.off = off, .value = value};
}

static uint64_t model_u64(const struct att *a, int64_t off)
{
    uint64_t v = 0;
    if (off >= 0 && off + 8 <= HX_REGION_LEN)
        memcpy(&v, a->model + off, 8);
    return v;
}

static uint32_t fake_qpn(uint32_t target)
{
    return FAKE_QPN_BASE + target;
}

/* A victim that died must not cost a timeout per remaining row. */
bool hx_victim_alive(struct att *a)
{
    if (a->reaped)
        return false;
    if (waitpid(a->victim, &a->status, WNOHANG) == a->victim)
        a->reaped = true;
    return !a->reaped;
}

/* ---- answers ---- */
struct want {
    uint32_t qpn;
    uint8_t op;
    uint32_t psn;
    int syn; /* exact AETH syndrome; -1: any ACK (type 000) */
    const uint8_t *payload;
    uint32_t len;
    bool check_orig;
    uint64_t orig;
};

static void describe(const struct sr_pkt *p, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s qpn 0x%x psn 0x%x syndrome 0x%02x len %u", sr_opcode_name(p->bth.opcode),
             p->bth.dest_qp, p->bth.psn, p->aeth.syndrome, p->payload_len);
}

/* Receive until w arrives; anything else that arrives is unexpected. */
static bool wait_resp(struct att *a, const struct want *w)
{
    uint8_t *buf = a->rx;
    uint64_t end = hx_now_ms() + RESP_MS;
    if (end > a->deadline_ms)
        end = a->deadline_ms;
    for (;;) {
        uint64_t now = hx_now_ms();
        if (now >= end)
            break;
        uint8_t src[16];
        uint16_t sport;
        int n = sr_forge_recv(&a->a, buf, MAX_DGRAM, src, &sport, (int)(end - now));
        if (n == -ETIMEDOUT)
            break;
        if (n < 0) {
            hx_fail(a, "recv: %s", strerror(-n));
            return false;
        }
        struct sr_forge_l3 l3 = {
            .src_gid = src, .dst_gid = a->a.gid, .sport = sport, .dport = a->a.port};
        struct sr_pkt p;
        char d[160];
        const char *why = memcmp(src, a->info.gid, 16)                ? "not from the victim"
                          : n < SR_BTH_LEN + SR_ICRC_LEN              ? "too short"
                          : !sr_forge_icrc_ok(&l3, buf, (size_t)n)    ? "bad ICRC"
                          : sr_wire_decode(buf, (size_t)n, 0, &p) < 0 ? "malformed"
                                                                      : NULL;
        if (why && !strcmp(why, "bad ICRC") && sr_wire_decode(buf, (size_t)n, 0, &p) >= 0 &&
            (sr_opcode_info(p.bth.opcode)->flags & SR_OPF_READ_RESP)) {
            a->stale_icrc++; /* KNOWN_BUG_TX_BATCH_ICRC_RACE: see run_read_write */
            continue;
        }
        if (why) {
            char hex[3 * 48 + 1] = "";
            for (int k = 0; k < n && k < 48; k++)
                snprintf(hex + 3 * k, 4, " %02x", buf[k]);
            hx_fail(a, "a datagram of %d bytes from the victim: %s:%s", n, why, hex);
            continue;
        }
        describe(&p, d, sizeof(d));
        if (a->mode == HX_MODE_FUZZ && p.bth.dest_qp != w->qpn)
            continue; /* answers to the fuzz are not checked, only the barrier's */
        bool match = p.bth.dest_qp == w->qpn && p.bth.opcode == w->op && p.bth.psn == w->psn;
        if (match && (p.hdrs & SR_HDR_BIT(SR_HDR_AETH)))
            match = w->syn < 0 ? SR_AETH_TYPE(p.aeth.syndrome) == SR_AETH_ACK
                               : p.aeth.syndrome == (uint8_t)w->syn;
        if (!match) {
            hx_fail(a, "unexpected answer %s (waiting for %s psn 0x%x syndrome %d)", d,
                    sr_opcode_name(w->op), w->psn, w->syn);
            continue;
        }
        if (w->payload && (p.payload_len != w->len || memcmp(p.payload, w->payload, w->len)))
            hx_fail(a, "answer %s: payload differs from the victim's memory", d);
        if (w->check_orig && p.atomic_orig != w->orig)
            hx_fail(a, "answer %s: original value 0x%" PRIx64 ", want 0x%" PRIx64, d, p.atomic_orig,
                    w->orig);
        return true;
    }
    hx_fail(a, "no %s psn 0x%x syndrome %d within %d ms", sr_opcode_name(w->op), w->psn, w->syn,
            RESP_MS);
    if (!hx_victim_alive(a)) {
        hx_fail(a, "the victim is gone: attack stopped");
        a->deadline_ms = hx_now_ms();
    }
    return false;
}

/* ---- building and sending a row ---- */
struct built {
    uint8_t buf[MAX_DGRAM];
    size_t len;
    uint32_t psn;
    uint32_t dst_qpn;
    const struct sr_forge *via;
};

static uint32_t row_qpn(const struct att *a, const struct row *r)
{
    switch (r->dst) {
    case D_UD:
        return a->info.ud_qpn;
    case D_UC:
        return a->info.uc_qpn;
    case D_LEGIT:
        return a->info.legit_qpn;
    case D_DEAD:
        return a->info.dead_qpn;
    case D_INIT:
        return a->info.init_qpn;
    case D_QPN:
        return r->qpn;
    default:
        return a->info.qpn[r->dst];
    }
}

static bool is_target(const struct row *r)
{
    return r->dst >= 0 && r->dst < HX_TARGETS;
}

/* Where a SEND's payload lands: positions of its pattern. */
static uint64_t send_pos(const struct att *a, const struct row *r)
{
    if (r->dst == D_UD)
        return (uint64_t)a->ud_delivered * HX_UD_SLOT + 40;
    return is_target(r) ? (uint64_t)r->dst * HX_RECV_SLOT : 0;
}

static int build_row(struct att *a, const struct row *r, struct built *b)
{
    const struct sr_opcode_info *info = sr_opcode_info(r->op);
    if (!info)
        return SR_ERR_WIRE_OPCODE;
    bool resp = info->flags & SR_OPF_RESPONSE;
    struct sr_pkt p = {0};
    p.bth.opcode = r->op;
    p.bth.pkey = 0xffff;
    p.bth.dest_qp = b->dst_qpn = row_qpn(a, r);
    uint32_t base = 0;
    if (is_target(r))
        base = resp ? a->info.sq_psn[r->dst] : a->t[r->dst].epsn;
    else if (r->dst == D_LEGIT)
        base = 0x424242;
    else if (r->dst == D_UC)
        base = a->uc_epsn;
    b->psn = r->fx & FX_REPLAY ? a->saved[r->slot].psn : sr_psn_add(base, (uint32_t)r->psn);
    p.bth.psn = b->psn;
    p.bth.ack_req = !resp && SR_OPCODE_TRANSPORT(r->op) == SR_OP_RC;

    uint64_t va = 0;
    switch (r->va) {
    case VA_REGION:
        va = a->info.region + (uint64_t)r->off;
        break;
    case VA_ABS:
        va = (uint64_t)r->off;
        break;
    case VA_LEGIT:
        va = a->info.legit_va + (uint64_t)r->off;
        break;
    }
    uint32_t key = r->key == KEY_A       ? a->info.rkey_a
                   : r->key == KEY_B     ? a->info.rkey_b
                   : r->key == KEY_BAD   ? a->info.rkey_a ^ 0xff /* same slot, wrong tag */
                   : r->key == KEY_LEGIT ? a->info.legit_rkey
                                         : 0;
    p.reth.va = va;
    p.reth.rkey = key;
    p.reth.dma_len = r->dma;
    p.atomic.va = va;
    p.atomic.rkey = key;
    p.atomic.swap_add = r->add;
    if (r->cmp == CMP_MODEL)
        p.atomic.compare = model_u64(a, r->off);
    else if (r->cmp == CMP_OTHER)
        p.atomic.compare = ~model_u64(a, r->off);
    p.aeth.syndrome = r->syn;
    if (SR_OPCODE_OP(r->op) == SR_OP_ATOMIC_ACK) {
        /* the bytes it leaves in the requester's buffer: a pattern */
        uint8_t orig[8];
        fill_pat(orig, 8, r->seed, HX_REQ_ATOMIC_OFF);
        memcpy(&p.atomic_orig, orig, 8);
    }
    p.deth.qkey = r->mut & MU_QKEY ? HX_UD_QKEY ^ 0x1000 : HX_UD_QKEY;
    p.deth.src_qp = UD_FAKE_QPN;
    p.imm = UD_IMM;
    p.xrc_srqn = 1;
    uint8_t *payload = a->payload;
    if (r->len && (info->flags & SR_OPF_PAYLOAD)) {
        uint64_t pos = info->flags & SR_OPF_SEND ? send_pos(a, r) : (uint64_t)r->off;
        fill_pat(payload, r->len, r->seed, pos);
        p.payload = payload;
        p.payload_len = r->len;
    }
    int n = sr_wire_encode(&p, b->buf, sizeof(b->buf));
    if (n < 0)
        return n;
    b->len = (size_t)n;

    uint32_t m = r->mut;
    if (m & MU_EXTRA) { /* payload where the opcode has none: before the ICRC slot */
        memset(b->buf + b->len - SR_ICRC_LEN, 0xab, r->arg);
        b->len += r->arg;
    }
    if (m & MU_TRUNC)
        b->len = r->arg;
    if (m & MU_OPCODE)
        b->buf[0] = (uint8_t)r->arg;
    if (m & MU_TVER)
        b->buf[1] |= 1;
    if (m & MU_PAD)
        b->buf[1] = (uint8_t)((b->buf[1] & ~0x30) | (r->arg << 4));
    if (m & MU_ACKREQ)
        b->buf[8] |= 0x80;

    b->via = m & MU_FROM_B ? &a->b : &a->a;
    struct sr_forge_l3 l3 = sr_forge_l3_to(b->via, a->info.gid);
    if (m & MU_IPID)
        l3.ip_id = 64;
    if (m & MU_IPID_GSO)
        l3.ip_id = 63;
    if (m & MU_WRONG_DST)
        l3.dst_gid = a->a.gid;
    if (m & MU_SPORT)
        l3.sport = SR_ROCE_UDP_PORT + 1;
    if (m & MU_SPOOF)
        l3.src_gid = a->a.gid;
    if (b->len >= SR_BTH_LEN + SR_ICRC_LEN) {
        int err = sr_forge_icrc_fill(&l3, b->buf, b->len);
        if (err)
            return err;
    }
    if (m & MU_ICRC_FLIP)
        b->buf[b->len - 1] ^= 0x01;
    if (m & MU_BODY_FLIP)
        b->buf[info->hdr_len] ^= 0x10;
    return 0;
}

static void count_drop(struct att *a, int exp)
{
    a->x.drop[exp]++;
    if (exp != X_SHORT && exp != X_LONG && exp != X_ICRC)
        a->x.delivered++;
}

/* Send one row and check what it must cause. */
static void run_row(struct att *a, const struct row *r)
{
    a->row = r->name;
    if (hx_now_ms() >= a->deadline_ms) {
        hx_fail(a, "scenario deadline reached");
        return;
    }
    struct built *b = malloc(sizeof(*b));
    if (!b) {
        hx_fail(a, "malloc");
        return;
    }
    int err = build_row(a, r, b);
    if (err) {
        hx_fail(a, "cannot build: %s", sr_err_name(err));
        free(b);
        return;
    }
    err = sr_forge_send(b->via, a->info.gid, b->buf, b->len);
    if (err) {
        hx_fail(a, "send: %s", strerror(-err));
        free(b);
        return;
    }
    struct tgt *t = is_target(r) ? &a->t[r->dst] : NULL;
    if (r->dst == D_UC)
        a->uc_epsn = sr_psn_add(b->psn, 1);
    uint32_t fq = is_target(r) ? fake_qpn((uint32_t)r->dst) : 0;
    if (r->fx & FX_DUP)
        a->x.duplicates++;
    if (r->fx & FX_ERR_RCVD)
        a->x.err_naks_rcvd++;
    if (r->fx & FX_RNR_RCVD)
        a->x.rnr_naks_rcvd++;
    const struct sr_opcode_info *info = sr_opcode_info(r->op);
    struct want w = {.qpn = fq, .op = SR_OP_RC | SR_OP_ACK, .psn = b->psn, .syn = -1};
    switch (r->exp) {
    case X_ACK:
        a->x.delivered++;
        if (!t || !wait_resp(a, &w))
            break;
        t->epsn = sr_psn_add(b->psn, 1);
        if (r->len && (info->flags & SR_OPF_WRITE)) {
            declare(a, HX_AREA_REGION, (uint32_t)r->off, r->len, r->seed);
            fill_pat(a->model + r->off, r->len, r->seed, (uint64_t)r->off);
        } else if (r->len && (info->flags & SR_OPF_SEND)) {
            declare(a, HX_AREA_RBUF, (uint32_t)send_pos(a, r), r->len, r->seed);
            a->done.recv_status[r->dst] = IBV_WC_SUCCESS;
            a->done.recv_len[r->dst] = r->len;
        }
        break;
    case X_NAK:
        a->x.delivered++;
        if (!t)
            break;
        w.syn = r->syn;
        if (r->syn == 0x60) {
            w.psn = t->epsn; /* IBA 9.7.5.1.2: the NAK names the expected PSN */
            a->x.seq_naks_sent++;
        } else {
            a->x.err_naks_sent++;
            t->dead = true;
        }
        wait_resp(a, &w);
        break;
    case X_RNR:
        a->x.delivered++;
        a->x.rnr_naks_sent++;
        w.syn = r->syn;
        if (t)
            wait_resp(a, &w);
        break;
    case X_READ: {
        a->x.delivered++;
        uint32_t npkts = r->dma ? (r->dma + HX_PATH_MTU - 1) / HX_PATH_MTU : 1;
        for (uint32_t k = 0; t && k < npkts; k++) {
            uint32_t chunk = r->dma ? SR_MIN(HX_PATH_MTU, r->dma - k * HX_PATH_MTU) : 0;
            w.op = SR_OP_RC | (npkts == 1       ? SR_OP_READ_RESP_ONLY
                               : k == 0         ? SR_OP_READ_RESP_FIRST
                               : k == npkts - 1 ? SR_OP_READ_RESP_LAST
                                                : SR_OP_READ_RESP_MIDDLE);
            w.psn = sr_psn_add(b->psn, k);
            w.payload = chunk ? a->model + r->off + (int64_t)k * HX_PATH_MTU : a->model;
            w.len = chunk;
            if (!wait_resp(a, &w))
                break;
        }
        if (t && !(r->fx & FX_REPLAY))
            t->epsn = sr_psn_add(b->psn, npkts);
        if (r->fx & FX_SAVE)
            a->saved[r->slot].psn = b->psn;
        break;
    }
    case X_ATOMIC: {
        a->x.delivered++;
        w.op = SR_OP_RC | SR_OP_ATOMIC_ACK;
        w.check_orig = true;
        uint64_t cur = model_u64(a, r->off);
        w.orig = r->fx & FX_REPLAY ? a->saved[r->slot].orig : cur;
        if (!t || !wait_resp(a, &w))
            break;
        if (r->fx & FX_REPLAY)
            break;
        t->epsn = sr_psn_add(b->psn, 1);
        uint64_t next = cur;
        if (SR_OPCODE_OP(r->op) == SR_OP_FETCH_ADD)
            next = cur + r->add;
        else if (r->cmp == CMP_MODEL) /* the compare value was the current one */
            next = r->add;
        memcpy(a->model + r->off, &next, 8);
        declare_atomic(a, (uint32_t)r->off, next);
        if (r->fx & FX_SAVE) {
            a->saved[r->slot].psn = b->psn;
            a->saved[r->slot].orig = cur;
        }
        break;
    }
    case X_DUP_ACK:
        a->x.delivered++;
        if (t) {
            w.psn = sr_psn_add(t->epsn, SR_PSN_MASK);
            wait_resp(a, &w);
        }
        break;
    case X_SILENT:
        a->x.delivered++;
        if (r->dst == D_UC && r->len && (info->flags & SR_OPF_WRITE)) {
            declare(a, HX_AREA_REGION, (uint32_t)r->off, r->len, r->seed);
            fill_pat(a->model + r->off, r->len, r->seed, (uint64_t)r->off);
        }
        if (r->dst == D_UD) {
            declare(a, HX_AREA_UDBUF, a->ud_delivered * HX_UD_SLOT, 40, HX_SEED_ANY); /* GRH */
            declare(a, HX_AREA_UDBUF, (uint32_t)send_pos(a, r), r->len, r->seed);
            a->ud_delivered++;
        }
        break;
    default:
        count_drop(a, r->exp);
        break;
    }
    free(b);
}

static void barrier(struct att *a)
{
    run_row(a, &barrier_row);
}

/* After an error NAK the QP is in Error: a valid request is now dropped. */
static void after_death(struct att *a, int target)
{
    struct row r = barrier_row;
    r.name = "valid_write_after_error_nak";
    r.dst = target;
    r.exp = X_NO_QP;
    run_row(a, &r);
}

static void run_rows(struct att *a, const struct row *rows, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (rows[i].mut & MU_FROM_B)
            barrier(a); /* order across our two sockets is not guaranteed */
        run_row(a, &rows[i]);
    }
    barrier(a);
}

static void run_fatal(struct att *a)
{
    for (size_t i = 0; i < SR_ARRAY_SIZE(fatal_rows); i++) {
        struct row pre;
        struct row r = fatal_row(i, &pre);
        run_row(a, &pre);
        run_row(a, &r);
        after_death(a, r.dst);
        a->done.state[r.dst] = IBV_QPS_ERR;
        a->done.event[r.dst] = r.syn == 0x62 ? IBV_EVENT_QP_ACCESS_ERR : IBV_EVENT_QP_REQ_ERR;
        /* its receive: flushed, or failed with a length error */
        a->done.recv_status[r.dst] =
            SR_OPCODE_OP(r.op) == SR_OP_SEND_ONLY ? IBV_WC_LOC_LEN_ERR : IBV_WC_WR_FLUSH_ERR;
    }
    barrier(a);
}

static void run_requester(struct att *a)
{
    a->row = "victim_requests";
    uint32_t s = a->info.sq_psn[HX_T_SPARE];
    struct sr_forge_l3 l3 = {
        .src_gid = a->info.gid, .dst_gid = a->a.gid, .sport = SR_ROCE_UDP_PORT, .dport = a->a.port};
    bool read_seen = false, atomic_seen = false;
    uint64_t end = hx_now_ms() + RESP_MS;
    while ((!read_seen || !atomic_seen) && hx_now_ms() < end) {
        int n = sr_forge_recv(&a->a, a->rx, MAX_DGRAM, NULL, NULL, (int)(end - hx_now_ms()));
        struct sr_pkt p;
        if (n < 0 || !sr_forge_icrc_ok(&l3, a->rx, (size_t)n) ||
            sr_wire_decode(a->rx, (size_t)n, 0, &p) < 0 || p.bth.dest_qp != fake_qpn(HX_T_SPARE)) {
            hx_fail(a, "not one of the victim's requests (%d bytes)", n);
            continue;
        }
        if (p.bth.opcode == RC(READ_REQ))
            read_seen = p.bth.psn == s && p.reth.va == HX_REQ_VA && p.reth.rkey == HX_REQ_RKEY &&
                        p.reth.dma_len == HX_REQ_READ_LEN;
        else if (p.bth.opcode == RC(FETCH_ADD))
            atomic_seen = p.bth.psn == sr_psn_add(s, 1) && p.atomic.va == HX_REQ_VA + HX_PAGE &&
                          p.atomic.rkey == HX_REQ_RKEY && p.atomic.swap_add == HX_REQ_ADD;
        else
            hx_fail(a, "unexpected %s from the victim", sr_opcode_name(p.bth.opcode));
    }
    if (!read_seen || !atomic_seen) {
        hx_fail(a, "the victim's READ (%d) and FETCH_ADD (%d) did not arrive as posted", read_seen,
                atomic_seen);
        return;
    }
    for (size_t i = 0; i < SR_ARRAY_SIZE(requester_rows); i++) {
        const struct row *r = &requester_rows[i];
        run_row(a, r);
        if (r->exp != X_SILENT)
            continue;
        if (SR_OPCODE_OP(r->op) == SR_OP_ATOMIC_ACK)
            declare(a, HX_AREA_LBUF, HX_REQ_ATOMIC_OFF, 8, r->seed);
        else
            declare(a, HX_AREA_LBUF, 0, r->len, r->seed);
    }
    a->done.req_status[0] = a->done.req_status[1] = IBV_WC_SUCCESS;
    barrier(a);
}

/* ---- a READ and a WRITE to the same bytes, back to back ----
 * The responder executes requests in order (IBA 9.7.5.1): the READ
 * response carries the bytes from before the WRITE, under an ICRC that
 * matches them. Sent without waiting in between, so that both usually
 * land in one receive batch of the victim. */
static void run_read_write(struct att *a)
{
    enum { PAIRS = 16, LEN = 64, OFF = 0x1900 };
    struct built *rb = malloc(sizeof(*rb)), *wb = malloc(sizeof(*wb));
    if (!rb || !wb) {
        free(rb);
        free(wb);
        return;
    }
    unsigned stale_icrc = 0, new_bytes = 0;
    struct tgt *t = &a->t[HX_T_GOOD];
    struct sr_forge_l3 l3 = {
        .src_gid = a->info.gid, .dst_gid = a->a.gid, .sport = SR_ROCE_UDP_PORT, .dport = a->a.port};
    for (int k = 0; k < PAIRS && hx_now_ms() < a->deadline_ms; k++) {
        int64_t off = OFF + k * LEN;
        struct row rd = {
            "read_then_write_same_bytes", HX_T_GOOD, RC(READ_REQ), 0, VA_REGION, off, KEY_A, LEN};
        struct row wr = {"read_then_write_same_bytes",
                         HX_T_GOOD,
                         RC(WRITE_ONLY),
                         1,
                         VA_REGION,
                         off,
                         KEY_A,
                         LEN,
                         LEN,
                         .seed = 0x90 + (uint32_t)k};
        a->row = rd.name;
        if (build_row(a, &rd, rb) || build_row(a, &wr, wb) ||
            sr_forge_send(&a->a, a->info.gid, rb->buf, rb->len) ||
            sr_forge_send(&a->a, a->info.gid, wb->buf, wb->len)) {
            hx_fail(a, "cannot send");
            break;
        }
        a->x.delivered += 2;
        bool got_read = false, got_ack = false;
        uint64_t end = hx_now_ms() + RESP_MS;
        while ((!got_read || !got_ack) && hx_now_ms() < end) {
            uint8_t src[16];
            int n = sr_forge_recv(&a->a, a->rx, MAX_DGRAM, src, NULL, (int)(end - hx_now_ms()));
            struct sr_pkt p;
            if (n < 0 || sr_wire_decode(a->rx, (size_t)n, 0, &p) < 0) {
                hx_fail(a, "no valid answer (%d)", n);
                continue;
            }
            bool icrc = sr_forge_icrc_ok(&l3, a->rx, (size_t)n);
            if (p.bth.opcode == RC(ACK) && p.bth.psn == wb->psn && icrc) {
                got_ack = true;
            } else if (p.bth.opcode == RC(READ_RESP_ONLY) && p.bth.psn == rb->psn &&
                       p.payload_len == LEN) {
                got_read = true;
                bool old = !memcmp(p.payload, a->model + off, LEN);
                uint8_t later[LEN];
                fill_pat(later, LEN, wr.seed, (uint64_t)off);
                bool newer = !memcmp(p.payload, later, LEN);
                stale_icrc += !icrc;
                new_bytes += newer;
                if (icrc && !old)
                    hx_fail(a, "pair %d: the READ response (valid ICRC) carries %s bytes", k,
                            newer ? "the later WRITE's" : "unknown");
            } else {
                hx_fail(a, "unexpected answer %s psn 0x%x", sr_opcode_name(p.bth.opcode),
                        p.bth.psn);
            }
        }
        if (!got_read || !got_ack)
            hx_fail(a, "pair %d: READ response %d, ACK %d", k, got_read, got_ack);
        t->epsn = sr_psn_add(wb->psn, 1);
        fill_pat(a->model + off, LEN, wr.seed, (uint64_t)off);
        declare(a, HX_AREA_REGION, (uint32_t)off, LEN, wr.seed);
    }
    if (stale_icrc)
        printf("[attacker] KNOWN_BUG_TX_BATCH_ICRC_RACE: check skipped: %u of %d READ "
               "responses left with an ICRC that does not match their payload (%u of them "
               "carrying the bytes of the WRITE that followed the READ): the UDP driver "
               "computes the ICRC when it queues a packet (sr_udp_queue) but the kernel "
               "gathers the payload from registered memory at sr_udp_flush, after the rest "
               "of the receive batch ran; a real requester drops the response and, on retry, "
               "reads the later WRITE's bytes\n",
               stale_icrc, PAIRS, new_bytes);
    else
        printf("hx attacker: ok %-28s %d READ responses carry the bytes from before the WRITE "
               "that followed them\n",
               "read_then_write_same_bytes", PAIRS);
    free(rb);
    free(wb);
    barrier(a);
}

/* ---- bulk classes: random bytes, lengths, ICRC-valid noise ---- */
static void send_raw(struct att *a, const uint8_t *buf, size_t len, int exp)
{
    int err = sr_forge_send(&a->a, a->info.gid, buf, len);
    if (err)
        hx_fail(a, "send %zu bytes: %s", len, strerror(-err));
    else
        count_drop(a, exp);
}

static void random_fill(struct att *a, uint8_t *p, size_t len)
{
    for (size_t i = 0; i < len; i++)
        p[i] = (uint8_t)sr_forge_rand(&a->rng);
}

static void run_bulk(struct att *a)
{
    uint8_t *buf = a->raw;
    struct sr_forge_l3 l3 = sr_forge_l3_to(&a->a, a->info.gid);
    a->row = "random_shorter_than_bth_icrc";
    for (size_t len = 0; len < SR_BTH_LEN + SR_ICRC_LEN; len++) {
        random_fill(a, buf, len);
        send_raw(a, buf, len, X_SHORT);
    }
    barrier(a);
    a->row = "random_bytes";
    for (int i = 0; i < 256; i++) {
        size_t len = 16 + sr_forge_rand(&a->rng) % 1400;
        random_fill(a, buf, len);
        if (sr_forge_icrc_ok(&l3, buf, len)) /* 2^-32: keep the class pure */
            buf[len - 1] ^= 1;
        send_raw(a, buf, len, X_ICRC);
        if (i % BULK_BARRIER == BULK_BARRIER - 1)
            barrier(a);
    }
    barrier(a);
    /* The receive buffer holds a 4096-byte payload and headers: 4224 bytes
     * (src/drivers/udp/udp.c); one more is truncated by the kernel. */
    a->row = "random_longer_than_receive_buffer";
    static const size_t lens[] = {4224, 4225, 4500, 8192, 9000, 16384, MAX_DGRAM};
    for (size_t i = 0; i < SR_ARRAY_SIZE(lens); i++) {
        random_fill(a, buf, lens[i]);
        if (sr_forge_icrc_ok(&l3, buf, lens[i]))
            buf[lens[i] - 1] ^= 1;
        send_raw(a, buf, lens[i], lens[i] > 4224 ? X_LONG : X_ICRC);
        barrier(a);
    }
    /* Random bodies with a valid ICRC: the QPN is looked up first. */
    a->row = "random_body_valid_icrc_unknown_qpn";
    for (int i = 0; i < 128; i++) {
        size_t len = 16 + sr_forge_rand(&a->rng) % 1000;
        random_fill(a, buf, len);
        sr_put_be24(buf + 5, 0x700000u + (uint32_t)i);
        sr_forge_icrc_fill(&l3, buf, len);
        send_raw(a, buf, len, X_NO_QP);
        if (i % BULK_BARRIER == BULK_BARRIER - 1)
            barrier(a);
    }
    barrier(a);
}

/* ---- fuzz: valid packets with a few bytes changed, ICRC fixed ---- */
static void run_fuzz(struct att *a)
{
    static const uint8_t ops[] = {
        RC(WRITE_ONLY),
        RC(WRITE_FIRST),
        RC(WRITE_MIDDLE),
        RC(WRITE_LAST),
        RC(READ_REQ),
        RC(FETCH_ADD),
        RC(CMP_SWAP),
        RC(SEND_ONLY),
        RC(SEND_FIRST),
        RC(ACK),
        RC(READ_RESP_ONLY),
        RC(ATOMIC_ACK),
        SR_OP_UD | SR_OP_SEND_ONLY,
    };
    static const int dsts[] = {HX_T_SPARE,           HX_T_GOOD, HX_T_SEQ, HX_T_FIRST_FATAL,
                               HX_T_FIRST_FATAL + 1, D_UD,      D_UC,     D_LEGIT};
    struct built *b = malloc(sizeof(*b));
    if (!b)
        return;
    struct sr_forge_l3 l3 = sr_forge_l3_to(&a->a, a->info.gid);
    a->row = "fuzz";
    for (int i = 0; i < FUZZ_PKTS && hx_now_ms() < a->deadline_ms; i++) {
        uint64_t r = sr_forge_rand(&a->rng);
        struct row row = {"fuzz",
                          dsts[r % SR_ARRAY_SIZE(dsts)],
                          ops[(r >> 8) % SR_ARRAY_SIZE(ops)],
                          (int32_t)((r >> 16) % 5) - 2,
                          VA_REGION,
                          (int64_t)((r >> 24) % (HX_A_LEN / 8)) * 8 - 64,
                          KEY_A,
                          (uint32_t)(r >> 40) % 96,
                          0,
                          .syn = (uint8_t)(r >> 48),
                          .seed = (uint32_t)(r >> 56),
                          .add = r};
        if (row.dst == D_UD)
            row.op = SR_OP_UD | SR_OP_SEND_ONLY;
        if (row.dst == D_UC) /* UC has SENDs and WRITEs only */
            row.op = sr_opcode_info(SR_OP_UC | SR_OPCODE_OP(row.op))
                         ? (uint8_t)(SR_OP_UC | SR_OPCODE_OP(row.op))
                         : UC(WRITE_ONLY);
        const struct sr_opcode_info *info = sr_opcode_info(row.op);
        if (info->flags & SR_OPF_PAYLOAD)
            row.len = info->flags & (SR_OPF_FIRST | SR_OPF_MIDDLE) ? HX_PATH_MTU : row.dma % 72;
        if (SR_OPCODE_OP(row.op) == SR_OP_WRITE_ONLY)
            row.dma = row.len;
        if (build_row(a, &row, b))
            continue;
        if (i % 8 == 0)
            goto send; /* some valid packets keep the QPs' state moving */
        /* 1-3 bytes changed anywhere but the destination QPN (whose
         * barrier QP must survive) and the ICRC */
        int flips = 1 + (int)(sr_forge_rand(&a->rng) % 3);
        for (int k = 0; k < flips && b->len > 12 + SR_ICRC_LEN; k++) {
            uint64_t q = sr_forge_rand(&a->rng);
            size_t at = (size_t)(q % SR_MIN(b->len - SR_ICRC_LEN, 72));
            if (at >= 5 && at <= 7)
                continue;
            b->buf[at] ^= (uint8_t)(1 + (q >> 32) % 255);
        }
        sr_forge_icrc_fill(&l3, b->buf, b->len);
    send:;
        int err = sr_forge_send(&a->a, a->info.gid, b->buf, b->len);
        if (err)
            hx_fail(a, "send: %s", strerror(-err));
        else
            a->x.delivered++;
        if (i % 32 == 31)
            barrier(a);
    }
    free(b);
    barrier(a);
    /* granted: all of MR A and every receive buffer's own bytes */
    declare(a, HX_AREA_REGION, HX_A_OFF, HX_A_LEN, HX_SEED_ANY);
    for (int t = 0; t < HX_TARGETS; t++)
        declare(a, HX_AREA_RBUF, (uint32_t)t * HX_RECV_SLOT, HX_RECV_LEN, HX_SEED_ANY);
    for (int k = 0; k < HX_UD_RECVS; k++)
        declare(a, HX_AREA_UDBUF, (uint32_t)k * HX_UD_SLOT, HX_UD_RECV_LEN, HX_SEED_ANY);
}

/* ---- entry points ---- */
void hx_attack_init(struct att *a)
{
    for (uint32_t i = 0; i < HX_REGION_LEN; i++)
        a->model[i] = hx_pat(HX_SEED_REGION, i);
    for (int i = 0; i < HX_TARGETS; i++) {
        a->t[i].epsn = a->info.rq_psn[i];
        a->done.state[i] = a->mode == HX_MODE_CLASSES ? IBV_QPS_RTS : -1;
        a->done.recv_status[i] = a->mode == HX_MODE_CLASSES ? -1 : -2;
        a->done.event[i] = a->mode == HX_MODE_CLASSES ? -1 : -2;
    }
    a->uc_epsn = a->info.uc_rq_psn;
    a->done.req_status[0] = a->done.req_status[1] = -1;
    a->done.ud_src_qpn = a->mode == HX_MODE_CLASSES ? UD_FAKE_QPN : 0xffffffffu;
    a->done.uc_state = a->mode == HX_MODE_CLASSES ? IBV_QPS_RTS : -1;
}

void hx_attack_run(struct att *a)
{
    if (a->mode == HX_MODE_CLASSES) {
        run_requester(a); /* first: its requests wait in our socket */
        run_rows(a, good_rows, SR_ARRAY_SIZE(good_rows));
        run_rows(a, seq_rows, SR_ARRAY_SIZE(seq_rows));
        run_rows(a, malformed_rows, SR_ARRAY_SIZE(malformed_rows));
        run_rows(a, noqp_rows, SR_ARRAY_SIZE(noqp_rows));
        run_rows(a, ud_rows, SR_ARRAY_SIZE(ud_rows));
        run_rows(a, uc_rows, SR_ARRAY_SIZE(uc_rows));
        run_rows(a, legit_rows, SR_ARRAY_SIZE(legit_rows));
        run_read_write(a);
        run_fatal(a);
        run_bulk(a);
        a->done.ud_recvs = (int32_t)a->ud_delivered;
    } else {
        run_fuzz(a);
        a->done.ud_recvs = -1;
    }
    barrier(a);
}
