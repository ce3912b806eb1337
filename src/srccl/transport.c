/* transport.c: srccl's transport over public verbs. One RC QP per peer,
 * one CQ with a completion channel, one registered region holding every
 * slot (tx slots first, then rx slots, slot_cnt per peer each way).
 *
 * Data: RDMA WRITE WITH IMMEDIATE from our tx slot s % slot_cnt into the
 * peer's rx slot of the same index; the immediate is the chunk number s
 * (low 16 bits) and, above it, the number of chunks we have consumed from
 * that peer (15 bits): every chunk carries a credit back. The byte length
 * comes with the receive completion.
 * Credits on their own: SEND WITH IMMEDIATE, no payload, immediate =
 * 2^31 | number of chunks consumed (31 bits). Counts are cumulative, so
 * credits coalesce; the two kinds travel in order on the one QP. An own
 * SEND goes only once every slot or half a slot's bytes are consumed and
 * uncredited (a small message's credit can wait, a stream's cannot),
 * before this rank sleeps to a sender whose every slot is taken, and to every
 * sender before the application gets control back with requests queued
 * (sc_tp_flush): a symmetric exchange (recursive doubling, 2 ranks) then
 * sends none, and no sender stays blocked on a rank that sleeps, so waits
 * cannot form a cycle on credits.
 * Every receive completion is replaced by a fresh receive (no scatter
 * entries: neither message carries a payload into the receive queue).
 *
 * The interface is non-blocking (tx_slot / tx_post, rx_peek / rx_release,
 * progress); sc_tp_wait is the one place that sleeps. */
#include "sc_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SC_WIRE_MAGIC                                                                              \
    0x73725733u                   /* "srW3": the immediates below, pid and segment in the record   \
                                   */
#define SC_IMM_CREDIT 0x80000000u /* a credit SEND; else a chunk */
#define SC_IMM_MASK   0x7fffffffu /* a credit SEND's count */
#define SC_IMM_SEQ    0xffffu     /* a chunk's number */
#define SC_IMM_ACK_SH 16          /* a chunk's piggybacked count, 15 bits */
#define SC_IMM_ACK    0x7fffu

enum sc_wr_kind { SC_WR_DATA = 1, SC_WR_CREDIT = 2, SC_WR_RECV = 3 };

static uint64_t wr_id(enum sc_wr_kind k, int peer)
{
    return ((uint64_t)k << 32) | (uint32_t)peer;
}

/* Index of a peer's slots in the region (ourselves excluded). */
static size_t peer_index(srcclComm_t c, int peer)
{
    return (size_t)(peer < c->rank ? peer : peer - 1);
}

/* Zero-SGE work requests still point at an (unused) SGE: some providers
 * copy sg_list whatever num_sge is. */
static srcclResult_t post_recv(srcclComm_t c, struct sc_peer *p)
{
    struct ibv_sge no_sge = {0};
    struct ibv_recv_wr wr = {.wr_id = wr_id(SC_WR_RECV, p->rank), .sg_list = &no_sge, .num_sge = 0},
                       *bad;
    int e = ibv_post_recv(p->qp, &wr, &bad);
    if (e)
        return sc_fail(c, srcclSystemError, "ibv_post_recv (peer %d): %s", p->rank, strerror(e));
    return srcclSuccess;
}

/* Ranks with the same host id share the CPUs (containers on one kernel
 * included: the boot id is the kernel's). */
static uint32_t host_id(void)
{
    char buf[512] = "";
    gethostname(buf, 255);
    size_t len = strlen(buf);
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, buf + len, sizeof(buf) - len - 1);
        if (n > 0)
            len += (size_t)n;
        close(fd);
    }
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (uint8_t)buf[i]) * 16777619u;
    return h;
}

srcclResult_t sc_tp_open(srcclComm_t c, struct sc_wire_rank *mine)
{
    const struct sc_config *cfg = &c->cfg;
    int ndev = 0;
    struct ibv_device **list = ibv_get_device_list(&ndev);
    if (!list || ndev == 0) {
        if (list)
            ibv_free_device_list(list);
        return sc_fail(c, srcclSystemError,
                       "no RDMA device (for softrdma: LD_LIBRARY_PATH=<build>/lib so that its "
                       "libibverbs.so.1 is loaded)");
    }
    struct ibv_device *dev = NULL;
    for (int i = 0; i < ndev && !dev; i++)
        if (!cfg->ib_dev[0] || !strcmp(ibv_get_device_name(list[i]), cfg->ib_dev))
            dev = list[i];
    if (!dev) {
        ibv_free_device_list(list);
        return sc_fail(c, srcclSystemError, "SRCCL_IB_DEV=%s: no such device", cfg->ib_dev);
    }
    c->ctx = ibv_open_device(dev);
    const char *dev_name = ibv_get_device_name(dev);
    ibv_free_device_list(list);
    if (!c->ctx)
        return sc_fail(c, srcclSystemError, "ibv_open_device(%s): %s", dev_name, strerror(errno));

    struct ibv_port_attr pa;
    int e = ibv_query_port(c->ctx, cfg->ib_port, &pa);
    if (e)
        return sc_fail(c, srcclSystemError, "ibv_query_port(%u): %s", cfg->ib_port, strerror(e));
    if (pa.state != IBV_PORT_ACTIVE)
        return sc_fail(c, srcclSystemError, "port %u is not active (state %d)", cfg->ib_port,
                       pa.state);
    c->mtu = pa.active_mtu;
    c->link_layer = pa.link_layer;
    c->lid = pa.lid;
    if ((e = ibv_query_gid(c->ctx, cfg->ib_port, cfg->gid_index, &c->gid)))
        return sc_fail(c, srcclSystemError, "ibv_query_gid(port %u, index %u): %s", cfg->ib_port,
                       cfg->gid_index, strerror(e ? e : errno));

    int npeers = c->nranks - 1;
    c->sq_len = 2 * cfg->slot_cnt + 4;
    c->rq_len = 2 * cfg->slot_cnt + 4;
    c->cq_len = npeers * (int)(c->sq_len + c->rq_len) + 16;
    if (!(c->pd = ibv_alloc_pd(c->ctx)))
        return sc_fail(c, srcclSystemError, "ibv_alloc_pd: %s", strerror(errno));
    if (!(c->channel = ibv_create_comp_channel(c->ctx)))
        return sc_fail(c, srcclSystemError, "ibv_create_comp_channel: %s", strerror(errno));
    if (!(c->cq = ibv_create_cq(c->ctx, SC_MAX(c->cq_len, 1), c, c->channel, 0)))
        return sc_fail(c, srcclSystemError, "ibv_create_cq(%d): %s", c->cq_len, strerror(errno));

    size_t region = (size_t)cfg->slot_cnt * cfg->slot_len;
    c->mem_len = SC_MAX((size_t)npeers * region * 2, 64);
    if (posix_memalign((void **)&c->mem, 4096, c->mem_len))
        return sc_fail(c, srcclSystemError, "out of memory (%zu bytes of slots)", c->mem_len);
    memset(c->mem, 0, c->mem_len);
    c->mr = ibv_reg_mr(c->pd, c->mem, c->mem_len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (!c->mr)
        return sc_fail(c, srcclSystemError, "ibv_reg_mr(%zu bytes): %s", c->mem_len,
                       strerror(errno));

    memset(mine, 0, sizeof(*mine));
    mine->magic = SC_WIRE_MAGIC;
    mine->rank = (uint32_t)c->rank;
    mine->nranks = (uint32_t)c->nranks;
    mine->rkey = c->mr->rkey;
    mine->slot_len = (uint32_t)cfg->slot_len;
    mine->slot_cnt = cfg->slot_cnt;
    memcpy(mine->gid, c->gid.raw, 16);
    mine->lid = c->lid;
    mine->link_layer = c->link_layer;
    mine->mtu = (uint8_t)c->mtu;
    mine->host = host_id();

    uint64_t seed = sc_now_ns() ^ ((uint64_t)getpid() << 32);
    for (int i = 0; i < c->nranks; i++) {
        struct sc_peer *p = &c->peers[i];
        p->rank = i;
        if (i == c->rank)
            continue;
        size_t idx = peer_index(c, i);
        p->tx = c->mem + idx * region;
        p->rx = c->mem + ((size_t)npeers + idx) * region;
        if (!(p->rx_len = calloc(cfg->slot_cnt, sizeof(uint32_t))))
            return sc_fail(c, srcclSystemError, "out of memory");
        struct ibv_qp_init_attr qa = {
            .send_cq = c->cq,
            .recv_cq = c->cq,
            .cap = {.max_send_wr = c->sq_len,
                    .max_recv_wr = c->rq_len,
                    .max_send_sge = 1,
                    .max_recv_sge = 1},
            .qp_type = IBV_QPT_RC,
        };
        if (!(p->qp = ibv_create_qp(c->pd, &qa)))
            return sc_fail(c, srcclSystemError, "ibv_create_qp (peer %d): %s", i, strerror(errno));
        struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT,
                                .pkey_index = 0,
                                .port_num = cfg->ib_port,
                                .qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
        if ((e = ibv_modify_qp(
                 p->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)))
            return sc_fail(c, srcclSystemError, "ibv_modify_qp(INIT, peer %d): %s", i, strerror(e));
        /* Receives first, so that nothing the peer sends finds none. */
        for (uint32_t k = 0; k < c->rq_len; k++) {
            srcclResult_t r = post_recv(c, p);
            if (r)
                return r;
        }
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        mine->peer[i].qpn = p->qp->qp_num;
        mine->peer[i].psn = (uint32_t)(seed >> 40) & 0xffffffu;
        mine->peer[i].raddr = (uint64_t)(uintptr_t)p->rx;
    }
    srcclResult_t sr = sc_shm_open(c, mine);
    if (sr)
        return sr;
    sc_debug(c, "device %s port %u mtu %d link %s, %u slots x %zu bytes per peer, %s kernels",
             dev_name, cfg->ib_port, 128 << c->mtu,
             c->link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand", cfg->slot_cnt,
             cfg->slot_len, c->kern.isa);
    return srcclSuccess;
}

srcclResult_t sc_tp_connect(srcclComm_t c, const uint8_t *all, size_t rec_len)
{
    const struct sc_wire_rank *me = (const void *)(all + (size_t)c->rank * rec_len);
    for (int i = 0; i < c->nranks; i++) {
        const struct sc_wire_rank *w = (const void *)(all + (size_t)i * rec_len);
        if (w->magic != SC_WIRE_MAGIC || w->rank != (uint32_t)i || w->nranks != (uint32_t)c->nranks)
            return sc_fail(c, srcclInternalError, "rendezvous: bad record for rank %d", i);
        if (w->slot_len != me->slot_len || w->slot_cnt != me->slot_cnt)
            return sc_fail(c, srcclInvalidUsage,
                           "SRCCL_CHUNK_BYTES/SRCCL_SLOTS differ: rank %d has %u x %u, rank %d "
                           "has %u x %u",
                           i, w->slot_cnt, w->slot_len, c->rank, me->slot_cnt, me->slot_len);
    }
    c->local_ranks = 0;
    for (int i = 0; i < c->nranks; i++)
        c->local_ranks +=
            ((const struct sc_wire_rank *)(const void *)(all + (size_t)i * rec_len))->host ==
            me->host;
    /* More ranks here than CPUs: a rank that waits polls and yields its CPU
     * in turn (sched_yield), like Open MPI's yield-when-idle, rather than
     * sleeping on the completion channel at once: every sleep costs two
     * wake-ups per message (the NIC thread's, then the rank's), a turn of
     * the CPUs among the waiting ranks costs much less. It sleeps after
     * 1 ms without news. */
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    c->spin_yield = cpus > 0 && c->local_ranks > cpus;
    if (!c->cfg.spin_set && c->spin_yield)
        c->cfg.spin_ns = 1000000;
    c->spin_per_byte = !c->cfg.spin_set && c->cfg.spin_ns > 0;
    sc_debug(c, "%d ranks on this host (%ld CPUs): spin %llu us%s", c->local_ranks, cpus,
             (unsigned long long)(c->cfg.spin_ns / 1000), c->spin_yield ? ", yielding" : "");
    for (int i = 0; i < c->nranks; i++) {
        if (i == c->rank)
            continue;
        const struct sc_wire_rank *w = (const void *)(all + (size_t)i * rec_len);
        struct sc_peer *p = &c->peers[i];
        p->raddr = w->peer[c->rank].raddr;
        p->rkey = w->rkey;
        struct ibv_qp_attr a = {
            .qp_state = IBV_QPS_RTR,
            .path_mtu = (enum ibv_mtu)SC_MIN((int)c->mtu, (int)w->mtu),
            .dest_qp_num = w->peer[c->rank].qpn,
            .rq_psn = w->peer[c->rank].psn,
            .max_dest_rd_atomic = 1,
            .min_rnr_timer = 12,
            .ah_attr = {.port_num = c->cfg.ib_port, .sl = 0},
        };
        if (c->link_layer == IBV_LINK_LAYER_INFINIBAND && w->lid) {
            a.ah_attr.dlid = w->lid;
        } else { /* RoCE: the path is the peer's GID (a GRH on every packet) */
            a.ah_attr.is_global = 1;
            memcpy(a.ah_attr.grh.dgid.raw, w->gid, 16);
            a.ah_attr.grh.sgid_index = c->cfg.gid_index;
            a.ah_attr.grh.hop_limit = 64;
        }
        int e = ibv_modify_qp(p->qp, &a,
                              IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                                  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
        if (e)
            return sc_fail(c, srcclSystemError, "ibv_modify_qp(RTR, peer %d): %s", i, strerror(e));
        memset(&a, 0, sizeof(a));
        a.qp_state = IBV_QPS_RTS;
        a.sq_psn = me->peer[i].psn;
        a.timeout = c->cfg.ib_timeout;
        a.retry_cnt = c->cfg.ib_retry_cnt;
        a.rnr_retry = 7; /* receives are always posted; a late repost is waited for */
        a.max_rd_atomic = 1;
        e = ibv_modify_qp(p->qp, &a,
                          IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                              IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
        if (e)
            return sc_fail(c, srcclSystemError, "ibv_modify_qp(RTS, peer %d): %s", i, strerror(e));
    }
    return sc_shm_connect(c, all, rec_len);
}

void sc_tp_close(srcclComm_t c)
{
    sc_shm_close(c);
    if (c->peers) {
        for (int i = 0; i < c->nranks; i++) {
            if (c->peers[i].qp)
                ibv_destroy_qp(c->peers[i].qp);
            free(c->peers[i].rx_len);
        }
    }
    if (c->mr)
        ibv_dereg_mr(c->mr);
    free(c->mem);
    if (c->cq)
        ibv_destroy_cq(c->cq);
    if (c->channel)
        ibv_destroy_comp_channel(c->channel);
    if (c->pd)
        ibv_dealloc_pd(c->pd);
    if (c->ctx)
        ibv_close_device(c->ctx);
    c->mr = NULL;
    c->mem = NULL;
    c->cq = NULL;
    c->channel = NULL;
    c->pd = NULL;
    c->ctx = NULL;
}

/* Sends back what we consumed in a credit SEND of its own, unless the
 * credits in flight fill their share of the send queue (the next credit
 * completion flushes then). */
static srcclResult_t flush_credit(srcclComm_t c, struct sc_peer *p)
{
    if (p->rx_consumed == p->rx_credited)
        return srcclSuccess;
    if (p->credit_inflight >= c->cfg.slot_cnt + 2) {
        p->credit_wanted = true;
        return srcclSuccess;
    }
    struct ibv_sge no_sge = {0}; /* see post_recv */
    struct ibv_send_wr wr = {
        .wr_id = wr_id(SC_WR_CREDIT, p->rank),
        .sg_list = &no_sge,
        .num_sge = 0,
        .opcode = IBV_WR_SEND_WITH_IMM,
        .send_flags = IBV_SEND_SIGNALED,
        .imm_data = htonl(SC_IMM_CREDIT | (uint32_t)(p->rx_consumed & SC_IMM_MASK)),
    };
    struct ibv_send_wr *bad;
    int e = ibv_post_send(p->qp, &wr, &bad);
    if (e)
        return sc_fail(c, srcclSystemError, "ibv_post_send(credit to %d): %s", p->rank,
                       strerror(e));
    p->credit_inflight++;
    p->credit_wanted = false;
    p->rx_credited = p->rx_consumed;
    p->rx_owed_len = 0;
    return srcclSuccess;
}

/* Every slot, or half a slot's bytes, consumed and not yet returned: the
 * sender is out of slots or streaming, return them now rather than with
 * our next chunk. */
static srcclResult_t maybe_credit(srcclComm_t c, struct sc_peer *p)
{
    uint64_t owed = p->rx_consumed - p->rx_credited;
    if (p->credit_wanted || owed >= c->cfg.slot_cnt || p->rx_owed_len >= c->cfg.slot_len / 2)
        return flush_credit(c, p);
    return srcclSuccess;
}

srcclResult_t sc_tp_flush(srcclComm_t c, bool all)
{
    for (int i = 0; i < c->nranks; i++) {
        struct sc_peer *p = &c->peers[i];
        /* Not all: only to a sender whose every slot is taken (it may be
         * blocked on us). Any other sender's next chunk wakes us, and the
         * next sleep looks again. */
        if (i == c->rank || (!all && p->rx_arrived - p->rx_credited < c->cfg.slot_cnt))
            continue;
        srcclResult_t r = flush_credit(c, p);
        if (r)
            return r;
    }
    return srcclSuccess;
}

void *sc_tp_tx_slot(srcclComm_t c, int peer)
{
    struct sc_peer *p = &c->peers[peer];
    uint32_t n = c->cfg.slot_cnt;
    if (p->tx_head - p->tx_credit >= n || p->tx_head - p->tx_done >= n)
        return NULL;
    return p->tx + (size_t)(p->tx_head % n) * c->cfg.slot_len;
}

srcclResult_t sc_tp_tx_post(srcclComm_t c, int peer, size_t len)
{
    struct sc_peer *p = &c->peers[peer];
    size_t slot = (size_t)(p->tx_head % c->cfg.slot_cnt);
    struct ibv_sge sge = {.addr = (uintptr_t)(p->tx + slot * c->cfg.slot_len),
                          .length = (uint32_t)len,
                          .lkey = c->mr->lkey};
    struct ibv_send_wr wr = {
        .wr_id = wr_id(SC_WR_DATA, peer),
        .sg_list = &sge,
        .num_sge = len ? 1 : 0,
        .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
        .send_flags = IBV_SEND_SIGNALED,
        .imm_data = htonl((uint32_t)(p->tx_head & SC_IMM_SEQ) |
                          (uint32_t)(p->rx_consumed & SC_IMM_ACK) << SC_IMM_ACK_SH),
        .wr.rdma = {.remote_addr = p->raddr + slot * c->cfg.slot_len, .rkey = p->rkey},
    };
    struct ibv_send_wr *bad;
    int e = ibv_post_send(p->qp, &wr, &bad);
    if (e)
        return sc_fail(c, srcclSystemError, "ibv_post_send(chunk to %d): %s", peer, strerror(e));
    p->tx_head++;
    p->rx_credited = p->rx_consumed;
    p->rx_owed_len = 0;
    return srcclSuccess;
}

const void *sc_tp_rx_peek(srcclComm_t c, int peer, size_t *len)
{
    struct sc_peer *p = &c->peers[peer];
    if (p->rx_arrived == p->rx_consumed)
        return NULL;
    size_t slot = (size_t)(p->rx_consumed % c->cfg.slot_cnt);
    *len = p->rx_len[slot];
    return p->rx + slot * c->cfg.slot_len;
}

srcclResult_t sc_tp_rx_release(srcclComm_t c, int peer)
{
    struct sc_peer *p = &c->peers[peer];
    p->rx_owed_len += p->rx_len[p->rx_consumed % c->cfg.slot_cnt];
    p->rx_consumed++;
    return maybe_credit(c, p);
}

static srcclResult_t on_wc(srcclComm_t c, const struct ibv_wc *wc)
{
    enum sc_wr_kind kind = (enum sc_wr_kind)(wc->wr_id >> 32);
    int peer = (int)(uint32_t)wc->wr_id;
    if (peer < 0 || peer >= c->nranks || peer == c->rank)
        return sc_fail(c, srcclInternalError, "completion with a bad wr_id 0x%llx",
                       (unsigned long long)wc->wr_id);
    struct sc_peer *p = &c->peers[peer];
    if (wc->status != IBV_WC_SUCCESS) {
        static const char *const what[] = {"?", "a data WRITE", "a credit SEND", "a receive"};
        return sc_fail(c, srcclRemoteError,
                       "rank %d unreachable or failed: %s completed with \"%s\" (status %d, vendor "
                       "error 0x%x)",
                       peer, what[kind <= SC_WR_RECV ? kind : 0], ibv_wc_status_str(wc->status),
                       wc->status, wc->vendor_err);
    }
    switch (kind) {
    case SC_WR_DATA:
        p->tx_done++;
        return srcclSuccess;
    case SC_WR_CREDIT:
        p->credit_inflight--;
        return maybe_credit(c, p);
    case SC_WR_RECV:
        break;
    default:
        return sc_fail(c, srcclInternalError, "completion of unknown kind %d", (int)kind);
    }
    srcclResult_t r = post_recv(c, p);
    if (r)
        return r;
    if (!(wc->wc_flags & IBV_WC_WITH_IMM))
        return sc_fail(c, srcclInternalError, "message from rank %d without an immediate", peer);
    uint32_t imm = ntohl(wc->imm_data), count, mask;
    if (wc->opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
        if ((imm & SC_IMM_CREDIT) || (imm & SC_IMM_SEQ) != (uint32_t)(p->rx_arrived & SC_IMM_SEQ))
            return sc_fail(c, srcclInternalError, "rank %d: chunk %u arrived, expected %u", peer,
                           imm & SC_IMM_SEQ, (uint32_t)(p->rx_arrived & SC_IMM_SEQ));
        p->rx_len[p->rx_arrived % c->cfg.slot_cnt] = wc->byte_len;
        p->rx_arrived++;
        count = (imm >> SC_IMM_ACK_SH) & SC_IMM_ACK;
        mask = SC_IMM_ACK;
    } else if (imm & SC_IMM_CREDIT) {
        count = imm & SC_IMM_MASK;
        mask = SC_IMM_MASK;
    } else {
        return sc_fail(c, srcclInternalError, "rank %d: a SEND that is not a credit", peer);
    }
    /* Both kinds arrive in the order they were posted: counts only grow. */
    uint64_t delta = (count - (uint32_t)(p->tx_credit & mask)) & mask;
    if (p->tx_credit + delta > p->tx_head)
        return sc_fail(c, srcclInternalError, "rank %d returned %llu credits for %llu chunks", peer,
                       (unsigned long long)(p->tx_credit + delta), (unsigned long long)p->tx_head);
    p->tx_credit += delta;
    return srcclSuccess;
}

srcclResult_t sc_tp_progress(srcclComm_t c, int *progressed)
{
    *progressed = 0;
    if (c->async_err)
        return c->async_err;
    struct ibv_wc wc[32];
    for (;;) {
        int n = ibv_poll_cq(c->cq, 32, wc);
        if (n < 0)
            return sc_fail(c, srcclSystemError, "ibv_poll_cq failed (%d)", n);
        for (int i = 0; i < n; i++) {
            srcclResult_t r = on_wc(c, &wc[i]);
            if (r)
                return r;
        }
        *progressed += n;
        if (n < 32)
            return srcclSuccess;
    }
}

srcclResult_t sc_tp_timeout(srcclComm_t c, const char *what, int peer)
{
    return sc_fail(c, srcclTimeout,
                   "call #%llu: waited %.1f s (SRCCL_TIMEOUT) %s rank %d: that rank is dead, "
                   "hung, or not calling the same collective",
                   (unsigned long long)c->ops, (double)c->cfg.timeout_ns / 1e9, what, peer);
}

srcclResult_t sc_tp_arm(srcclComm_t c, int *progressed)
{
    *progressed = 0;
    /* About to sleep: no sender may be kept waiting for what we consumed. */
    srcclResult_t r = sc_tp_flush(c, false);
    if (r)
        return r;
    if (c->cq_armed)
        return srcclSuccess;
    int e = ibv_req_notify_cq(c->cq, 0);
    if (e)
        return sc_fail(c, srcclSystemError, "ibv_req_notify_cq: %s", strerror(e));
    c->cq_armed = true;
    /* A completion between the last poll and arming raises no event. */
    return sc_tp_progress(c, progressed);
}

void sc_tp_ack(srcclComm_t c)
{
    struct ibv_cq *cq;
    void *ctx;
    struct pollfd pfd = {.fd = c->channel->fd, .events = POLLIN};
    if (poll(&pfd, 1, 0) == 1 && ibv_get_cq_event(c->channel, &cq, &ctx) == 0) {
        ibv_ack_cq_events(cq, 1);
        c->cq_armed = false;
    }
}

/* Polls, spins for spin_ns, then sleeps on the channel: returns after a
 * completion, an event, 100 ms or until_ns. *woke: completions were polled. */
static srcclResult_t idle(srcclComm_t c, uint64_t until, uint64_t spin_ns, int *woke)
{
    srcclResult_t r = sc_tp_progress(c, woke);
    if (r || *woke)
        return r;
    uint64_t now = sc_now_ns();
    uint64_t spin_end = now + spin_ns;
    while (now < spin_end && now < until) {
        if ((r = sc_tp_progress(c, woke)) || *woke)
            return r;
        if (c->spin_yield)
            sched_yield();
        now = sc_now_ns();
    }
    if (now >= until)
        return srcclSuccess;
    if ((r = sc_tp_arm(c, woke)) || *woke)
        return r;
    uint64_t left_ms = (until - now + 999999) / 1000000;
    struct pollfd pfd = {.fd = c->channel->fd, .events = POLLIN};
    if (poll(&pfd, 1, (int)SC_MIN(left_ms, 100)) > 0)
        sc_tp_ack(c);
    return srcclSuccess;
}

srcclResult_t sc_tp_idle(srcclComm_t c, uint64_t until)
{
    if (sc_shm_blocked(c)) { /* a queued collective waits on shared memory, not on the CQ */
        int prog;
        srcclResult_t r = sc_tp_progress(c, &prog);
        if (!r && !prog)
            sc_shm_idle(c, until);
        return r;
    }
    int woke;
    return idle(c, until, c->cfg.spin_ns, &woke);
}

srcclResult_t sc_tp_wait(srcclComm_t c, uint64_t deadline, const char *what, int peer, size_t len)
{
    /* A chunk of len bytes takes about len ns to arrive (~1 GB/s): spin
     * that much longer, so that a pipelined transfer does not sleep and
     * wake once per chunk, while a small message that is late (its sender
     * is elsewhere) is slept on after the base spin. */
    uint64_t spin = c->cfg.spin_ns + (c->spin_per_byte ? (uint64_t)len : 0);
    int woke;
    srcclResult_t r = idle(c, deadline, spin, &woke);
    if (r || woke || sc_now_ns() < deadline)
        return r;
    return sc_tp_timeout(c, what, peer);
}
