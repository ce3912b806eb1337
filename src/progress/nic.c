/* nic.c: the per-device progress thread around the engine, the UDP
 * driver and the shared-memory driver. */
#include "sr_nic.h"
#include "ack.h"
#include "sr_bulk.h"
#include "sr_util.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

enum {
    RX_BATCH = 64,
    /* A receive call can bring in megabytes (GRO batches): the engine's
     * clock, which stamps held ACKs and arms timers, is read again every
     * RX_CLOCK_PKTS packets rather than once per call. With one reading per
     * call an ACK held at the end of a long batch would count its hold from
     * the batch's start and be due the moment the pass ended: sent alone,
     * before the reply it was held for. */
    RX_CLOCK_PKTS = 8,
};
/* While peers send through shared memory, an empty UDP receive is most of
 * an empty pass (a system call against a few loads): after UDP_IDLE_PASSES
 * empty ones in a row, a pass looks at the socket only every UDP_SKIP-th
 * time, until it finds a datagram. The NIC thread still watches the
 * socket when it blocks. */
#define UDP_IDLE_PASSES 256u
#define UDP_SKIP        16u
/* How long the NIC thread polls after traffic before it blocks, when it
 * spins at all (sr_progress.h): a passive target's next request usually
 * comes sooner and then needs no wake-up, which would add about 20 us to
 * a READ target's latency (docs/PERFORMANCE.md). A constant: no test or
 * benchmark needs another value. */
#define SPIN_NS 50000ull

struct sr_nic {
    pthread_mutex_t lock;
    struct sr_engine *eng;
    struct sr_udp *udp;
    struct sr_shm *shm;   /* NULL: UDP only */
    bool shm_backlog;     /* packets wait for room in a peer's ring */
    bool app_bulk;        /* the last inline pass: sr_progress_app_bulk */
    uint64_t app_tx_mark; /* UDP bytes sent up to the last inline pass */
    uint32_t udp_idle;    /* empty UDP receives in a row */
    uint32_t udp_skips;   /* passes that left the socket alone */
    pthread_t thread;
    int evfd;
    atomic_bool stop;
    _Atomic uint64_t sleep_until; /* deadline the thread sleeps towards; 0 = awake */
    uint64_t now;                 /* time of the packets being received */
    uint32_t rx_ticks;            /* packets received (RX_CLOCK_PKTS) */
    struct sr_progress policy;    /* the NIC thread's (sr_progress.h) */
    /* verbs calls so far (sr_nic_lock): the thread notes when the count
     * last moved, so the calls themselves read no clock */
    _Atomic uint64_t app_calls;
    /* application threads waiting for the lock (sr_nic_lock) */
    atomic_uint app_waiting;
    bool timers_deferred; /* the NIC thread's last pass left them to one */
    /* The hand-off (sr_progress_handoff_until): what application threads
     * tell the NIC thread about their polls. */
    uint64_t handoff_ns;
    _Atomic uint64_t last_poll_ns; /* last poll; 0 = handed back */
    uint64_t prev_poll_ns;         /* last poll, kept when handed back (under lock) */
    _Atomic uint64_t poll_gap_ns;  /* moving average of the gaps between polls */
    _Atomic uint64_t last_pass_ns; /* last inline pass */
    atomic_bool napping;           /* the NIC thread is in a hand-off nap */
    /* An application thread is about to sleep (sr_nic_app_blocks) and has
     * not polled since: it posts nothing until a completion wakes it. */
    atomic_bool app_asleep;
    struct sr_engine_ops user_ops; /* the layer above's cq/async callbacks */
    void *user_ctx;
};

uint64_t sr_nic_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct timespec ts_of_ns(uint64_t ns)
{
    return (struct timespec){.tv_sec = (time_t)(ns / 1000000000ull),
                             .tv_nsec = (long)(ns % 1000000000ull)};
}

/* The thread's eventfd: wakes it from its blocking ppoll or from a hand-off nap. */
static void nic_wake(struct sr_nic *nic)
{
    uint64_t one = 1;
    ssize_t r = write(nic->evfd, &one, sizeof(one));
    (void)r; /* a full counter already wakes the thread */
}

static void nic_wake_clear(struct sr_nic *nic)
{
    uint64_t v;
    ssize_t r = read(nic->evfd, &v, sizeof(v));
    (void)r;
}

/* Puts what the engine sent on its way: UDP's batch, shared memory's
 * rings (and backlogs). */
static void nic_flush_out(struct sr_nic *nic)
{
    if (nic->shm)
        nic->shm_backlog = !sr_shm_flush(nic->shm);
    sr_udp_flush(nic->udp);
}

static int nic_tx(void *ctx, const struct sr_tx_pkt *pkt)
{
    struct sr_nic *nic = ctx;
    if (nic->shm) {
        int r = sr_shm_send(nic->shm, pkt); /* copies: pkt->flush holds */
        if (r == 0 && !nic->shm_backlog && sr_shm_backlogged(nic->shm)) {
            nic->shm_backlog = true; /* the NIC thread must come back for it */
            if (atomic_load(&nic->sleep_until))
                nic_wake(nic);
        }
        if (r != SR_SHM_REMOTE)
            return r;
    }
    if (pkt->bulk)
        return SR_ERR_INVAL;            /* a reference means nothing off this host: lost */
    return sr_udp_queue(nic->udp, pkt); /* honours pkt->flush */
}

static void nic_tx_fence(void *ctx)
{
    struct sr_nic *nic = ctx;
    sr_udp_fence(nic->udp);
}

static bool nic_tx_trains(void *ctx, const uint8_t *dgid)
{
    struct sr_nic *nic = ctx;
    if (!sr_udp_trains(nic->udp))
        return false;
    return !nic->shm || !sr_shm_reaches(nic->shm, dgid);
}

static uint32_t nic_bulk_to(void *ctx, const uint8_t *dgid)
{
    struct sr_nic *nic = ctx;
    return nic->shm ? sr_shm_bulk_to(nic->shm, dgid) : 0;
}

static int nic_bulk_copy(void *ctx, uint64_t peer, bool to_peer, const struct sr_bulk_seg *local,
                         uint32_t local_cnt, const struct sr_bulk_seg *remote, uint32_t remote_cnt)
{
    (void)ctx;
    return sr_shm_copy((uint32_t)peer, to_peer, local, local_cnt, remote, remote_cnt);
}

static void nic_cq_event(void *ctx, struct sr_cq *cq, bool solicited)
{
    struct sr_nic *nic = ctx;
    if (nic->user_ops.cq_event)
        nic->user_ops.cq_event(nic->user_ctx, cq, solicited);
}

static void nic_async_event(void *ctx, enum sr_event_type type, void *obj)
{
    struct sr_nic *nic = ctx;
    if (nic->user_ops.async_event)
        nic->user_ops.async_event(nic->user_ctx, type, obj);
}

static void nic_rx(void *arg, const uint8_t *pkt, size_t len, const uint8_t *src_gid)
{
    struct sr_nic *nic = arg;
    if (++nic->rx_ticks % RX_CLOCK_PKTS == 0)
        nic->now = sr_nic_now();
    sr_engine_rx(nic->eng, pkt, len, src_gid, nic->now);
}

static void nic_shm_rx(void *arg, const uint8_t *pkt, size_t len, const uint8_t *src_gid,
                       uint32_t ref_pid)
{
    struct sr_nic *nic = arg;
    if (!ref_pid) {
        nic_rx(arg, pkt, len, src_gid);
        return;
    }
    if (++nic->rx_ticks % RX_CLOCK_PKTS == 0)
        nic->now = sr_nic_now();
    sr_engine_rx_bulk(nic->eng, pkt, len, src_gid, ref_pid, nic->now); /* sr_bulk.h */
    /* its ACK leaves now, not held and not after the rest of the batch:
     * each record may stand for megabytes copied (longer than any hold),
     * and the requester's window and timers wait for it */
    nic->now = sr_nic_now();
    sr_engine_release_acks(nic->eng, UINT64_MAX);
    nic_flush_out(nic);
}

/* From the UDP socket: with the datagram's ECN field, whose CE mark the
 * engine's notification point answers (docs/CONGESTION.md). */
static void nic_rx_udp(void *arg, const uint8_t *pkt, size_t len, const uint8_t *src_gid)
{
    struct sr_nic *nic = arg;
    if (++nic->rx_ticks % RX_CLOCK_PKTS == 0)
        nic->now = sr_nic_now();
    sr_engine_rx_ecn(nic->eng, pkt, len, src_gid, sr_udp_rx_ecn(nic->udp) == 3, nic->now);
}

static bool nic_app_waits(struct sr_nic *nic)
{
    return atomic_load_explicit(&nic->app_waiting, memory_order_relaxed) != 0;
}

/* A pass run by the NIC thread (ours), or inline by an application thread.
 * The NIC thread leaves the timers to an application thread that waits
 * for the lock, once: it is about to post (the reply an ACK is held for)
 * or to poll, whose pass fires them. */
static int nic_pass(struct sr_nic *nic, bool ours)
{
    int total = 0;
    for (;;) {
        nic->now = sr_nic_now();
        bool skip = nic->udp_idle >= UDP_IDLE_PASSES && nic->shm && sr_shm_active(nic->shm) &&
                    ++nic->udp_skips % UDP_SKIP != 0;
        int n = skip   ? 0
                : ours ? sr_udp_recv(nic->udp, nic_rx_udp, nic, RX_BATCH)
                       : sr_udp_poll(nic->udp, nic_rx_udp, nic, RX_BATCH);
        if (!skip)
            nic->udp_idle = n > 0 ? 0 : SR_MIN(nic->udp_idle + 1, UDP_IDLE_PASSES);
        int m = nic->shm ? sr_shm_recv(nic->shm, nic_shm_rx, nic, RX_BATCH) : 0;
        if (n > 0)
            total += n;
        total += m;
        if (n < RX_BATCH && m < RX_BATCH)
            break;
    }
    /* the time of the last packets (nic_rx keeps it within RX_CLOCK_PKTS
     * packets), not a fresh reading: a timer due since then fires at the
     * next pass, and a ping-pong's reply waits for one clock reading
     * (about 30 ns) less */
    uint64_t now = nic->now;
    bool defer = ours && !nic->timers_deferred && nic_app_waits(nic);
    if (ours)
        nic->timers_deferred = defer;
    if (sr_engine_next_deadline(nic->eng) <= now && !defer)
        sr_engine_advance(nic->eng, now);
    nic_flush_out(nic);
    return total;
}

int sr_nic_progress(struct sr_nic *nic)
{
    sr_engine_hold_acks(nic->eng, true); /* an application thread: a reply may follow */
    const struct sr_udp_stats *st = sr_udp_counters(nic->udp);
    uint64_t rx0 = st->rx_bytes;
    int n = nic_pass(nic, false);
    uint64_t rx = st->rx_bytes - rx0, tx = st->tx_bytes - nic->app_tx_mark;
    nic->app_tx_mark = st->tx_bytes;
    nic->app_bulk = sr_progress_app_bulk(rx, tx);
    if (nic->handoff_ns)
        atomic_store_explicit(&nic->last_pass_ns, nic->now, memory_order_relaxed);
    sr_nic_kick(nic); /* the pass may have set a timer (a held ACK) */
    return n;
}

void sr_nic_app_nap(void)
{
    /* the thread's timer slack (50 us by default) would stretch 10 us
     * to 60: lowered for the nap, then put back */
    int slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    (void)prctl(PR_SET_TIMERSLACK, 1000ul);
    struct timespec ts = ts_of_ns(SR_PROGRESS_BULK_NAP_NS);
    nanosleep(&ts, NULL);
    if (slack > 0)
        (void)prctl(PR_SET_TIMERSLACK, (unsigned long)slack);
}

/* A poll the hand-off counts, at now. */
static void nic_app_polls(struct sr_nic *nic, uint64_t now)
{
    if (atomic_load_explicit(&nic->app_asleep, memory_order_relaxed))
        atomic_store_explicit(&nic->app_asleep, false, memory_order_relaxed);
    if (!nic->handoff_ns)
        return;
    uint64_t avg = atomic_load_explicit(&nic->poll_gap_ns, memory_order_relaxed);
    avg = sr_progress_poll_gap(avg, nic->prev_poll_ns, now);
    nic->prev_poll_ns = now;
    atomic_store_explicit(&nic->poll_gap_ns, avg, memory_order_relaxed);
    atomic_store_explicit(&nic->last_poll_ns, now, memory_order_relaxed);
}

void sr_nic_app_blocks(struct sr_nic *nic)
{
    atomic_store_explicit(&nic->app_asleep, true, memory_order_relaxed);
    atomic_store(&nic->last_poll_ns, 0); /* seq_cst: pairs with nic_handoff_nap */
    if (atomic_load(&nic->napping))
        nic_wake(nic);
}

/* Sends the ACKs held since held_since or earlier (under lock). */
static void nic_release_acks(struct sr_nic *nic, uint64_t held_since)
{
    if (sr_engine_release_acks(nic->eng, held_since))
        nic_flush_out(nic);
}

void sr_nic_app_sleeps(struct sr_nic *nic)
{
    nic_release_acks(nic, UINT64_MAX);
    sr_nic_app_blocks(nic);
}

bool sr_nic_polled(struct sr_nic *nic, const struct sr_progress_poll *poll)
{
    /* an inline pass stamped nic->now; otherwise the clock is read only
     * when the hand-off needs it */
    uint64_t now = poll->ran ? nic->now : 0;
    struct sr_progress_poll_decision d = sr_progress_polled(poll, SR_ACK_IDLE_NS, now);
    if (d.release)
        nic_release_acks(nic, d.held_since);
    if (d.hands_back)
        sr_nic_app_blocks(nic);
    if (d.counts)
        nic_app_polls(nic, poll->ran || !nic->handoff_ns ? now : sr_nic_now());
    bool nap = poll->ran && nic->app_bulk;
    nic->app_bulk = false;
    return nap;
}

void sr_nic_flush(struct sr_nic *nic)
{
    nic_flush_out(nic);
}

void sr_nic_kick(struct sr_nic *nic)
{
    uint64_t sleeping = atomic_load(&nic->sleep_until);
    if (sleeping && sr_progress_kick(sleeping, sr_engine_next_deadline(nic->eng),
                                     sr_udp_next_deadline(nic->udp)))
        nic_wake(nic);
}

void sr_nic_posted(struct sr_nic *nic, bool flush)
{
    if (flush)
        nic_flush_out(nic);
    sr_nic_kick(nic);
}

/* Bytes received so far through shared memory. */
static uint64_t nic_shm_rx_bytes(struct sr_nic *nic)
{
    if (!nic->shm)
        return 0;
    struct sr_shm_stats m;
    sr_shm_stats(nic->shm, &m);
    return m.rx_bytes;
}

/* What the application side has told the NIC thread. */
static void nic_app_read(struct sr_nic *nic, struct sr_progress_app *a, bool seq_cst)
{
    a->last_poll_ns = seq_cst ? atomic_load(&nic->last_poll_ns)
                              : atomic_load_explicit(&nic->last_poll_ns, memory_order_relaxed);
    a->last_pass_ns = atomic_load_explicit(&nic->last_pass_ns, memory_order_relaxed);
    a->poll_gap_ns = atomic_load_explicit(&nic->poll_gap_ns, memory_order_relaxed);
    a->calls = atomic_load_explicit(&nic->app_calls, memory_order_relaxed);
    a->waiting = nic_app_waits(nic);
    a->asleep = atomic_load_explicit(&nic->app_asleep, memory_order_relaxed);
}

/* Stays off the socket while the hand-off lasts, woken early by an
 * application thread that blocks. */
static void nic_handoff_nap(struct sr_nic *nic, uint64_t now)
{
    atomic_store(&nic->napping, true);
    /* the policy's until_ns again, now that napping is set: an application
     * that blocked meanwhile has written the eventfd only if it saw it */
    struct sr_progress_app app;
    nic_app_read(nic, &app, true);
    uint64_t until = sr_progress_handoff_until(&nic->policy, &app, now);
    if (until) {
        struct timespec ts = ts_of_ns(until - now);
        struct pollfd pfd = {.fd = nic->evfd, .events = POLLIN};
        if (ppoll(&pfd, 1, &ts, NULL) > 0)
            nic_wake_clear(nic);
    }
    atomic_store(&nic->napping, false);
}

/* Waits for a packet, a doorbell, a kick, or until (UINT64_MAX: none). */
static void nic_block(struct sr_nic *nic, uint64_t until, uint64_t now)
{
    struct timespec ts, *tsp = NULL;
    if (until != UINT64_MAX) {
        ts = ts_of_ns(until > now ? until - now : 0);
        tsp = &ts;
    }
    /* ppoll, not a standing epoll set: a socket watched by epoll costs
     * every sender a callback per datagram even while nobody waits
     * (a ping-pong's half round trip 0.2 us longer, udpbench). */
    struct pollfd pfd[3] = {{.fd = sr_udp_fd(nic->udp), .events = POLLIN},
                            {.fd = nic->evfd, .events = POLLIN},
                            {.fd = nic->shm ? sr_shm_fd(nic->shm) : -1, .events = POLLIN}};
    int k = ppoll(pfd, 3, tsp, NULL);
    atomic_store(&nic->sleep_until, 0);
    if (k > 0 && (pfd[1].revents & POLLIN))
        nic_wake_clear(nic);
    if (nic->shm)
        sr_shm_wake(nic->shm, k > 0 && (pfd[2].revents & POLLIN));
}

/* One cycle of the NIC thread: the policy decides (sr_progress_next),
 * this carries it out. */
static void nic_cycle(struct sr_nic *nic)
{
    struct sr_progress *p = &nic->policy;
    struct sr_progress_in in = {0};
    uint64_t now = sr_nic_now();
    nic_app_read(nic, &in.app, false);
    struct sr_progress_decision d = sr_progress_next(p, &in, now);
    if (d.action == SR_PROGRESS_HANDOFF) {
        nic_handoff_nap(nic, now);
        return;
    }
    while (d.action == SR_PROGRESS_YIELD) {
        sched_yield();
        nic_app_read(nic, &in.app, false);
        d = sr_progress_next(p, &in, sr_nic_now());
    }
    pthread_mutex_lock(&nic->lock);
    nic_app_read(nic, &in.app, false);
    d = sr_progress_next(p, &in, sr_nic_now()); /* SR_PROGRESS_PASS */
    sr_engine_hold_acks(nic->eng, d.hold_acks);
    const struct sr_udp_stats *us = sr_udp_counters(nic->udp);
    uint64_t udp_before = us->rx_bytes, shm_before = nic_shm_rx_bytes(nic);
    in.pass.pkts = nic_pass(nic, true);
    in.pass.udp_bytes = us->rx_bytes - udp_before;
    in.pass.shm_bytes = nic_shm_rx_bytes(nic) - shm_before;
    uint64_t deadline = sr_engine_next_deadline(nic->eng);
    uint64_t held = sr_udp_next_deadline(nic->udp); /* injected delays */
    in.pass.deadline_ns = SR_MIN(deadline, held);
    in.pass.shm_backlog = nic->shm_backlog;
    now = sr_nic_now();
    d = sr_progress_next(p, &in, now);
    /* blocking arms the shared-memory doorbell; a peer that wrote
     * meanwhile makes it a spin */
    if (d.action == SR_PROGRESS_BLOCK && nic->shm && !sr_shm_sleep(nic->shm))
        d.action = SR_PROGRESS_SPIN;
    if (d.action == SR_PROGRESS_BLOCK)
        atomic_store(&nic->sleep_until, d.until_ns);
    pthread_mutex_unlock(&nic->lock);
    if (d.action == SR_PROGRESS_NAP) {
        struct timespec ts = ts_of_ns(d.until_ns - now);
        nanosleep(&ts, NULL);
    } else if (d.action == SR_PROGRESS_BLOCK) {
        nic_block(nic, d.until_ns, now);
    }
}

static void *nic_thread(void *arg)
{
    struct sr_nic *nic = arg;
    /* 1 us: a bulk nap of 10 us would otherwise last up to 60 */
    (void)prctl(PR_SET_TIMERSLACK, 1000ul);
    while (!atomic_load(&nic->stop))
        nic_cycle(nic);
    return NULL;
}

int sr_nic_open(const struct sr_nic_cfg *cfg, struct sr_nic **out)
{
    struct sr_nic *nic = calloc(1, sizeof(*nic));
    if (!nic)
        return SR_ERR_NOMEM;
    nic->evfd = -1;
    nic->handoff_ns = cfg->handoff_ns;
    struct sr_progress_cfg pc = {.spin_ns = SPIN_NS,
                                 .handoff_ns = cfg->handoff_ns,
                                 .app_reply_ns = SR_ACK_APP_REPLY_NS,
                                 .idle_ack_ns = SR_ACK_IDLE_NS};
    sr_progress_init(&nic->policy, &pc);
    pthread_mutex_init(&nic->lock, NULL);
    int err = sr_udp_open(&cfg->udp, &nic->udp);
    if (err)
        goto err_free;
    struct sr_engine_cfg ec = cfg->engine;
    memcpy(ec.gid, sr_udp_addr(nic->udp), 16);
    nic->user_ops = cfg->engine.ops;
    nic->user_ctx = cfg->engine.ops_ctx;
    ec.ops.tx = nic_tx;
    ec.ops.tx_fence = nic_tx_fence;
    ec.trains = sr_udp_trains(nic->udp);
    ec.trains_to = nic_tx_trains;
    if (!cfg->no_shm && cfg->shm_bulk) {
        ec.bulk_to = nic_bulk_to;
        ec.bulk_copy = nic_bulk_copy;
        ec.bulk_read = cfg->shm_bulk_read;
    }
    ec.ops.cq_event = nic_cq_event;
    ec.ops.async_event = nic_async_event;
    ec.ops_ctx = nic;
    err = sr_engine_create(&ec, &nic->eng);
    if (err)
        goto err_udp;
    if (!cfg->no_shm) {
        struct sr_shm_cfg sc = {
            .port = sr_udp_port(nic->udp), .dir = cfg->shm_dir, .bulk_min = cfg->shm_bulk};
        memcpy(sc.gid, ec.gid, 16);
        if (sr_shm_open(&sc, &nic->shm)) /* no /dev/shm: UDP alone */
            nic->shm = NULL;
    }
    err = SR_ERR_NOMEM;
    nic->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (nic->evfd < 0)
        goto err_engine;
    if (pthread_create(&nic->thread, NULL, nic_thread, nic))
        goto err_engine;
    *out = nic;
    return 0;

err_engine:
    if (nic->evfd >= 0)
        close(nic->evfd);
    sr_shm_close(nic->shm);
    sr_engine_destroy(nic->eng);
err_udp:
    sr_udp_close(nic->udp);
err_free:
    pthread_mutex_destroy(&nic->lock);
    free(nic);
    return err;
}

void sr_nic_close(struct sr_nic *nic)
{
    if (!nic)
        return;
    atomic_store(&nic->stop, true);
    nic_wake(nic);
    pthread_join(nic->thread, NULL);
    close(nic->evfd);
    sr_engine_destroy(nic->eng);
    sr_shm_close(nic->shm);
    sr_udp_close(nic->udp);
    pthread_mutex_destroy(&nic->lock);
    free(nic);
}

struct sr_engine *sr_nic_engine(struct sr_nic *nic)
{
    return nic->eng;
}
const uint8_t *sr_nic_gid(const struct sr_nic *nic)
{
    return sr_udp_addr(nic->udp);
}
void sr_nic_lock(struct sr_nic *nic)
{
    if (pthread_mutex_trylock(&nic->lock) != 0) {
        atomic_fetch_add_explicit(&nic->app_waiting, 1, memory_order_relaxed);
        pthread_mutex_lock(&nic->lock);
        atomic_fetch_sub_explicit(&nic->app_waiting, 1, memory_order_relaxed);
    }
    /* only application threads take the lock here: no read-modify-write */
    atomic_store_explicit(&nic->app_calls,
                          atomic_load_explicit(&nic->app_calls, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}
void sr_nic_unlock(struct sr_nic *nic)
{
    pthread_mutex_unlock(&nic->lock);
}
void sr_nic_udp_stats(struct sr_nic *nic, struct sr_udp_stats *out)
{
    sr_udp_stats(nic->udp, out);
}
void sr_nic_exiting(struct sr_nic *nic)
{
    if (nic->shm)
        sr_shm_unlink(nic->shm);
}

void sr_nic_shm_stats(struct sr_nic *nic, struct sr_shm_stats *out)
{
    if (nic->shm)
        sr_shm_stats(nic->shm, out);
    else
        memset(out, 0, sizeof(*out));
}
