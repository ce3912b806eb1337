/* srdma-sim: one verified transfer between two soft RDMA devices over the
 * deterministic network simulator (sr_xfer), with a short human summary.
 *
 *   srdma-sim --op write --size 1M --count 100 --loss 0.05 --reorder 0.01 \
 *             --dup 0.01 --corrupt 0.001 --seed 7
 *
 * Nothing leaves the process: the addresses are the simulator's. Exit
 * status: 0 when every byte and completion verified, 1 when a check failed
 * (or the run could not be set up), 2 for a usage error.
 */
#include "sr_xfer.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { EXIT_VERIFY = 1, EXIT_USAGE = 2 };

static void usage(FILE *f)
{
    fprintf(f,
            "usage: srdma-sim [options]\n"
            "Run one transfer between two simulated RoCEv2 devices and verify every byte\n"
            "and every completion.\n"
            "\n"
            "  --op NAME          send, send_imm, write, write_imm, read, cas, faa (send)\n"
            "  --qp rc|uc         transport; uc: send/write only, on a fault-free link (rc)\n"
            "  --size N           bytes per message, K/M/G binary suffixes (4K; atomics: 8)\n"
            "  --count N          messages (100)\n"
            "  --depth N          messages in flight (16)\n"
            "  --mtu N            path MTU: 256, 512, 1024, 2048, 4096 (4096)\n"
            "  --rate R           link rate in bit/s, K/M/G decimal suffixes, 0 = infinite (10G)\n"
            "  --delay-us T       one-way propagation delay in microseconds (2)\n"
            "  --queue-bytes N    link queue limit, K/M/G binary, 0 = unlimited (16M)\n"
            "  --loss P           per-packet loss probability, both directions (0)\n"
            "  --reorder P        per-packet reordering probability (0)\n"
            "  --dup P            per-packet duplication probability (0)\n"
            "  --corrupt P        per-packet bit-flip probability; caught by the ICRC (0)\n"
            "  --seed N           seed of the faults and the data patterns (1)\n"
            "  --timeout E        transport timer 4.096 us * 2^E, 0..31 (10 = 4.2 ms)\n"
            "  --retry N          retry_cnt, 0..7 (7)\n"
            "  --rnr-retry N      rnr_retry, 0..7, 7 = infinite (7)\n"
            "  --window N         requester window in packets, 0 = engine default (0)\n"
            "  --qdelay-us T      with --sack: queueing the requester may build beyond\n"
            "                     its round trip, 0 = no cap (0, as the library's)\n"
            "  --sack             selective recovery on both nodes (docs/WIRE.md)\n"
            "  --time-limit-ms T  simulated time limit, 0 = automatic (0)\n"
            "  --ipv6             IPv6 addresses (fd00::1, fd00::2) instead of IPv4\n"
            "  --help             this text\n");
}

static int usage_error(const char *opt, const char *val, const char *why)
{
    fprintf(stderr, "srdma-sim: %s '%s': %s (see --help)\n", opt, val, why);
    return EXIT_USAGE;
}

/* An unsigned integer with an optional K/M/G suffix, binary (sizes) or
 * decimal (rates). */
static int parse_scaled(const char *s, bool binary, uint64_t *out)
{
    char *end;
    if (!*s || *s == '-')
        return -1;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !(v >= 0))
        return -1;
    double mul = 1;
    switch (*end) {
    case 'k':
    case 'K':
        mul = binary ? 1024.0 : 1e3;
        end++;
        break;
    case 'm':
    case 'M':
        mul = binary ? 1048576.0 : 1e6;
        end++;
        break;
    case 'g':
    case 'G':
        mul = binary ? 1073741824.0 : 1e9;
        end++;
        break;
    default:
        break;
    }
    if (*end)
        return -1;
    v *= mul;
    if (v >= 1.8e19 || v != (double)(uint64_t)v)
        return -1; /* whole units only */
    *out = (uint64_t)v;
    return 0;
}

static int parse_uint(const char *s, uint64_t max, uint64_t *out)
{
    char *end;
    if (!*s || *s == '-')
        return -1;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (*end || errno || v > max)
        return -1;
    *out = v;
    return 0;
}

static int parse_prob(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !(v >= 0 && v <= 1))
        return -1;
    *out = v;
    return 0;
}

static void fmt_size(char *buf, size_t n, uint64_t v)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB"};
    int u = 0;
    double d = (double)v;
    while (u < 3 && d >= 1024) {
        d /= 1024;
        u++;
    }
    if (d == (double)(uint64_t)d)
        snprintf(buf, n, "%.0f %s", d, units[u]);
    else
        snprintf(buf, n, "%.2f %s", d, units[u]);
}

static void fmt_rate(char *buf, size_t n, double bps)
{
    if (bps >= 1e9)
        snprintf(buf, n, "%.3g Gb/s", bps / 1e9);
    else if (bps >= 1e6)
        snprintf(buf, n, "%.3g Mb/s", bps / 1e6);
    else
        snprintf(buf, n, "%.3g kb/s", bps / 1e3);
}

static void print_summary(const struct sr_xfer_cfg *c, const struct sr_xfer_result *r)
{
    bool atomic = c->op == SR_XFER_CAS || c->op == SR_XFER_FAA;
    char size[32], queue[32], payload[32], rate[32];
    fmt_size(size, sizeof(size), atomic ? 8 : c->size);
    fmt_size(queue, sizeof(queue), c->link.queue_bytes);
    fmt_size(payload, sizeof(payload), r->payload_bytes);
    if (c->link.rate_bps)
        fmt_rate(rate, sizeof(rate), (double)c->link.rate_bps);
    else
        snprintf(rate, sizeof(rate), "infinite rate");
    printf("srdma-sim: %s %s, %" PRIu64 " x %s, depth %u, MTU %u, %s, seed %" PRIu64 "\n",
           c->qp_type == SR_QPT_UC ? "UC" : "RC", sr_xfer_op_name(c->op), c->count, size, c->depth,
           c->mtu, c->ipv6 ? "IPv6" : "IPv4", c->seed);
    printf("  link             %s, %.3g us one-way, queue %s; loss %g, reorder %g, dup %g, "
           "corrupt %g\n",
           rate, (double)c->link.delay_ns / 1e3, c->link.queue_bytes ? queue : "unlimited",
           c->link.loss, c->link.reorder, c->link.dup, c->link.corrupt);
    printf("  simulated time   %.3f ms (%" PRIu64 " of %" PRIu64 " messages)\n",
           (double)r->sim_ns / 1e6, r->msgs_done, c->count);
    printf("  goodput          %.3f Gb/s (%s of payload)\n", r->goodput_bps / 1e9, payload);
    const struct sr_engine_stats *q = &r->eng[0], *s = &r->eng[1];
    printf("  retransmissions  %" PRIu64 " packets, %" PRIu64 " timeouts\n",
           q->retransmits + s->retransmits, q->timeouts);
    printf("  NAKs             sequence %" PRIu64 " sent / %" PRIu64 " received, RNR %" PRIu64
           " sent / %" PRIu64 " received\n",
           s->seq_naks_sent, q->seq_naks_rcvd, s->rnr_naks_sent, q->rnr_naks_rcvd);
    printf("  duplicates       %" PRIu64 " requests answered again by the responder\n",
           s->rx_duplicate);
    if (c->sack)
        printf("  selective        %" PRIu64 " SACKs, %" PRIu64 " kept out of order, %" PRIu64
               " selective resends (%" PRIu64 " of them again), %" PRIu64 " probes, %" PRIu64
               " overflows\n",
               s->sacks_sent, s->ooo_stored + s->ooo_placed, q->sack_resends, q->sack_lost_resends,
               q->probes, s->ooo_overflow);
    const struct sr_sim_link_stats *a = &r->link[0], *b = &r->link[1];
    printf("  faults injected  lost %" PRIu64 ", duplicated %" PRIu64 ", reordered %" PRIu64
           ", corrupted %" PRIu64 " (ICRC drops %" PRIu64 "), queue drops %" PRIu64 "\n",
           a->lost + b->lost, a->duplicated + b->duplicated, a->reordered + b->reordered,
           a->corrupted + b->corrupted, r->node[0].rx_icrc_drops + r->node[1].rx_icrc_drops,
           a->queue_drops + b->queue_drops);
    printf("  packets          %" PRIu64 " requests (%.1f MiB), %" PRIu64 " responses\n", a->sent,
           (double)a->bytes / 1048576.0, b->sent);
}

int main(int argc, char **argv)
{
    struct sr_xfer_cfg c;
    sr_xfer_cfg_init(&c);
    enum {
        O_OP = 256,
        O_QP,
        O_SIZE,
        O_COUNT,
        O_DEPTH,
        O_MTU,
        O_RATE,
        O_DELAY,
        O_QUEUE,
        O_LOSS,
        O_REORDER,
        O_DUP,
        O_CORRUPT,
        O_SEED,
        O_TIMEOUT,
        O_RETRY,
        O_RNR,
        O_WINDOW,
        O_LIMIT,
        O_IPV6,
        O_SACK,
        O_QDELAY,
    };
    static const struct option opts[] = {
        {"op", required_argument, NULL, O_OP},
        {"qp", required_argument, NULL, O_QP},
        {"size", required_argument, NULL, O_SIZE},
        {"count", required_argument, NULL, O_COUNT},
        {"depth", required_argument, NULL, O_DEPTH},
        {"mtu", required_argument, NULL, O_MTU},
        {"rate", required_argument, NULL, O_RATE},
        {"delay-us", required_argument, NULL, O_DELAY},
        {"queue-bytes", required_argument, NULL, O_QUEUE},
        {"loss", required_argument, NULL, O_LOSS},
        {"reorder", required_argument, NULL, O_REORDER},
        {"dup", required_argument, NULL, O_DUP},
        {"corrupt", required_argument, NULL, O_CORRUPT},
        {"seed", required_argument, NULL, O_SEED},
        {"timeout", required_argument, NULL, O_TIMEOUT},
        {"retry", required_argument, NULL, O_RETRY},
        {"rnr-retry", required_argument, NULL, O_RNR},
        {"window", required_argument, NULL, O_WINDOW},
        {"time-limit-ms", required_argument, NULL, O_LIMIT},
        {"ipv6", no_argument, NULL, O_IPV6},
        {"sack", no_argument, NULL, O_SACK},
        {"qdelay-us", required_argument, NULL, O_QDELAY},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    opterr = 0; /* our own messages, with the exit status of a usage error */
    int o, li;
    char name[32];
    while ((li = -1, o = getopt_long(argc, argv, ":h", opts, &li)) != -1) {
        const char *v = optarg;
        /* The option as typed, for messages: argv[optind - 1] is its value
         * when the value came as a separate argument. */
        if (li >= 0)
            snprintf(name, sizeof(name), "--%s", opts[li].name);
        else
            snprintf(name, sizeof(name), "%s", argv[optind - 1]);
        uint64_t u = 0;
        double d = 0;
        switch (o) {
        case 'h':
            usage(stdout);
            return 0;
        case O_OP:
            if (sr_xfer_op_parse(v, &c.op))
                return usage_error("--op", v,
                                   "one of send, send_imm, write, write_imm, read, cas, faa");
            break;
        case O_QP:
            if (!strcmp(v, "rc") || !strcmp(v, "RC"))
                c.qp_type = SR_QPT_RC;
            else if (!strcmp(v, "uc") || !strcmp(v, "UC"))
                c.qp_type = SR_QPT_UC;
            else
                return usage_error("--qp", v, "rc or uc");
            break;
        case O_SIZE:
            if (parse_scaled(v, true, &u) || u > SR_MAX_MSG_LEN)
                return usage_error("--size", v, "a byte count up to 2G (K/M/G are binary)");
            c.size = (uint32_t)u;
            break;
        case O_COUNT:
            if (parse_scaled(v, false, &u) || u == 0)
                return usage_error("--count", v, "a positive message count");
            c.count = u;
            break;
        case O_DEPTH:
            if (parse_uint(v, 1u << 15, &u) || u == 0)
                return usage_error("--depth", v, "1 .. 32768");
            c.depth = (uint32_t)u;
            break;
        case O_MTU:
            if (parse_uint(v, 4096, &u) ||
                (u != 256 && u != 512 && u != 1024 && u != 2048 && u != 4096))
                return usage_error("--mtu", v, "256, 512, 1024, 2048 or 4096");
            c.mtu = (uint32_t)u;
            break;
        case O_RATE:
            if (parse_scaled(v, false, &u) || u > (1ull << 62))
                return usage_error("--rate", v, "bits per second, e.g. 10G or 100M");
            c.link.rate_bps = u;
            break;
        case O_DELAY: {
            char *end;
            errno = 0;
            d = strtod(v, &end);
            if (end == v || *end || errno || !(d >= 0 && d <= 1e9))
                return usage_error("--delay-us", v, "microseconds, e.g. 2 or 0.5");
            c.link.delay_ns = (uint64_t)(d * 1e3 + 0.5);
            break;
        }
        case O_QUEUE:
            if (parse_scaled(v, true, &u))
                return usage_error("--queue-bytes", v, "a byte count (K/M/G are binary)");
            c.link.queue_bytes = u;
            break;
        case O_LOSS:
        case O_REORDER:
        case O_DUP:
        case O_CORRUPT:
            if (parse_prob(v, &d))
                return usage_error(name, v, "a probability in [0, 1]");
            *(o == O_LOSS      ? &c.link.loss
              : o == O_REORDER ? &c.link.reorder
              : o == O_DUP     ? &c.link.dup
                               : &c.link.corrupt) = d;
            break;
        case O_SEED:
            if (parse_uint(v, UINT64_MAX, &u))
                return usage_error("--seed", v, "an unsigned integer");
            c.seed = u;
            break;
        case O_TIMEOUT:
            if (parse_uint(v, 31, &u))
                return usage_error("--timeout", v, "an exponent 0 .. 31 (0 = infinite)");
            c.timeout = (uint8_t)u;
            break;
        case O_RETRY:
        case O_RNR:
            if (parse_uint(v, 7, &u))
                return usage_error(name, v, "0 .. 7");
            if (o == O_RETRY)
                c.retry_cnt = (uint8_t)u;
            else
                c.rnr_retry = (uint8_t)u;
            break;
        case O_SACK:
            c.sack = true;
            break;
        case O_QDELAY:
            if (parse_uint(v, 1000000, &u))
                return usage_error("--qdelay-us", v, "microseconds, 0..1000000");
            c.qdelay_ns = u * 1000;
            break;
        case O_WINDOW:
            if (parse_uint(v, UINT32_MAX, &u))
                return usage_error("--window", v, "packets, 0 = the engine's default");
            c.window_pkts = (uint32_t)u;
            break;
        case O_LIMIT: {
            char *end;
            errno = 0;
            d = strtod(v, &end);
            if (end == v || *end || errno || !(d >= 0 && d <= 1e12))
                return usage_error("--time-limit-ms", v, "simulated milliseconds, 0 = automatic");
            c.time_limit_ns = (uint64_t)(d * 1e6 + 0.5);
            break;
        }
        case O_IPV6:
            c.ipv6 = true;
            break;
        case ':':
            fprintf(stderr, "srdma-sim: %s needs a value (see --help)\n", name);
            return EXIT_USAGE;
        default:
            fprintf(stderr, "srdma-sim: unknown option '%s' (see --help)\n", name);
            return EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "srdma-sim: unexpected argument '%s' (see --help)\n", argv[optind]);
        return EXIT_USAGE;
    }

    struct sr_xfer_result r;
    int err = sr_xfer_run(&c, &r);
    if (err == SR_ERR_INVAL) {
        fprintf(stderr, "srdma-sim: %s (see --help)\n", r.error);
        return EXIT_USAGE;
    }
    if (err) {
        fprintf(stderr, "srdma-sim: could not run: %s\n", r.error[0] ? r.error : sr_strerror(err));
        return EXIT_VERIFY;
    }
    print_summary(&c, &r);
    if (!r.ok) {
        printf("FAILED: %s\n", r.error);
        return EXIT_VERIFY;
    }
    printf("OK: every byte and completion verified\n");
    return 0;
}
