/* sched.c: what runs when, on each communicator: a FIFO of requests (the
 * non-blocking calls, a group's calls at srcclGroupEnd, and blocking calls
 * that arrive while requests are queued), srcclTest, srcclWait and groups.
 *
 * Progress happens only inside srccl calls on the communicator: srcclTest
 * (one or a few passes), srcclWait and srcclGroupEnd (passes until done,
 * sleeping on the completion channel in between), the non-blocking call
 * itself (one pass, so that its first chunks leave at once), and any
 * blocking call queued behind requests. There is no progress thread.
 *
 * A pass polls the CQ, then works on the head of the queue:
 *   - a collective runs on a coroutine (ucontext): the algorithm is the
 *     blocking code of algos.c, whose waits (prims.c wait_for) yield back
 *     here instead of sleeping when comm->in_co. Collectives run one after
 *     the other in call order, since they share the per-peer chunk streams;
 *     one stack per communicator is enough;
 *   - a run of point-to-point requests at the head is one window that
 *     progresses together: every send and receive in it moves chunks as
 *     slots and data allow, in call order per peer and direction (the
 *     matching rule). So a send and a receive with the same peer, a ring,
 *     or an all-to-all of sends and receives cannot deadlock. Sends and
 *     receives with oneself are matched in call order and copied.
 * A request completes when it leaves the head: in call order. Every wait
 * keeps SRCCL_TIMEOUT (a collective's in prims.c, the window's measured
 * from its last progress), so errors reach srcclTest / srcclWait /
 * srcclGroupEnd as they reach blocking calls. Only time spent inside
 * srccl counts: between srcclTest calls the clock stops (enter / leave).
 *
 * Groups are per thread (as NCCL's): a depth counter and the list of calls
 * made inside, run by the outermost srcclGroupEnd. */
#include "sc_int.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>

#if defined(__SANITIZE_ADDRESS__)
#define SC_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SC_ASAN 1
#endif
#endif
#ifdef SC_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

#define SC_REQ_MAGIC 0x53435271u /* "SCRq" */
#ifdef SC_ASAN
#define SC_CO_STACK (1024 * 1024) /* ASan's redzones make frames larger */
#else
#define SC_CO_STACK (256 * 1024)
#endif

struct srcclRequest {
    uint32_t magic;
    srcclComm_t comm;  /* NULL once complete: the communicator may be gone */
    srcclComm_t owner; /* for srcclGroupEnd's message (the group's comms live) */
    struct sc_op op;
    struct srcclRequest *next;
    bool held;     /* a handle refers to it: srcclTest / srcclWait free it */
    bool started;  /* reached the head (a collective's coroutine exists) */
    bool finished; /* point to point: all its bytes have moved */
    bool complete; /* left the queue: result is final */
    srcclResult_t result;
    size_t off; /* point to point: bytes moved */
};

struct sc_co {
    ucontext_t self, caller;
    void *map; /* guard page, then the stack */
    size_t map_len;
    bool live;
    srcclResult_t result;
    struct srcclRequest *req;
#ifdef SC_ASAN
    void *fake;
    const void *caller_bottom;
    size_t caller_size;
#endif
};

/* ---- coroutines ---- */
static void co_main(unsigned lo, unsigned hi)
{
    srcclComm_t c = (srcclComm_t)(((uintptr_t)hi << 32) | (uintptr_t)lo);
    struct sc_co *co = c->co;
#ifdef SC_ASAN
    __sanitizer_finish_switch_fiber(NULL, &co->caller_bottom, &co->caller_size);
#endif
    co->result = sc_op_run(c, &co->req->op);
    co->live = false;
#ifdef SC_ASAN
    __sanitizer_start_switch_fiber(NULL, co->caller_bottom, co->caller_size);
#endif
    /* returning resumes uc_link, the last caller */
}

static srcclResult_t co_alloc(srcclComm_t c)
{
    struct sc_co *co = calloc(1, sizeof(*co));
    if (!co)
        return sc_fail(c, srcclSystemError, "out of memory (coroutine)");
    co->map_len = SC_CO_STACK + 4096;
    co->map = mmap(NULL, co->map_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (co->map == MAP_FAILED) {
        free(co);
        return sc_fail(c, srcclSystemError, "out of memory (coroutine stack)");
    }
    mprotect(co->map, 4096, PROT_NONE); /* overflow faults instead of corrupting */
    c->co = co;
    return srcclSuccess;
}

/* getcontext returns twice in general (not here: the context is only
 * entered through makecontext's entry point), hence no locals around it. */
static srcclResult_t co_start(srcclComm_t c, struct srcclRequest *q)
{
    if (!c->co && co_alloc(c))
        return c->async_err ? c->async_err : srcclSystemError;
    if (getcontext(&c->co->self))
        return sc_fail(c, srcclSystemError, "getcontext failed");
    c->co->self.uc_stack.ss_sp = (char *)c->co->map + 4096;
    c->co->self.uc_stack.ss_size = SC_CO_STACK;
    c->co->self.uc_link = &c->co->caller;
    uintptr_t p = (uintptr_t)c;
    makecontext(&c->co->self, (void (*)(void))co_main, 2, (unsigned)(p & 0xffffffffu),
                (unsigned)(p >> 32));
    c->co->req = q;
    c->co->live = true;
    return srcclSuccess;
}

static void co_resume(srcclComm_t c)
{
    struct sc_co *co = c->co;
    c->in_co = true;
#ifdef SC_ASAN
    void *fake = NULL;
    __sanitizer_start_switch_fiber(&fake, (char *)co->map + 4096, SC_CO_STACK);
#endif
    swapcontext(&co->caller, &co->self);
#ifdef SC_ASAN
    __sanitizer_finish_switch_fiber(fake, NULL, NULL);
#endif
    c->in_co = false;
}

static void co_suspend(srcclComm_t c)
{
    struct sc_co *co = c->co;
#ifdef SC_ASAN
    __sanitizer_start_switch_fiber(&co->fake, co->caller_bottom, co->caller_size);
#endif
    swapcontext(&co->self, &co->caller);
#ifdef SC_ASAN
    __sanitizer_finish_switch_fiber(co->fake, &co->caller_bottom, &co->caller_size);
#endif
}

srcclResult_t sc_co_block(srcclComm_t c, uint64_t *deadline, const char *what, int peer)
{
    int prog;
    srcclResult_t r = sc_tp_progress(c, &prog);
    if (r || prog)
        return r;
    if (sc_now_ns() >= *deadline)
        return sc_tp_timeout(c, what, peer);
    if ((r = sc_tp_flush(c, true))) /* the application may be away for long */
        return r;
    uint64_t away = c->away_ns;
    co_suspend(c);
    *deadline += c->away_ns - away; /* the application's time is not waiting */
    return c->async_err;
}

/* ---- the queue ---- */
static bool is_p2p(const struct srcclRequest *q)
{
    return q->op.kind == SC_OP_SEND || q->op.kind == SC_OP_RECV;
}

static void release(struct srcclRequest *q)
{
    q->magic = 0;
    free(q);
}

static void pop(srcclComm_t c, srcclResult_t r)
{
    struct srcclRequest *q = c->q_head;
    c->q_head = q->next;
    if (!c->q_head)
        c->q_tail = NULL;
    q->next = NULL;
    q->result = r;
    q->complete = true;
    q->comm = NULL;
    if (!q->held)
        release(q);
}

static struct srcclRequest *new_req(srcclComm_t c, const struct sc_op *o)
{
    struct srcclRequest *q = calloc(1, sizeof(*q));
    if (!q)
        return NULL;
    q->magic = SC_REQ_MAGIC;
    q->comm = q->owner = c;
    q->op = *o;
    q->held = true;
    return q;
}

static struct srcclRequest *enqueue(srcclComm_t c, const struct sc_op *o)
{
    struct srcclRequest *q = new_req(c, o);
    if (!q)
        return NULL;
    if (c->q_tail)
        c->q_tail->next = q;
    else
        c->q_head = q;
    c->q_tail = q;
    return q;
}

static size_t op_bytes(const struct sc_op *o)
{
    return o->cnt * sc_type_size(o->dt);
}

/* A receive whose chunk has another length than the send's: the ranks
 * disagree on the counts; the streams are out of step for good. */
static srcclResult_t mismatch(srcclComm_t c, const struct srcclRequest *q, size_t got, size_t want)
{
    srcclResult_t r = sc_fail(c, srcclInvalidUsage,
                              "%s: rank %d sent a chunk of %zu bytes where %zu were expected: the "
                              "send and the receive disagree on the count or datatype",
                              q->op.fn, q->op.root, got, want);
    c->async_err = r;
    return r;
}

/* One pass over the point-to-point window at the head. */
static srcclResult_t p2p_pass(srcclComm_t c, int *moved)
{
    size_t slot = c->cfg.slot_len;
    memset(c->p2p_busy, 0, (size_t)c->nranks * 2);
    for (struct srcclRequest *q = c->q_head; q && is_p2p(q); q = q->next) {
        int peer = q->op.root;
        bool send = q->op.kind == SC_OP_SEND;
        uint8_t *busy = &c->p2p_busy[2 * peer + send];
        if (q->finished || *busy || peer == c->rank)
            continue;
        size_t bytes = op_bytes(&q->op);
        while (q->off < bytes) {
            size_t want = SC_MIN(slot, bytes - q->off);
            if (send) {
                void *tx = sc_tp_tx_slot(c, peer);
                if (!tx)
                    break;
                memcpy(tx, (const char *)q->op.send + q->off, want);
                srcclResult_t r = sc_tp_tx_post(c, peer, want);
                if (r)
                    return r;
            } else {
                size_t len = 0;
                const void *rx = sc_tp_rx_peek(c, peer, &len);
                if (!rx)
                    break;
                if (len != want)
                    return mismatch(c, q, len, want);
                memcpy((char *)q->op.recv + q->off, rx, want);
                srcclResult_t r = sc_tp_rx_release(c, peer);
                if (r)
                    return r;
            }
            q->off += want;
            (*moved)++;
        }
        q->finished = q->off == bytes;
        *busy = !q->finished; /* later calls with this peer and direction wait */
    }
    /* With oneself: the k-th send matches the k-th receive. */
    struct srcclRequest *s = c->q_head, *r = c->q_head;
    for (;;) {
        while (s && is_p2p(s) && (s->finished || s->op.kind != SC_OP_SEND || s->op.root != c->rank))
            s = s->next;
        while (r && is_p2p(r) && (r->finished || r->op.kind != SC_OP_RECV || r->op.root != c->rank))
            r = r->next;
        if (!s || !r || !is_p2p(s) || !is_p2p(r))
            return srcclSuccess;
        if (op_bytes(&s->op) != op_bytes(&r->op))
            return mismatch(c, r, op_bytes(&s->op), op_bytes(&r->op));
        memmove(r->op.recv, s->op.send, op_bytes(&s->op));
        s->finished = r->finished = true;
        (*moved)++;
    }
}

/* One pass: polls the CQ, then runs the head of the queue until it has
 * to wait. *progressed > 0 if anything happened. */
/* Back in srccl after the application had the thread: that time does not
 * count toward SRCCL_TIMEOUT (a rank that computes between srcclTest calls
 * is not a dead peer to the others' requests, nor they to its). */
static void enter(srcclComm_t c)
{
    if (c->left_ns) {
        uint64_t gap = sc_now_ns() - c->left_ns;
        c->away_ns += gap;
        c->p2p_since_ns += gap;
        c->left_ns = 0;
    }
}

/* Returning to the application; requests may still be queued. */
static void leave(srcclComm_t c)
{
    c->left_ns = c->q_head ? sc_now_ns() : 0;
    /* Requests outstanding: their peers may need our credits meanwhile (a
     * failure is now c->async_err, returned by the next call). */
    if (c->q_head && c->nranks > 1 && !c->async_err)
        sc_tp_flush(c, true);
}

static void pass(srcclComm_t c, int *progressed)
{
    *progressed = 0;
    enter(c);
    if (c->nranks > 1 && !c->async_err) {
        int n = 0;
        sc_tp_progress(c, &n); /* a failure is now c->async_err */
        *progressed += n;
    }
    while (c->q_head) {
        struct srcclRequest *h = c->q_head;
        if (c->async_err) { /* the first failure fails everything queued */
            while (c->q_head)
                pop(c, c->async_err);
            *progressed += 1;
            return;
        }
        if (is_p2p(h)) {
            uint64_t now = sc_now_ns();
            if (!h->started) {
                h->started = true;
                c->p2p_since_ns = now;
            }
            int moved = 0;
            srcclResult_t r = p2p_pass(c, &moved);
            if (r) {
                if (!c->async_err)
                    pop(c, r);
                continue;
            }
            *progressed += moved;
            if (moved)
                c->p2p_since_ns = now;
            if (h->finished) {
                while (c->q_head && is_p2p(c->q_head) && c->q_head->finished)
                    pop(c, srcclSuccess);
                *progressed += 1;
                continue;
            }
            if (now - c->p2p_since_ns >= c->cfg.timeout_ns) {
                bool send = h->op.kind == SC_OP_SEND;
                sc_tp_timeout(c, send ? "for credit from" : "for data from", h->op.root);
                continue;
            }
            return;
        }
        if (c->nranks == 1) { /* nothing to wait for: run it here */
            pop(c, sc_op_run(c, &h->op));
            *progressed += 1;
            continue;
        }
        if (!h->started) {
            h->started = true;
            srcclResult_t r = co_start(c, h);
            if (r) {
                pop(c, r);
                continue;
            }
        }
        co_resume(c);
        if (c->co->live)
            return;
        pop(c, c->co->result);
        *progressed += 1;
    }
}

static void nap_ms(long ms)
{
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* Sleeps until one of the communicators has a completion (100 ms at most). */
static void idle_many(srcclComm_t *cs, int n)
{
    if (n == 1 && cs[0]->nranks > 1) {
        sc_tp_idle(cs[0], sc_now_ns() + 100000000ull);
        return;
    }
    struct pollfd pfd[64];
    srcclComm_t who[64];
    int k = 0;
    for (int i = 0; i < n && k < 64; i++) {
        if (cs[i]->nranks == 1 || cs[i]->async_err)
            continue;
        if (sc_shm_blocked(cs[i])) { /* it waits on shared memory: nap briefly */
            sc_shm_idle(cs[i], sc_now_ns() + 1000000ull);
            return;
        }
        int prog = 0;
        if (sc_tp_arm(cs[i], &prog) || prog)
            return;
        pfd[k] = (struct pollfd){.fd = cs[i]->channel->fd, .events = POLLIN};
        who[k++] = cs[i];
    }
    if (k == 0) {
        nap_ms(1); /* only copies with oneself: nothing to sleep on */
        return;
    }
    if (poll(pfd, (nfds_t)k, 100) > 0)
        for (int i = 0; i < k; i++)
            if (pfd[i].revents & POLLIN)
                sc_tp_ack(who[i]);
}

static srcclResult_t wait_req(struct srcclRequest *q)
{
    while (!q->complete) {
        srcclComm_t c = q->comm;
        int prog;
        pass(c, &prog);
        if (!q->complete && !prog)
            idle_many(&c, 1);
    }
    return q->result;
}

srcclResult_t sc_sched_finish(srcclComm_t c)
{
    while (c->q_head) {
        int prog;
        pass(c, &prog);
        if (c->q_head && !prog)
            idle_many(&c, 1);
    }
    return c->async_err;
}

/* ---- groups (per thread) ---- */
struct group_ent {
    srcclComm_t comm;
    struct sc_op op;
};

static _Thread_local struct {
    int depth;
    srcclResult_t err; /* the first failed call inside the group */
    char msg[512];
    struct group_ent *ents;
    size_t cnt, cap;
} grp;

bool sc_in_group(void)
{
    return grp.depth > 0;
}

void sc_sched_abort(srcclComm_t c)
{
    srcclResult_t r = c->async_err ? c->async_err : srcclInvalidUsage;
    while (c->q_head)
        pop(c, r);
    if (c->co) {
        munmap(c->co->map, c->co->map_len);
        free(c->co);
        c->co = NULL;
    }
    /* Calls of this thread's open group on this communicator go too. */
    size_t k = 0;
    for (size_t i = 0; i < grp.cnt; i++)
        if (grp.ents[i].comm != c)
            grp.ents[k++] = grp.ents[i];
    grp.cnt = k;
}

/* Remembers the first failure of a call made inside a group. */
srcclResult_t sc_group_note(srcclResult_t r)
{
    if (r && grp.depth > 0 && !grp.err) {
        grp.err = r;
        snprintf(grp.msg, sizeof(grp.msg), "%s", srcclGetLastError(NULL));
    }
    return r;
}

srcclResult_t sc_submit(srcclComm_t c, const struct sc_op *o, srcclRequest_t *request)
{
    bool empty = o->cnt == 0 && o->kind != SC_OP_BARRIER;
    if (grp.depth > 0) {
        if (request)
            return sc_group_note(
                sc_fail(c, srcclInvalidUsage,
                        "%s: non-blocking calls cannot be made inside a group (the "
                        "blocking call is queued there, and srcclGroupEnd runs it)",
                        o->fn));
        if (empty)
            return srcclSuccess;
        if (grp.cnt == grp.cap) {
            size_t cap = grp.cap ? grp.cap * 2 : 16;
            struct group_ent *e = realloc(grp.ents, cap * sizeof(*e));
            if (!e)
                return sc_group_note(sc_fail(c, srcclSystemError, "%s: out of memory", o->fn));
            grp.ents = e;
            grp.cap = cap;
        }
        grp.ents[grp.cnt++] = (struct group_ent){c, *o};
        return srcclSuccess;
    }
    if (!request && !c->q_head)
        return empty ? srcclSuccess : sc_op_run(c, o);
    struct srcclRequest *q = empty ? new_req(c, o) : enqueue(c, o);
    if (!q)
        return sc_fail(c, srcclSystemError, "%s: out of memory", o->fn);
    if (empty) { /* nothing to move: complete at once, never queued */
        q->complete = true;
        q->comm = NULL;
    }
    if (request) {
        *request = q;
        if (!q->complete) {
            int prog;
            pass(c, &prog); /* start it: its first chunks leave now */
            leave(c);
        }
        return srcclSuccess;
    }
    srcclResult_t r = wait_req(q);
    release(q);
    leave(c);
    return r;
}

SC_EXPORT srcclResult_t srcclGroupStart(void)
{
    if (grp.depth++ == 0) {
        grp.err = srcclSuccess;
        grp.msg[0] = 0;
        grp.cnt = 0;
    }
    return srcclSuccess;
}

SC_EXPORT srcclResult_t srcclGroupEnd(void)
{
    if (grp.depth == 0) {
        sc_set_thread_error("srcclGroupEnd: no group is open (srcclGroupStart)");
        return srcclInvalidUsage;
    }
    if (--grp.depth > 0)
        return srcclSuccess;
    size_t cnt = grp.cnt;
    grp.cnt = 0;
    if (grp.err) {
        sc_set_thread_error("srcclGroupEnd: nothing was run: a call in the group failed: %s",
                            grp.msg);
        return grp.err;
    }
    if (cnt == 0)
        return srcclSuccess;
    struct srcclRequest **reqs = calloc(cnt, sizeof(*reqs));
    srcclComm_t *comms = calloc(cnt, sizeof(*comms));
    int ncomm = 0;
    size_t nq = 0;
    srcclResult_t r = srcclSuccess;
    if (!reqs || !comms) {
        sc_set_thread_error("srcclGroupEnd: out of memory");
        r = srcclSystemError;
        goto out;
    }
    for (size_t i = 0; i < cnt; i++) {
        int k = 0;
        while (k < ncomm && comms[k] != grp.ents[i].comm)
            k++;
        if (k == ncomm)
            comms[ncomm++] = grp.ents[i].comm;
    }
    /* Per communicator: the collectives in call order, then every send and
     * receive as one window. The same on every rank whatever the order in
     * which the group mixed them. */
    for (int k = 0; k < ncomm; k++)
        for (int p2p = 0; p2p < 2; p2p++)
            for (size_t i = 0; i < cnt; i++) {
                const struct group_ent *e = &grp.ents[i];
                bool is_pp = e->op.kind == SC_OP_SEND || e->op.kind == SC_OP_RECV;
                if (e->comm != comms[k] || is_pp != (p2p == 1))
                    continue;
                if (!(reqs[nq] = enqueue(e->comm, &e->op))) {
                    r = sc_fail(e->comm, srcclSystemError, "srcclGroupEnd: out of memory");
                    goto out;
                }
                nq++;
            }
    for (;;) {
        int prog = 0;
        for (int k = 0; k < ncomm; k++) {
            int p;
            pass(comms[k], &p);
            prog += p;
        }
        size_t left = 0;
        for (size_t i = 0; i < nq; i++)
            left += !reqs[i]->complete;
        if (!left)
            break;
        if (!prog)
            idle_many(comms, ncomm);
    }
    for (size_t i = 0; i < nq; i++) {
        if (reqs[i]->result) { /* the message of the first failure, whatever ran after it */
            r = reqs[i]->result;
            sc_set_thread_error("%s", reqs[i]->owner->last_err);
            break;
        }
    }
out:
    for (int k = 0; k < ncomm; k++)
        leave(comms[k]);
    for (size_t i = 0; i < nq; i++) {
        if (reqs[i]->complete)
            release(reqs[i]);
        else
            reqs[i]->held = false; /* out of memory half way: the queue frees it */
    }
    free(reqs);
    free(comms);
    return r;
}

/* ---- requests ---- */
static bool bad_req(srcclRequest_t q, const char *fn)
{
    if (q && q->magic == SC_REQ_MAGIC)
        return false;
    sc_set_thread_error("%s: %s", fn, q ? "not a request (already completed?)" : "request is NULL");
    return true;
}

SC_EXPORT srcclResult_t srcclTest(srcclRequest_t q, int *done)
{
    if (bad_req(q, "srcclTest"))
        return srcclInvalidArgument;
    if (!done) {
        sc_set_thread_error("srcclTest: done is NULL");
        return srcclInvalidArgument;
    }
    /* A few passes while they progress: what is ready moves now. */
    srcclComm_t c = q->comm;
    for (int i = 0; i < 16 && !q->complete; i++) {
        int prog;
        pass(c, &prog);
        if (!prog)
            break;
    }
    if (c)
        leave(c);
    if (!q->complete) {
        *done = 0;
        return srcclSuccess;
    }
    *done = 1;
    srcclResult_t r = q->result;
    release(q);
    return r;
}

SC_EXPORT srcclResult_t srcclWait(srcclRequest_t q)
{
    if (bad_req(q, "srcclWait"))
        return srcclInvalidArgument;
    srcclComm_t c = q->comm;
    srcclResult_t r = wait_req(q);
    release(q);
    if (c)
        leave(c);
    return r;
}
