/* prims.c: the primitives every collective is written in (after NCCL's:
 * send, recv, recv-reduce-send, recv-reduce-copy-send, recv-copy-send,
 * recv-reduce-copy). Each moves one chunk of at most slot_len bytes; both
 * ends of a connection always agree on the chunk sizes, so a length that
 * differs from the expected one is a usage error (counts that differ
 * between ranks), reported instead of silently misread. A primitive on
 * zero elements does nothing on either end. */
#include "sc_int.h"

#include <string.h>

void sc_prims_init(struct sc_prims *p, srcclComm_t comm, int recv_peer, int send_peer,
                   srcclDataType_t dt, srcclRedOp_t op)
{
    p->comm = comm;
    p->recv_peer = recv_peer;
    p->send_peer = send_peer;
    p->dt = dt;
    p->esize = sc_type_size(dt);
    p->reduce = comm->kern.reduce[op][dt];
    p->post = op == srcclAvg ? comm->kern.div[dt] : NULL;
}

size_t sc_prims_chunk_cnt(const struct sc_prims *p)
{
    return p->comm->cfg.slot_len / p->esize;
}

static srcclResult_t check_len(struct sc_prims *p, size_t got, size_t want)
{
    if (got == want)
        return srcclSuccess;
    srcclComm_t c = p->comm;
    srcclResult_t r = sc_fail(c, srcclInvalidUsage,
                              "call #%llu: rank %d sent a chunk of %zu bytes where %zu were "
                              "expected: the ranks disagree on the collective or its count",
                              (unsigned long long)c->ops, p->recv_peer, got, want);
    c->async_err = r; /* the streams are out of step: the communicator is done */
    return r;
}

/* Waits for the next chunk from recv_peer (rx, want bytes) and/or a free
 * slot towards send_peer (tx, for tx_len bytes), with one deadline for both. */
static srcclResult_t wait_for(struct sc_prims *p, const void **rx, size_t want, void **tx,
                              size_t tx_len)
{
    srcclComm_t c = p->comm;
    uint64_t deadline = 0;
    size_t len = 0;
    for (;;) {
        if (rx && !*rx)
            *rx = sc_tp_rx_peek(c, p->recv_peer, &len);
        if (tx && !*tx)
            *tx = sc_tp_tx_slot(c, p->send_peer);
        if ((!rx || *rx) && (!tx || *tx))
            break;
        if (!deadline)
            deadline = sc_now_ns() + c->cfg.timeout_ns;
        bool data = rx && !*rx;
        const char *what = data ? "for data from" : "for credit from";
        int peer = data ? p->recv_peer : p->send_peer;
        /* Queued (non-blocking or grouped): yield to srcclTest / srcclWait. */
        srcclResult_t r = c->in_co ? sc_co_block(c, &deadline, what, peer)
                                   : sc_tp_wait(c, deadline, what, peer, data ? want : tx_len);
        if (r)
            return r;
    }
    return rx ? check_len(p, len, want) : srcclSuccess;
}

enum {
    P_RECV = 1 << 0,   /* consume a received chunk */
    P_SEND = 1 << 1,   /* fill a send slot and post it */
    P_REDUCE = 1 << 2, /* the result is reduce(received, src), else a copy */
    P_OUT = 1 << 3,    /* a sent result is also copied to dst */
};

/* One chunk of cnt elements through a step (NCCL's generic-op shape): wait
 * for what the step needs (a received chunk, a free send slot), build the
 * result where it goes first (the send slot when sending, else dst), then
 * post and release. */
static srcclResult_t prim(struct sc_prims *p, unsigned f, const void *src, void *dst, size_t cnt,
                          bool postop)
{
    if (!cnt)
        return srcclSuccess;
    size_t len = cnt * p->esize;
    const void *rx = NULL;
    void *tx = NULL;
    srcclResult_t r =
        wait_for(p, f & P_RECV ? &rx : NULL, f & P_RECV ? len : 0, f & P_SEND ? &tx : NULL, len);
    if (r)
        return r;
    void *out = f & P_SEND ? tx : dst;
    if (f & P_REDUCE) {
        p->reduce(out, rx, src, cnt);
        if (postop && p->post)
            p->post(out, cnt, p->comm->nranks);
    } else {
        memcpy(out, f & P_RECV ? rx : src, len);
    }
    if (f & P_OUT)
        memcpy(dst, tx, len);
    if ((f & P_SEND) && (r = sc_tp_tx_post(p->comm, p->send_peer, len)))
        return r;
    return f & P_RECV ? sc_tp_rx_release(p->comm, p->recv_peer) : srcclSuccess;
}

srcclResult_t sc_send(struct sc_prims *p, const void *src, size_t cnt)
{
    return prim(p, P_SEND, src, NULL, cnt, false);
}

srcclResult_t sc_recv(struct sc_prims *p, void *dst, size_t cnt)
{
    return prim(p, P_RECV, NULL, dst, cnt, false);
}

srcclResult_t sc_recv_reduce_send(struct sc_prims *p, const void *src, size_t cnt)
{
    return prim(p, P_RECV | P_SEND | P_REDUCE, src, NULL, cnt, false);
}

srcclResult_t sc_recv_reduce_copy_send(struct sc_prims *p, const void *src, void *dst, size_t cnt,
                                       bool postop)
{
    return prim(p, P_RECV | P_SEND | P_REDUCE | P_OUT, src, dst, cnt, postop);
}

srcclResult_t sc_recv_reduce_copy(struct sc_prims *p, const void *src, void *dst, size_t cnt,
                                  bool postop)
{
    return prim(p, P_RECV | P_REDUCE, src, dst, cnt, postop);
}

srcclResult_t sc_recv_copy_send(struct sc_prims *p, void *dst, size_t cnt)
{
    return prim(p, P_RECV | P_SEND | P_OUT, NULL, dst, cnt, false);
}

srcclResult_t sc_send_msg(struct sc_prims *p, const void *src, size_t cnt)
{
    size_t step = sc_prims_chunk_cnt(p);
    for (size_t off = 0; off < cnt; off += step) {
        srcclResult_t r = sc_send(p, (const char *)src + off * p->esize, SC_MIN(step, cnt - off));
        if (r)
            return r;
    }
    return srcclSuccess;
}

srcclResult_t sc_recv_msg(struct sc_prims *p, void *dst, size_t cnt)
{
    size_t step = sc_prims_chunk_cnt(p);
    for (size_t off = 0; off < cnt; off += step) {
        srcclResult_t r = sc_recv(p, (char *)dst + off * p->esize, SC_MIN(step, cnt - off));
        if (r)
            return r;
    }
    return srcclSuccess;
}

srcclResult_t sc_sendrecv_msg(struct sc_prims *p, const void *src, void *dst, size_t cnt,
                              bool reduce)
{
    /* Sends run ahead of receives by as many chunks as there are free slots
     * (never blocking for them), so that both directions stay full; chunk
     * k is always sent before chunk k is received, which is what makes
     * src == dst (reduce in place) safe. */
    size_t step = sc_prims_chunk_cnt(p), sent = 0;
    for (size_t off = 0; off < cnt; off += step) {
        while (sent < cnt && (sent <= off || sc_tp_tx_slot(p->comm, p->send_peer))) {
            size_t n = SC_MIN(step, cnt - sent);
            srcclResult_t r = sc_send(p, (const char *)src + sent * p->esize, n);
            if (r)
                return r;
            sent += n;
        }
        size_t n = SC_MIN(step, cnt - off);
        char *d = (char *)dst + off * p->esize;
        srcclResult_t r = reduce ? sc_recv_reduce_copy(p, d, d, n, false) : sc_recv(p, d, n);
        if (r)
            return r;
    }
    return srcclSuccess;
}
