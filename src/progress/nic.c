/* nic.c: the per-device progress thread around the engine, the UDP
 * driver and the shared-memory driver. */
#include "sr_nic.h"
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
     * RX_CLOCK_PKTS packets rather than once per call. With one reading
     * per call an ACK held at the end of a long batch counted its hold from
     * the batch's start and was due the moment the pass ended: sent alone,
     * before the reply it was held for (ib_write_lat 1 MiB: 300 of 300). */
    RX_CLOCK_PKTS = 8,
};
/* An application thread that waits for the lock may post the reply a
 * held ACK waits for: the NIC thread lets it in first (sched_yield for up
 * to APP_FIRST_NS) and leaves that pass's timers to it. Without this,
 * where everything ran slower (AddressSanitizer), the NIC thread took the
 * lock back, fired the hold and the ACK left alone (a ping-pong of 1 MiB
 * WRITEs lost step in 2 runs of 8). */
#define APP_FIRST_NS   20000ull
#define HANDOFF_MIN_NS 50000ull
/* While peers send through shared memory, an empty UDP receive is most of
 * an empty pass (a system call against a few loads): after UDP_IDLE_PASSES
 * empty ones in a row, a pass looks at the socket only every UDP_SKIP-th
 * time, until it finds a datagram. The NIC thread still watches the
 * socket when it blocks. */
#define UDP_IDLE_PASSES 256u
#define UDP_SKIP        16u
#define HANDOFF_GROW    4
/* The hand-off is for an application thread that polls in a loop: it
 * picks up packets within a poll's gap, so the NIC thread need not be
 * woken for them. One that polls now and then (a UCX process waiting in
 * a socket barrier runs ucp_worker_progress about once a millisecond; a
 * runtime's async thread) would leave every packet in the socket until its
 * next poll: a passive RDMA READ target answered one READ per poll (UCX
 * ucp_get 64 KiB: 1.1 ms each). So the thread naps only while the gaps
 * between polls average (poll_gap_ns) DENSE_GAP_NS or less. Each gap
 * counts up to DENSE_GAP_CAP_NS, with weight 1/8: a loop that polls and
 * then waits on memory now and then (ib_write_lat) stays dense, one that
 * waits that long every other poll (UCX's progress polls two CQs, then
 * sleeps) is sparse. */
#define DENSE_GAP_NS     50000ull
#define DENSE_GAP_CAP_NS (4 * DENSE_GAP_NS)
/* A passive NIC thread that spins between packets takes something from
 * the sending process on this machine even when it has time to spare (two
 * vCPUs: the sender sped up when the receiver slept instead; the cause is
 * not visible from the guest). While the thread spent at least SLACK_PCT %
 * of the last SLACK_WINDOW_NS finding nothing, a pass that brought in
 * BULK_BYTES or more (the sender is that far ahead: bulk transfer with a
 * deep window) is followed by a nap of BULK_NAP_NS instead of more polls.
 * Over UDP it naps after such a pass even without that slack: there the
 * sender does the larger share (the kernel's copy and the ICRC against a
 * copy and the ICRC), and waking up to a deeper socket costs the receiver
 * less than its spinning costs the sender (ib_write_bw 64 KiB and 1 MiB
 * 3..9% faster, 4 KiB unchanged). Through shared memory each side copies
 * once, and the slack rule stays (napping there anyway: 1..5% slower).
 * Held ACKs stay held through it (their timers bound them): sent before
 * each nap, a ping-pong's ACK left ahead of the reply it was held for, and
 * the peer, completed early, waited on memory while the reply sat in its
 * socket for the rest of a hand-off.
 * A smaller threshold (32 KiB) made 4 KiB WRITE streams 30% slower (not
 * understood: sending the held ACKs before each nap did not help). */
#define BULK_BYTES      262144u
#define BULK_NAP_NS     10000ull
#define SLACK_WINDOW_NS 1000000ull
#define SLACK_PCT       15u
/* An application that polls and finds nothing is not about to reply to
 * the ACKs its NIC has held this long. (Session 7 tried keeping them on a
 * QP whose own requests had not completed: messages that cross, both
 * sides posting then polling, waited for the holds, 22 us and 202 us on
 * QPs that had been in a ping-pong.) */
#define IDLE_ACK_NS 4000ull
/* An application that called a verb this recently may post a reply that
 * a held ACK can ride with. */
#define APP_REPLY_NS 10000000ull

struct sr_nic {
    pthread_mutex_t lock;
    struct sr_engine *eng;
    struct sr_udp *udp;
    struct sr_shm *shm;   /* NULL: UDP only */
    bool shm_backlog;     /* packets wait for room in a peer's ring */
    bool app_bulk;        /* the last inline pass received BULK_BYTES over UDP */
    uint64_t app_tx_mark; /* UDP bytes sent up to the last inline pass */
    uint32_t udp_idle;    /* empty UDP receives in a row */
    uint32_t udp_skips;   /* passes that left the socket alone */
    pthread_t thread;
    int evfd;
    atomic_bool stop;
    _Atomic uint64_t sleep_until; /* deadline the thread sleeps towards; 0 = awake */
    uint64_t now;                 /* time of the packets being received */
    uint32_t rx_ticks;            /* packets received (RX_CLOCK_PKTS) */
    /* Adaptive busy-polling: after a packet, poll this long before
     * blocking, but only while no application thread has made a verbs call
     * for app_idle_ns. An application that calls verbs polls the NIC
     * inline itself, and on few cores a spinning NIC thread would only
     * steal its time; one that does not (a passive RDMA target, a thread
     * asleep on a completion channel) gets its packets without a wake-up
     * each. */
    uint64_t spin_ns, app_idle_ns;
    /* verbs calls so far (sr_nic_lock): the thread notes when the count
     * last moved, so the calls themselves read no clock */
    _Atomic uint64_t app_calls;
    /* application threads waiting for the lock (sr_nic_lock) */
    atomic_uint app_waiting;
    bool timers_deferred; /* the NIC thread's last pass left them to one */
    /* Hand-off: while an application thread polls (ibv_poll_cq: an empty
     * poll runs the NIC inline), the thread stays off the socket for
     * handoff_ns (handoff_cur_ns) after each poll: no wake-up per packet,
     * no fight for the lock. It takes a pass itself when no inline pass ran for
     * HANDOFF_GROW x handoff_ns (a thread polling a CQ that never runs dry would
     * otherwise starve the rest). An application about to block
     * (ibv_req_notify_cq) hands back at once. */
    uint64_t handoff_ns;
    /* The hand-off in force, between HANDOFF_MIN_NS and HANDOFF_GROW x
     * handoff_ns: an application that polls a CQ and then waits elsewhere
     * (spins on memory for an RDMA WRITE) leaves packets in the socket that
     * nobody reads until the hand-off ends. Each time the thread finds that
     * (the hand-off ran out with packets waiting), it halves, to handoff_ns
     * at most. Each nap that ends with the application still polling
     * doubles it: every such end is a wake-up that preempts a polling
     * thread on a busy machine (1 ms naps made ~1% of a ping-pong's round
     * trips 20 us late), so it grows past handoff_ns, up to the bound on
     * inline passes. */
    uint64_t handoff_cur_ns;
    bool napped;                   /* the thread's last look at the hand-off made it nap */
    _Atomic uint64_t last_poll_ns; /* last poll; 0 = handed back */
    uint64_t prev_poll_ns;         /* last poll, kept when handed back (under lock) */
    _Atomic uint64_t poll_gap_ns;  /* moving average of the gaps between polls */
    _Atomic uint64_t last_pass_ns; /* last inline pass */
    atomic_bool napping;
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
                : ours ? sr_udp_recv(nic->udp, nic_rx, nic, RX_BATCH)
                       : sr_udp_poll(nic->udp, nic_rx, nic, RX_BATCH);
        if (!skip)
            nic->udp_idle = n > 0 ? 0 : SR_MIN(nic->udp_idle + 1, UDP_IDLE_PASSES);
        int m = nic->shm ? sr_shm_recv(nic->shm, nic_rx, nic, RX_BATCH) : 0;
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
    /* a receiver of bulk that sends little itself (a READ requester, a
     * SEND target); one that sends as much (a collective) naps not */
    uint64_t rx = st->rx_bytes - rx0, tx = st->tx_bytes - nic->app_tx_mark;
    nic->app_tx_mark = st->tx_bytes;
    nic->app_bulk = rx >= BULK_BYTES && tx < rx / 8;
    if (nic->handoff_ns)
        atomic_store_explicit(&nic->last_pass_ns, nic->now, memory_order_relaxed);
    return n;
}

bool sr_nic_app_bulk(struct sr_nic *nic)
{
    if (!nic->app_bulk)
        return false;
    nic->app_bulk = false;
    return true;
}

void sr_nic_app_nap(void)
{
    /* the thread's timer slack (50 us by default) would stretch 10 us
     * to 60: lowered for the nap, then put back */
    int slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    (void)prctl(PR_SET_TIMERSLACK, 1000ul);
    struct timespec ts = ts_of_ns(BULK_NAP_NS);
    nanosleep(&ts, NULL);
    if (slack > 0)
        (void)prctl(PR_SET_TIMERSLACK, (unsigned long)slack);
}

void sr_nic_app_polls(struct sr_nic *nic, bool after_pass)
{
    if (atomic_load_explicit(&nic->app_asleep, memory_order_relaxed))
        atomic_store_explicit(&nic->app_asleep, false, memory_order_relaxed);
    if (!nic->handoff_ns)
        return;
    uint64_t now = after_pass ? nic->now : sr_nic_now();
    uint64_t gap = now > nic->prev_poll_ns ? now - nic->prev_poll_ns : 0;
    uint64_t avg = atomic_load_explicit(&nic->poll_gap_ns, memory_order_relaxed);
    avg = (7 * avg + SR_MIN(gap, DENSE_GAP_CAP_NS)) / 8;
    nic->prev_poll_ns = now;
    atomic_store_explicit(&nic->poll_gap_ns, avg, memory_order_relaxed);
    atomic_store_explicit(&nic->last_poll_ns, now, memory_order_relaxed);
}

void sr_nic_app_blocks(struct sr_nic *nic)
{
    atomic_store_explicit(&nic->app_asleep, true, memory_order_relaxed);
    atomic_store(&nic->last_poll_ns, 0); /* seq_cst: pairs with nic_nap */
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

void sr_nic_app_idle(struct sr_nic *nic)
{
    if (nic->now > IDLE_ACK_NS)
        nic_release_acks(nic, nic->now - IDLE_ACK_NS);
}

/* Until when the hand-off lets the thread stay off the socket; 0 when
 * it does not (the thread then runs the NIC itself). */
static uint64_t nic_handoff_until(struct sr_nic *nic, uint64_t now, bool seq_cst)
{
    uint64_t poll = seq_cst ? atomic_load(&nic->last_poll_ns)
                            : atomic_load_explicit(&nic->last_poll_ns, memory_order_relaxed);
    uint64_t pass = atomic_load_explicit(&nic->last_pass_ns, memory_order_relaxed);
    if (!poll || now - poll >= nic->handoff_cur_ns || now - pass >= HANDOFF_GROW * nic->handoff_ns)
        return 0;
    if (atomic_load_explicit(&nic->poll_gap_ns, memory_order_relaxed) > DENSE_GAP_NS)
        return 0; /* polls too far apart to pick packets up in time */
    return SR_MIN(poll + nic->handoff_cur_ns, pass + HANDOFF_GROW * nic->handoff_ns);
}

/* Stays off the socket while an application thread polls; false when it
 * does not. *expired: the hand-off just ran out (the application neither
 * polled nor handed back). */
static bool nic_nap(struct sr_nic *nic, bool *expired)
{
    uint64_t now = sr_nic_now();
    if (!nic_handoff_until(nic, now, false)) {
        *expired = nic->napped && atomic_load_explicit(&nic->last_poll_ns, memory_order_relaxed);
        nic->napped = false;
        return false;
    }
    if (nic->napped) /* a nap ended and the application still polls */
        nic->handoff_cur_ns = SR_MIN(HANDOFF_GROW * nic->handoff_ns, 2 * nic->handoff_cur_ns);
    nic->napped = true;
    atomic_store(&nic->napping, true);
    /* recheck: an application that blocked meanwhile has written the eventfd
     * only if it saw napping set */
    uint64_t until = nic_handoff_until(nic, now, true);
    if (until) {
        struct timespec ts = ts_of_ns(until - now);
        struct pollfd pfd = {.fd = nic->evfd, .events = POLLIN};
        if (ppoll(&pfd, 1, &ts, NULL) > 0)
            nic_wake_clear(nic);
    }
    atomic_store(&nic->napping, false);
    return true;
}

void sr_nic_flush(struct sr_nic *nic)
{
    nic_flush_out(nic);
}

void sr_nic_kick(struct sr_nic *nic)
{
    uint64_t sleeping = atomic_load(&nic->sleep_until);
    if (sleeping && sr_engine_next_deadline(nic->eng) < sleeping)
        nic_wake(nic);
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

static void *nic_thread(void *arg)
{
    struct sr_nic *nic = arg;
    uint64_t last_busy = 0, seen_calls = 0, app_seen = 0;
    /* 1 us: a bulk nap of 10 us would otherwise last up to 60 */
    (void)prctl(PR_SET_TIMERSLACK, 1000ul);
    uint64_t win_start = 0, win_busy = 0, win_idle = 0; /* the slack window */
    bool slack = false;
    while (!atomic_load(&nic->stop)) {
        bool expired = false;
        if (nic->handoff_ns && nic_nap(nic, &expired))
            continue;
        /* an application thread woken by the last unlock goes first */
        for (uint64_t t0 = 0; nic_app_waits(nic);) {
            uint64_t t = sr_nic_now();
            if (!t0)
                t0 = t;
            else if (t - t0 >= APP_FIRST_NS)
                break;
            sched_yield();
        }
        pthread_mutex_lock(&nic->lock);
        uint64_t start = sr_nic_now();
        uint64_t calls = atomic_load_explicit(&nic->app_calls, memory_order_relaxed);
        if (calls != seen_calls) {
            seen_calls = calls;
            app_seen = start;
        }
        /* Hold ACKs for a reply only if an application here calls verbs at
         * all and is not asleep waiting for a completion: a passive target's
         * peers get theirs at once, and so do the peers of a sleeper (which
         * may well be waiting for the peer, which waits for this ACK). */
        sr_engine_hold_acks(nic->eng,
                            app_seen && start - app_seen < APP_REPLY_NS &&
                                !atomic_load_explicit(&nic->app_asleep, memory_order_relaxed));
        const struct sr_udp_stats *us = sr_udp_counters(nic->udp);
        uint64_t udp_before = us->rx_bytes, shm_before = nic_shm_rx_bytes(nic);
        int n = nic_pass(nic, true);
        uint64_t udp_bytes = us->rx_bytes - udp_before;
        uint64_t bytes = udp_bytes + nic_shm_rx_bytes(nic) - shm_before; /* either driver */
        if (expired && n > 0) /* they waited for the hand-off to run out */
            nic->handoff_cur_ns = SR_MAX(SR_MIN(HANDOFF_MIN_NS, nic->handoff_ns),
                                         SR_MIN(nic->handoff_ns, nic->handoff_cur_ns) / 2);
        uint64_t deadline = sr_engine_next_deadline(nic->eng);
        uint64_t held = sr_udp_next_deadline(nic->udp); /* injected delays */
        if (held < deadline)
            deadline = held;
        uint64_t now = sr_nic_now();
        if (n > 0) {
            last_busy = now;
            win_busy += now - start;
        } else {
            win_idle += now - start;
        }
        if (now - win_start >= SLACK_WINDOW_NS) {
            slack = win_idle * 100 >= SLACK_PCT * (win_idle + win_busy);
            win_start = now;
            win_busy = win_idle = 0;
        }
        bool spin = now - last_busy < nic->spin_ns && now - app_seen > nic->app_idle_ns;
        bool slack_nap = spin && slack && bytes >= BULK_BYTES;
        /* not counted as idle time: it would make slack of the UDP naps
         * themselves, and shared-memory passes would nap too */
        bool udp_nap = !slack_nap && spin && udp_bytes >= BULK_BYTES;
        bool nap = slack_nap || udp_nap;
        if (nic->shm_backlog) { /* never block with packets unsent */
            spin = true;
            nap |= !n; /* a receiver behind: give it the CPU, come back */
        }
        if (!spin && nic->shm && !sr_shm_sleep(nic->shm))
            spin = true; /* a peer wrote meanwhile */
        if (!spin)
            atomic_store(&nic->sleep_until, deadline == UINT64_MAX ? UINT64_MAX : deadline);
        pthread_mutex_unlock(&nic->lock);
        if (nap) {
            struct timespec ts = ts_of_ns(BULK_NAP_NS);
            nanosleep(&ts, NULL);
            if (!udp_nap)
                win_idle += sr_nic_now() - now;
        }
        if (spin)
            continue;
        /* Block until a packet, a doorbell, a kick, or the next deadline. */
        struct timespec ts, *tsp = NULL;
        if (deadline != UINT64_MAX) {
            ts = ts_of_ns(deadline > now ? deadline - now : 0);
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
    return NULL;
}

int sr_nic_open(const struct sr_nic_cfg *cfg, struct sr_nic **out)
{
    struct sr_nic *nic = calloc(1, sizeof(*nic));
    if (!nic)
        return SR_ERR_NOMEM;
    nic->evfd = -1;
    nic->spin_ns = cfg->spin_ns;
    nic->app_idle_ns = 1000000;
    nic->handoff_ns = nic->handoff_cur_ns = cfg->handoff_ns;
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
    ec.ops.cq_event = nic_cq_event;
    ec.ops.async_event = nic_async_event;
    ec.ops_ctx = nic;
    err = sr_engine_create(&ec, &nic->eng);
    if (err)
        goto err_udp;
    if (!cfg->no_shm) {
        struct sr_shm_cfg sc = {.port = sr_udp_port(nic->udp), .dir = cfg->shm_dir};
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
