/* fabric_metrics.c: the fabric's counters as the public getters give them:
 * per link and switch, per flow and collective, the delivered series, the
 * run summary (flow completion percentiles by nearest rank, collective
 * completion, utilisation of the switch-to-switch links) and the digest
 * that tells two runs apart. */
#include "fabric_int.h"
#include "sr_engine.h"
#include "sr_util.h"

#include <stdlib.h>
#include <string.h>

int sr_fabric_coll_info(const struct sr_fabric *f, int coll, struct sr_fabric_coll_info *out)
{
    if (!f || !out || coll < 0 || (size_t)coll >= f->coll_cnt)
        return SR_ERR_INVAL;
    const struct fab_coll *c = &f->colls[coll];
    *out = (struct sr_fabric_coll_info){
        .flows = c->flows, .arrived = c->arrived, .start_ns = c->start_ns, .end_ns = c->end_ns};
    return 0;
}

uint32_t sr_fabric_coll_cnt(const struct sr_fabric *f)
{
    return (uint32_t)f->coll_cnt;
}

const uint64_t *sr_fabric_series(const struct sr_fabric *f, uint32_t *cnt)
{
    *cnt = (uint32_t)f->series_cnt;
    return f->cfg.sample_ns ? f->series : NULL;
}

int sr_fabric_link_stats(struct sr_fabric *f, int link, struct sr_fabric_link_stats *out)
{
    if (!f || !out || link < 0 || (uint32_t)link >= f->link_cnt)
        return SR_ERR_INVAL;
    struct fab_link *l = &f->links[link];
    fab_q_drain(l, f->now_ns);
    *out = l->st;
    out->q_pkts = l->q_cnt;
    return 0;
}

int sr_fabric_switch_stats(struct sr_fabric *f, int node, struct sr_fabric_switch_stats *out)
{
    if (!f || !out || node < (int)f->host_cnt || (uint32_t)node >= f->node_cnt)
        return SR_ERR_INVAL;
    struct fab_node *n = &f->nodes[node];
    memset(out, 0, sizeof(*out));
    out->in = n->in;
    out->dropped = n->dropped;
    out->noroute = n->noroute;
    for (uint32_t i = 0; i < n->port_cnt; i++) {
        struct fab_link *l = &f->links[n->ports[i]];
        fab_q_drain(l, f->now_ns);
        out->queued += l->q_cnt;
        out->out += l->st.tx_pkts - l->q_cnt;
    }
    return 0;
}

int sr_fabric_flow_info(const struct sr_fabric *f, int flow, struct sr_fabric_flow_info *out)
{
    if (!f || !out || flow < 0 || (uint32_t)flow >= f->flow_cnt)
        return SR_ERR_INVAL;
    const struct fab_flow *fl = &f->flows[flow];
    *out = (struct sr_fabric_flow_info){.src = fl->src,
                                        .dst = fl->dst,
                                        .bytes = fl->bytes,
                                        .start_ns = fl->start_ns,
                                        .end_ns = fl->end_ns,
                                        .arrive_ns = fl->arrive_ns,
                                        .after = fl->after,
                                        .coll = fl->coll,
                                        .done = fl->done,
                                        .ok = fl->ok};
    return 0;
}

static int fab_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

void sr_fabric_summary(struct sr_fabric *f, struct sr_fabric_summary *out)
{
    memset(out, 0, sizeof(*out));
    out->flows = f->flow_cnt;
    out->events = f->events;
    uint64_t *fct = malloc((f->flow_cnt + 1) * sizeof(*fct));
    uint32_t n = 0;
    for (uint32_t i = 0; i < f->flow_cnt; i++) {
        const struct fab_flow *fl = &f->flows[i];
        if (!fl->done)
            continue;
        out->done++;
        if (!fl->ok) {
            out->failed++;
            continue;
        }
        out->end_ns = SR_MAX(out->end_ns, fl->end_ns);
        if (fct)
            fct[n++] = fl->end_ns - fl->start_ns;
    }
    if (fct && n) {
        qsort(fct, n, sizeof(*fct), fab_cmp_u64);
        /* Nearest rank. */
        out->fct_p50_ns = fct[(n * 50 + 99) / 100 - 1];
        out->fct_p99_ns = fct[(n * 99 + 99) / 100 - 1];
        out->fct_max_ns = fct[n - 1];
    }
    free(fct);
    for (uint32_t i = 0; i < f->host_cnt; i++) {
        const struct fab_host *h = &f->hosts[i];
        out->host_tx += h->tx;
        out->host_rx += h->rx;
        out->trimmed_rx += h->rx_trimmed;
        if (h->eng) {
            struct sr_engine_stats es;
            sr_engine_stats(h->eng, &es);
            out->retransmits += es.retransmits;
            out->timeouts += es.timeouts;
            out->probes += es.probes;
        }
    }
    uint64_t span = out->end_ns ? out->end_ns : f->now_ns;
    uint32_t fl_cnt = 0;
    for (uint32_t i = 0; i < f->link_cnt; i++) {
        const struct fab_link *l = &f->links[i];
        out->drops += l->st.drops + l->st.down_drops + l->st.wire_drops + l->st.loss_drops;
        out->ecn_marked += l->st.ecn_marked;
        out->loss_drops += l->st.loss_drops;
        out->max_q_bytes = SR_MAX(out->max_q_bytes, l->st.max_q_bytes);
        if ((uint32_t)l->from < f->host_cnt || (uint32_t)l->to < f->host_cnt || !span)
            continue;
        double u = (double)l->st.tx_bytes * 8.0 * 1e9 / ((double)l->cfg.rate_bps * (double)span);
        out->max_util = u > out->max_util ? u : out->max_util;
        out->mean_util += u;
        fl_cnt++;
    }
    for (uint32_t i = f->host_cnt; i < f->node_cnt; i++)
        out->drops += f->nodes[i].noroute;
    if (fl_cnt)
        out->mean_util /= fl_cnt;
    for (uint32_t i = 0; i < f->flow_cnt; i++)
        out->verified_bad += f->flows[i].bad;
    out->colls = (uint32_t)f->coll_cnt;
    for (size_t i = 0; i < f->coll_cnt; i++) {
        const struct fab_coll *c = &f->colls[i];
        if (c->end_ns == UINT64_MAX || c->start_ns == UINT64_MAX)
            continue;
        out->colls_done++;
        out->coll_max_ns = SR_MAX(out->coll_max_ns, c->end_ns - c->start_ns);
    }
}

void sr_fabric_progress(const struct sr_fabric *f, uint32_t *flows_done, uint32_t *colls_done,
                        uint64_t *events)
{
    uint32_t cd = 0;
    for (size_t i = 0; i < f->coll_cnt; i++)
        cd += f->colls[i].end_ns != UINT64_MAX;
    *flows_done = f->flows_done;
    *colls_done = cd;
    *events = f->events;
}

static uint64_t fab_digest_add(uint64_t h, uint64_t v)
{
    return fab_mix64(h ^ v) + 0x9e3779b97f4a7c15ull;
}

uint64_t sr_fabric_digest(struct sr_fabric *f)
{
    uint64_t h = fab_digest_add(0, f->now_ns);
    h = fab_digest_add(h, f->events);
    for (uint32_t i = 0; i < f->link_cnt; i++) {
        struct sr_fabric_link_stats s;
        sr_fabric_link_stats(f, (int)i, &s);
        const uint64_t v[] = {s.tx_pkts,    s.tx_bytes, s.arrived,    s.drops,
                              s.down_drops, s.trimmed,  s.ecn_marked, s.max_q_bytes,
                              s.wire_drops, s.q_pkts,   s.loss_drops};
        for (size_t j = 0; j < sizeof(v) / sizeof(v[0]); j++)
            h = fab_digest_add(h, v[j]);
    }
    for (uint32_t i = 0; i < f->flow_cnt; i++) {
        h = fab_digest_add(h, f->flows[i].end_ns);
        h = fab_digest_add(h, f->flows[i].ok);
        if (f->flows[i].coll)
            h = fab_digest_add(h, f->flows[i].arrive_ns);
    }
    for (size_t i = 0; i < f->series_cnt; i++)
        h = fab_digest_add(h, f->series[i]);
    for (uint32_t i = 0; i < f->host_cnt; i++)
        h = fab_digest_add(h, f->hosts[i].rx ^ f->hosts[i].tx << 32);
    return h;
}
