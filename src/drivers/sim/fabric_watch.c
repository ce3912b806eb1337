/* fabric_watch.c: time series for congestion experiments: the queue of one
 * watched link sampled at exact interval boundaries (with the largest
 * queue, drops and ECN marks of each interval), and per host the wire
 * bytes it sent and the payload bytes receivers accepted from it per
 * interval. The DCQCN paper's plots (Zhu et al., SIGCOMM 2015, the fluid
 * model and testbed figures) are of exactly these: queue length and each
 * flow's rate over time.
 *
 * The queue at a boundary is exact: a link's queue only shrinks between
 * two of its own events (serialization is FIFO at a fixed rate), so every
 * event on the watched link (an arrival, a drain, an offer) first records
 * the boundaries it passes by draining the queue to each of them in turn. */
#include "fabric_int.h"
#include "sr_util.h"

#include <stdlib.h>
#include <string.h>

static struct sr_fabric_qsample *fab_watch_grow(struct fab_watch *w)
{
    if (w->cnt == w->cap) {
        size_t ncap = w->cap ? w->cap * 2 : 1024;
        struct sr_fabric_qsample *s = realloc(w->s, ncap * sizeof(*s));
        if (!s)
            return NULL;
        w->s = s;
        w->cap = ncap;
    }
    return &w->s[w->cnt++];
}

void fab_watch_catch_up(struct fab_link *l, uint64_t now_ns)
{
    struct fab_watch *w = l->watch;
    while (w->next_ns <= now_ns) {
        fab_q_drain_raw(l, w->next_ns);
        struct sr_fabric_qsample *s = fab_watch_grow(w);
        if (!s)
            return; /* out of memory: the series stops here */
        *s = (struct sr_fabric_qsample){.q_bytes = l->q_bytes, .max_q_bytes = l->q_bytes};
        w->next_ns += w->step_ns;
    }
}

/* The current interval (the last boundary recorded), once caught up. */
static struct sr_fabric_qsample *fab_watch_cur(struct fab_link *l)
{
    struct fab_watch *w = l->watch;
    return w->cnt ? &w->s[w->cnt - 1] : NULL;
}

void fab_watch_enq(struct fab_link *l, bool marked)
{
    struct sr_fabric_qsample *s = fab_watch_cur(l);
    if (!s)
        return;
    s->max_q_bytes = SR_MAX(s->max_q_bytes, l->q_bytes);
    s->marks += marked;
}

void fab_watch_drop(struct fab_link *l)
{
    struct sr_fabric_qsample *s = fab_watch_cur(l);
    if (s)
        s->drops++;
}

void fab_series_add(struct sr_fabric *f, struct fab_series *s, uint64_t bytes)
{
    size_t i = (size_t)(f->now_ns / f->cfg.sample_ns);
    if (i >= s->cnt) {
        size_t cap = s->cap;
        if (i >= cap) {
            while (cap <= i)
                cap = cap ? cap * 2 : 1024;
            uint64_t *v = realloc(s->v, cap * sizeof(*v));
            if (!v)
                return;
            s->v = v;
            s->cap = cap;
        }
        memset(s->v + s->cnt, 0, (i + 1 - s->cnt) * sizeof(*s->v));
        s->cnt = i + 1;
    }
    s->v[i] += bytes;
}

void fab_watch_free(struct sr_fabric *f)
{
    free(f->watch.s);
    for (uint32_t i = 0; f->hosts && i < f->host_cnt; i++) {
        free(f->hosts[i].sent.v);
        free(f->hosts[i].got.v);
    }
}

int sr_fabric_watch_link(struct sr_fabric *f, int link)
{
    if (!f || f->started || !f->cfg.sample_ns || link < 0 || (uint32_t)link >= f->link_cnt)
        return SR_ERR_INVAL;
    for (uint32_t i = 0; i < f->link_cnt; i++)
        f->links[i].watch = NULL;
    f->watch.cnt = 0;
    f->watch.next_ns = 0;
    f->watch.step_ns = f->cfg.sample_ns;
    f->links[link].watch = &f->watch;
    return 0;
}

const struct sr_fabric_qsample *sr_fabric_queue_series(struct sr_fabric *f, uint32_t *cnt)
{
    *cnt = 0;
    for (uint32_t i = 0; i < f->link_cnt; i++) {
        struct fab_link *l = &f->links[i];
        if (l->watch) {
            fab_q_drain(l, f->now_ns);
            *cnt = (uint32_t)f->watch.cnt;
            return f->watch.s;
        }
    }
    return NULL;
}

const uint64_t *sr_fabric_host_series(const struct sr_fabric *f, uint32_t host, bool delivered,
                                      uint32_t *cnt)
{
    *cnt = 0;
    if (!f->cfg.sample_ns || !f->cfg.host_series || host >= f->host_cnt)
        return NULL;
    const struct fab_series *s = delivered ? &f->hosts[host].got : &f->hosts[host].sent;
    *cnt = (uint32_t)s->cnt;
    return s->v;
}
