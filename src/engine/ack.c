/* ack.c: the acknowledgement policy (see ack.h). A responder may coalesce
 * ACKs (IBA 9.7.5.1.1: an ACK acknowledges every request up to its PSN),
 * so one asked for by an AckReq packet may be held back a little and
 * leave with the QP's next packet: a request the application posts in
 * reply, or a response. Anything else the responder sends goes after the
 * held ACK, so the requester sees responses in PSN order (IBA 9.7.5.1). */
#include "ack.h"
#include "sr_util.h"

void sr_ack_policy_set(struct sr_ack_policy *p, uint64_t cfg_delay_ns, bool hold)
{
    p->cfg_delay_ns = cfg_delay_ns;
    p->delay_ns = hold ? cfg_delay_ns : SR_MIN(cfg_delay_ns, (uint64_t)SR_ACK_PASSIVE_DELAY_NS);
    p->reply_delay_ns = hold ? SR_ACK_REPLY_HOLD * cfg_delay_ns : p->delay_ns;
}

/* How long the ACK about to be held may wait. A QP whose last held ACK
 * rode with a reply (a ping-pong) waits longer: an ACK sent alone because
 * the reply was a little late would complete the peer's request without
 * the reply, and a peer that then waits for the reply outside the verbs
 * (polling memory for an RDMA WRITE) would have it picked up late. The
 * longer hold stays well inside the transport timeout (IBA 9.7.6.1.3),
 * judged by the QP's own (peers usually agree), and one ACK that falls due
 * ends it. */
static uint64_t hold_for(const struct sr_ack *a, const struct sr_ack_policy *p, uint64_t timeout_ns)
{
    if (!a->rides || p->reply_delay_ns <= p->delay_ns)
        return p->delay_ns;
    uint64_t cap = timeout_ns / 4; /* no timeout: no cap */
    return SR_MAX(p->delay_ns, SR_MIN(p->reply_delay_ns, cap));
}

static enum sr_ack_verdict on_ackreq(struct sr_ack *a, struct sr_ack_policy *p,
                                     const struct sr_ack_in *in, struct sr_ack_out *out)
{
    uint64_t delay = hold_for(a, p, in->timeout_ns);
    out->psn = in->psn;
    out->msn = in->msn;
    if (!delay) {
        /* cumulative: it covers whatever might be held */
        a->pending = false;
        a->hold_ns = 0;
        return out->verdict = SR_ACK_SEND_NOW;
    }
    /* The newest request acknowledged, as QUIC's ack_delay counts from the
     * largest acknowledged packet (RFC 9000 13.2.5). */
    a->last_req_ns = in->now_ns;
    if (!a->pending) {
        a->pending = true;
        a->end = in->end;
        a->since = in->now_ns;
        a->due = in->now_ns + delay;
        p->held = true;
    } else if (in->end && !a->end) {
        /* A reply can follow only the end of a message: its ACK is held
         * from then, not from an ACK request inside the message that it
         * replaces (one every SR_ACK_EVERY packets; that hold may end
         * before the application has seen the message). Once per hold,
         * and within a quarter of the transport timeout of the hold's
         * start: the requester must not time out first. */
        uint64_t cap = a->since + SR_MAX(delay, in->timeout_ns / 4);
        a->end = true;
        a->due = SR_MIN(in->now_ns + delay, cap);
    }
    a->psn = in->psn;
    a->msn = in->msn;
    out->until = a->due;
    return out->verdict = SR_ACK_HOLD;
}

/* The held ACK leaves now. */
static enum sr_ack_verdict release(struct sr_ack *a, struct sr_ack_out *out,
                                   enum sr_ack_verdict how, uint64_t now_ns)
{
    a->pending = false;
    a->hold_ns = now_ns > a->last_req_ns ? now_ns - a->last_req_ns : 0;
    out->psn = a->psn;
    out->msn = a->msn;
    return out->verdict = how;
}

enum sr_ack_verdict sr_ack_decide(struct sr_ack *a, struct sr_ack_policy *p,
                                  const struct sr_ack_in *in, struct sr_ack_out *out)
{
    out->verdict = SR_ACK_NONE;
    out->until = UINT64_MAX;
    if (in->ev == SR_ACK_EV_ACKREQ)
        return on_ackreq(a, p, in, out);
    if (!a->pending)
        return SR_ACK_NONE;
    switch (in->ev) {
    case SR_ACK_EV_REQUEST:
        /* The peer answers this QP's requests: hold its next ACKs longer. */
        a->rides = true;
        return release(a, out, SR_ACK_RIDE, in->now_ns);
    case SR_ACK_EV_RESPONSE:
        return release(a, out, SR_ACK_RIDE, in->now_ns);
    case SR_ACK_EV_TIMER:
        if (a->due <= in->now_ns) {
            /* No reply came in time: the next ACK is held only as long as
             * an ordinary one. */
            a->rides = false;
            return release(a, out, SR_ACK_SEND_NOW, in->now_ns);
        }
        break;
    case SR_ACK_EV_IDLE:
        if (a->since <= in->held_since)
            return release(a, out, SR_ACK_SEND_NOW, in->now_ns);
        break;
    case SR_ACK_EV_DROP:
        a->pending = false;
        return SR_ACK_NONE;
    case SR_ACK_EV_ACKREQ:
        break;
    }
    out->until = a->due;
    return out->verdict = SR_ACK_HOLD;
}

uint16_t sr_ack_req_every(bool trains, uint64_t timeout_ns, uint32_t window_pkts)
{
    uint32_t every =
        trains && timeout_ns >= SR_ACK_LONG_TIMEOUT_NS ? SR_ACK_EVERY_TRAINS : SR_ACK_EVERY;
    return (uint16_t)SR_MAX(SR_MIN(every, window_pkts / 2), 1u);
}

uint64_t sr_ack_max_hold(const struct sr_ack_policy *p, uint64_t timeout_ns)
{
    uint64_t reply = SR_ACK_REPLY_HOLD * p->cfg_delay_ns;
    return SR_MAX(p->cfg_delay_ns, SR_MIN(reply, timeout_ns / 4));
}
