/*
 * srdma-switch: a user-space Ethernet switch between network namespaces, so
 * that bottlenecks, drop-tail loss and ECN marks come from our own code on a
 * machine without tc qdiscs. Owns the whole program: ports (AF_PACKET sockets
 * on veth ends), MAC learning with flooding (ARP broadcasts reach every host,
 * so hosts resolve each other themselves), one drop-tail FIFO per egress port
 * drained by a serialisation clock, RED-style CE marking, counters, CSV and
 * pcap output. Single-threaded: one poll loop whose timeout is the earliest
 * departure. See docs/SWITCH.md.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SW_PORTS_MAX    16
#define SW_FRAME_MAX    9216
#define SW_MAC_MAX      256
#define SW_HIST_BUCKETS 1024
/* the clock's bucket: how far behind it may catch up: longer than a
 * scheduler time slice on a loaded machine, short against a 1 s window */
#define SW_BURST_NS 20000000u
#define SW_RX_BATCH 64

/* a queued frame, allocated to its length: slots are cheap pointers, so a
 * ring sized for a buffer of minimum-size frames costs little memory */
struct sw_frame {
    uint32_t len;
    uint8_t data[];
};

struct sw_stats {
    uint64_t rx_frames, rx_bytes;
    uint64_t tx_frames, tx_bytes;
    uint64_t marks, drops, flood;
    uint64_t qmax;
    uint64_t first_tx_ns, last_tx_ns; /* the busy span the rate is over */
    uint64_t lost_ns; /* link time lost with frames waiting: stalls past SW_BURST_NS */
    uint64_t hist[SW_HIST_BUCKETS]; /* queue depth seen by each arrival */
    uint64_t hist_cnt;
};

struct sw_port {
    char name[IFNAMSIZ];
    int fd;
    int ifindex;
    /* FIFO of frames waiting to leave; a ring of slots, bytes bounded */
    struct sw_frame **ring;
    uint32_t ring_cnt, head, len;
    uint64_t q_bytes;
    uint64_t next_tx_ns; /* when the head may start: the serialisation clock */
    struct sw_stats st;
};

struct sw_mac {
    uint8_t mac[6];
    int port;
};

/* a static route: IPv4 destination -> egress port, ahead of MAC learning */
struct sw_route {
    uint32_t addr; /* network order */
    int port;
};

#define SW_ROUTES_MAX 64

struct sw_config {
    double rate_bps; /* 0: line rate (no clock) */
    uint64_t buffer_len;
    uint64_t kmin_len, kmax_len;
    double pmax;
    const char *pcap_path;
    int pcap_port;
    const char *csv_path;
    double duration_s;
    uint64_t seed;
    struct sw_route route[SW_ROUTES_MAX];
    int route_cnt;
};

struct sw {
    struct sw_config cfg;
    struct sw_port port[SW_PORTS_MAX];
    int port_cnt;
    struct sw_mac mac[SW_MAC_MAX];
    int mac_cnt;
    uint64_t rng;
    uint64_t hist_width;
    FILE *pcap;
    FILE *csv;
    uint64_t start_ns;
};

static volatile sig_atomic_t sw_stop;

static void sw_on_signal(int sig)
{
    (void)sig;
    sw_stop = 1;
}

static uint64_t sw_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* xorshift64*: marking decisions must be reproducible for a given seed */
static double sw_rand01(struct sw *sw)
{
    sw->rng ^= sw->rng >> 12;
    sw->rng ^= sw->rng << 25;
    sw->rng ^= sw->rng >> 27;
    return (double)((sw->rng * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

/* A number with an optional k, m or g suffix: powers of `unit` (1024 for
 * sizes in bytes, 1000 for rates in bit/s). */
static int sw_parse_scaled(const char *s, double unit, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || v < 0)
        return -1;
    switch (*end) {
    case 'g':
    case 'G':
        v *= unit;
        /* fall through */
    case 'm':
    case 'M':
        v *= unit;
        /* fall through */
    case 'k':
    case 'K':
        v *= unit;
        end++;
        break;
    default:
        break;
    }
    if (*end)
        return -1;
    *out = v;
    return 0;
}

static int sw_parse_size(const char *s, uint64_t *out)
{
    double v;
    if (sw_parse_scaled(s, 1024, &v) != 0 || v > 0x1p63)
        return -1;
    *out = (uint64_t)v;
    return 0;
}

static int sw_parse_rate(const char *s, double *out)
{
    return sw_parse_scaled(s, 1000, out);
}

static int sw_port_open(struct sw *sw, const char *name)
{
    struct sw_port *p;
    struct sockaddr_ll sll;
    int one = 1, buf = 8 << 20;

    if (sw->port_cnt == SW_PORTS_MAX || strlen(name) >= IFNAMSIZ) {
        fprintf(stderr, "srdma-switch: too many ports or name too long: %s\n", name);
        return -1;
    }
    p = &sw->port[sw->port_cnt];
    snprintf(p->name, sizeof(p->name), "%s", name);
    p->ifindex = (int)if_nametoindex(name);
    if (p->ifindex == 0) {
        fprintf(stderr, "srdma-switch: no interface %s\n", name);
        return -1;
    }
    p->fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK, htons(ETH_P_ALL));
    if (p->fd < 0) {
        perror("srdma-switch: socket(AF_PACKET)");
        return -1;
    }
    /* a socket on one device still sees what we send out of it: skip those */
    setsockopt(p->fd, SOL_PACKET, PACKET_IGNORE_OUTGOING, &one, sizeof(one));
    /* bursts of a fast sender must wait in the kernel, not be lost there */
    setsockopt(p->fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf));
    setsockopt(p->fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof(buf));
    memset(&sll, 0, sizeof(sll));
    sll.sll_family = AF_PACKET;
    sll.sll_protocol = htons(ETH_P_ALL);
    sll.sll_ifindex = p->ifindex;
    if (bind(p->fd, (struct sockaddr *)&sll, sizeof(sll)) < 0) {
        perror("srdma-switch: bind");
        close(p->fd);
        return -1;
    }
    /* enough slots for a full buffer of minimum-size (60-byte) frames */
    p->ring_cnt = (uint32_t)(sw->cfg.buffer_len / 60 + 2);
    p->ring = calloc(p->ring_cnt, sizeof(*p->ring));
    if (!p->ring) {
        close(p->fd);
        return -1;
    }
    sw->port_cnt++;
    return 0;
}

static int sw_mac_lookup(const struct sw *sw, const uint8_t *mac)
{
    for (int i = 0; i < sw->mac_cnt; i++)
        if (memcmp(sw->mac[i].mac, mac, 6) == 0)
            return sw->mac[i].port;
    return -1;
}

/* The port a static route names for an IPv4 frame's destination, or -1. */
static int sw_route_lookup(const struct sw *sw, const uint8_t *f, size_t len)
{
    uint32_t dst;
    if (sw->cfg.route_cnt == 0 || len < 34 || f[12] != 0x08 || f[13] != 0x00)
        return -1;
    memcpy(&dst, f + 30, 4);
    for (int i = 0; i < sw->cfg.route_cnt; i++)
        if (sw->cfg.route[i].addr == dst)
            return sw->cfg.route[i].port;
    return -1;
}

static int sw_parse_route(struct sw_config *cfg, const char *s)
{
    char ip[64];
    const char *eq = strchr(s, '=');
    struct sw_route *r;
    if (!eq || eq - s >= (long)sizeof(ip) || cfg->route_cnt == SW_ROUTES_MAX)
        return -1;
    memcpy(ip, s, (size_t)(eq - s));
    ip[eq - s] = 0;
    r = &cfg->route[cfg->route_cnt];
    if (inet_pton(AF_INET, ip, &r->addr) != 1)
        return -1;
    r->port = atoi(eq + 1);
    cfg->route_cnt++;
    return 0;
}

static void sw_mac_learn(struct sw *sw, const uint8_t *mac, int port)
{
    if (mac[0] & 1)
        return; /* a multicast source is bogus: never a destination */
    for (int i = 0; i < sw->mac_cnt; i++)
        if (memcmp(sw->mac[i].mac, mac, 6) == 0) {
            sw->mac[i].port = port; /* a host moved */
            return;
        }
    if (sw->mac_cnt < SW_MAC_MAX) {
        memcpy(sw->mac[sw->mac_cnt].mac, mac, 6);
        sw->mac[sw->mac_cnt].port = port;
        sw->mac_cnt++;
    }
}

/* RFC 1624 incremental update for one 16-bit word changing old -> new */
static uint16_t sw_csum_update(uint16_t csum, uint16_t old, uint16_t new)
{
    uint32_t s = (uint16_t)~csum + (uint32_t)(uint16_t)~old + new;
    s = (s & 0xffff) + (s >> 16);
    s = (s & 0xffff) + (s >> 16);
    return (uint16_t)~s;
}

/* Sets CE on an ECT(0)/ECT(1) IPv4 or IPv6 packet (RFC 3168 6.1.1.1);
 * returns 1 if marked, 0 if the packet is not ECN-capable. */
static int sw_mark_ce(uint8_t *f, uint32_t len)
{
    uint16_t type;
    uint32_t off = 14;

    if (len < 14)
        return 0;
    type = (uint16_t)(f[12] << 8 | f[13]);
    if (type == 0x8100 && len >= 18) { /* one VLAN tag */
        type = (uint16_t)(f[16] << 8 | f[17]);
        off = 18;
    }
    if (type == 0x0800 && len >= off + 20 && (f[off] >> 4) == 4) {
        uint8_t *ip = f + off;
        uint16_t oldw = (uint16_t)(ip[0] << 8 | ip[1]), neww, csum;
        if ((ip[1] & 3) == 0 || (ip[1] & 3) == 3)
            return 0;
        ip[1] |= 3;
        neww = (uint16_t)(ip[0] << 8 | ip[1]);
        csum = (uint16_t)(ip[10] << 8 | ip[11]);
        csum = sw_csum_update(csum, oldw, neww);
        ip[10] = (uint8_t)(csum >> 8);
        ip[11] = (uint8_t)csum;
        return 1;
    }
    if (type == 0x86dd && len >= off + 40 && (f[off] >> 4) == 6) {
        /* traffic class straddles bytes 0 and 1; ECN is its low 2 bits */
        uint8_t ecn = (f[off + 1] >> 4) & 3;
        if (ecn == 0 || ecn == 3)
            return 0;
        f[off + 1] |= 0x30;
        return 1;
    }
    return 0;
}

static void sw_hist_add(struct sw *sw, struct sw_stats *st, uint64_t q)
{
    uint64_t b = q / sw->hist_width;
    if (b >= SW_HIST_BUCKETS)
        b = SW_HIST_BUCKETS - 1;
    st->hist[b]++;
    st->hist_cnt++;
    if (q > st->qmax)
        st->qmax = q;
}

static uint64_t sw_hist_p99(const struct sw *sw, const struct sw_stats *st)
{
    uint64_t want = st->hist_cnt - st->hist_cnt / 100, seen = 0;
    if (st->hist_cnt == 0)
        return 0;
    for (int b = 0; b < SW_HIST_BUCKETS; b++) {
        seen += st->hist[b];
        if (seen >= want)
            return (uint64_t)(b + 1) * sw->hist_width; /* bucket's upper edge */
    }
    return st->qmax;
}

/* Admission to an egress FIFO: drop-tail on bytes, then RED-style marking
 * on the depth the arriving frame sees (DCQCN's Kmin/Kmax/Pmax). */
static void sw_enqueue(struct sw *sw, int out, const uint8_t *f, uint32_t len, uint64_t now_ns)
{
    struct sw_port *p = &sw->port[out];
    struct sw_frame *slot;
    uint64_t q = p->q_bytes;

    sw_hist_add(sw, &p->st, q);
    if (q + len > sw->cfg.buffer_len || p->len == p->ring_cnt) {
        p->st.drops++;
        return;
    }
    slot = malloc(sizeof(*slot) + len);
    if (!slot) {
        p->st.drops++;
        return;
    }
    p->ring[(p->head + p->len) % p->ring_cnt] = slot;
    memcpy(slot->data, f, len);
    slot->len = len;
    if (sw->cfg.kmax_len > 0 && q > sw->cfg.kmin_len) {
        double prob = 1.0;
        if (q < sw->cfg.kmax_len)
            prob = sw->cfg.pmax * (double)(q - sw->cfg.kmin_len) /
                   (double)(sw->cfg.kmax_len - sw->cfg.kmin_len);
        if (sw_rand01(sw) < prob && sw_mark_ce(slot->data, len))
            p->st.marks++;
    }
    if (p->len == 0 && p->next_tx_ns < now_ns)
        p->next_tx_ns = now_ns; /* an idle link does not bank credit */
    p->len++;
    p->q_bytes += len;
}

static void sw_pcap_open(struct sw *sw)
{
    struct {
        uint32_t magic;
        uint16_t major, minor;
        int32_t zone;
        uint32_t sigfigs, snaplen, linktype;
    } h = {0xa1b23c4d, 2, 4, 0, 0, SW_FRAME_MAX, 1}; /* nanosecond pcap, Ethernet */
    sw->pcap = fopen(sw->cfg.pcap_path, "wb");
    if (!sw->pcap) {
        perror("srdma-switch: pcap");
        return;
    }
    fwrite(&h, sizeof(h), 1, sw->pcap);
}

static void sw_pcap_write(struct sw *sw, const struct sw_frame *fr)
{
    struct timespec ts;
    uint32_t rec[4];
    clock_gettime(CLOCK_REALTIME, &ts);
    rec[0] = (uint32_t)ts.tv_sec;
    rec[1] = (uint32_t)ts.tv_nsec;
    rec[2] = rec[3] = fr->len;
    fwrite(rec, sizeof(rec), 1, sw->pcap);
    fwrite(fr->data, fr->len, 1, sw->pcap);
}

/* Sends what the clock allows; returns the next departure or UINT64_MAX. */
static uint64_t sw_drain(struct sw *sw, int i, uint64_t now_ns)
{
    struct sw_port *p = &sw->port[i];
    /* a bounded batch per call, so other ports and receiving get their turn */
    for (uint32_t n = 0; p->len > 0 && n < 256; n++) {
        struct sw_frame *fr = p->ring[p->head];
        if (sw->cfg.rate_bps > 0 && p->next_tx_ns > now_ns)
            return p->next_tx_ns;
        /* a late wake-up may catch up, a stall may not: past SW_BURST_NS
         * behind, the time is lost as on an idle link, so that no window
         * longer than that sees more than the rate */
        if (p->next_tx_ns + SW_BURST_NS < now_ns) {
            /* counted: a backlogged egress that loses time runs below its
             * rate, and a benchmark must know its bottleneck did */
            p->st.lost_ns += now_ns - SW_BURST_NS - p->next_tx_ns;
            p->next_tx_ns = now_ns - SW_BURST_NS;
        }
        if (send(p->fd, fr->data, fr->len, 0) < 0) {
            if (errno == EAGAIN || errno == ENOBUFS)
                return now_ns + 10000; /* the device is full: retry soon */
            p->st.drops++;
        } else {
            if (p->st.tx_frames++ == 0)
                p->st.first_tx_ns = now_ns;
            p->st.last_tx_ns = now_ns;
            p->st.tx_bytes += fr->len;
            if (sw->pcap && sw->cfg.pcap_port == i)
                sw_pcap_write(sw, fr);
        }
        if (sw->cfg.rate_bps > 0)
            p->next_tx_ns += (uint64_t)((double)fr->len * 8e9 / sw->cfg.rate_bps);
        p->q_bytes -= fr->len;
        free(fr);
        p->head = (p->head + 1) % p->ring_cnt;
        p->len--;
    }
    return p->len ? now_ns : UINT64_MAX;
}

static void sw_receive(struct sw *sw, int in, uint64_t now_ns)
{
    static uint8_t buf[SW_FRAME_MAX];
    struct sw_port *p = &sw->port[in];

    for (int n = 0; n < SW_RX_BATCH; n++) {
        ssize_t len = recv(p->fd, buf, sizeof(buf), MSG_TRUNC);
        int out;
        if (len < 0)
            return;
        if (len < 14 || len > SW_FRAME_MAX) {
            p->st.drops++; /* runt, or an offload train we cannot forward */
            continue;
        }
        p->st.rx_frames++;
        p->st.rx_bytes += (uint64_t)len;
        sw_mac_learn(sw, buf + 6, in);
        out = sw_route_lookup(sw, buf, (size_t)len);
        if (out < 0 && !(buf[0] & 1))
            out = sw_mac_lookup(sw, buf);
        if (out == in)
            continue;
        if (out >= 0) {
            sw_enqueue(sw, out, buf, (uint32_t)len, now_ns);
            continue;
        }
        p->st.flood++;
        for (int o = 0; o < sw->port_cnt; o++)
            if (o != in)
                sw_enqueue(sw, o, buf, (uint32_t)len, now_ns);
    }
}

static void sw_print_stats(struct sw *sw, FILE *f)
{
    double secs = (double)(sw_now_ns() - sw->start_ns) / 1e9;
    fprintf(
        f, "srdma-switch: %.3f s, rate %.3f Gb/s, buffer %llu B, kmin %llu kmax %llu pmax %.3f\n",
        secs, sw->cfg.rate_bps / 1e9, (unsigned long long)sw->cfg.buffer_len,
        (unsigned long long)sw->cfg.kmin_len, (unsigned long long)sw->cfg.kmax_len, sw->cfg.pmax);
    for (int i = 0; i < sw->port_cnt; i++) {
        struct sw_port *p = &sw->port[i];
        struct tpacket_stats ks = {0, 0};
        socklen_t kl = sizeof(ks);
        double busy = (double)(p->st.last_tx_ns - p->st.first_tx_ns) / 1e9;
        getsockopt(p->fd, SOL_PACKET, PACKET_STATISTICS, &ks, &kl);
        fprintf(f,
                "port %d %s: rx_frames=%llu rx_bytes=%llu tx_frames=%llu tx_bytes=%llu "
                "marks=%llu drops=%llu kernel_drops=%u flood=%llu qmax=%llu qp99=%llu "
                "tx_gbps=%.3f lost_ms=%.1f\n",
                i, p->name, (unsigned long long)p->st.rx_frames, (unsigned long long)p->st.rx_bytes,
                (unsigned long long)p->st.tx_frames, (unsigned long long)p->st.tx_bytes,
                (unsigned long long)p->st.marks, (unsigned long long)p->st.drops, ks.tp_drops,
                (unsigned long long)p->st.flood, (unsigned long long)p->st.qmax,
                (unsigned long long)sw_hist_p99(sw, &p->st),
                busy > 0 ? (double)p->st.tx_bytes * 8 / busy / 1e9 : 0.0,
                (double)p->st.lost_ns / 1e6);
    }
    fflush(f);
}

static void sw_csv_row(struct sw *sw, uint64_t now_ns)
{
    double t = (double)(now_ns - sw->start_ns) / 1e9;
    for (int i = 0; i < sw->port_cnt; i++) {
        struct sw_port *p = &sw->port[i];
        fprintf(sw->csv, "%.3f,%d,%s,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu,%llu\n", t, i, p->name,
                (unsigned long long)p->st.rx_frames, (unsigned long long)p->st.rx_bytes,
                (unsigned long long)p->st.tx_frames, (unsigned long long)p->st.tx_bytes,
                (unsigned long long)p->st.marks, (unsigned long long)p->st.drops,
                (unsigned long long)p->q_bytes, (unsigned long long)p->st.qmax,
                (unsigned long long)sw_hist_p99(sw, &p->st));
    }
    fflush(sw->csv);
}

static void sw_usage(void)
{
    fprintf(stderr,
            "usage: srdma-switch --port IF [--port IF ...] [--rate R] [--buffer B]\n"
            "         [--kmin B --kmax B --pmax P] [--pcap FILE [--pcap-port N]]\n"
            "         [--stats-csv FILE [--stats-interval-ms N]] [--duration S] [--seed N]\n"
            "         [--route IPV4=PORT ...]\n"
            "  R in bit/s with k/M/G (0: line rate), B in bytes with K/M;\n"
            "  every egress port gets the same rate, buffer and thresholds.\n");
}

int main(int argc, char **argv)
{
    static struct sw sw;
    static const struct option opts[] = {{"port", required_argument, 0, 'p'},
                                         {"rate", required_argument, 0, 'r'},
                                         {"buffer", required_argument, 0, 'b'},
                                         {"kmin", required_argument, 0, 'k'},
                                         {"kmax", required_argument, 0, 'K'},
                                         {"pmax", required_argument, 0, 'P'},
                                         {"pcap", required_argument, 0, 'w'},
                                         {"pcap-port", required_argument, 0, 'W'},
                                         {"stats-csv", required_argument, 0, 'c'},
                                         {"stats-interval-ms", required_argument, 0, 'i'},
                                         {"duration", required_argument, 0, 'd'},
                                         {"seed", required_argument, 0, 's'},
                                         {"route", required_argument, 0, 'R'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *ports[SW_PORTS_MAX];
    int nports = 0, c;
    struct sigaction sa;
    struct pollfd pfd[SW_PORTS_MAX];
    uint64_t next_csv, csv_every_ns = 1000000000u;

    sw.cfg.buffer_len = 1 << 20;
    sw.cfg.pmax = 1.0;
    sw.cfg.seed = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        int bad = 0;
        switch (c) {
        case 'p':
            if (nports == SW_PORTS_MAX)
                bad = 1;
            else
                ports[nports++] = optarg;
            break;
        case 'r':
            bad = sw_parse_rate(optarg, &sw.cfg.rate_bps);
            break;
        case 'b':
            bad = sw_parse_size(optarg, &sw.cfg.buffer_len);
            break;
        case 'k':
            bad = sw_parse_size(optarg, &sw.cfg.kmin_len);
            break;
        case 'K':
            bad = sw_parse_size(optarg, &sw.cfg.kmax_len);
            break;
        case 'P':
            sw.cfg.pmax = atof(optarg);
            break;
        case 'w':
            sw.cfg.pcap_path = optarg;
            break;
        case 'W':
            sw.cfg.pcap_port = atoi(optarg);
            break;
        case 'c':
            sw.cfg.csv_path = optarg;
            break;
        case 'i':
            csv_every_ns = strtoull(optarg, NULL, 10) * 1000000u;
            bad = csv_every_ns == 0 || csv_every_ns > 60000000000ull;
            break;
        case 'd':
            sw.cfg.duration_s = atof(optarg);
            break;
        case 'R':
            bad = sw_parse_route(&sw.cfg, optarg);
            break;
        case 's':
            sw.cfg.seed = strtoull(optarg, NULL, 0);
            break;
        default:
            sw_usage();
            return c == 'h' ? 0 : 2;
        }
        if (bad) {
            fprintf(stderr, "srdma-switch: bad value: %s\n", optarg);
            return 2;
        }
    }
    if (nports < 2 || sw.cfg.buffer_len < SW_FRAME_MAX ||
        (sw.cfg.kmax_len && sw.cfg.kmax_len <= sw.cfg.kmin_len)) {
        fprintf(stderr,
                "srdma-switch: need two ports or more, a buffer of at least %d B, "
                "and kmax above kmin\n",
                SW_FRAME_MAX);
        sw_usage();
        return 2;
    }
    for (int i = 0; i < sw.cfg.route_cnt; i++)
        if (sw.cfg.route[i].port < 0 || sw.cfg.route[i].port >= nports) {
            fprintf(stderr, "srdma-switch: a route names port %d of %d\n", sw.cfg.route[i].port,
                    nports);
            return 2;
        }
    sw.rng = sw.cfg.seed ? sw.cfg.seed : 1;
    sw.hist_width = sw.cfg.buffer_len / SW_HIST_BUCKETS + 1;
    for (int i = 0; i < nports; i++)
        if (sw_port_open(&sw, ports[i]) < 0)
            return 1;
    if (sw.cfg.pcap_path)
        sw_pcap_open(&sw);
    if (sw.cfg.csv_path) {
        sw.csv = fopen(sw.cfg.csv_path, "w");
        if (sw.csv)
            fprintf(sw.csv, "t,port,name,rx_frames,rx_bytes,tx_frames,tx_bytes,marks,drops,"
                            "q_bytes,qmax,qp99\n");
    }
    /* the clock's wake-ups are microseconds apart: default 50 us slack would
     * turn a smooth rate into bursts */
    prctl(PR_SET_TIMERSLACK, 1UL);
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = sw_on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    for (int i = 0; i < sw.port_cnt; i++)
        pfd[i] = (struct pollfd){.fd = sw.port[i].fd, .events = POLLIN};
    fprintf(stderr, "srdma-switch: %d ports up\n", sw.port_cnt);
    sw.start_ns = sw_now_ns();
    next_csv = sw.start_ns + csv_every_ns;

    while (!sw_stop) {
        uint64_t now = sw_now_ns(), next = now + 100000000u;
        struct timespec to;
        if (sw.cfg.duration_s > 0 && (double)(now - sw.start_ns) / 1e9 >= sw.cfg.duration_s)
            break;
        if (sw.csv && now >= next_csv) {
            sw_csv_row(&sw, now);
            next_csv += csv_every_ns;
        }
        if (sw.csv && next_csv < next)
            next = next_csv;
        for (int i = 0; i < sw.port_cnt; i++) {
            uint64_t t = sw_drain(&sw, i, now);
            if (t < next)
                next = t;
        }
        now = sw_now_ns();
        to.tv_sec = 0;
        to.tv_nsec = next > now ? (long)(next - now) : 0;
        if (ppoll(pfd, (nfds_t)sw.port_cnt, &to, NULL) < 0 && errno != EINTR) {
            perror("srdma-switch: ppoll");
            break;
        }
        now = sw_now_ns();
        /* drain after every port's batch: under a flood of arrivals the
         * egress clock must not wait for a whole round of receiving */
        for (int i = 0; i < sw.port_cnt; i++)
            if (pfd[i].revents & POLLIN) {
                sw_receive(&sw, i, now);
                now = sw_now_ns();
                for (int o = 0; o < sw.port_cnt; o++)
                    sw_drain(&sw, o, now);
            }
    }
    if (sw.csv) {
        sw_csv_row(&sw, sw_now_ns());
        fclose(sw.csv);
    }
    if (sw.pcap)
        fclose(sw.pcap);
    sw_print_stats(&sw, stdout);
    for (int i = 0; i < sw.port_cnt; i++) {
        struct sw_port *p = &sw.port[i];
        for (uint32_t n = 0; n < p->len; n++)
            free(p->ring[(p->head + n) % p->ring_cnt]);
        close(p->fd);
        free(p->ring);
    }
    return 0;
}
