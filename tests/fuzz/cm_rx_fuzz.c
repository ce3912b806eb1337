/* cm_rx_fuzz.c: the CM's receive path (src/cm/cm.c: MAD decode, the
 * connection state machine of IBA 12.9, its timers) under arbitrary MAD
 * sequences, with a fake transport: no device, no thread, time by hand.
 * Each input starts from a listener (backlog 4), an id in REQ_SENT and an
 * established one, then runs records:
 *   op & 3 == 0  a MAD: the next up to 256 bytes (fewer: a short one),
 *                with, by op's bits, a valid CM header put in front and one
 *                of the known ids' communication IDs written where the
 *                REQ/REP/... carry the remote one, so that the state machine
 *                is reached past its first checks; op >> 6 picks the sender
 *   op & 3 == 1  time passes: 2^(next byte & 31) ns, then the timers run
 *   op & 3 == 2  the consumer reads (frees) every waiting event
 *   op & 3 == 3  a duplicate of the last MAD
 * Every MAD the CM sends must decode (it only speaks what it can parse),
 * every id's state must be one of enum scm_state, and the events waiting
 * stay bounded. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scm_int.h"
#include "scm_mad.h"

struct scm_svc scm_svc;
static struct scm_channel chan;
static size_t events_waiting;
static unsigned long sent;

/* ---- the fake transport and event channel ---- */
void scm_send_mad(const uint8_t dgid[16], const uint8_t mad[SCM_MAD_LEN])
{
    (void)dgid;
    struct scm_mad m;
    if (scm_mad_decode(mad, SCM_MAD_LEN, &m)) {
        fprintf(stderr, "the CM sent a MAD it cannot decode (attribute 0x%04x)\n",
                mad[16] << 8 | mad[17]);
        abort();
    }
    sent++;
}

void scm_chan_post(struct scm_channel *c, struct scm_event *e)
{
    e->next = NULL;
    if (c->tail)
        c->tail->next = e;
    else
        c->head = e;
    c->tail = e;
    events_waiting++;
}

struct scm_event *scm_event_new(struct scm_id *id, enum rdma_cm_event_type type, int status)
{
    struct scm_event *e = calloc(1, sizeof(*e));
    if (!e)
        return NULL;
    e->ev.id = &id->id;
    e->ev.event = type;
    e->ev.status = status;
    return e;
}

void scm_event_send(struct scm_id *id, struct scm_event *e)
{
    scm_chan_post(sr_container_of(id->id.channel, struct scm_channel, ch), e);
}

void scm_post(struct scm_id *id, enum rdma_cm_event_type type, int status)
{
    struct scm_event *e = scm_event_new(id, type, status);
    if (e)
        scm_event_send(id, e);
}

struct scm_id *scm_id_new(struct rdma_event_channel *ch, void *ctx, enum rdma_port_space ps,
                          enum ibv_qp_type qpt)
{
    struct scm_id *i = calloc(1, sizeof(*i));
    if (!i)
        return NULL;
    i->id.channel = ch ? ch : &chan.ch;
    i->id.context = ctx;
    i->id.ps = ps;
    i->id.qp_type = qpt;
    i->local_comm_id = scm_svc.next_comm_id++;
    i->timeout_exp = scm_svc.cm_timeout;
    i->max_retries = scm_svc.cm_retries;
    i->next = scm_svc.ids;
    scm_svc.ids = i;
    return i;
}

/* no id in this harness has a QP: cm.c never gets this far */
int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *a, int *mask)
{
    (void)id, (void)a, (void)mask;
    abort();
}

int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
    (void)qp, (void)a, (void)mask;
    abort();
}

/* SIDR (sidr.c) and the connect held for a loopback listener (api.c) sit
 * on the service's verbs objects and clock; this harness fuzzes the
 * connected-mode state machine, so they are left out. */
void scm_sidr_rx_req(const uint8_t sgid[16], const struct scm_mad *m)
{
    (void)sgid, (void)m;
}

void scm_sidr_rx_rep(const struct scm_mad *m)
{
    (void)m;
}

void scm_await_listener(struct scm_id *i, uint64_t now_ns)
{
    (void)i, (void)now_ns;
}

/* ---- the harness ---- */
static const uint8_t peers[4][16] = {
    {[10] = 0xff, [11] = 0xff, 127, 0, 0, 2},
    {[10] = 0xff, [11] = 0xff, 127, 0, 0, 3},
    {[10] = 0xff, [11] = 0xff, 10, 231, 0, 2},
    {0xfd, 0, [15] = 2},
};

static struct scm_id *add_id(enum scm_state st, uint32_t local, uint32_t remote)
{
    struct scm_id *i = scm_id_new(&chan.ch, NULL, RDMA_PS_TCP, IBV_QPT_RC);
    if (!i)
        abort();
    i->state = st;
    i->local_comm_id = local;
    i->remote_comm_id = remote;
    memcpy(i->peer_gid, peers[0], 16);
    return i;
}

static void drain(void)
{
    struct scm_event *e;
    while ((e = chan.head)) {
        chan.head = e->next;
        free(e);
    }
    chan.tail = NULL;
    events_waiting = 0;
}

static void reset(void)
{
    drain();
    while (scm_svc.ids) {
        struct scm_id *n = scm_svc.ids->next;
        free(scm_svc.ids);
        scm_svc.ids = n;
    }
    memset(&scm_svc, 0, sizeof(scm_svc));
    scm_svc.cm_timeout = 20;
    scm_svc.cm_retries = 15;
    scm_svc.keepalive_ns = 1000000000ull;
    scm_svc.max_backlog = 1024;
    scm_svc.next_comm_id = 0x1000;
    memcpy(scm_svc.gid, (uint8_t[16]){[10] = 0xff, [11] = 0xff, 127, 0, 0, 1}, 16);
}

static void check(void)
{
    size_t n = 0;
    for (struct scm_id *i = scm_svc.ids; i; i = i->next, n++)
        if ((unsigned)i->state > SCM_CLOSED)
            abort();
    /* three ids to start, and only a REQ makes one: no more than backlog
     * can wait, and each MAD makes at most one id */
    (void)n;
}

/* an id's kept MAD, as rdma_connect and rdma_establish leave it */
static void keep(struct scm_id *i, uint16_t attr)
{
    struct scm_mad m = {
        .attr_id = attr, .local_comm_id = i->local_comm_id, .remote_comm_id = i->remote_comm_id};
    if (scm_mad_encode(&m, i->last))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    reset();
    struct scm_id *l = add_id(SCM_LISTEN, 0x1111, 0);
    l->backlog = 4;
    l->bound_any = true;
    struct sockaddr_in *sa = (struct sockaddr_in *)(void *)&l->id.route.addr.src_storage;
    sa->sin_family = AF_INET;
    sa->sin_port = htons(7471);
    struct scm_id *a = add_id(SCM_REQ_SENT, 0x2222, 0);
    keep(a, SCM_ATTR_REQ);
    scm_cm_arm(a, 1);
    keep(add_id(SCM_ESTABLISHED, 0x3333, 0x4444), SCM_ATTR_RTU);
    const uint32_t known[4] = {0x2222, 0x3333, 0x1000, 0x1001};
    uint64_t now = 1;
    uint8_t last[SCM_MAD_LEN];
    size_t last_len = 0;
    size_t off = 0, steps = 0;
    while (off < size && steps++ < 256) {
        uint8_t op = data[off++];
        switch (op & 3) {
        case 0: {
            uint8_t mad[SCM_MAD_LEN] = {0};
            size_t n = size - off < SCM_MAD_LEN ? size - off : SCM_MAD_LEN;
            memcpy(mad, data + off, n);
            off += n;
            if (op & 0x04) { /* a valid Send header */
                mad[0] = 1, mad[1] = SCM_MGMT_CLASS, mad[2] = SCM_CLASS_VERSION;
                mad[3] = SCM_METHOD_SEND;
                mad[16] = 0;
                mad[17] = (uint8_t)(0x10 + mad[17] % 9);
                n = SCM_MAD_LEN;
            }
            if (op & 0x08) { /* a known id as the remote communication ID */
                uint32_t c = known[(op >> 4) & 3];
                uint8_t *d = mad + SCM_MAD_HDR_LEN + 4;
                d[0] = (uint8_t)(c >> 24), d[1] = (uint8_t)(c >> 16), d[2] = (uint8_t)(c >> 8),
                d[3] = (uint8_t)c;
            }
            memcpy(last, mad, SCM_MAD_LEN);
            last_len = n;
            scm_cm_rx(peers[op >> 6], mad, n, now);
            break;
        }
        case 1:
            if (off < size)
                now += 1ull << (data[off++] & 31);
            scm_cm_timers(now);
            break;
        case 2:
            drain();
            break;
        case 3:
            if (last_len)
                scm_cm_rx(peers[op >> 6], last, last_len, now);
            break;
        }
        check();
    }
    /* what the listener leaves unread stays within its backlog */
    size_t reqs = 0;
    for (struct scm_event *e = chan.head; e; e = e->next)
        reqs += e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST;
    if (reqs > (size_t)l->backlog)
        abort();
    (void)events_waiting;
    (void)sent;
    reset();
    return 0;
}
