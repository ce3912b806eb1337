/* udp_test.c: the UDP driver on loopback only (127.0.0.0/8 and ::1):
 * auto-claimed addresses, scatter sends with pad, ICRC interoperability
 * with the wire codec's full-packet path in both directions and both IP
 * versions, corrupt/short/long datagrams dropped and counted, explicit
 * binds, address clashes, send errors, and a 1000-packet burst received in
 * batches and in order. Every wait is bounded by a poll() timeout. */
#include "sr_test.h"
#include "sr_udp.h"
#include "sr_util.h"
#include "sr_wire.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <linux/sock_diag.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

enum { WAIT_MS = 2000, RX_KEEP = 16, PKT_MAX = 4096 + 128 };

static const uint8_t v4_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
static const uint8_t v6_loopback[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};

/* Where this run's addresses start, so that concurrent test runs (ctest -j,
 * other engineers' tests) rarely probe the same 127.x addresses. */
static uint32_t base_seed;

/* ---- receive log ---- */
struct rx_log {
    int n; /* packets seen */
    struct {
        uint8_t data[PKT_MAX];
        size_t len;
        uint8_t src[16];
    } pkt[RX_KEEP]; /* the first RX_KEEP, copied */
    uint32_t *psn;  /* when set: the PSN of every packet, in arrival order */
    int psn_cap;
};

static void rx_log_cb(void *arg, const uint8_t *pkt, size_t len, const uint8_t *src_gid)
{
    struct rx_log *log = arg;
    if (log->n < RX_KEEP && len <= PKT_MAX) {
        memcpy(log->pkt[log->n].data, pkt, len);
        log->pkt[log->n].len = len;
        memcpy(log->pkt[log->n].src, src_gid, 16);
    }
    if (log->psn && log->n < log->psn_cap)
        log->psn[log->n] = sr_get_be24(pkt + 9);
    log->n++;
}

/* Read until `want` datagrams (valid or not) were read or WAIT_MS of
 * silence; at most max per sr_udp_recv call. Returns the number read and
 * the number of calls that returned datagrams. */
static int rx_wait(struct sr_udp *u, struct rx_log *log, int want, int max, int *calls)
{
    int got = 0;
    while (got < want) {
        int r = sr_udp_recv(u, rx_log_cb, log, max);
        SR_CHECK(r >= 0 && r <= max);
        if (r < 0)
            break;
        if (r > 0) {
            got += r;
            if (calls)
                (*calls)++;
            continue;
        }
        struct pollfd pfd = {.fd = sr_udp_fd(u), .events = POLLIN};
        if (poll(&pfd, 1, WAIT_MS) <= 0)
            break;
    }
    return got;
}

/* ---- addresses and plain sockets ---- */
static void gid_v4(uint8_t *gid, uint32_t host)
{
    memcpy(gid, v4_prefix, 12);
    gid[12] = 127;
    gid[13] = (uint8_t)(host >> 16);
    gid[14] = (uint8_t)(host >> 8);
    gid[15] = (uint8_t)host;
}

static bool gid_is_v4(const uint8_t *gid)
{
    return memcmp(gid, v4_prefix, 12) == 0;
}

static void sa_of(const uint8_t *gid, uint16_t port, struct sockaddr_storage *ss, socklen_t *len)
{
    memset(ss, 0, sizeof(*ss));
    if (gid_is_v4(gid)) {
        struct sockaddr_in *in = (struct sockaddr_in *)ss;
        in->sin_family = AF_INET;
        in->sin_port = htons(port);
        memcpy(&in->sin_addr, gid + 12, 4);
        *len = sizeof(*in);
    } else {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(port);
        memcpy(&in6->sin6_addr, gid, 16);
        *len = sizeof(*in6);
    }
}

/* A plain UDP socket (a foreign RoCEv2 stack, as far as the driver can
 * tell) bound to gid:port, port 0 = ephemeral; *port_out is the bound
 * port. DF like any RoCEv2 sender, so its IPv4 identification is 0. */
static int plain_open(const uint8_t *gid, uint16_t port, uint16_t *port_out)
{
    bool v4 = gid_is_v4(gid);
    int fd = socket(v4 ? AF_INET : AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int on = 1, pmtu = v4 ? IP_PMTUDISC_DO : IPV6_PMTUDISC_DO;
    if (!v4)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof(on));
    setsockopt(fd, v4 ? IPPROTO_IP : IPPROTO_IPV6, v4 ? IP_MTU_DISCOVER : IPV6_MTU_DISCOVER, &pmtu,
               sizeof(pmtu));
    struct sockaddr_storage ss;
    socklen_t len;
    sa_of(gid, port, &ss, &len);
    if (bind(fd, (struct sockaddr *)&ss, len) != 0 ||
        getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
        close(fd);
        return -1;
    }
    if (port_out)
        *port_out = ntohs(v4 ? ((struct sockaddr_in *)&ss)->sin_port
                             : ((struct sockaddr_in6 *)&ss)->sin6_port);
    return fd;
}

/* A plain socket on a free 127.x address at `port`, searching from seed. */
static int plain_open_v4(uint32_t seed, uint16_t port, uint8_t *gid, uint16_t *port_out)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t host = (seed + i) & 0xffffff;
        if ((host & 0xff) == 0 || (host & 0xff) == 0xff || host == 1)
            continue;
        gid_v4(gid, host);
        int fd = plain_open(gid, port, port_out);
        if (fd >= 0)
            return fd;
    }
    return -1;
}

static ssize_t plain_send(int fd, const uint8_t *gid, uint16_t port, const void *buf, size_t len)
{
    struct sockaddr_storage ss;
    socklen_t salen;
    sa_of(gid, port, &ss, &salen);
    return sendto(fd, buf, len, 0, (struct sockaddr *)&ss, salen);
}

/* Receive one datagram on a plain socket, waiting at most WAIT_MS. */
static ssize_t plain_recv(int fd, uint8_t *buf, size_t cap, uint8_t *src, uint16_t *sport)
{
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    if (poll(&pfd, 1, WAIT_MS) <= 0)
        return -1;
    struct sockaddr_storage ss;
    socklen_t salen = sizeof(ss);
    ssize_t n = recvfrom(fd, buf, cap, MSG_DONTWAIT, (struct sockaddr *)&ss, &salen);
    if (ss.ss_family == AF_INET) {
        struct sockaddr_in *in = (struct sockaddr_in *)&ss;
        memcpy(src, v4_prefix, 12);
        memcpy(src + 12, &in->sin_addr, 4);
        *sport = ntohs(in->sin_port);
    } else {
        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
        memcpy(src, &in6->sin6_addr, 16);
        *sport = ntohs(in6->sin6_port);
    }
    return n;
}

static int dev_open_auto(uint32_t seed, struct sr_udp **u)
{
    struct sr_udp_cfg cfg = {.auto_seed = seed};
    return sr_udp_open(&cfg, u);
}

/* ---- packets, through the wire codec's full-packet path ---- */

/* Transport packet of opcode op with payload_len bytes of a pattern. */
static void make_pkt(struct sr_pkt *p, uint8_t op, uint32_t psn, const uint8_t *payload,
                     uint32_t payload_len)
{
    memset(p, 0, sizeof(*p));
    p->bth.opcode = op;
    p->bth.pkey = 0xffff;
    p->bth.dest_qp = 0x123456;
    p->bth.psn = psn & SR_PSN_MASK;
    p->bth.ack_req = !(sr_opcode_info(op)->flags & SR_OPF_RESPONSE);
    p->reth.va = 0x1000;
    p->reth.rkey = 0xabcd;
    p->reth.dma_len = payload_len;
    p->payload = payload;
    p->payload_len = payload_len;
}

/* IP/UDP headers (as Linux sends them for a DF socket: ID 0) + transport
 * packet + ICRC by sr_icrc_fill. Returns the IP/UDP header length; *len is
 * the whole length. */
static int full_pkt(const struct sr_pkt *p, const uint8_t *src, uint16_t sport, const uint8_t *dst,
                    uint16_t dport, uint8_t *buf, size_t cap, size_t *len)
{
    uint8_t tp[PKT_MAX];
    int tlen = sr_wire_encode(p, tp, sizeof(tp));
    if (tlen < 0)
        return tlen;
    struct sr_l3_addr a = {
        .ipv6 = !gid_is_v4(src), .src_port = sport, .dst_port = dport, .ttl = 64};
    memcpy(a.src, a.ipv6 ? src : src + 12, a.ipv6 ? 16 : 4);
    memcpy(a.dst, a.ipv6 ? dst : dst + 12, a.ipv6 ? 16 : 4);
    int hl = sr_l3_encode(&a, (size_t)tlen, buf, cap);
    if (hl < 0 || (size_t)hl + (size_t)tlen > cap)
        return SR_ERR_NOSPACE;
    memcpy(buf + hl, tp, (size_t)tlen);
    *len = (size_t)hl + (size_t)tlen;
    int err = sr_icrc_fill(buf, *len);
    return err ? err : hl;
}

/* Send p from device u with its payload cut into `pieces` iov pieces. */
static int dev_send(struct sr_udp *u, const struct sr_pkt *p, const uint8_t *dgid, int pieces)
{
    uint8_t hdr[SR_MAX_HDR_LEN];
    int hl = sr_wire_encode_hdr(p, hdr, sizeof(hdr));
    if (hl < 0)
        return hl;
    struct sr_iov iov[SR_UDP_MAX_IOV];
    uint32_t off = 0, cnt = 0;
    for (int i = 0; i < pieces; i++) {
        /* Uneven cuts, and empty pieces when pieces > payload_len. */
        uint32_t take = i == pieces - 1 ? p->payload_len - off
                                        : SR_MIN(p->payload_len - off, (uint32_t)(7 + i * 13));
        iov[cnt++] = (struct sr_iov){.base = p->payload + off, .len = take};
        off += take;
    }
    struct sr_tx_pkt t = {
        .hdr = hdr,
        .hdr_len = (uint32_t)hl,
        .iov = iov,
        .iov_cnt = cnt,
        .payload_len = p->payload_len,
        .pad_len = sr_wire_pad_len(p->payload_len),
        .dgid = dgid,
        .src_port = 0xc000,
    };
    return sr_udp_send(u, &t);
}

static uint8_t pattern[2 * SR_MAX_PMTU]; /* payloads start at small offsets into it */

static void fill_pattern(void)
{
    for (size_t i = 0; i < sizeof(pattern); i++)
        pattern[i] = (uint8_t)(i * 31 + 7);
}

/* ---- tests ---- */

static void test_auto_two_devices(void)
{
    struct sr_udp *a = NULL, *b = NULL;
    SR_CHECK_EQ(dev_open_auto(base_seed, &a), 0);
    /* Same seed: b must walk past a's address. */
    SR_CHECK_EQ(dev_open_auto(base_seed, &b), 0);
    if (!a || !b)
        goto out;
    const uint8_t *ga = sr_udp_addr(a), *gb = sr_udp_addr(b);
    SR_CHECK(memcmp(ga, gb, 16) != 0);
    for (int k = 0; k < 2; k++) {
        const uint8_t *g = k ? gb : ga;
        SR_CHECK(gid_is_v4(g));
        SR_CHECK_EQ(g[12], 127);
        SR_CHECK(g[15] != 0 && g[15] != 255);
        SR_CHECK(!(g[13] == 0 && g[14] == 0 && g[15] == 1));
    }
    SR_CHECK_EQ(sr_udp_port(a), SR_ROCE_UDP_PORT);

    /* The socket is what the driver promises: non-blocking, close-on-exec,
     * no address sharing, DF. */
    int fd = sr_udp_fd(a), v = -1;
    socklen_t vl = sizeof(v);
    SR_CHECK(fcntl(fd, F_GETFL) & O_NONBLOCK);
    SR_CHECK(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    SR_CHECK_EQ(getsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &v, &vl), 0);
    SR_CHECK_EQ(v, 0);
    SR_CHECK_EQ(getsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &v, &vl), 0);
    SR_CHECK_EQ(v, IP_PMTUDISC_DO);

    /* Seeds near 127.0.0.1 and at a .255 host byte skip the reserved ones. */
    struct sr_udp *c = NULL;
    if (dev_open_auto(1, &c) == 0) {
        const uint8_t *g = sr_udp_addr(c);
        SR_CHECK(!(g[13] == 0 && g[14] == 0 && g[15] == 1));
        sr_udp_close(c);
    }
    if (dev_open_auto(0x0102ff, &c) == 0) {
        SR_CHECK(sr_udp_addr(c)[15] != 255 && sr_udp_addr(c)[15] != 0);
        sr_udp_close(c);
    }
out:
    sr_udp_close(a);
    sr_udp_close(b);
}

/* Scatter sends of several opcodes, payload sizes (every pad length) and
 * iov cuts: the receiver gets exactly hdr | payload | pad | ICRC, with the
 * ICRC the wire codec computes over the full IP packet. */
static void test_send_recv_iov(void)
{
    static const struct {
        uint8_t op;
        uint32_t len;
        int pieces;
    } rows[] = {
        {SR_OP_RC | SR_OP_SEND_ONLY, 0, 1},
        {SR_OP_RC | SR_OP_SEND_ONLY, 1, 1},
        {SR_OP_RC | SR_OP_SEND_ONLY, 2, 3},
        {SR_OP_RC | SR_OP_SEND_ONLY, 3, 2},
        {SR_OP_RC | SR_OP_SEND_ONLY, 5, 4},
        {SR_OP_RC | SR_OP_WRITE_ONLY, 1023, 5},
        {SR_OP_RC | SR_OP_WRITE_FIRST, 4096, 32},
        {SR_OP_UC | SR_OP_WRITE_ONLY_IMM, 4095, 9},
        {SR_OP_RC | SR_OP_ACK, 0, 0},
    };
    struct sr_udp *a = NULL, *b = NULL;
    struct rx_log *log = calloc(1, sizeof(*log));
    SR_CHECK_EQ(dev_open_auto(base_seed + 16, &a), 0);
    SR_CHECK_EQ(dev_open_auto(base_seed + 32, &b), 0);
    if (!a || !b || !log)
        goto out;
    uint64_t tx_bytes = 0;
    for (size_t i = 0; i < SR_ARRAY_SIZE(rows); i++) {
        struct sr_pkt p;
        make_pkt(&p, rows[i].op, (uint32_t)i, pattern + i, rows[i].len);
        SR_CHECK_EQ(dev_send(a, &p, sr_udp_addr(b), rows[i].pieces), 0);
        tx_bytes += sr_wire_pkt_len(rows[i].op, rows[i].len);
    }
    int n = (int)SR_ARRAY_SIZE(rows);
    SR_CHECK_EQ(rx_wait(b, log, n, 64, NULL), n);
    SR_CHECK_EQ(log->n, n);
    for (int i = 0; i < n && i < log->n; i++) {
        sr_test_ctx = sr_opcode_name(rows[i].op);
        struct sr_pkt p;
        make_pkt(&p, rows[i].op, (uint32_t)i, pattern + i, rows[i].len);
        uint8_t want[PKT_MAX + 64];
        size_t wlen = 0;
        int hl = full_pkt(&p, sr_udp_addr(a), SR_ROCE_UDP_PORT, sr_udp_addr(b), SR_ROCE_UDP_PORT,
                          want, sizeof(want), &wlen);
        SR_CHECK(hl > 0);
        SR_CHECK_EQ(log->pkt[i].len, wlen - (size_t)hl);
        if (hl > 0 && log->pkt[i].len == wlen - (size_t)hl)
            SR_CHECK_MEM(log->pkt[i].data, want + hl, log->pkt[i].len);
        SR_CHECK_MEM(log->pkt[i].src, sr_udp_addr(a), 16);
        struct sr_pkt d;
        SR_CHECK(sr_wire_decode(log->pkt[i].data, log->pkt[i].len, 4096, &d) > 0);
        SR_CHECK_EQ(d.payload_len, rows[i].len);
    }
    sr_test_ctx = __func__;
    struct sr_udp_stats sa, sb;
    sr_udp_stats(a, &sa);
    sr_udp_stats(b, &sb);
    SR_CHECK_EQ(sa.tx_pkts, n);
    SR_CHECK_EQ(sa.tx_bytes, tx_bytes);
    SR_CHECK_EQ(sa.tx_drops, 0);
    SR_CHECK_EQ(sb.rx_pkts, n);
    SR_CHECK_EQ(sb.rx_bytes, tx_bytes);
    SR_CHECK_EQ(sb.rx_icrc_drops + sb.rx_short_drops + sb.rx_long_drops, 0);
out:
    free(log);
    sr_udp_close(a);
    sr_udp_close(b);
}

/* IPv4 interoperability both ways with a plain socket that uses the wire
 * codec's full-packet path (sr_l3_encode + sr_wire_encode + sr_icrc_fill,
 * then the IP/UDP header stripped, as the kernel adds its own). */
static void test_icrc_interop_v4(void)
{
    struct sr_udp *d = NULL;
    struct rx_log *log = calloc(1, sizeof(*log));
    uint8_t pg[16], buf[PKT_MAX + 64], src[16];
    uint16_t pport = 0, sport = 0;
    SR_CHECK_EQ(dev_open_auto(base_seed + 48, &d), 0);
    /* Foreign sender on an ephemeral source port: RoCEv2 source ports are
     * entropy and must be accepted. */
    int fd = plain_open_v4(base_seed + 64, 0, pg, &pport);
    SR_CHECK(fd >= 0);
    if (!d || fd < 0 || !log)
        goto out;

    /* plain -> driver */
    struct sr_pkt p;
    make_pkt(&p, SR_OP_RC | SR_OP_WRITE_ONLY, 77, pattern, 333);
    size_t len = 0;
    int hl = full_pkt(&p, pg, pport, sr_udp_addr(d), SR_ROCE_UDP_PORT, buf, sizeof(buf), &len);
    SR_CHECK(hl > 0);
    SR_CHECK_EQ(plain_send(fd, sr_udp_addr(d), SR_ROCE_UDP_PORT, buf + hl, len - (size_t)hl),
                (ssize_t)(len - (size_t)hl));
    SR_CHECK_EQ(rx_wait(d, log, 1, 8, NULL), 1);
    SR_CHECK_EQ(log->n, 1);
    SR_CHECK_EQ(log->pkt[0].len, len - (size_t)hl);
    SR_CHECK_MEM(log->pkt[0].data, buf + hl, len - (size_t)hl);
    SR_CHECK_MEM(log->pkt[0].src, pg, 16);
    close(fd);

    /* driver -> plain: the plain socket listens on 4791 and checks the ICRC
     * over the header it reconstructs with sr_l3_encode. */
    fd = plain_open_v4(base_seed + 80, SR_ROCE_UDP_PORT, pg, NULL);
    SR_CHECK(fd >= 0);
    if (fd < 0)
        goto out;
    make_pkt(&p, SR_OP_RC | SR_OP_SEND_ONLY, 0xffffff, pattern + 5, 1001);
    SR_CHECK_EQ(dev_send(d, &p, pg, 3), 0);
    uint8_t l3[SR_IPV4_HDR_LEN + SR_UDP_HDR_LEN];
    ssize_t n = plain_recv(fd, buf + sizeof(l3), sizeof(buf) - sizeof(l3), src, &sport);
    SR_CHECK_EQ(n, (ssize_t)sr_wire_pkt_len(p.bth.opcode, 1001));
    SR_CHECK_MEM(src, sr_udp_addr(d), 16);
    SR_CHECK_EQ(sport, SR_ROCE_UDP_PORT);
    if (n > 0) {
        struct sr_l3_addr a = {.src_port = sport, .ttl = 1, .tos = 0xb8};
        memcpy(a.src, src + 12, 4);
        memcpy(a.dst, pg + 12, 4);
        SR_CHECK_EQ(sr_l3_encode(&a, (size_t)n, buf, sizeof(l3)), (int)sizeof(l3));
        SR_CHECK_EQ(sr_icrc_verify(buf, sizeof(l3) + (size_t)n), 0);
        struct sr_pkt dp;
        SR_CHECK(sr_wire_decode(buf + sizeof(l3), (size_t)n, 4096, &dp) > 0);
        SR_CHECK_EQ(dp.bth.psn, 0xffffff);
        SR_CHECK_MEM(dp.payload, pattern + 5, 1001);
    }
out:
    if (fd >= 0)
        close(fd);
    free(log);
    sr_udp_close(d);
}

/* Bad datagrams from a plain socket: one flipped payload byte, shorter than
 * BTH + ICRC (including empty), larger than any RoCEv2 packet. Each is read,
 * counted and never reaches the callback; a good one still does. */
static void test_bad_datagrams(void)
{
    struct sr_udp *d = NULL;
    struct rx_log *log = calloc(1, sizeof(*log));
    uint8_t pg[16], buf[PKT_MAX + 64];
    uint16_t pport = 0;
    SR_CHECK_EQ(dev_open_auto(base_seed + 96, &d), 0);
    int fd = plain_open_v4(base_seed + 112, 0, pg, &pport);
    SR_CHECK(fd >= 0);
    if (!d || fd < 0 || !log)
        goto out;
    const uint8_t *dg = sr_udp_addr(d);

    struct sr_pkt p;
    make_pkt(&p, SR_OP_RC | SR_OP_SEND_ONLY, 5, pattern, 64);
    size_t len = 0;
    int hl = full_pkt(&p, pg, pport, dg, SR_ROCE_UDP_PORT, buf, sizeof(buf), &len);
    SR_CHECK(hl > 0);
    uint8_t *tp = buf + hl;
    size_t tlen = len - (size_t)hl;
    tp[SR_BTH_LEN + 10] ^= 0x20; /* one payload byte */
    SR_CHECK_EQ(plain_send(fd, dg, SR_ROCE_UDP_PORT, tp, tlen), (ssize_t)tlen);
    tp[SR_BTH_LEN + 10] ^= 0x20;
    tp[tlen - 1] ^= 1; /* the ICRC itself */
    SR_CHECK_EQ(plain_send(fd, dg, SR_ROCE_UDP_PORT, tp, tlen), (ssize_t)tlen);
    tp[tlen - 1] ^= 1;
    SR_CHECK_EQ(plain_send(fd, dg, SR_ROCE_UDP_PORT, tp, SR_BTH_LEN + SR_ICRC_LEN - 1),
                SR_BTH_LEN + SR_ICRC_LEN - 1);
    SR_CHECK_EQ(plain_send(fd, dg, SR_ROCE_UDP_PORT, tp, 0), 0);
    static uint8_t big[9000];
    SR_CHECK_EQ(plain_send(fd, dg, SR_ROCE_UDP_PORT, big, sizeof(big)), (ssize_t)sizeof(big));
    SR_CHECK_EQ(plain_send(fd, dg, SR_ROCE_UDP_PORT, tp, tlen), (ssize_t)tlen); /* good */

    SR_CHECK_EQ(rx_wait(d, log, 6, 64, NULL), 6);
    SR_CHECK_EQ(log->n, 1);
    SR_CHECK_EQ(log->pkt[0].len, tlen);
    SR_CHECK_MEM(log->pkt[0].data, tp, tlen);
    struct sr_udp_stats s;
    sr_udp_stats(d, &s);
    SR_CHECK_EQ(s.rx_icrc_drops, 2);
    SR_CHECK_EQ(s.rx_short_drops, 2);
    SR_CHECK_EQ(s.rx_long_drops, 1);
    SR_CHECK_EQ(s.rx_pkts, 1);
    SR_CHECK_EQ(s.rx_bytes, tlen);
out:
    if (fd >= 0)
        close(fd);
    free(log);
    sr_udp_close(d);
}

/* An explicit 127.0.0.x address; a device can talk to itself. */
static void test_explicit_v4(void)
{
    struct sr_udp *d = NULL;
    struct rx_log *log = calloc(1, sizeof(*log));
    struct sr_udp_cfg cfg = {.sndbuf = 1 << 20, .rcvbuf = 1 << 20};
    int err = SR_ERR_BUSY;
    for (uint32_t x = 2; x < 255 && err == SR_ERR_BUSY; x++) {
        gid_v4(cfg.addr, x);
        err = sr_udp_open(&cfg, &d);
    }
    SR_CHECK_EQ(err, 0);
    if (err || !log)
        goto out;
    SR_CHECK_MEM(sr_udp_addr(d), cfg.addr, 16);
    struct sr_pkt p;
    make_pkt(&p, SR_OP_UC | SR_OP_SEND_ONLY, 9, pattern, 17);
    SR_CHECK_EQ(dev_send(d, &p, cfg.addr, 2), 0);
    SR_CHECK_EQ(rx_wait(d, log, 1, 1, NULL), 1);
    SR_CHECK_EQ(log->n, 1);
    SR_CHECK_MEM(log->pkt[0].src, cfg.addr, 16);
    SR_CHECK_EQ(log->pkt[0].len, sr_wire_pkt_len(p.bth.opcode, 17));
out:
    free(log);
    sr_udp_close(d);
}

/* A taken address fails cleanly; auto-claim walks past a taken one. */
static void test_addr_taken(void)
{
    struct sr_udp *a = NULL, *b = (struct sr_udp *)&b;
    SR_CHECK_EQ(dev_open_auto(base_seed + 128, &a), 0);
    if (!a)
        return;
    struct sr_udp_cfg cfg = {0};
    memcpy(cfg.addr, sr_udp_addr(a), 16);
    errno = 0;
    SR_CHECK_EQ(sr_udp_open(&cfg, &b), SR_ERR_BUSY);
    SR_CHECK_EQ(errno, EADDRINUSE);
    SR_CHECK(b == (struct sr_udp *)&b); /* *out untouched on failure */

    /* Someone else (a plain socket) holds the seed's first address. */
    uint8_t pg[16];
    int fd = plain_open_v4(base_seed + 144, SR_ROCE_UDP_PORT, pg, NULL);
    SR_CHECK(fd >= 0);
    if (fd >= 0) {
        uint32_t host = (uint32_t)pg[13] << 16 | (uint32_t)pg[14] << 8 | pg[15];
        b = NULL;
        SR_CHECK_EQ(dev_open_auto(host, &b), 0);
        if (b) {
            SR_CHECK(memcmp(sr_udp_addr(b), pg, 16) != 0);
            SR_CHECK_EQ(sr_udp_addr(b)[12], 127);
            sr_udp_close(b);
        }
        close(fd);
    }

    /* Not a local address (TEST-NET-1, no traffic), and a wildcard. */
    gid_v4(cfg.addr, 0);
    cfg.addr[12] = 192;
    cfg.addr[14] = 2;
    cfg.addr[15] = 1;
    errno = 0;
    SR_CHECK_EQ(sr_udp_open(&cfg, &b), SR_ERR_INVAL);
    SR_CHECK_EQ(errno, EADDRNOTAVAIL);
    memset(cfg.addr + 12, 0, 4);
    SR_CHECK_EQ(sr_udp_open(&cfg, &b), SR_ERR_INVAL);
    SR_CHECK_EQ(sr_udp_open(NULL, &b), SR_ERR_INVAL);
    SR_CHECK_EQ(sr_udp_open(&cfg, NULL), SR_ERR_INVAL);
    sr_udp_close(a);
    sr_udp_close(NULL);
}

/* Malformed sends are refused and counted; a send to a 127.x address with
 * no listener succeeds (unconnected UDP ignores ICMP errors) and leaves the
 * socket usable. */
static void test_send_errors(void)
{
    struct sr_udp *d = NULL;
    struct rx_log *log = calloc(1, sizeof(*log));
    SR_CHECK_EQ(dev_open_auto(base_seed + 160, &d), 0);
    if (!d || !log)
        goto out;
    uint8_t hdr[SR_MAX_HDR_LEN];
    struct sr_pkt p;
    make_pkt(&p, SR_OP_RC | SR_OP_SEND_ONLY, 1, pattern, 8);
    int hl = sr_wire_encode_hdr(&p, hdr, sizeof(hdr));
    struct sr_iov iov = {.base = pattern, .len = 8};
    uint8_t dgid[16];
    memcpy(dgid, sr_udp_addr(d), 16);
    const struct sr_tx_pkt good = {.hdr = hdr,
                                   .hdr_len = (uint32_t)hl,
                                   .iov = &iov,
                                   .iov_cnt = 1,
                                   .payload_len = 8,
                                   .dgid = dgid};
    struct sr_tx_pkt t = good;
    t.dgid = v6_loopback; /* other family */
    SR_CHECK_EQ(sr_udp_send(d, &t), SR_ERR_INVAL);
    t = good;
    t.pad_len = 4;
    SR_CHECK_EQ(sr_udp_send(d, &t), SR_ERR_INVAL);
    t = good;
    t.payload_len = 9; /* disagrees with the iov */
    SR_CHECK_EQ(sr_udp_send(d, &t), SR_ERR_INVAL);
    t = good;
    t.hdr_len = SR_BTH_LEN - 1;
    SR_CHECK_EQ(sr_udp_send(d, &t), SR_ERR_INVAL);
    t = good;
    t.iov_cnt = SR_UDP_MAX_IOV + 1;
    SR_CHECK_EQ(sr_udp_send(d, &t), SR_ERR_INVAL);
    SR_CHECK_EQ(sr_udp_send(d, NULL), SR_ERR_INVAL);
    struct sr_udp_stats s;
    sr_udp_stats(d, &s);
    SR_CHECK_EQ(s.tx_drops, 6);
    SR_CHECK_EQ(s.tx_pkts, 0);

    uint8_t nobody[16];
    gid_v4(nobody, (base_seed + 0x8000) & 0xffff00); /* host byte 0: nobody binds it */
    nobody[15] = 254;
    t = good;
    t.dgid = nobody;
    for (int i = 0; i < 3; i++)
        SR_CHECK_EQ(sr_udp_send(d, &t), 0);
    SR_CHECK_EQ(sr_udp_send(d, &good), 0);
    SR_CHECK_EQ(rx_wait(d, log, 1, 8, NULL), 1);
    SR_CHECK_EQ(log->n, 1);
    SR_CHECK_EQ(sr_udp_recv(d, rx_log_cb, log, 8), 0);
    SR_CHECK_EQ(sr_udp_recv(d, rx_log_cb, log, 0), 0);
    SR_CHECK_EQ(sr_udp_recv(d, rx_log_cb, log, -1), SR_ERR_INVAL);
out:
    free(log);
    sr_udp_close(d);
}

/* 1000 packets sent back to back arrive complete, in order, and in
 * batches (fewer recv calls than packets). */
static void test_burst(void)
{
    enum { N = 1000 };
    struct sr_udp *a = NULL, *b = NULL;
    struct rx_log *log = calloc(1, sizeof(*log));
    uint32_t *psn = calloc(N, sizeof(*psn));
    SR_CHECK_EQ(dev_open_auto(base_seed + 176, &a), 0);
    SR_CHECK_EQ(dev_open_auto(base_seed + 192, &b), 0);
    if (!a || !b || !log || !psn)
        goto out;
    log->psn = psn;
    log->psn_cap = N;
    int sent = 0;
    for (int i = 0; i < N; i++) {
        struct sr_pkt p;
        make_pkt(&p, SR_OP_RC | SR_OP_SEND_MIDDLE, 0xfffe00u + (uint32_t)i, pattern + i % 64, 256);
        sent += dev_send(a, &p, sr_udp_addr(b), 1 + i % 4) == 0;
    }
    SR_CHECK_EQ(sent, N);
    int calls = 0;
    SR_CHECK_EQ(rx_wait(b, log, N, 1000, &calls), N);
    SR_CHECK_EQ(log->n, N);
    SR_CHECK(calls > 0 && calls <= N / SR_UDP_BATCH + 4);
    int in_order = 0;
    for (int i = 0; i < N && i < log->n; i++)
        in_order += psn[i] == ((0xfffe00u + (uint32_t)i) & SR_PSN_MASK);
    SR_CHECK_EQ(in_order, N);
    struct sr_udp_stats s;
    sr_udp_stats(b, &s);
    SR_CHECK_EQ(s.rx_pkts, N);
    SR_CHECK_EQ(s.rx_icrc_drops, 0);
out:
    free(psn);
    free(log);
    sr_udp_close(a);
    sr_udp_close(b);
}

/* Bytes queued in fd's receive buffer (SO_MEMINFO), 0 if unknown. */
static uint32_t rx_queued(int fd)
{
    uint32_t mi[SK_MEMINFO_VARS] = {0};
    socklen_t len = sizeof(mi);
    return getsockopt(fd, SOL_SOCKET, SO_MEMINFO, mi, &len) ? 0 : mi[SK_MEMINFO_RMEM_ALLOC];
}

/* Sends n 64-byte SEND ONLYs, PSN psn.., from a to b, and waits (WAIT_MS
 * at most) until all of them are queued at b: one's share of b's receive
 * buffer is known from the first, received alone and left queued. */
static void send_and_wait(struct sr_udp *a, struct sr_udp *b, uint32_t psn, int n)
{
    uint32_t one = 0;
    for (int i = 0; i < n; i++) {
        struct sr_pkt p;
        make_pkt(&p, SR_OP_RC | SR_OP_SEND_ONLY, psn + (uint32_t)i, pattern, 64);
        SR_CHECK_EQ(dev_send(a, &p, sr_udp_addr(b), 1), 0);
        if (i == 0) {
            struct pollfd pfd = {.fd = sr_udp_fd(b), .events = POLLIN};
            SR_CHECK_EQ(poll(&pfd, 1, WAIT_MS), 1);
            one = rx_queued(sr_udp_fd(b));
        }
    }
    for (int ms = 0; ms < WAIT_MS && rx_queued(sr_udp_fd(b)) < (uint32_t)n * one; ms++)
        usleep(1000);
    SR_CHECK(one > 0 && rx_queued(sr_udp_fd(b)) >= (uint32_t)n * one);
}

/* sr_udp_poll: after a call that found the socket empty it reads one
 * datagram and returns, the rest staying queued for the next call, which
 * reads its full batch again; sr_udp_recv always reads up to its batch. */
static void test_poll_after_idle(void)
{
    struct sr_udp *a = NULL, *b = NULL;
    struct rx_log *log = calloc(1, sizeof(*log));
    SR_CHECK_EQ(dev_open_auto(base_seed + 224, &a), 0);
    SR_CHECK_EQ(dev_open_auto(base_seed + 240, &b), 0);
    if (!a || !b || !log)
        goto out;
    for (int round = 0; round < 2; round++) {
        bool poll_fn = round == 0;
        int (*rx)(struct sr_udp *, sr_udp_rx_fn, void *, int) = poll_fn ? sr_udp_poll : sr_udp_recv;
        SR_CHECK_EQ(rx(b, rx_log_cb, log, 16), 0); /* empty: idle */
        send_and_wait(a, b, 100, 3);
        log->n = 0;
        SR_CHECK_EQ(rx(b, rx_log_cb, log, 16), poll_fn ? 1 : 3);
        if (poll_fn) /* not idle any more: the others in one call */
            SR_CHECK_EQ(rx(b, rx_log_cb, log, 16), 2);
        SR_CHECK_EQ(log->n, 3);
        for (int i = 0; i < 3 && i < log->n; i++)
            SR_CHECK_EQ(sr_get_be24(log->pkt[i].data + 9), 100u + (uint32_t)i);
    }
out:
    free(log);
    sr_udp_close(a);
    sr_udp_close(b);
}

/* Queue p from device u (sr_udp_queue: batched, GSO when it can). */
static int dev_queue(struct sr_udp *u, const struct sr_pkt *p, const uint8_t *dgid)
{
    uint8_t hdr[SR_MAX_HDR_LEN];
    int hl = sr_wire_encode_hdr(p, hdr, sizeof(hdr));
    if (hl < 0)
        return hl;
    struct sr_iov iov = {.base = p->payload, .len = p->payload_len};
    struct sr_tx_pkt t = {
        .hdr = hdr,
        .hdr_len = (uint32_t)hl,
        .iov = &iov,
        .iov_cnt = p->payload_len ? 1 : 0,
        .payload_len = p->payload_len,
        .pad_len = sr_wire_pad_len(p->payload_len),
        .dgid = dgid,
    };
    return sr_udp_queue(u, &t);
}

/* A GSO train as a foreign RoCEv2 receiver sees it: the kernel cuts it
 * for a socket without GRO and numbers the segments' IPv4 identifications
 * 0, 1, 2, ... (DF, unconnected). Each segment must carry the ICRC of the
 * header it really has (identification k), not the identification-0 ICRC
 * that the driver's own receivers would also accept. Odd payloads (pad 3:
 * a 7-byte pad + ICRC entry shared with the next header) and a shorter
 * last segment. */
static void test_gso_wire_ids(void)
{
    struct sr_udp *d = NULL;
    uint8_t pg[16], buf[PKT_MAX + 64], src[16];
    uint16_t sport = 0;
    SR_CHECK_EQ(dev_open_auto(base_seed + 1000, &d), 0);
    int fd = plain_open_v4(base_seed + 1016, SR_ROCE_UDP_PORT, pg, NULL);
    SR_CHECK(fd >= 0);
    if (!d || fd < 0)
        goto out;
    enum { SEGS = 9 };
    struct sr_pkt p;
    for (uint32_t i = 0; i < SEGS; i++) {
        make_pkt(&p, SR_OP_RC | SR_OP_SEND_ONLY, 700 + i, pattern + i, i < SEGS - 1 ? 101 : 50);
        SR_CHECK_EQ(dev_queue(d, &p, pg), 0);
    }
    SR_CHECK_EQ(sr_udp_flush(d), 0);
    struct sr_udp_stats s;
    sr_udp_stats(d, &s);
    SR_CHECK_EQ(s.tx_gso_sends, 1);
    uint8_t l3[SR_IPV4_HDR_LEN + SR_UDP_HDR_LEN];
    for (uint16_t k = 0; k < SEGS; k++) {
        sr_test_ctx = "segment";
        uint32_t plen = k < SEGS - 1 ? 101 : 50;
        ssize_t n = plain_recv(fd, buf + sizeof(l3), sizeof(buf) - sizeof(l3), src, &sport);
        SR_CHECK_EQ(n, (ssize_t)sr_wire_pkt_len(SR_OP_RC | SR_OP_SEND_ONLY, plen));
        if (n <= 0)
            break;
        struct sr_l3_addr a = {.src_port = sport, .ip_id = k};
        memcpy(a.src, src + 12, 4);
        memcpy(a.dst, pg + 12, 4);
        SR_CHECK_EQ(sr_l3_encode(&a, (size_t)n, buf, sizeof(l3)), (int)sizeof(l3));
        SR_CHECK_EQ(sr_icrc_verify(buf, sizeof(l3) + (size_t)n), 0);
        if (k) { /* the identification matters: 0 would not do */
            a.ip_id = 0;
            sr_l3_encode(&a, (size_t)n, buf, sizeof(l3));
            SR_CHECK_EQ(sr_icrc_verify(buf, sizeof(l3) + (size_t)n), SR_ERR_WIRE_ICRC);
        }
        struct sr_pkt dp;
        SR_CHECK(sr_wire_decode(buf + sizeof(l3), (size_t)n, 4096, &dp) > 0);
        SR_CHECK_EQ(dp.bth.psn, 700u + k);
        SR_CHECK_MEM(dp.payload, pattern + k, plen);
    }
out:
    if (fd >= 0)
        close(fd);
    sr_udp_close(d);
}

/* Multipath (sr_udp_cfg.paths): packet k's sr_tx_pkt.path picks the
 * socket, so the source port; path 0 is the bound port, the others
 * distinct; a path beyond the count wraps; every datagram carries the ICRC
 * of the header it really has (its own source port), queued or sent one
 * by one, and the queue's order holds across sockets. */
static void test_paths(void)
{
    struct sr_udp *d = NULL;
    uint8_t pg[16], buf[PKT_MAX + 64], src[16];
    struct sr_udp_cfg cfg = {.auto_seed = base_seed + 1100, .paths = 4};
    SR_CHECK_EQ(sr_udp_open(&cfg, &d), 0);
    int fd = plain_open_v4(base_seed + 1116, SR_ROCE_UDP_PORT, pg, NULL);
    SR_CHECK(fd >= 0);
    if (!d || fd < 0)
        goto out;
    enum { N = 10 };
    static const uint8_t path_of[N] = {0, 1, 2, 3, 0, 1, 2, 3, 5, 2};
    for (uint32_t i = 0; i < N; i++) {
        struct sr_pkt p;
        make_pkt(&p, SR_OP_RC | SR_OP_SEND_ONLY, 900 + i, pattern + i, 200);
        uint8_t hdr[SR_MAX_HDR_LEN];
        int hl = sr_wire_encode_hdr(&p, hdr, sizeof(hdr));
        struct sr_iov iov = {.base = p.payload, .len = p.payload_len};
        struct sr_tx_pkt t = {.hdr = hdr,
                              .hdr_len = (uint32_t)hl,
                              .iov = &iov,
                              .iov_cnt = 1,
                              .payload_len = p.payload_len,
                              .pad_len = sr_wire_pad_len(p.payload_len),
                              .dgid = pg,
                              .path = path_of[i]};
        SR_CHECK_EQ(i == N - 1 ? sr_udp_send(d, &t) : sr_udp_queue(d, &t), 0);
        if (i == N - 2)
            SR_CHECK_EQ(sr_udp_flush(d), 0);
    }
    uint16_t port_of[N] = {0};
    uint8_t l3[SR_IPV4_HDR_LEN + SR_UDP_HDR_LEN];
    for (uint32_t k = 0; k < N; k++) {
        uint16_t sport = 0;
        ssize_t n = plain_recv(fd, buf + sizeof(l3), sizeof(buf) - sizeof(l3), src, &sport);
        SR_CHECK_EQ(n, (ssize_t)sr_wire_pkt_len(SR_OP_RC | SR_OP_SEND_ONLY, 200));
        if (n <= 0)
            break;
        struct sr_l3_addr a = {.src_port = sport};
        memcpy(a.src, src + 12, 4);
        memcpy(a.dst, pg + 12, 4);
        SR_CHECK_EQ(sr_l3_encode(&a, (size_t)n, buf, sizeof(l3)), (int)sizeof(l3));
        SR_CHECK_EQ(sr_icrc_verify(buf, sizeof(l3) + (size_t)n), 0);
        struct sr_pkt dp;
        SR_CHECK(sr_wire_decode(buf + sizeof(l3), (size_t)n, 4096, &dp) > 0);
        SR_CHECK_EQ(dp.bth.psn, 900u + k); /* in the order queued */
        port_of[k] = sport;
    }
    SR_CHECK_EQ(port_of[0], SR_ROCE_UDP_PORT);
    for (uint32_t k = 0; k < N; k++)
        for (uint32_t j = 0; j < N; j++)
            SR_CHECK((port_of[k] == port_of[j]) == (path_of[k] % 4 == path_of[j] % 4));
out:
    if (fd >= 0)
        close(fd);
    sr_udp_close(d);
}

/* GSO trains: same-size packets to one peer leave as one send (a shorter
 * one may end the train, another peer starts a new one); a GRO receiver
 * gets the train as one batch, a receiver without GRO gets the segments
 * one by one with identifications 1, 2, ... and still accepts them; every
 * byte arrives, in order. With no_gso every packet is its own send. */
static void test_gso_trains(void)
{
    struct sr_udp *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    struct rx_log *lb = calloc(1, sizeof(*lb)), *lc = calloc(1, sizeof(*lc));
    struct rx_log *lb2 = calloc(1, sizeof(*lb2));
    struct sr_udp_cfg ca = {.auto_seed = base_seed + 400};
    struct sr_udp_cfg cc = {.auto_seed = base_seed + 432, .no_gro = true};
    struct sr_udp_cfg cd = {.auto_seed = base_seed + 448, .no_gso = true};
    SR_CHECK_EQ(sr_udp_open(&ca, &a), 0);
    SR_CHECK_EQ(dev_open_auto(base_seed + 416, &b), 0);
    SR_CHECK_EQ(sr_udp_open(&cc, &c), 0);
    SR_CHECK_EQ(sr_udp_open(&cd, &d), 0);
    if (!a || !b || !c || !d || !lb || !lc || !lb2)
        goto out;
    const uint8_t *gb = sr_udp_addr(b), *gc = sr_udp_addr(c);
    struct sr_pkt p;
    /* to b: 15 full 4 KiB SEND MIDDLEs and a 100-byte SEND LAST (train 1) */
    for (uint32_t i = 0; i < 16; i++) {
        make_pkt(&p, SR_OP_RC | (i < 15 ? SR_OP_SEND_MIDDLE : SR_OP_SEND_LAST), 100 + i,
                 pattern + i, i < 15 ? 4096 : 100);
        SR_CHECK_EQ(dev_queue(a, &p, gb), 0);
    }
    for (uint32_t i = 0; i < 3; i++) { /* to c: train 2 */
        make_pkt(&p, SR_OP_RC | SR_OP_SEND_MIDDLE, 200 + i, pattern + 20 + i, 1024);
        SR_CHECK_EQ(dev_queue(a, &p, gc), 0);
    }
    for (uint32_t i = 0; i < 2; i++) { /* to b again: train 3 */
        make_pkt(&p, SR_OP_RC | SR_OP_SEND_MIDDLE, 300 + i, pattern + 30 + i, 512);
        SR_CHECK_EQ(dev_queue(a, &p, gb), 0);
    }
    SR_CHECK_EQ(sr_udp_flush(a), 0);
    struct sr_udp_stats s;
    sr_udp_stats(a, &s);
    SR_CHECK_EQ(s.tx_pkts, 21);
    SR_CHECK_EQ(s.tx_gso_sends, 3);
    SR_CHECK_EQ(s.tx_drops, 0);

    SR_CHECK_EQ(rx_wait(b, lb, 2, 64, NULL), 2); /* one GRO batch each */
    SR_CHECK_EQ(lb->n, 18);
    for (int i = 0; i < 16 && i < lb->n; i++) {
        size_t plen = i < 15 ? 4096 : 100;
        SR_CHECK_EQ(lb->pkt[i].len, SR_BTH_LEN + plen + sr_wire_pad_len((uint32_t)plen) + 4);
        SR_CHECK_EQ(sr_get_be24(lb->pkt[i].data + 9), 100u + (uint32_t)i);
        SR_CHECK_MEM(lb->pkt[i].data + SR_BTH_LEN, pattern + i, plen);
    }
    sr_udp_stats(b, &s);
    SR_CHECK_EQ(s.rx_pkts, 18);
    SR_CHECK_EQ(s.rx_icrc_drops, 0);
    SR_CHECK_EQ(s.rx_gro_bufs, 2);

    SR_CHECK_EQ(rx_wait(c, lc, 3, 64, NULL), 3); /* the kernel cut the train */
    SR_CHECK_EQ(lc->n, 3);
    for (int i = 0; i < 3 && i < lc->n; i++)
        SR_CHECK_MEM(lc->pkt[i].data + SR_BTH_LEN, pattern + 20 + i, 1024);
    sr_udp_stats(c, &s);
    SR_CHECK_EQ(s.rx_pkts, 3);
    SR_CHECK_EQ(s.rx_icrc_drops, 0);
    SR_CHECK_EQ(s.rx_gro_bufs, 0);

    /* no_gso: five packets, five sends */
    for (uint32_t i = 0; i < 5; i++) {
        make_pkt(&p, SR_OP_RC | SR_OP_SEND_MIDDLE, 400 + i, pattern + i, 2048);
        SR_CHECK_EQ(dev_queue(d, &p, gb), 0);
    }
    SR_CHECK_EQ(sr_udp_flush(d), 0);
    sr_udp_stats(d, &s);
    SR_CHECK_EQ(s.tx_pkts, 5);
    SR_CHECK_EQ(s.tx_gso_sends, 0);
    SR_CHECK_EQ(rx_wait(b, lb2, 5, 64, NULL), 5);
    SR_CHECK_EQ(lb2->n, 5);
out:
    free(lb);
    free(lb2);
    free(lc);
    sr_udp_close(a);
    sr_udp_close(b);
    sr_udp_close(c);
    sr_udp_close(d);
}

/* sr_tx_pkt.flush: the caller may change the payload memory once queue
 * returns. A few bytes are copied (nothing is sent until the next flush,
 * and what arrives is the data at queue time); beyond 8 KiB the queue is
 * sent at once. */
static void test_flush_flag(void)
{
    struct sr_udp *a = NULL, *b = NULL;
    struct rx_log *log = calloc(1, sizeof(*log));
    static uint8_t buf[3 * 4096];
    SR_CHECK_EQ(dev_open_auto(base_seed + 496, &a), 0);
    SR_CHECK_EQ(dev_open_auto(base_seed + 512, &b), 0);
    if (!a || !b || !log)
        goto out;
    const uint8_t *gb = sr_udp_addr(b);
    memcpy(buf, pattern, sizeof(buf) < sizeof(pattern) ? sizeof(buf) : sizeof(pattern));
    struct sr_pkt p;
    uint8_t hdr[SR_MAX_HDR_LEN];
    struct sr_iov iov;
    struct sr_tx_pkt t;
    /* two 1 KiB READ responses, the second flagged: copied, not sent */
    for (uint32_t i = 0; i < 2; i++) {
        make_pkt(&p, SR_OP_RC | SR_OP_READ_RESP_MIDDLE, 50 + i, buf + i * 1024, 1024);
        int hl = sr_wire_encode_hdr(&p, hdr, sizeof(hdr));
        iov = (struct sr_iov){.base = buf + i * 1024, .len = 1024};
        t = (struct sr_tx_pkt){.hdr = hdr,
                               .hdr_len = (uint32_t)hl,
                               .iov = &iov,
                               .iov_cnt = 1,
                               .payload_len = 1024,
                               .dgid = gb,
                               .flush = i == 1};
        SR_CHECK_EQ(sr_udp_queue(a, &t), 0);
    }
    struct sr_udp_stats s;
    sr_udp_stats(a, &s);
    SR_CHECK_EQ(s.tx_pkts, 0);
    memset(buf, 0xee, 2048); /* the caller reuses its memory */
    SR_CHECK_EQ(sr_udp_flush(a), 0);
    SR_CHECK_EQ(rx_wait(b, log, 1, 64, NULL), 1);
    SR_CHECK_EQ(log->n, 2);
    for (int i = 0; i < 2 && i < log->n; i++)
        SR_CHECK_MEM(log->pkt[i].data + SR_BTH_LEN, pattern + i * 1024, 1024);
    /* three 4 KiB responses, the last flagged: 12 KiB, sent at once */
    memcpy(buf, pattern, sizeof(buf) < sizeof(pattern) ? sizeof(buf) : sizeof(pattern));
    for (uint32_t i = 0; i < 3; i++) {
        make_pkt(&p, SR_OP_RC | SR_OP_READ_RESP_MIDDLE, 60 + i, buf + i * 4096, 4096);
        int hl = sr_wire_encode_hdr(&p, hdr, sizeof(hdr));
        iov = (struct sr_iov){.base = buf + (size_t)i * 4096, .len = 4096};
        t = (struct sr_tx_pkt){.hdr = hdr,
                               .hdr_len = (uint32_t)hl,
                               .iov = &iov,
                               .iov_cnt = 1,
                               .payload_len = 4096,
                               .dgid = gb,
                               .flush = i == 2};
        SR_CHECK_EQ(sr_udp_queue(a, &t), 0);
    }
    sr_udp_stats(a, &s);
    SR_CHECK_EQ(s.tx_pkts, 5);
out:
    free(log);
    sr_udp_close(a);
    sr_udp_close(b);
}

/* Which IPv4 identifications a receiver accepts: those of a GSO train
 * (0..63), not others. Forged with a plain socket (whose datagrams really
 * carry identification 0): the ICRC is what decides. */
static void test_ipv4_id_window(void)
{
    struct sr_udp *d = NULL;
    struct rx_log *log = calloc(1, sizeof(*log));
    uint8_t pg[16], buf[PKT_MAX + 64];
    uint16_t pport = 0;
    SR_CHECK_EQ(dev_open_auto(base_seed + 464, &d), 0);
    int fd = plain_open_v4(base_seed + 480, 0, pg, &pport);
    SR_CHECK(fd >= 0);
    if (!d || fd < 0 || !log)
        goto out;
    const uint8_t *dg = sr_udp_addr(d);
    static const uint16_t ids[] = {0, 1, 63, 64, 1000};
    for (unsigned i = 0; i < 5; i++) {
        struct sr_pkt p;
        make_pkt(&p, SR_OP_RC | SR_OP_SEND_ONLY, 7 + i, pattern, 300);
        size_t len = 0;
        int hl = full_pkt(&p, pg, pport, dg, SR_ROCE_UDP_PORT, buf, sizeof(buf), &len);
        SR_CHECK(hl > 0);
        sr_put_be16(buf + 4, ids[i]);
        SR_CHECK_EQ(sr_icrc_fill(buf, len), 0);
        SR_CHECK_EQ(plain_send(fd, dg, SR_ROCE_UDP_PORT, buf + hl, len - (size_t)hl),
                    (ssize_t)(len - (size_t)hl));
    }
    SR_CHECK_EQ(rx_wait(d, log, 5, 64, NULL), 5);
    SR_CHECK_EQ(log->n, 3);
    for (int i = 0; i < 3 && i < log->n; i++)
        SR_CHECK_EQ(sr_get_be24(log->pkt[i].data + 9), 7u + (uint32_t)i);
    struct sr_udp_stats s;
    sr_udp_stats(d, &s);
    SR_CHECK_EQ(s.rx_icrc_drops, 2);
out:
    if (fd >= 0)
        close(fd);
    free(log);
    sr_udp_close(d);
}

/* IPv6 on ::1: self-talk, and interoperability both ways with the wire
 * codec's IPv6 full-packet path. Skipped when ::1 is unavailable. */
static void test_ipv6(void)
{
    struct sr_udp *d = NULL;
    struct rx_log *log = calloc(1, sizeof(*log));
    uint8_t buf[PKT_MAX + 64], src[16];
    uint16_t pport = 0, sport = 0;
    int fd = -1;
    struct sr_udp_cfg cfg = {0};
    memcpy(cfg.addr, v6_loopback, 16);
    int err = sr_udp_open(&cfg, &d);
    if (err) {
        printf("test_ipv6: skipped: cannot bind [::1]:4791 (%s, errno %d)\n", sr_err_name(err),
               errno);
        goto out;
    }
    if (!log)
        goto out;
    int v = -1;
    socklen_t vl = sizeof(v);
    SR_CHECK_EQ(getsockopt(sr_udp_fd(d), IPPROTO_IPV6, IPV6_MTU_DISCOVER, &v, &vl), 0);
    SR_CHECK_EQ(v, IPV6_PMTUDISC_DO);
    SR_CHECK_EQ(getsockopt(sr_udp_fd(d), IPPROTO_IPV6, IPV6_V6ONLY, &v, &vl), 0);
    SR_CHECK_EQ(v, 1);

    /* self */
    struct sr_pkt p;
    make_pkt(&p, SR_OP_RC | SR_OP_WRITE_FIRST, 3, pattern, 4096);
    SR_CHECK_EQ(dev_send(d, &p, v6_loopback, 7), 0);
    SR_CHECK_EQ(rx_wait(d, log, 1, 4, NULL), 1);
    SR_CHECK_EQ(log->n, 1);
    SR_CHECK_MEM(log->pkt[0].src, v6_loopback, 16);
    SR_CHECK_EQ(log->pkt[0].len, sr_wire_pkt_len(p.bth.opcode, 4096));

    /* plain -> driver, from an ephemeral port */
    fd = plain_open(v6_loopback, 0, &pport);
    SR_CHECK(fd >= 0);
    if (fd < 0)
        goto out;
    make_pkt(&p, SR_OP_RC | SR_OP_SEND_LAST, 4, pattern + 1, 77);
    size_t len = 0;
    int hl =
        full_pkt(&p, v6_loopback, pport, v6_loopback, SR_ROCE_UDP_PORT, buf, sizeof(buf), &len);
    SR_CHECK_EQ(hl, SR_IPV6_HDR_LEN + SR_UDP_HDR_LEN);
    SR_CHECK_EQ(plain_send(fd, v6_loopback, SR_ROCE_UDP_PORT, buf + hl, len - (size_t)hl),
                (ssize_t)(len - (size_t)hl));
    SR_CHECK_EQ(rx_wait(d, log, 1, 4, NULL), 1);
    SR_CHECK_EQ(log->n, 2);
    SR_CHECK_EQ(log->pkt[1].len, len - (size_t)hl);
    SR_CHECK_MEM(log->pkt[1].data, buf + hl, len - (size_t)hl);
    close(fd);
    fd = -1;

    /* driver -> plain: the plain socket takes [::1]:4791, so the device
     * moves to another port to send to it. */
    sr_udp_close(d);
    d = NULL;
    fd = plain_open(v6_loopback, SR_ROCE_UDP_PORT, NULL);
    SR_CHECK(fd >= 0);
    err = SR_ERR_BUSY;
    for (uint32_t i = 0; i < 64 && err == SR_ERR_BUSY; i++) {
        cfg.port = (uint16_t)(20000 + (base_seed + i) % 20000);
        err = sr_udp_open(&cfg, &d);
    }
    SR_CHECK_EQ(err, 0);
    if (fd < 0 || err)
        goto out;
    make_pkt(&p, SR_OP_UD | SR_OP_SEND_ONLY_IMM, 6, pattern + 2, 502);
    p.deth.qkey = 0x11111111;
    p.deth.src_qp = 0x42;
    SR_CHECK_EQ(dev_send(d, &p, v6_loopback, 5), 0);
    ssize_t n = plain_recv(fd, buf + 48, sizeof(buf) - 48, src, &sport);
    SR_CHECK_EQ(n, (ssize_t)sr_wire_pkt_len(p.bth.opcode, 502));
    SR_CHECK_EQ(sport, cfg.port);
    SR_CHECK_MEM(src, v6_loopback, 16);
    if (n > 0) {
        struct sr_l3_addr a = {.ipv6 = true, .src_port = sport, .ttl = 9, .flow_label = 0x12345};
        memcpy(a.src, src, 16);
        memcpy(a.dst, v6_loopback, 16);
        SR_CHECK_EQ(sr_l3_encode(&a, (size_t)n, buf, 48), 48);
        SR_CHECK_EQ(sr_icrc_verify(buf, 48 + (size_t)n), 0);
    }
out:
    if (fd >= 0)
        close(fd);
    free(log);
    sr_udp_close(d);
}

/* Each test claims addresses from its own offset of this run's base. */
/* SOFTRDMA_FAULT: the parser, and each fault applied on receive. */
static void test_fault_parse(void)
{
    struct sr_fault_cfg f;
    const char *bad = NULL;
    SR_CHECK_EQ(
        sr_fault_parse("loss=0.01,reorder=0.02,dup=0.001,corrupt=0.5,delay_us=50,seed=9", &f, &bad),
        0);
    SR_CHECK(f.on);
    SR_CHECK(f.loss == 0.01 && f.reorder == 0.02 && f.dup == 0.001 && f.corrupt == 0.5);
    SR_CHECK_EQ(f.delay_ns, 50000);
    SR_CHECK_EQ(f.seed, 9);
    SR_CHECK_EQ(sr_fault_parse("", &f, &bad), 0);
    SR_CHECK(!f.on);
    static const char *const wrong[] = {"loss=2",    "loss=-0.1",  "loss",    "speed=1",
                                        "loss=0.1,", "delay_us=x", "seed=-1", "dup=0.1x"};
    for (size_t i = 0; i < SR_ARRAY_SIZE(wrong); i++) {
        sr_test_ctx = wrong[i];
        SR_CHECK_EQ(sr_fault_parse(wrong[i], &f, &bad), SR_ERR_INVAL);
    }
}

/* A receiver with the given faults; n packets from a clean sender. */
static void fault_run(const char *spec, int n, struct rx_log *log, struct sr_udp_stats *st)
{
    struct sr_udp_cfg rc = {.auto_seed = base_seed + 901};
    SR_CHECK_EQ(sr_fault_parse(spec, &rc.fault, NULL), 0);
    struct sr_udp *rx = NULL, *tx = NULL;
    SR_CHECK_EQ(sr_udp_open(&rc, &rx), 0);
    SR_CHECK_EQ(dev_open_auto(base_seed + 950, &tx), 0);
    if (!rx || !tx)
        return;
    for (int i = 0; i < n; i++) {
        struct sr_pkt p;
        make_pkt(&p, 0x04, (uint32_t)i, pattern, 64);
        SR_CHECK_EQ(dev_send(tx, &p, sr_udp_addr(rx), 1), 0);
    }
    rx_wait(rx, log, n, SR_UDP_BATCH, NULL);
    /* held datagrams come out once their time has come */
    for (int k = 0; k < 100 && sr_udp_next_deadline(rx) != UINT64_MAX; k++) {
        usleep(1000);
        sr_udp_recv(rx, rx_log_cb, log, SR_UDP_BATCH);
    }
    sr_udp_stats(rx, st);
    sr_udp_close(rx);
    sr_udp_close(tx);
}

static void test_faults(void)
{
    static uint32_t psns[1000];
    struct rx_log *log = calloc(1, sizeof(*log));
    struct sr_udp_stats st;

    sr_test_ctx = "loss=1";
    memset(log, 0, sizeof(*log));
    fault_run("loss=1", 50, log, &st);
    SR_CHECK_EQ(log->n, 0);
    SR_CHECK_EQ(st.fault_lost, 50);

    sr_test_ctx = "corrupt=1: the ICRC catches every one";
    memset(log, 0, sizeof(*log));
    fault_run("corrupt=1,seed=4", 50, log, &st);
    SR_CHECK_EQ(log->n, 0);
    SR_CHECK_EQ(st.fault_corrupted, 50);
    SR_CHECK_EQ(st.rx_icrc_drops, 50);

    sr_test_ctx = "dup=1";
    memset(log, 0, sizeof(*log));
    fault_run("dup=1", 50, log, &st);
    SR_CHECK_EQ(log->n, 100);
    SR_CHECK_EQ(st.fault_dup, 50);

    sr_test_ctx = "loss=0.2";
    memset(log, 0, sizeof(*log));
    fault_run("loss=0.2,seed=7", 1000, log, &st);
    SR_CHECK(st.fault_lost > 120 && st.fault_lost < 280);
    SR_CHECK_EQ((uint64_t)log->n + st.fault_lost, 1000);

    sr_test_ctx = "reorder=0.3: later datagrams overtake";
    memset(log, 0, sizeof(*log));
    log->psn = psns;
    log->psn_cap = 1000;
    fault_run("reorder=0.3,seed=5", 200, log, &st);
    SR_CHECK_EQ(log->n, 200);
    SR_CHECK(st.fault_reordered > 20);
    int inversions = 0;
    for (int i = 1; i < log->n && i < 200; i++)
        inversions += psns[i] < psns[i - 1];
    SR_CHECK(inversions > 0);

    sr_test_ctx = "delay_us=2000";
    memset(log, 0, sizeof(*log));
    log->psn = NULL;
    struct sr_udp_cfg rc = {.auto_seed = base_seed + 960};
    SR_CHECK_EQ(sr_fault_parse("delay_us=2000", &rc.fault, NULL), 0);
    struct sr_udp *rx = NULL, *tx = NULL;
    SR_CHECK_EQ(sr_udp_open(&rc, &rx), 0);
    SR_CHECK_EQ(dev_open_auto(base_seed + 970, &tx), 0);
    if (rx && tx) {
        struct sr_pkt p;
        make_pkt(&p, 0x04, 1, pattern, 64);
        SR_CHECK_EQ(dev_send(tx, &p, sr_udp_addr(rx), 1), 0);
        rx_wait(rx, log, 1, SR_UDP_BATCH, NULL);
        SR_CHECK_EQ(log->n, 0); /* read, but held */
        SR_CHECK(sr_udp_next_deadline(rx) != UINT64_MAX);
        usleep(3000);
        sr_udp_recv(rx, rx_log_cb, log, SR_UDP_BATCH);
        SR_CHECK_EQ(log->n, 1);
        SR_CHECK_EQ(sr_udp_next_deadline(rx), UINT64_MAX);
    }
    sr_udp_close(rx);
    sr_udp_close(tx);
    free(log);
}

int main(void)
{
    base_seed = ((uint32_t)getpid() * 256u) & 0xffffffu;
    fill_pattern();
    SR_RUN(test_auto_two_devices);
    SR_RUN(test_send_recv_iov);
    SR_RUN(test_icrc_interop_v4);
    SR_RUN(test_bad_datagrams);
    SR_RUN(test_explicit_v4);
    SR_RUN(test_addr_taken);
    SR_RUN(test_send_errors);
    SR_RUN(test_burst);
    SR_RUN(test_poll_after_idle);
    SR_RUN(test_gso_trains);
    SR_RUN(test_gso_wire_ids);
    SR_RUN(test_ipv4_id_window);
    SR_RUN(test_flush_flag);
    SR_RUN(test_ipv6);
    SR_RUN(test_paths);
    SR_RUN(test_fault_parse);
    SR_RUN(test_faults);
    return SR_TEST_RESULT();
}
