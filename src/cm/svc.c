/* svc.c: the CM service of the process: the device's GSI QP (QP1), the
 * thread that receives MADs and fires timers, event channels, the
 * listener directory, and the connection state machine (IBA 12.9). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "scm.h"
#include "scm_int.h"

struct scm_svc scm_svc = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* QP1's queues as deep as the kernel's MAD layer makes them (512 receives,
 * ib_mad's recv_queue_size): a UD receive queue that runs dry drops what
 * comes (IBA 11.4.1.2, no RNR for UD), and a burst of connects (cmtime
 * -c 100 posts 100 REQs at once) then waits out a resend, 4.8 s. */
enum { RX_SLOTS = 512, TX_SLOTS = 256, SLOT = SR_GRH + SCM_MAD_LEN };

uint64_t scm_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- event channels ---- */
void scm_chan_post(struct scm_channel *c, struct scm_event *e)
{
    e->next = NULL;
    if (c->tail)
        c->tail->next = e;
    else
        c->head = e;
    c->tail = e;
    if (!c->signaled) {
        c->signaled = true;
        char b = 1;
        if (write(c->wfd, &b, 1) != 1)
            c->signaled = false;
    }
}

struct scm_event *scm_chan_pop(struct scm_channel *c)
{
    struct scm_event *e = c->head;
    if (!e)
        return NULL;
    c->head = e->next;
    if (!c->head) {
        c->tail = NULL;
        if (c->signaled) {
            char b;
            if (read(c->ch.fd, &b, 1) == 1)
                c->signaled = false;
        }
    }
    return e;
}

/* Events of a destroyed id go with it. */
void scm_chan_purge(struct scm_channel *c, struct scm_id *id)
{
    struct scm_event **pp = &c->head, *last = NULL;
    while (*pp) {
        struct scm_event *e = *pp;
        if (e->ev.id == &id->id || e->ev.listen_id == &id->id) {
            *pp = e->next;
            free(e);
        } else {
            last = e;
            pp = &e->next;
        }
    }
    c->tail = last;
    if (!c->head && c->signaled) {
        char b;
        if (read(c->ch.fd, &b, 1) == 1)
            c->signaled = false;
    }
}

static struct scm_channel *chan_of(struct scm_id *id)
{
    return id->id.channel ? sr_container_of(id->id.channel, struct scm_channel, ch) : NULL;
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
    struct scm_channel *c = chan_of(id);
    if (!c) {
        free(e);
        return;
    }
    scm_chan_post(c, e);
}

void scm_post(struct scm_id *id, enum rdma_cm_event_type type, int status)
{
    struct scm_event *e = scm_event_new(id, type, status);
    if (e)
        scm_event_send(id, e);
}

/* ---- the listener directory ---- */
/* A listener publishes (port space, port, address) -> its device's GID in
 * /dev/shm, named by network namespace like the shm driver's mailboxes, so
 * that a process resolving 127.0.0.1 or a wildcard finds which device
 * listens there (docs/CM.md). */
struct dir_rec {
    uint32_t magic;
    int32_t pid;
    uint8_t gid[16];
};
#define DIR_MAGIC 0x53434d31u

static void dir_name(char *out, size_t n, uint16_t ps, uint16_t port, const uint8_t ip[16])
{
    char hex[33];
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", ip[i]);
    snprintf(out, n, "/dev/shm/softrdma-cm-%lu-%x-%u-%s", scm_svc.netns, ps, port, hex);
}

static bool dir_read(const char *path, struct dir_rec *r)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = read(fd, r, sizeof(*r));
    close(fd);
    if (n != (ssize_t)sizeof(*r) || r->magic != DIR_MAGIC)
        return false;
    if (r->pid > 0 && kill(r->pid, 0) && errno == ESRCH) {
        unlink(path); /* its process is gone */
        return false;
    }
    return true;
}

int scm_dir_publish(struct scm_id *id, uint16_t port, const uint8_t ip[16])
{
    dir_name(id->dir_path, sizeof(id->dir_path), (uint16_t)id->id.ps, port, ip);
    struct dir_rec r = {.magic = DIR_MAGIC, .pid = getpid()};
    memcpy(r.gid, scm_svc.gid, 16);
    for (int tries = 0; tries < 2; tries++) {
        int fd = open(id->dir_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd >= 0) {
            ssize_t n = write(fd, &r, sizeof(r));
            close(fd);
            if (n != (ssize_t)sizeof(r)) {
                unlink(id->dir_path);
                id->dir_path[0] = 0;
                return EIO;
            }
            return 0;
        }
        struct dir_rec old;
        if (errno != EEXIST || dir_read(id->dir_path, &old))
            break;
    }
    id->dir_path[0] = 0;
    return EADDRINUSE;
}

void scm_dir_unpublish(struct scm_id *id)
{
    if (id->dir_path[0])
        unlink(id->dir_path);
    id->dir_path[0] = 0;
}

bool scm_dir_lookup(uint16_t ps, uint16_t port, const uint8_t ip[16], uint8_t gid[16])
{
    char path[128];
    struct dir_rec r;
    dir_name(path, sizeof(path), ps, port, ip);
    if (dir_read(path, &r)) {
        memcpy(gid, r.gid, 16);
        return true;
    }
    /* a wildcard listener of the same family takes any local address */
    uint8_t any[16] = {0};
    if (scm_ip_is_v4(ip))
        any[10] = any[11] = 0xff;
    dir_name(path, sizeof(path), ps, port, any);
    if (dir_read(path, &r)) {
        memcpy(gid, r.gid, 16);
        return true;
    }
    return false;
}

bool scm_port_in_use(uint16_t ps, uint16_t port)
{
    for (struct scm_id *i = scm_svc.ids; i; i = i->next)
        if (i->id.ps == (enum rdma_port_space)ps && scm_id_port(i, true) == port &&
            i->state != SCM_CLOSED && !i->passive)
            return true;
    return false;
}

/* ---- QP1 ---- */
static int post_recv_slot(uint32_t i)
{
    struct ibv_sge sge = {.addr = (uintptr_t)(scm_svc.buf + (size_t)i * SLOT),
                          .length = SLOT,
                          .lkey = scm_svc.mr->lkey};
    struct ibv_recv_wr wr = {.wr_id = i, .sg_list = &sge, .num_sge = 1}, *bad;
    return ibv_post_recv(scm_svc.gsi, &wr, &bad);
}

/* QP1's send completions, each a send slot free again */
void scm_svc_tx_reap(void)
{
    struct ibv_wc wc[16];
    int n;
    while ((n = ibv_poll_cq(scm_svc.scq, 16, wc)) > 0)
        scm_svc.tx_done += (uint32_t)n;
}

void scm_send_mad(const uint8_t dgid[16], const uint8_t mad[SCM_MAD_LEN])
{
    struct scm_svc *s = &scm_svc;
    if (s->trace)
        fprintf(stderr, "softrdma cm: %d send %s to %u.%u.%u.%u\n", (int)getpid(),
                scm_attr_name((uint16_t)(mad[16] << 8 | mad[17])), dgid[12], dgid[13], dgid[14],
                dgid[15]);
    struct ibv_ah_attr aa = {.is_global = 1, .port_num = 1};
    memcpy(aa.grh.dgid.raw, dgid, 16);
    aa.grh.hop_limit = 64;
    /* A send slot is free once its completion is in: QP1's send queue
     * completes in order (IBA 10.8.3), so with fewer than TX_SLOTS
     * outstanding, slot tx_posted % TX_SLOTS is not in flight. A full
     * queue gets at most 10 ms to drain; after that the MAD is lost and
     * the timers resend it. */
    scm_svc_tx_reap();
    for (int n = 0; s->tx_posted - s->tx_done >= TX_SLOTS && n < 10000; n++) {
        struct timespec ts = {.tv_nsec = 1000};
        nanosleep(&ts, NULL);
        scm_svc_tx_reap();
    }
    if (s->tx_posted - s->tx_done >= TX_SLOTS)
        return;
    struct ibv_ah *ah = ibv_create_ah(s->pd, &aa);
    if (!ah)
        return; /* a lost MAD: the timers resend it */
    uint32_t slot = RX_SLOTS + s->tx_posted % TX_SLOTS;
    uint8_t *p = s->buf + (size_t)slot * SLOT;
    memcpy(p, mad, SCM_MAD_LEN);
    struct ibv_sge sge = {.addr = (uintptr_t)p, .length = SCM_MAD_LEN, .lkey = s->mr->lkey};
    struct ibv_send_wr wr = {.wr_id = slot,
                             .sg_list = &sge,
                             .num_sge = 1,
                             .opcode = IBV_WR_SEND,
                             .send_flags = IBV_SEND_SIGNALED},
                       *bad;
    wr.wr.ud.ah = ah;
    wr.wr.ud.remote_qpn = 1;
    wr.wr.ud.remote_qkey = SCM_GSI_QKEY; /* IBA 13.5.1.1: QP1 takes Q_Key 0x80010000 */
    if (!ibv_post_send(s->gsi, &wr, &bad))
        s->tx_posted++;
    ibv_destroy_ah(ah);
}

static void *svc_thread(void *arg);

static unsigned long netns_id(void)
{
    struct stat st;
    return stat("/proc/self/ns/net", &st) ? 0 : (unsigned long)st.st_ino;
}

/* Open the device and its QP1, start the thread. Lock held. */
int scm_svc_up(void)
{
    struct scm_svc *s = &scm_svc;
    if (s->up)
        return 0;
    if (s->err)
        return s->err;
    int err = ENODEV;
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (!list || n < 1)
        goto fail;
    s->verbs = ibv_open_device(list[0]);
    ibv_free_device_list(list);
    if (!s->verbs)
        goto fail;
    union ibv_gid g;
    if (ibv_query_gid(s->verbs, 1, 0, &g))
        goto fail;
    memcpy(s->gid, g.raw, 16);
    s->guid = ibv_get_device_guid(s->verbs->device);
    struct ibv_device_attr da;
    if (ibv_query_device(s->verbs, &da))
        goto fail;
    s->max_resp_res = (uint8_t)(da.max_qp_rd_atom > 255 ? 255 : da.max_qp_rd_atom);
    s->max_init_depth = (uint8_t)(da.max_qp_init_rd_atom > 255 ? 255 : da.max_qp_init_rd_atom);
    s->netns = netns_id();
    s->trace = getenv("SOFTRDMA_CM_TRACE") != NULL;
    scm_cm_config();
    err = ENOMEM;
    s->pd = ibv_alloc_pd(s->verbs);
    s->cch = ibv_create_comp_channel(s->verbs);
    if (!s->pd || !s->cch)
        goto fail;
    s->cq = ibv_create_cq(s->verbs, RX_SLOTS, NULL, s->cch, 0);
    /* sends complete into a CQ of their own, reaped by whoever sends next */
    s->scq = ibv_create_cq(s->verbs, TX_SLOTS, NULL, NULL, 0);
    if (!s->cq || !s->scq)
        goto fail;
    struct ibv_qp_init_attr ia = {.send_cq = s->scq,
                                  .recv_cq = s->cq,
                                  .qp_type = IBV_QPT_UD,
                                  .cap = {.max_send_wr = TX_SLOTS,
                                          .max_recv_wr = RX_SLOTS,
                                          .max_send_sge = 1,
                                          .max_recv_sge = 1}};
    s->gsi = ibv_create_qp(s->pd, &ia);
    if (!s->gsi)
        goto fail;
    err = softrdma_priv_make_gsi_qp(s->gsi);
    if (err)
        goto fail;
    err = EIO;
    struct ibv_qp_attr qa = {.qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = SCM_GSI_QKEY};
    if (ibv_modify_qp(s->gsi, &qa, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
        goto fail;
    qa.qp_state = IBV_QPS_RTR;
    if (ibv_modify_qp(s->gsi, &qa, IBV_QP_STATE))
        goto fail;
    qa.qp_state = IBV_QPS_RTS;
    qa.sq_psn = 0;
    if (ibv_modify_qp(s->gsi, &qa, IBV_QP_STATE | IBV_QP_SQ_PSN))
        goto fail;
    size_t len = (size_t)(RX_SLOTS + TX_SLOTS) * SLOT;
    s->buf = calloc(1, len);
    if (!s->buf)
        goto fail;
    s->mr = ibv_reg_mr(s->pd, s->buf, len, IBV_ACCESS_LOCAL_WRITE);
    if (!s->mr)
        goto fail;
    for (uint32_t i = 0; i < RX_SLOTS; i++)
        if (post_recv_slot(i))
            goto fail;
    if (ibv_req_notify_cq(s->cq, 0))
        goto fail;
    if (pipe2(s->wake, O_CLOEXEC | O_NONBLOCK))
        goto fail;
    uint32_t seed = (uint32_t)getpid() ^ (uint32_t)scm_now_ns();
    s->next_comm_id = seed * 2654435761u | 1;
    s->next_port = (uint16_t)(32768 + seed % 28000);
    if (pthread_create(&s->thread, NULL, svc_thread, NULL))
        goto fail;
    s->up = true;
    return 0;
fail:
    /* The device stays as far as it got; later calls fail the same way. */
    s->err = err;
    return err;
}

void scm_svc_kick(void)
{
    char b = 1;
    if (write(scm_svc.wake[1], &b, 1) < 0) {
        /* full: the thread is awake already */
    }
}

static void svc_rx(uint64_t now_ns)
{
    struct scm_svc *s = &scm_svc;
    struct ibv_wc wc[16];
    int n;
    while ((n = ibv_poll_cq(s->cq, 16, wc)) > 0) {
        for (int i = 0; i < n; i++) {
            uint8_t *p = s->buf + wc[i].wr_id * SLOT;
            if (s->trace && wc[i].byte_len >= SR_GRH + 18)
                fprintf(stderr, "softrdma cm: %d recv %s (wc status %d)\n", (int)getpid(),
                        scm_attr_name((uint16_t)(p[SR_GRH + 16] << 8 | p[SR_GRH + 17])),
                        wc[i].status);
            if (wc[i].status == IBV_WC_SUCCESS && wc[i].byte_len >= SR_GRH) {
                /* The sender's GID: from the GRH (IBA 8.3.1), or on RoCEv2
                 * over IPv4 from the IPv4 header in its last 20 bytes
                 * (IBA A17.4.5.1). */
                uint8_t sgid[16] = {[10] = 0xff, [11] = 0xff};
                if (p[20] >> 4 == 4)
                    memcpy(sgid + 12, p + 20 + 12, 4);
                else
                    memcpy(sgid, p + 8, 16);
                scm_cm_rx(sgid, p + SR_GRH, wc[i].byte_len - SR_GRH, now_ns);
            }
            post_recv_slot((uint32_t)wc[i].wr_id);
        }
    }
}

static void *svc_thread(void *arg)
{
    (void)arg;
    struct scm_svc *s = &scm_svc;
    for (;;) {
        pthread_mutex_lock(&s->lock);
        uint64_t now = scm_now_ns();
        uint64_t next = scm_cm_timers(now);
        pthread_mutex_unlock(&s->lock);
        int tmo = -1;
        if (next) {
            uint64_t d = next > now ? next - now : 0;
            tmo = (int)(d / 1000000 + 1);
        }
        struct pollfd pf[2] = {{.fd = s->cch->fd, .events = POLLIN},
                               {.fd = s->wake[0], .events = POLLIN}};
        int r = poll(pf, 2, tmo);
        if (r < 0 && errno != EINTR)
            break;
        pthread_mutex_lock(&s->lock);
        if (pf[1].revents) {
            char b[64];
            while (read(s->wake[0], b, sizeof(b)) > 0) {
            }
        }
        if (pf[0].revents) {
            struct ibv_cq *cq;
            void *ctx;
            if (!ibv_get_cq_event(s->cch, &cq, &ctx)) {
                ibv_ack_cq_events(cq, 1);
                ibv_req_notify_cq(s->cq, 0);
            }
        }
        svc_rx(scm_now_ns());
        pthread_mutex_unlock(&s->lock);
    }
    return NULL;
}

/* A process that exits with connections open: the kernel's rdma_cm closes
 * its ids for it, and their peers hear DREQs (or REJs); a peer waiting for
 * DISCONNECTED or for the DREP to its own DREQ would otherwise wait out
 * every retry (77 s). perftest's ib_atomic_lat -R server returns from main
 * with its connection open. This runs before libibverbs' destructor takes
 * the device's mailbox away (librdmacm depends on it, so its destructors
 * run first), and is bounded: the lock at most 100 ms, then at most 200 ms
 * until QP1 has completed the MADs. */
__attribute__((destructor)) static void svc_fini(void)
{
    struct scm_svc *s = &scm_svc;
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_nsec += 100000000;
    if (dl.tv_nsec >= 1000000000) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000;
    }
    if (pthread_mutex_timedlock(&s->lock, &dl))
        return;
    if (!s->up) {
        pthread_mutex_unlock(&s->lock);
        return;
    }
    uint32_t before = s->tx_posted;
    for (struct scm_id *i = s->ids; i; i = i->next)
        scm_cm_leave(i);
    uint32_t want = s->tx_posted;
    bool wait = want != before;
    pthread_mutex_unlock(&s->lock);
    for (int n = 0; wait && n < 200; n++) {
        pthread_mutex_lock(&s->lock);
        scm_svc_tx_reap();
        wait = (int32_t)(want - s->tx_done) > 0;
        pthread_mutex_unlock(&s->lock);
        if (wait)
            usleep(1000);
    }
}
