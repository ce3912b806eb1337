/* srdma-fabric: runs a workload over a simulated leaf-spine or fat-tree
 * fabric with one softrdma engine per host, and prints a summary table
 * (optionally per-flow and per-link CSV). Wall time and memory are the
 * tool's own measurements; everything else comes from simulated time and
 * is the same for the same flags. See docs/FABRIC.md. */
#define _POSIX_C_SOURCE 200809L
#include "sr_cc.h"
#include "sr_engine.h"
#include "sr_fabric.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

struct fail_spec {
    char a[32], b[32];
    uint64_t down_ns, up_ns; /* up_ns 0: stays down */
};

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: srdma-fabric [options]\n"
        "  --topo leaf-spine|fat-tree   (leaf-spine)\n"
        "  --leaves N --spines N --hosts-per-leaf N   (4, 2, 4)\n"
        "  --k N                        fat-tree arity, even (4)\n"
        "  --host-rate G --fabric-rate G   link rates in Gbit/s (100, 100)\n"
        "  --host-delay NS --fabric-delay NS   propagation (500, 1000)\n"
        "  --buffer BYTES               switch port buffer (512K)\n"
        "  --kmin BYTES --kmax BYTES --pmax P   ECN RED profile (64K, 256K, 0.2; kmax 0 = off)\n"
        "  --trim                       trim payloads instead of dropping\n"
        "  --detect US                  routing sees failures after this (10)\n"
        "  --workload perm|incast|a2a|ring|hd   (perm); ring and hd are all-reduce\n"
        "                               of --size bytes per host across all hosts\n"
        "  --size BYTES                 message size, K/M/G suffixes (1M)\n"
        "  --bg-frac F --bg-size BYTES  background permutation among a fraction F\n"
        "                               of the hosts beside the workload (off, 1M)\n"
        "  --loss P                     random loss per packet per link (0)\n"
        "  --incast-n N --incast-dst H  senders and target of incast (8, 0)\n"
        "  --stagger US                 incast: sender i starts at i x US (0)\n"
        "  --mode verified|header       payload mode (verified)\n"
        "  --mtu N --window PKTS --timeout CODE   engine settings (4096, 64, 8)\n"
        "  --sack                       selective recovery between the hosts (docs/WIRE.md)\n"
        "  --paths N --path-policy spray|adaptive   entropy values per QP (1: one)\n"
        "  --cc SPEC                    congestion control, as SOFTRDMA_CC (none)\n"
        "  --fail A:B@US[-US]           cut cable A-B at US, restore at the second\n"
        "                               (e.g. leaf0:spine1@50-300); repeatable\n"
        "  --link-delay A:B=US[/HOLD_US]   link A->B's propagation becomes US, and\n"
        "                               with HOLD_US its arrivals wait for the next\n"
        "                               multiple of HOLD_US (a late host's wake-ups;\n"
        "                               links from a host only), e.g. h8:leaf0=40/1000;\n"
        "                               repeatable\n"
        "  --seed N --until MS          (1, 10000)\n"
        "  --flows-csv FILE --links-csv FILE\n"
        "  --sample US --series-csv FILE   delivered bytes per interval (100 us)\n"
        "  --watch A:B --queue-csv FILE   queue of link A->B at every --sample boundary\n"
        "                               (incast: the link into the target by default)\n"
        "  --hosts-csv FILE             per host and interval: wire bytes sent, payload\n"
        "                               delivered from it\n"
        "  --pcap A:B FILE              capture link A->B (e.g. leaf0:spine1) as pcap\n"
        "  --progress                   progress line on stderr even when short\n");
}

/* What every host's engine gets beyond the fabric's own settings
 * (sr_fabric_cfg.engine_cfg): the transport features under study. */
struct eng_opts {
    bool sack;
    uint8_t paths, path_policy;
    bool cc_on;
    struct sr_cc_cfg cc;
};

static void host_engine_cfg(void *ctx, uint32_t host, struct sr_engine_cfg *ec)
{
    const struct eng_opts *eo = ctx;
    ec->sack = eo->sack;
    ec->paths = eo->paths;
    ec->path_policy = eo->path_policy;
    ec->paths_seed = host;
    if (eo->cc_on)
        ec->cc = &eo->cc;
}

static int parse_size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0)
        return -1;
    switch (*end) {
    case 'k':
    case 'K':
        v *= 1024;
        end++;
        break;
    case 'm':
    case 'M':
        v *= 1024 * 1024;
        end++;
        break;
    case 'g':
    case 'G':
        v *= 1024.0 * 1024 * 1024;
        end++;
        break;
    default:
        break;
    }
    if (*end || v > 1e19)
        return -1;
    *out = (uint64_t)v;
    return 0;
}

static int parse_real(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi))
        return -1;
    *out = v;
    return 0;
}

static int parse_fail(const char *s, struct fail_spec *fs)
{
    memset(fs, 0, sizeof(*fs));
    const char *colon = strchr(s, ':'), *at = strchr(s, '@');
    if (!colon || !at || at < colon || (size_t)(colon - s) >= sizeof(fs->a) ||
        (size_t)(at - colon - 1) >= sizeof(fs->b))
        return -1;
    memcpy(fs->a, s, (size_t)(colon - s));
    memcpy(fs->b, colon + 1, (size_t)(at - colon - 1));
    char *end;
    double d = strtod(at + 1, &end);
    if (end == at + 1 || d < 0)
        return -1;
    fs->down_ns = (uint64_t)(d * 1000);
    if (*end == '-') {
        const char *u = end + 1;
        double v = strtod(u, &end);
        if (end == u || v * 1000 <= d * 1000)
            return -1;
        fs->up_ns = (uint64_t)(v * 1000);
    }
    return *end ? -1 : 0;
}

/* --link-delay A:B=US[/HOLD_US] */
struct delay_spec {
    char link[72];
    uint64_t delay_ns, hold_ns;
};

static int parse_link_delay(const char *s, struct delay_spec *ds)
{
    memset(ds, 0, sizeof(*ds));
    const char *eq = strchr(s, '=');
    if (!eq || eq == s || (size_t)(eq - s) >= sizeof(ds->link) || !strchr(s, ':'))
        return -1;
    memcpy(ds->link, s, (size_t)(eq - s));
    char *end;
    errno = 0;
    double d = strtod(eq + 1, &end);
    if (errno || end == eq + 1 || !(d >= 0 && d <= 1e9))
        return -1;
    ds->delay_ns = (uint64_t)(d * 1000);
    if (*end == '/') {
        const char *h = end + 1;
        double v = strtod(h, &end);
        if (end == h || !(v > 0 && v <= 1e9))
            return -1;
        ds->hold_ns = (uint64_t)(v * 1000);
    }
    return *end ? -1 : 0;
}

static double wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* User + system CPU seconds: on a shared machine wall time also counts
 * waiting for a core. */
static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

static double max_rss_mib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

static int find_link(struct sr_fabric *f, const char *spec)
{
    const char *colon = strchr(spec, ':');
    char a[32];
    if (!colon || (size_t)(colon - spec) >= sizeof(a))
        return -1;
    memcpy(a, spec, (size_t)(colon - spec));
    a[colon - spec] = 0;
    return sr_fabric_find_link(f, sr_fabric_find_node(f, a), sr_fabric_find_node(f, colon + 1));
}

/* Columns: a step of a collective has coll > 0, after (the step whose
 * arrival started it, -1 for the first) and arrive_ns (its receive
 * completion); start_ns is -1 for a step that never started. */
static int write_flows(struct sr_fabric *f, const char *path)
{
    FILE *o = fopen(path, "w");
    if (!o)
        return -1;
    fprintf(o, "flow,src,dst,bytes,start_ns,end_ns,fct_ns,ok,coll,after,arrive_ns\n");
    for (uint32_t i = 0; i < sr_fabric_flow_cnt(f); i++) {
        struct sr_fabric_flow_info fi;
        sr_fabric_flow_info(f, (int)i, &fi);
        bool started = fi.start_ns != UINT64_MAX, arrived = fi.arrive_ns != UINT64_MAX;
        fprintf(o,
                "%u,%u,%u,%" PRIu64 ",%s%" PRIu64 ",%s%" PRIu64 ",%" PRIu64 ",%d,%u,%d,%s%" PRIu64
                "\n",
                i, fi.src, fi.dst, fi.bytes, started ? "" : "-", started ? fi.start_ns : 1,
                fi.done ? "" : "-", fi.done ? fi.end_ns : 0, fi.done ? fi.end_ns - fi.start_ns : 0,
                fi.ok, fi.coll, fi.after, arrived ? "" : "-", arrived ? fi.arrive_ns : 1);
    }
    return fclose(o);
}

static int write_series(struct sr_fabric *f, const char *path, uint64_t sample_ns)
{
    FILE *o = fopen(path, "w");
    if (!o)
        return -1;
    uint32_t cnt = 0;
    const uint64_t *v = sr_fabric_series(f, &cnt);
    fprintf(o, "start_us,delivered_bytes,gbps\n");
    for (uint32_t i = 0; v && i < cnt; i++)
        fprintf(o, "%.3f,%" PRIu64 ",%.3f\n", (double)i * (double)sample_ns / 1e3, v[i],
                (double)v[i] * 8.0 / (double)sample_ns);
    return fclose(o);
}

static int write_queue(struct sr_fabric *f, const char *path, uint64_t sample_ns)
{
    FILE *o = fopen(path, "w");
    if (!o)
        return -1;
    uint32_t cnt = 0;
    const struct sr_fabric_qsample *q = sr_fabric_queue_series(f, &cnt);
    fprintf(o, "t_us,q_bytes,max_q_bytes,drops,marks\n");
    for (uint32_t i = 0; q && i < cnt; i++)
        fprintf(o, "%.3f,%" PRIu64 ",%" PRIu64 ",%u,%u\n", (double)i * (double)sample_ns / 1e3,
                q[i].q_bytes, q[i].max_q_bytes, q[i].drops, q[i].marks);
    return fclose(o);
}

/* Long format, one row per host that sent or delivered anything and
 * interval: what a plot of per-flow rates needs. */
static int write_hosts(struct sr_fabric *f, const char *path, uint64_t sample_ns)
{
    FILE *o = fopen(path, "w");
    if (!o)
        return -1;
    fprintf(o, "t_us,host,sent_bytes,sent_gbps,delivered_bytes,delivered_gbps\n");
    for (uint32_t h = 0; h < sr_fabric_host_cnt(f); h++) {
        uint32_t ns = 0, nd = 0;
        const uint64_t *sv = sr_fabric_host_series(f, h, false, &ns);
        const uint64_t *dv = sr_fabric_host_series(f, h, true, &nd);
        uint32_t n = ns > nd ? ns : nd;
        uint64_t any = 0;
        for (uint32_t i = 0; i < nd; i++)
            any |= dv[i];
        if (!any)
            continue; /* a pure receiver: its ACKs are not a flow */
        for (uint32_t i = 0; i < n; i++) {
            uint64_t a = i < ns ? sv[i] : 0, b = i < nd ? dv[i] : 0;
            fprintf(o, "%.3f,%u,%" PRIu64 ",%.3f,%" PRIu64 ",%.3f\n",
                    (double)i * (double)sample_ns / 1e3, h, a, (double)a * 8.0 / (double)sample_ns,
                    b, (double)b * 8.0 / (double)sample_ns);
        }
    }
    return fclose(o);
}

static int write_links(struct sr_fabric *f, const char *path, uint64_t span_ns)
{
    FILE *o = fopen(path, "w");
    if (!o)
        return -1;
    fprintf(o, "link,from,to,rate_bps,tx_pkts,tx_bytes,util,drops,down_drops,wire_drops,"
               "trimmed,ecn_marked,max_q_bytes,loss_drops\n");
    for (uint32_t i = 0; i < sr_fabric_link_cnt(f); i++) {
        struct sr_fabric_link_stats l;
        char a[32], b[32];
        sr_fabric_link_stats(f, (int)i, &l);
        sr_fabric_node_name(f, l.from, a, sizeof(a));
        sr_fabric_node_name(f, l.to, b, sizeof(b));
        double util =
            span_ns ? (double)l.tx_bytes * 8e9 / ((double)l.rate_bps * (double)span_ns) : 0.0;
        fprintf(o,
                "%u,%s,%s,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%.4f,%" PRIu64 ",%" PRIu64 ",%" PRIu64
                ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 "\n",
                i, a, b, l.rate_bps, l.tx_pkts, l.tx_bytes, util, l.drops, l.down_drops,
                l.wire_drops, l.trimmed, l.ecn_marked, l.max_q_bytes, l.loss_drops);
    }
    return fclose(o);
}

enum {
    OPT_TOPO = 256,
    OPT_LEAVES,
    OPT_SPINES,
    OPT_HPL,
    OPT_K,
    OPT_HRATE,
    OPT_FRATE,
    OPT_HDELAY,
    OPT_FDELAY,
    OPT_BUFFER,
    OPT_KMIN,
    OPT_KMAX,
    OPT_PMAX,
    OPT_TRIM,
    OPT_DETECT,
    OPT_WORKLOAD,
    OPT_SIZE,
    OPT_INCAST_N,
    OPT_INCAST_DST,
    OPT_MODE,
    OPT_MTU,
    OPT_WINDOW,
    OPT_TIMEOUT,
    OPT_FAIL,
    OPT_SEED,
    OPT_UNTIL,
    OPT_FLOWS_CSV,
    OPT_LINKS_CSV,
    OPT_PROGRESS,
    OPT_BG_FRAC,
    OPT_BG_SIZE,
    OPT_LOSS,
    OPT_SAMPLE,
    OPT_SERIES_CSV,
    OPT_PCAP,
    OPT_SACK,
    OPT_PATHS,
    OPT_PATH_POLICY,
    OPT_CC,
    OPT_STAGGER,
    OPT_WATCH,
    OPT_QUEUE_CSV,
    OPT_HOSTS_CSV,
    OPT_LINK_DELAY,
    OPT_HELP,
};

static const struct option opts[] = {
    {"topo", required_argument, 0, OPT_TOPO},
    {"leaves", required_argument, 0, OPT_LEAVES},
    {"spines", required_argument, 0, OPT_SPINES},
    {"hosts-per-leaf", required_argument, 0, OPT_HPL},
    {"k", required_argument, 0, OPT_K},
    {"host-rate", required_argument, 0, OPT_HRATE},
    {"fabric-rate", required_argument, 0, OPT_FRATE},
    {"host-delay", required_argument, 0, OPT_HDELAY},
    {"fabric-delay", required_argument, 0, OPT_FDELAY},
    {"buffer", required_argument, 0, OPT_BUFFER},
    {"kmin", required_argument, 0, OPT_KMIN},
    {"kmax", required_argument, 0, OPT_KMAX},
    {"pmax", required_argument, 0, OPT_PMAX},
    {"trim", no_argument, 0, OPT_TRIM},
    {"detect", required_argument, 0, OPT_DETECT},
    {"workload", required_argument, 0, OPT_WORKLOAD},
    {"size", required_argument, 0, OPT_SIZE},
    {"incast-n", required_argument, 0, OPT_INCAST_N},
    {"incast-dst", required_argument, 0, OPT_INCAST_DST},
    {"mode", required_argument, 0, OPT_MODE},
    {"mtu", required_argument, 0, OPT_MTU},
    {"window", required_argument, 0, OPT_WINDOW},
    {"timeout", required_argument, 0, OPT_TIMEOUT},
    {"fail", required_argument, 0, OPT_FAIL},
    {"seed", required_argument, 0, OPT_SEED},
    {"until", required_argument, 0, OPT_UNTIL},
    {"flows-csv", required_argument, 0, OPT_FLOWS_CSV},
    {"links-csv", required_argument, 0, OPT_LINKS_CSV},
    {"progress", no_argument, 0, OPT_PROGRESS},
    {"bg-frac", required_argument, 0, OPT_BG_FRAC},
    {"bg-size", required_argument, 0, OPT_BG_SIZE},
    {"loss", required_argument, 0, OPT_LOSS},
    {"sample", required_argument, 0, OPT_SAMPLE},
    {"series-csv", required_argument, 0, OPT_SERIES_CSV},
    {"pcap", required_argument, 0, OPT_PCAP},
    {"sack", no_argument, 0, OPT_SACK},
    {"paths", required_argument, 0, OPT_PATHS},
    {"path-policy", required_argument, 0, OPT_PATH_POLICY},
    {"cc", required_argument, 0, OPT_CC},
    {"stagger", required_argument, 0, OPT_STAGGER},
    {"watch", required_argument, 0, OPT_WATCH},
    {"queue-csv", required_argument, 0, OPT_QUEUE_CSV},
    {"hosts-csv", required_argument, 0, OPT_HOSTS_CSV},
    {"link-delay", required_argument, 0, OPT_LINK_DELAY},
    {"help", no_argument, 0, OPT_HELP},
    {0, 0, 0, 0},
};

#define MAX_FAILS 64

int main(int argc, char **argv)
{
    struct sr_fabric_cfg c = {
        .topo = SR_FABRIC_LEAF_SPINE,
        .leaves = 4,
        .spines = 2,
        .hosts_per_leaf = 4,
        .k = 4,
        .host_link = {.rate_bps = 100000000000ull, .delay_ns = 500},
        .fabric_link = {.rate_bps = 100000000000ull, .delay_ns = 1000},
        .kmin_bytes = 64 * 1024,
        .kmax_bytes = 256 * 1024,
        .pmax = 0.2,
        .detect_ns = 10000,
        .seed = 1,
    };
    uint64_t buffer = 512 * 1024, size = 1 << 20, until_ms = 10000;
    const char *workload = "perm", *flows_csv = NULL, *links_csv = NULL;
    uint32_t incast_n = 8, incast_dst = 0;
    struct fail_spec fails[MAX_FAILS];
    int fail_cnt = 0;
    struct delay_spec delays[MAX_FAILS];
    int delay_cnt = 0;
    bool progress = false;
    double bg_frac = 0, sample_us = 100;
    uint64_t bg_size = 1 << 20;
    const char *series_csv = NULL, *pcap_link = NULL, *pcap_file = NULL, *cc_spec = NULL;
    const char *watch = NULL, *queue_csv = NULL, *hosts_csv = NULL;
    double stagger_us = 0;
    struct eng_opts eo = {.path_policy = 1 /* spray */};
    int o;
    while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        uint64_t v = 0;
        bool num = o != OPT_TOPO && o != OPT_WORKLOAD && o != OPT_MODE && o != OPT_FAIL &&
                   o != OPT_FLOWS_CSV && o != OPT_LINKS_CSV && o != OPT_TRIM && o != OPT_PROGRESS &&
                   o != OPT_HELP && o != 'h' && o != '?' && o != OPT_PMAX && o != OPT_HRATE &&
                   o != OPT_FRATE && o != OPT_DETECT && o != OPT_BG_FRAC && o != OPT_LOSS &&
                   o != OPT_SAMPLE && o != OPT_SERIES_CSV && o != OPT_PCAP && o != OPT_SACK &&
                   o != OPT_PATH_POLICY && o != OPT_CC && o != OPT_STAGGER && o != OPT_WATCH &&
                   o != OPT_QUEUE_CSV && o != OPT_HOSTS_CSV && o != OPT_LINK_DELAY;
        if (num && parse_size(optarg, &v) < 0) {
            fprintf(stderr, "srdma-fabric: bad number '%s'\n", optarg);
            return 2;
        }
        switch (o) {
        case OPT_TOPO:
            if (!strcmp(optarg, "leaf-spine"))
                c.topo = SR_FABRIC_LEAF_SPINE;
            else if (!strcmp(optarg, "fat-tree"))
                c.topo = SR_FABRIC_FAT_TREE;
            else {
                fprintf(stderr, "srdma-fabric: unknown topology '%s'\n", optarg);
                return 2;
            }
            break;
        case OPT_LEAVES:
            c.leaves = (uint32_t)v;
            break;
        case OPT_SPINES:
            c.spines = (uint32_t)v;
            break;
        case OPT_HPL:
            c.hosts_per_leaf = (uint32_t)v;
            break;
        case OPT_K:
            c.k = (uint32_t)v;
            break;
        case OPT_HRATE:
            c.host_link.rate_bps = (uint64_t)(strtod(optarg, NULL) * 1e9);
            break;
        case OPT_FRATE:
            c.fabric_link.rate_bps = (uint64_t)(strtod(optarg, NULL) * 1e9);
            break;
        case OPT_HDELAY:
            c.host_link.delay_ns = v;
            break;
        case OPT_FDELAY:
            c.fabric_link.delay_ns = v;
            break;
        case OPT_BUFFER:
            buffer = v;
            break;
        case OPT_KMIN:
            c.kmin_bytes = v;
            break;
        case OPT_KMAX:
            c.kmax_bytes = v;
            break;
        case OPT_PMAX:
            c.pmax = strtod(optarg, NULL);
            break;
        case OPT_TRIM:
            c.trim = true;
            break;
        case OPT_DETECT:
            c.detect_ns = (uint64_t)(strtod(optarg, NULL) * 1000);
            break;
        case OPT_WORKLOAD:
            workload = optarg;
            break;
        case OPT_SIZE:
            size = v;
            break;
        case OPT_INCAST_N:
            incast_n = (uint32_t)v;
            break;
        case OPT_INCAST_DST:
            incast_dst = (uint32_t)v;
            break;
        case OPT_MODE:
            if (!strcmp(optarg, "verified"))
                c.mode = SR_FABRIC_VERIFIED;
            else if (!strcmp(optarg, "header"))
                c.mode = SR_FABRIC_HEADER_ONLY;
            else {
                fprintf(stderr, "srdma-fabric: unknown mode '%s'\n", optarg);
                return 2;
            }
            break;
        case OPT_MTU:
            c.mtu = (uint32_t)v;
            break;
        case OPT_WINDOW:
            c.window_pkts = (uint32_t)v;
            break;
        case OPT_TIMEOUT:
            c.timeout = (uint8_t)v;
            break;
        case OPT_FAIL:
            if (fail_cnt == MAX_FAILS || parse_fail(optarg, &fails[fail_cnt]) < 0) {
                fprintf(stderr, "srdma-fabric: bad --fail '%s'\n", optarg);
                return 2;
            }
            fail_cnt++;
            break;
        case OPT_SEED:
            c.seed = v;
            break;
        case OPT_UNTIL:
            until_ms = v;
            break;
        case OPT_FLOWS_CSV:
            flows_csv = optarg;
            break;
        case OPT_LINKS_CSV:
            links_csv = optarg;
            break;
        case OPT_PROGRESS:
            progress = true;
            break;
        case OPT_BG_FRAC:
            if (parse_real(optarg, 0, 1, &bg_frac) < 0) {
                fprintf(stderr, "srdma-fabric: bad --bg-frac '%s' (0 to 1)\n", optarg);
                return 2;
            }
            break;
        case OPT_BG_SIZE:
            bg_size = v;
            break;
        case OPT_LOSS:
            if (parse_real(optarg, 0, 1, &c.loss) < 0) {
                fprintf(stderr, "srdma-fabric: bad --loss '%s' (0 to 1)\n", optarg);
                return 2;
            }
            break;
        case OPT_SAMPLE:
            if (parse_real(optarg, 0.001, 1e9, &sample_us) < 0) {
                fprintf(stderr, "srdma-fabric: bad --sample '%s'\n", optarg);
                return 2;
            }
            break;
        case OPT_SERIES_CSV:
            series_csv = optarg;
            break;
        case OPT_PCAP:
            /* Two arguments: the link, then the file. */
            if (optind >= argc || argv[optind][0] == '-') {
                fprintf(stderr, "srdma-fabric: --pcap needs a link and a file\n");
                return 2;
            }
            pcap_link = optarg;
            pcap_file = argv[optind++];
            break;
        case OPT_SACK:
            eo.sack = true;
            break;
        case OPT_PATHS:
            if (v < 1 || v > 16) {
                fprintf(stderr, "srdma-fabric: bad --paths '%s' (1 to 16)\n", optarg);
                return 2;
            }
            eo.paths = (uint8_t)v;
            break;
        case OPT_PATH_POLICY:
            if (!strcmp(optarg, "spray"))
                eo.path_policy = 1;
            else if (!strcmp(optarg, "adaptive"))
                eo.path_policy = 2;
            else {
                fprintf(stderr, "srdma-fabric: unknown path policy '%s'\n", optarg);
                return 2;
            }
            break;
        case OPT_CC:
            cc_spec = optarg;
            break;
        case OPT_STAGGER:
            if (parse_real(optarg, 0, 1e9, &stagger_us) < 0) {
                fprintf(stderr, "srdma-fabric: bad --stagger '%s'\n", optarg);
                return 2;
            }
            break;
        case OPT_WATCH:
            watch = optarg;
            break;
        case OPT_QUEUE_CSV:
            queue_csv = optarg;
            break;
        case OPT_HOSTS_CSV:
            hosts_csv = optarg;
            break;
        case OPT_LINK_DELAY:
            if (delay_cnt == MAX_FAILS || parse_link_delay(optarg, &delays[delay_cnt]) < 0) {
                fprintf(stderr, "srdma-fabric: bad --link-delay '%s' (A:B=US[/HOLD_US])\n", optarg);
                return 2;
            }
            delay_cnt++;
            break;
        case OPT_HELP:
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        usage(stderr);
        return 2;
    }
    if (cc_spec) {
        char why[160];
        eo.cc.line_rate_bps = c.host_link.rate_bps; /* what a host's NIC sends at */
        if (sr_cc_parse(cc_spec, &eo.cc, why, sizeof(why))) {
            fprintf(stderr, "srdma-fabric: %s\n", why);
            return 2;
        }
        eo.cc_on = eo.cc.algo != SR_CC_NONE;
    }
    /* Spraying reorders: without selective recovery the hosts' go-back-N
     * would rewind on every overtaking packet, so it sprays only with
     * --sack (the engine's rule, sr_qp_reorder_ok). */
    if (eo.paths > 1 && !eo.sack)
        fprintf(stderr, "srdma-fabric: --paths without --sack keeps one path per QP\n");
    c.engine_cfg = host_engine_cfg;
    c.engine_cfg_ctx = &eo;
    c.fabric_link.buffer_bytes = buffer;
    c.host_link.buffer_bytes = buffer;
    if (series_csv || queue_csv || hosts_csv)
        c.sample_ns = (uint64_t)(sample_us * 1000);
    c.host_series = hosts_csv != NULL;

    double t0 = wall_s();
    int err = 0;
    struct sr_fabric *f = sr_fabric_create(&c, &err);
    if (!f) {
        fprintf(stderr, "srdma-fabric: bad fabric configuration (%d)\n", err);
        return 2;
    }
    if (!strcmp(workload, "perm"))
        err = sr_fabric_permutation(f, size, 0);
    else if (!strcmp(workload, "incast"))
        err =
            sr_fabric_incast_step(f, incast_dst, incast_n, size, 0, (uint64_t)(stagger_us * 1000));
    else if (!strcmp(workload, "a2a"))
        err = sr_fabric_all_to_all(f, size, 0);
    else if (!strcmp(workload, "ring"))
        err = sr_fabric_ring_allreduce(f, size, 0);
    else if (!strcmp(workload, "hd"))
        err = sr_fabric_hd_allreduce(f, size, 0);
    else
        err = SR_ERR_INVAL;
    if (err >= 0 && bg_frac > 0 && sr_fabric_background(f, bg_frac, bg_size, 0) < 0) {
        fprintf(stderr, "srdma-fabric: bad background load for this fabric\n");
        sr_fabric_destroy(f);
        return 2;
    }
    if (err < 0) {
        fprintf(stderr, "srdma-fabric: bad workload '%s' for this fabric\n", workload);
        sr_fabric_destroy(f);
        return 2;
    }
    for (int i = 0; i < fail_cnt; i++) {
        int a = sr_fabric_find_node(f, fails[i].a), b = sr_fabric_find_node(f, fails[i].b);
        if (sr_fabric_schedule_link(f, a, b, fails[i].down_ns, false) < 0 ||
            (fails[i].up_ns && sr_fabric_schedule_link(f, a, b, fails[i].up_ns, true) < 0)) {
            fprintf(stderr, "srdma-fabric: no cable %s:%s\n", fails[i].a, fails[i].b);
            sr_fabric_destroy(f);
            return 2;
        }
    }
    for (int i = 0; i < delay_cnt; i++) {
        if (sr_fabric_set_link_delay(f, find_link(f, delays[i].link), delays[i].delay_ns,
                                     delays[i].hold_ns) < 0) {
            fprintf(stderr,
                    "srdma-fabric: no link '%s' for --link-delay (a hold needs a host's uplink)\n",
                    delays[i].link);
            sr_fabric_destroy(f);
            return 2;
        }
    }
    if (queue_csv) {
        int link = -1;
        if (watch) {
            link = find_link(f, watch);
        } else if (!strcmp(workload, "incast")) {
            /* the target's own port: where an incast queues */
            for (uint32_t n = sr_fabric_host_cnt(f); n < sr_fabric_node_cnt(f) && link < 0; n++)
                link = sr_fabric_find_link(f, (int)n, (int)incast_dst);
        }
        if (link < 0 || sr_fabric_watch_link(f, link) < 0) {
            fprintf(stderr, "srdma-fabric: --queue-csv needs --watch FROM:TO (a link)\n");
            sr_fabric_destroy(f);
            return 2;
        }
    }
    FILE *pcap = NULL;
    struct sr_fabric_pcap pc;
    if (pcap_link) {
        int link = find_link(f, pcap_link);
        if (link < 0) {
            fprintf(stderr, "srdma-fabric: no link '%s' (FROM:TO, e.g. leaf0:spine1)\n", pcap_link);
            sr_fabric_destroy(f);
            return 2;
        }
        pcap = fopen(pcap_file, "wb");
        if (!pcap || sr_fabric_pcap_start(f, link, pcap, &pc) < 0) {
            fprintf(stderr, "srdma-fabric: cannot write '%s'\n", pcap_file);
            if (pcap)
                fclose(pcap);
            sr_fabric_destroy(f);
            return 2;
        }
    }

    /* Slices of simulated time, so the progress line can be refreshed
     * about once a second of wall time. */
    uint64_t until = until_ms * 1000000, slice = 20000;
    int r = SR_FABRIC_UNTIL;
    double last = t0;
    bool printed = false;
    for (uint64_t t = slice; r == SR_FABRIC_UNTIL; t += slice) {
        r = sr_fabric_run(f, t < until ? t : until);
        if (r < 0)
            break;
        if (r == SR_FABRIC_UNTIL && t >= until)
            break;
        double now = wall_s();
        if (now - last >= 1.0 || (progress && !printed)) {
            uint32_t done, colls_done;
            uint64_t events;
            sr_fabric_progress(f, &done, &colls_done, &events);
            fprintf(stderr, "\r  sim %.3f ms  flows %u/%u", (double)sr_fabric_now(f) / 1e6, done,
                    sr_fabric_flow_cnt(f));
            if (sr_fabric_coll_cnt(f))
                fprintf(stderr, "  collectives %u/%u", colls_done, sr_fabric_coll_cnt(f));
            fprintf(stderr, "  events %.2fM  %.2fM ev/s  rss %.0f MiB ", (double)events / 1e6,
                    (double)events / (now - t0) / 1e6, max_rss_mib());
            last = now;
            printed = true;
        }
    }
    if (printed)
        fprintf(stderr, "\n");
    double wall = wall_s() - t0;
    if (r < 0) {
        fprintf(stderr, "srdma-fabric: setup failed (%d)\n", r);
        if (pcap)
            fclose(pcap);
        sr_fabric_destroy(f);
        return 1;
    }

    struct sr_fabric_summary s;
    sr_fabric_summary(f, &s);
    char topo[96];
    if (c.topo == SR_FABRIC_LEAF_SPINE)
        snprintf(topo, sizeof(topo), "leaf-spine %u leaves x %u hosts, %u spines", c.leaves,
                 c.hosts_per_leaf, c.spines);
    else
        snprintf(topo, sizeof(topo), "fat-tree k=%u", c.k);
    printf("%-22s %s\n", "topology", topo);
    printf("%-22s %u (%s, %s, %" PRIu64 " bytes)\n", "hosts", sr_fabric_host_cnt(f), workload,
           c.mode == SR_FABRIC_VERIFIED ? "verified" : "header-only", size);
    printf("%-22s %u of %u (%u failed, %u bad data)\n", "flows done", s.done, s.flows, s.failed,
           s.verified_bad);
    printf("%-22s %.2f / %.2f / %.2f us\n", "fct p50 / p99 / max", (double)s.fct_p50_ns / 1e3,
           (double)s.fct_p99_ns / 1e3, (double)s.fct_max_ns / 1e3);
    if (s.colls)
        printf("%-22s %.2f us (%u of %u complete)\n", "collective time",
               (double)s.coll_max_ns / 1e3, s.colls_done, s.colls);
    printf("%-22s %.3f ms\n", "simulated time", (double)s.end_ns / 1e6);
    printf("%-22s %.0f%% max, %.0f%% mean\n", "fabric link util", s.max_util * 100,
           s.mean_util * 100);
    printf("%-22s %" PRIu64 " bytes\n", "max queue", s.max_q_bytes);
    printf("%-22s %" PRIu64 " (random loss %" PRIu64 ", trimmed %" PRIu64 ", ecn marked %" PRIu64
           ")\n",
           "drops", s.drops, s.loss_drops, s.trimmed_rx, s.ecn_marked);
    printf("%-22s %" PRIu64 " (timeouts %" PRIu64 ", tail-loss probes %" PRIu64 ")\n",
           "retransmissions", s.retransmits, s.timeouts, s.probes);
    double cpu = cpu_s();
    printf("%-22s %" PRIu64 " (%.2fM/s wall, %.2fM/s cpu)\n", "packet-hop events", s.events,
           (double)s.events / wall / 1e6, (double)s.events / cpu / 1e6);
    printf("%-22s %.2f s wall, %.2f s cpu, max rss %.0f MiB\n", "time", wall, cpu, max_rss_mib());
    printf("%-22s %016" PRIx64 "\n", "digest", sr_fabric_digest(f));
    int rc = s.done == s.flows && !s.failed && !s.verified_bad && s.colls_done == s.colls ? 0 : 1;
    if (flows_csv && write_flows(f, flows_csv) != 0)
        rc = 1;
    if (links_csv && write_links(f, links_csv, s.end_ns ? s.end_ns : sr_fabric_now(f)) != 0)
        rc = 1;
    if (series_csv && write_series(f, series_csv, c.sample_ns) != 0)
        rc = 1;
    if (queue_csv && write_queue(f, queue_csv, c.sample_ns) != 0)
        rc = 1;
    if (hosts_csv && write_hosts(f, hosts_csv, c.sample_ns) != 0)
        rc = 1;
    if (pcap && (fclose(pcap) != 0 || pc.err)) {
        fprintf(stderr, "srdma-fabric: writing '%s' failed\n", pcap_file);
        rc = 1;
    }
    sr_fabric_destroy(f);
    return rc;
}
