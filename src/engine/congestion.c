/* congestion.c: the engine's calls into src/cc (congestion.h). The
 * algorithms decide; this file feeds them the engine's events and carries
 * out their answers: a packet the pacer holds makes the QP wait for a
 * deadline of the timer list (never a sleep), the window caps the
 * requester, and the notification point's verdicts leave as RoCEv2 CNPs.
 *
 * What a paced byte is: every byte the engine hands the driver for the
 * packet (BTH through payload and pad, and the 4-byte ICRC) plus the IPv4
 * and UDP headers (28 bytes), so that a rate is close to what the packet
 * costs on an IP link. Ethernet framing is not counted. */
#include "engine_int.h"

enum { CONG_L3_BYTES = 20 + 8 + SR_ICRC_LEN }; /* IPv4 + UDP headers, ICRC */

void sr_cong_init(struct sr_qp *qp, uint64_t now_ns)
{
    struct sr_qp_cong *c = &qp->cong;
    const struct sr_cc_cfg *cfg = &qp->eng->cc;
    memset(c, 0, sizeof(*c));
    if (sr_cc_init(&c->cc, cfg, now_ns) < 0)
        (void)sr_cc_init(&c->cc, &(struct sr_cc_cfg){.algo = SR_CC_NONE}, now_ns);
    c->on = c->cc.ops != &sr_cc_none_ops;
}

bool sr_cong_gate(struct sr_qp *qp, const struct sr_swqe *w, uint64_t now_ns)
{
    struct sr_qp_cong *c = &qp->cong;
    (void)w; /* the pacer spaces by the packet before, not this one (sr_cc.h) */
    if (!c->on)
        return false;
    c->tx_mark = qp->eng->stats.tx_bytes;
    /* At the line rate the link (or the host) is the limit: pacing there
     * would only add a deadline per packet. DCQCN sits there until its
     * first CNP and again once it has recovered. With pace_line the host's
     * link is faster than line_rate (veths into srdma-switch), so the pacer
     * stands in for the NIC port's serialisation. */
    uint64_t rate = sr_cc_rate_bps(&c->cc);
    if (!rate || (rate >= qp->eng->cc.line_rate_bps && !qp->eng->cc.pace_line)) {
        c->pace_at = 0;
        return false;
    }
    uint64_t at = sr_cc_send_allowed(&c->cc, sr_qp_pmtu(qp), now_ns);
    if (!at) {
        c->pace_at = 0;
        return false;
    }
    c->pace_at = at;
    sr_engine_activate(qp->eng, qp); /* its deadline: sr_cong_deadline */
    return true;
}

void sr_cong_sent(struct sr_qp *qp, uint64_t now_ns)
{
    struct sr_qp_cong *c = &qp->cong;
    if (!c->on)
        return;
    uint64_t b = qp->eng->stats.tx_bytes - c->tx_mark;
    if (!b)
        return;
    sr_cc_on_sent(&c->cc, (uint32_t)SR_MIN(b + CONG_L3_BYTES, UINT32_MAX), now_ns);
    c->tx_mark = qp->eng->stats.tx_bytes;
    /* A rate may have ended a DCQCN stage (byte counter) or started the
     * timers: the timer list must know. */
    if (sr_cc_next_deadline(&c->cc) != SR_CC_NO_DEADLINE)
        sr_engine_activate(qp->eng, qp);
}

uint32_t sr_cong_window(const struct sr_qp *qp, uint32_t window_pkts)
{
    const struct sr_qp_cong *c = &qp->cong;
    if (!c->on)
        return window_pkts;
    uint64_t wb = sr_cc_window_bytes(&c->cc);
    if (!wb)
        return window_pkts;
    /* The window counts packets as path-MTU bytes, and never closes below
     * one packet (a QP must be able to make progress). */
    uint64_t pkts = SR_MAX(wb / sr_qp_pmtu(qp), 1);
    return pkts < window_pkts ? (uint32_t)pkts : window_pkts;
}

uint32_t sr_cong_ack_every(const struct sr_qp *qp, uint32_t every)
{
    const struct sr_qp_cong *c = &qp->cong;
    if (!c->on || every <= 1)
        return every;
    uint64_t rate = sr_cc_rate_bps(&c->cc);
    uint64_t t = sr_timeout_ns(qp->attr.timeout);
    if (!rate || (rate >= qp->eng->cc.line_rate_bps && !qp->eng->cc.pace_line) ||
        t == SR_NO_DEADLINE)
        return every;
    /* The transport timer runs from the oldest unacknowledged packet, and
     * a responder owes an ACK only for a request that asks (IBA 9.7.5.1.1,
     * coalescing): when the pacer holds the packet that asks, the timer
     * counts the pacer's gaps, and a QP cut to a low rate times out with
     * nothing lost (IBA 9.7.6.1.3 resends the window). So ask once per a
     * quarter of the timeout at the current rate; the rest of the timer
     * covers the responder's hold (at most a quarter, ack.c) and the
     * round trip. */
    uint64_t pkt_ns = (uint64_t)(sr_qp_pmtu(qp) + CONG_L3_BYTES) * 8 * 1000000000ull / rate;
    uint64_t n = pkt_ns ? t / 4 / pkt_ns : every;
    return n >= every ? every : (uint32_t)SR_MAX(n, 1);
}

uint64_t sr_cong_paced_until(const struct sr_qp *qp)
{
    return qp->cong.on ? qp->cong.pace_at : 0;
}

void sr_cong_acked(struct sr_qp *qp, uint32_t acked_pkts, uint64_t rtt_ns, uint64_t now_ns)
{
    struct sr_qp_cong *c = &qp->cong;
    if (!c->on || (!acked_pkts && !rtt_ns))
        return;
    /* The ECN echo of a SACK peer's response (ecn.c); false otherwise. */
    sr_cc_on_ack_hold(&c->cc, (uint64_t)acked_pkts * sr_qp_pmtu(qp), rtt_ns, sr_ecn_take_hold(qp),
                      sr_ecn_take(qp), now_ns);
}

void sr_cong_cnp_rx(struct sr_qp *qp, const uint8_t *src_gid, uint64_t now_ns)
{
    struct sr_qp_cong *c = &qp->cong;
    struct sr_engine *e = qp->eng;
    /* A connected QP hears only its peer (IBA 9.6.1.5's path check, as for
     * every other packet); a UD QP may be sent to, and congested, by any. */
    if (qp->type != SR_QPT_UD && memcmp(src_gid, qp->attr.dgid, 16) != 0) {
        e->stats.rx_drop_bad_peer++;
        return;
    }
    e->stats.cnps_rcvd++;
    c->cnps_rcvd++;
    sr_paths_qp_cnp(qp, now_ns); /* the adaptive path policy avoids the marked path */
    if (!c->on)
        return;
    sr_cc_on_cnp(&c->cc, now_ns);
    if (sr_cc_next_deadline(&c->cc) != SR_CC_NO_DEADLINE)
        sr_engine_activate(e, qp);
}

void sr_cong_ce_rx(struct sr_qp *qp, const struct sr_pkt *pkt, const uint8_t *src_gid,
                   uint64_t now_ns)
{
    struct sr_qp_cong *c = &qp->cong;
    struct sr_engine *e = qp->eng;
    e->stats.rx_ce++;
    if (!c->on || !sr_cc_np_on_ce(&c->np, &e->cc.np, now_ns))
        return;
    /* IBA Annex A17.9.3: the CNP is a BTH with opcode 0x81, P_Key, the
     * BECN bit set (the flow it answers met congestion), the destination
     * QP of the requester that sent the marked packet, PSN 0 and A 0,
     * then 16 reserved bytes (zero; sr_wire_encode_hdr writes them) and
     * the ICRC. A UD request names its sender in the DETH's source QP;
     * a connected QP's requester is its peer QP. */
    bool ud = qp->type == SR_QPT_UD;
    struct sr_pkt p = {0};
    p.bth.opcode = SR_OP_CNP;
    p.bth.pkey = 0xffff;
    p.bth.becn = true;
    p.bth.dest_qp = ud ? pkt->deth.src_qp : qp->attr.dest_qp_num;
    e->stats.cnps_sent++;
    sr_engine_tx(e, qp, &p, NULL, 0, ud ? src_gid : qp->attr.dgid);
}

uint64_t sr_cong_deadline(const struct sr_qp *qp)
{
    const struct sr_qp_cong *c = &qp->cong;
    if (!c->on)
        return SR_CC_NO_DEADLINE;
    uint64_t d = sr_cc_next_deadline(&c->cc);
    if (c->pace_at && c->pace_at < d)
        d = c->pace_at;
    return d;
}

void sr_cong_advance(struct sr_qp *qp, uint64_t now_ns)
{
    struct sr_qp_cong *c = &qp->cong;
    if (!c->on)
        return;
    if (sr_cc_next_deadline(&c->cc) <= now_ns)
        sr_cc_on_timer(&c->cc, now_ns);
    if (c->pace_at && c->pace_at <= now_ns) {
        c->pace_at = 0;
        sr_req_run(qp, now_ns);
    }
}

uint64_t sr_qp_cc_rate_bps(const struct sr_qp *qp)
{
    return qp->cong.on ? sr_cc_rate_bps(&qp->cong.cc) : 0;
}

uint64_t sr_qp_cc_window_bytes(const struct sr_qp *qp)
{
    return qp->cong.on ? sr_cc_window_bytes(&qp->cong.cc) : 0;
}
