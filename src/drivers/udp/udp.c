/* udp.c: RoCEv2 datagrams over a UDP socket (IBTA Vol 1 Annex A17.4: UDP
 * destination port 4791). Owns the socket, the loopback auto-claim, the
 * receive batch and the ICRC on both sides.
 *
 * The ICRC (Annex A17.3.3) covers the IP and UDP headers, which a UDP
 * socket neither writes nor sees. Both sides therefore rebuild the header
 * Linux puts on the wire for this socket and run the CRC over it:
 *  - IPv4: version/IHL 0x45, total length, identification 0, DF, protocol
 *    17, source, destination. With IP_PMTUDISC_DO an unconnected socket
 *    sends DF with identification 0 (without it the ID is a per-destination
 *    counter no receiver can guess). TOS, TTL and the header checksum are
 *    masked by the ICRC, so their values do not matter.
 *  - IPv6: payload length, next header 17, source, destination (traffic
 *    class, flow label and hop limit are masked). IPV6_PMTUDISC_DO keeps
 *    fragment headers away.
 *  - UDP: source port, destination port, length (checksum masked).
 * On receive the source comes from msg_name and the destination is the
 * bound address (never a wildcard, so it is known).
 *
 * Offloads. Consecutive queued packets of one size to one peer go out as
 * one UDP GSO send (UDP_SEGMENT; a shorter packet may end the train), and
 * the socket takes GRO batches (UDP_GRO), which are split back into their
 * datagrams here. The kernel numbers the IPv4 identification of the
 * segments of a GSO send 0, 1, 2, ... (DF, unconnected socket), so segment
 * k's ICRC is the one with identification k: the sender computes it with
 * 0 and adds the term identification k adds (sr_icrc_ipv4_id_term). The
 * part of the CRC before the BTH is the same for all the packets of one
 * length between two address:port pairs, and is kept (udp_pfx).
 *
 * A receiver cannot tell where a datagram sat in its sender's train (GRO
 * batches need not line up with GSO sends, and a socket without GRO gets
 * the segments one by one), so an IPv4 ICRC is accepted with any
 * identification 0..63: the CRC is computed once, with 0, and a mismatch
 * is looked up among the 63 terms the other identifications add. That
 * leaves 26 of the ICRC's 32 bits to catch corruption. IPv6 has no
 * identification.
 */
#include "sr_udp.h"
#include "sr_util.h"
#include "sr_wire.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

enum {
    UDP_DEFAULT_BUF = 8 << 20,
    /* The largest RoCEv2 transport packet (headers, a 4096-byte PMTU
     * payload, pad, ICRC) fits with room to spare; larger is malformed. */
    UDP_RX_DATA = SR_MAX_PMTU + 128,
    /* A GRO batch: up to the largest UDP payload. */
    UDP_RX_GRO = 65536,
    UDP_RX_GRO_VLEN = 16,
    /* GSO: segments per send (the kernel's UDP_MAX_SEGMENTS is 64 or
     * more), iovec entries per message (UIO_MAXIOV), largest UDP payload
     * of a send (IPv4 total length 65535). */
    UDP_GSO_MAX_SEGS = 64, /* also the identifications a receiver accepts */
    UDP_ID_CACHE = 16,     /* packet lengths whose identification terms are kept (sent
                              and received alike) */
    UDP_PFX_CACHE = 8,     /* flows and lengths whose ICRC prefix is kept, per direction */
    UDP_IOV_MAX = 1024,
    UDP_GSO_MAX_V4 = 65535 - SR_IPV4_HDR_LEN - SR_UDP_HDR_LEN,
    UDP_GSO_MAX_V6 = 65535 - SR_UDP_HDR_LEN,
    /* iovec entries a packet may use: header, payload pieces, pad + ICRC */
    UDP_PKT_IOV = SR_UDP_MAX_IOV + 2,
    /* A packet that must not outlive its memory unsent (sr_tx_pkt.flush)
     * costs a sendmmsg; when the caller's bytes queued so far are few,
     * copying them here (into an arena of UDP_TX_COPY) is cheaper. */
    UDP_TX_COPY = 64 << 10,
    UDP_TX_COPY_MAX = 8 << 10,
};
_Static_assert(UDP_RX_DATA % 64 == 0 && UDP_RX_GRO % 64 == 0, "slots stay 64-byte aligned");
_Static_assert(UDP_RX_DATA >= SR_MAX_HDR_LEN + SR_MAX_PMTU + 3 + SR_ICRC_LEN,
               "a receive slot holds the largest RoCEv2 packet");
_Static_assert(UDP_PKT_IOV <= UDP_IOV_MAX, "one packet fits in one message");
_Static_assert((int)SR_UDP_MAX_IOV >= (int)SR_MAX_SGE, "a packet may gather every SGE of a WQE");

union udp_sa {
    struct sockaddr sa;
    struct sockaddr_in in;
    struct sockaddr_in6 in6;
};

enum { UDP_HELD = 1024 }; /* datagrams held back at once by delay/reorder faults */

struct udp_held {
    uint64_t release_ns;
    union udp_sa name;
    uint32_t len;
    uint8_t ecn;   /* its IP ECN field (sr_udp_rx_ecn) */
    uint8_t *slot; /* UDP_RX_DATA bytes */
};

/* sr_icrc_ipv4_id_term for identifications 0..UDP_GSO_MAX_SEGS-1 at the
 * IPv4 lengths of the last UDP_ID_CACHE tables made; the lengths in one
 * cache line, searched before any table is touched. */
struct udp_id_terms {
    uint32_t ip_len[UDP_ID_CACHE]; /* 0: unused */
    uint32_t next;                 /* round-robin replacement */
    uint32_t term[UDP_ID_CACHE][UDP_GSO_MAX_SEGS];
};

/* The ICRC register after the invariant IP + UDP header (identification 0)
 * of the packets of tlen transport bytes between this device and a peer:
 * all the segments of a train, and most of a flow's packets, share it. */
struct udp_pfx {
    uint8_t gid[16]; /* the peer */
    uint16_t port;   /* the peer's UDP port */
    uint32_t tlen;   /* 0: unused */
    uint32_t reg;
};

/* A queued packet's own bytes; its payload stays in the caller's memory. */
struct udp_txpkt {
    uint8_t lead[8];             /* the previous segment's tail, when in one train */
    uint8_t hdr[SR_MAX_HDR_LEN]; /* copy: the engine's header buffer is transient */
    uint8_t tail[3 + SR_ICRC_LEN];
};
_Static_assert(sizeof(((struct udp_txpkt *)0)->lead) >= 3 + SR_ICRC_LEN &&
                   offsetof(struct udp_txpkt, hdr) == sizeof(((struct udp_txpkt *)0)->lead),
               "a tail fits in front of the header, right against it");

/* One message of the next sendmmsg: a datagram, or a GSO train of segs
 * datagrams of seg bytes (the last may be shorter) to one peer, whose
 * iovec entries are contiguous in tx_iov. */
struct udp_txmsg {
    union udp_sa sa;
    socklen_t salen;
    uint8_t dgid[16];
    uint32_t seg, segs, bytes;
    uint32_t iov_first, iov_cnt;
    bool closed;  /* a shorter segment ended the train */
    uint8_t path; /* the socket it leaves from (sr_udp_cfg.paths) */
    union {
        char buf[CMSG_SPACE(sizeof(uint16_t))];
        struct cmsghdr align;
    } ctl;
};

struct sr_udp {
    int fd;
    bool ipv6;
    uint16_t port;
    /* send sockets: [0] is fd, the others multipath's (sr_udp_cfg.paths) */
    uint8_t npaths;
    int path_fd[SR_UDP_PATHS_MAX];
    uint16_t path_port[SR_UDP_PATHS_MAX];
    uint8_t addr[16];
    bool gso, gro;    /* offloads in use */
    uint32_t gso_max; /* largest UDP payload of a GSO send */
    struct sr_udp_stats stats;
    uint8_t *rx_mem; /* rx_vlen slots of rx_slot bytes */
    size_t rx_slot;
    uint32_t rx_vlen; /* messages per recvmmsg */
    bool rx_idle;     /* the last recvmmsg found nothing */
    struct mmsghdr rx_msg[SR_UDP_BATCH];
    struct iovec rx_iov[SR_UDP_BATCH];
    union udp_sa rx_name[SR_UDP_BATCH];
    union {
        char buf[2 * CMSG_SPACE(sizeof(int))]; /* UDP_GRO; IP_TOS or IPV6_TCLASS */
        struct cmsghdr align;
    } rx_ctl[SR_UDP_BATCH];
    bool ecn;       /* cfg.ecn */
    uint8_t rx_ecn; /* the ECN field of the datagram being delivered */
    /* queued sends (sr_udp_queue), flushed with one sendmmsg */
    struct udp_txpkt *txp; /* SR_UDP_BATCH packets */
    struct udp_txmsg *txm; /* SR_UDP_BATCH messages */
    struct iovec *tx_iov;  /* SR_UDP_BATCH * UDP_PKT_IOV entries */
    uint32_t txp_cnt, txm_cnt, tx_iov_used;
    uint8_t *tx_copy;      /* UDP_TX_COPY bytes of copied payload */
    uint32_t tx_copy_used; /* bytes of it in use */
    uint32_t tx_prot;      /* tx_iov entries below this hold no caller memory */
    struct mmsghdr tx_msg[SR_UDP_BATCH];
    /* fault injection: datagrams held back (delay, reordering) */
    struct sr_fault_cfg fault;
    uint64_t rng;
    struct udp_held *held; /* UDP_HELD slots */
    uint32_t held_cnt;
    struct udp_id_terms id_terms;
    struct udp_pfx pfx[2][UDP_PFX_CACHE]; /* [0] sent, [1] received */
    uint32_t pfx_last[2], pfx_next[2];    /* last hit, round-robin replacement */
};

static const uint8_t v4_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

static bool gid_is_v4(const uint8_t *gid)
{
    return memcmp(gid, v4_prefix, sizeof(v4_prefix)) == 0;
}

/* errno of a failed socket call -> SR_ERR_* (errno itself is kept). */
static int udp_err(int e)
{
    switch (e) {
    case EAGAIN:
#if EWOULDBLOCK != EAGAIN
    case EWOULDBLOCK:
#endif
    case ENOBUFS:
    case EINTR:
    case EADDRINUSE:
        return SR_ERR_BUSY;
    case ENOMEM:
        return SR_ERR_NOMEM;
    case EMFILE:
    case ENFILE:
        return SR_ERR_LIMIT;
    case EAFNOSUPPORT:
    case EPROTONOSUPPORT:
        return SR_ERR_NOTSUP;
    case EMSGSIZE:
        return SR_ERR_RANGE;
    default: /* EADDRNOTAVAIL, EINVAL, ECONNREFUSED, ENETUNREACH, EACCES ... */
        return SR_ERR_INVAL;
    }
}

static void sa_from_gid(union udp_sa *sa, socklen_t *len, bool ipv6, const uint8_t *gid,
                        uint16_t port)
{
    memset(sa, 0, sizeof(*sa));
    if (ipv6) {
        sa->in6.sin6_family = AF_INET6;
        sa->in6.sin6_port = htons(port);
        memcpy(&sa->in6.sin6_addr, gid, 16);
        *len = sizeof(sa->in6);
    } else {
        sa->in.sin_family = AF_INET;
        sa->in.sin_port = htons(port);
        memcpy(&sa->in.sin_addr, gid + 12, 4);
        *len = sizeof(sa->in);
    }
}

/* The IP/UDP header the kernel produces (or produced) for a datagram from
 * src:sport to dst:dport with IPv4 identification 0, as the ICRC sees it;
 * see the file comment for why these values. */
static void udp_l3(bool ipv6, const uint8_t *src, uint16_t sport, const uint8_t *dst,
                   uint16_t dport, struct sr_l3_addr *a)
{
    *a = (struct sr_l3_addr){.ipv6 = ipv6, .src_port = sport, .dst_port = dport};
    size_t n = ipv6 ? 16 : 4, off = ipv6 ? 0 : 12;
    memcpy(a->src, src + off, n);
    memcpy(a->dst, dst + off, n);
}

/* The identification terms for IPv4 packets of ip_len bytes, computed on
 * first use. A flow uses a dozen lengths or so (full segments, its last
 * ones, ACKs, the SACK bitmaps' six lengths, D-SACKs), which all stay
 * cached; a miss costs some 20 multiplications mod P (icrc.c). */
static const uint32_t *udp_id_terms(struct sr_udp *u, size_t ip_len)
{
    struct udp_id_terms *c = &u->id_terms;
    for (int i = 0; i < UDP_ID_CACHE; i++)
        if (c->ip_len[i] == ip_len)
            return c->term[i];
    uint32_t i = c->next++ % UDP_ID_CACHE;
    c->ip_len[i] = (uint32_t)ip_len;
    sr_icrc_ipv4_id_terms(ip_len, c->term[i], UDP_GSO_MAX_SEGS);
    return c->term[i];
}

static bool pfx_is(const struct udp_pfx *c, const uint8_t *peer, uint16_t port, size_t tlen)
{
    return c->tlen == tlen && c->port == port && memcmp(c->gid, peer, 16) == 0;
}

/* The ICRC prefix of packets of tlen bytes received from (rx true)
 * peer:port, or sent (rx false) from our port to peer:4791; SR_ERR_* for
 * an unusable length. */
static int udp_pfx(struct sr_udp *u, bool rx, const uint8_t *peer, uint16_t port, size_t tlen,
                   uint32_t *reg)
{
    struct udp_pfx *c = u->pfx[rx];
    uint32_t i = u->pfx_last[rx];
    if (!pfx_is(&c[i], peer, port, tlen))
        for (i = 0; i < UDP_PFX_CACHE && !pfx_is(&c[i], peer, port, tlen); i++)
            ;
    if (i == UDP_PFX_CACHE) {
        struct sr_l3_addr a;
        if (rx)
            udp_l3(u->ipv6, peer, port, u->addr, u->port, &a);
        else
            udp_l3(u->ipv6, u->addr, port, peer, SR_ROCE_UDP_PORT, &a);
        uint32_t r;
        int err = sr_icrc_l3_prefix(&a, tlen, &r);
        if (err)
            return err;
        i = u->pfx_next[rx]++ % UDP_PFX_CACHE;
        memcpy(c[i].gid, peer, 16);
        c[i].port = port;
        c[i].tlen = (uint32_t)tlen;
        c[i].reg = r;
    }
    u->pfx_last[rx] = i;
    *reg = c[i].reg;
    return 0;
}

static void udp_set_buf(int fd, int force_opt, int opt, uint32_t bytes)
{
    int v = (int)SR_MIN(bytes ? bytes : (uint32_t)UDP_DEFAULT_BUF, (uint32_t)(INT32_MAX / 2));
    /* The FORCE variants pass net.core.[rw]mem_max but need CAP_NET_ADMIN;
     * the plain ones are capped silently. A small buffer only costs drops,
     * which the transport recovers from, so neither failure is fatal. */
    if (setsockopt(fd, SOL_SOCKET, force_opt, &v, sizeof(v)) != 0)
        (void)setsockopt(fd, SOL_SOCKET, opt, &v, sizeof(v));
}

static int udp_socket(bool ipv6, const struct sr_udp_cfg *cfg)
{
    int fd = socket(ipv6 ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int off = 0, on = 1;
    /* A second device on the same address must fail to bind, not share
     * (and steal half of) the first one's traffic. */
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &off, sizeof(off)) != 0)
        goto err_close;
    if (ipv6) {
        int pmtu = IPV6_PMTUDISC_DO;
        /* A v4-mapped peer would need the IPv4 header for its ICRC. */
        if (setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof(on)) != 0 ||
            setsockopt(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, &pmtu, sizeof(pmtu)) != 0)
            goto err_close;
    } else {
        /* DF and identification 0: the header the ICRC is computed over. */
        int pmtu = IP_PMTUDISC_DO;
        if (setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu)) != 0)
            goto err_close;
    }
    udp_set_buf(fd, SO_SNDBUFFORCE, SO_SNDBUF, cfg->sndbuf);
    udp_set_buf(fd, SO_RCVBUFFORCE, SO_RCVBUF, cfg->rcvbuf);
    return fd;

err_close:;
    int e = errno;
    close(fd);
    errno = e;
    return -1;
}

/* ECN (RFC 3168 5): every datagram leaves ECT(0), the codepoint RoCEv2
 * congestion control uses (IBA Annex A17.9), and each received one
 * reports its TOS or traffic class, whose low two bits are the ECN field.
 * The TOS's upper six bits (DSCP) stay 0. */
static int udp_ecn_setup(int fd, bool ipv6)
{
    int ect0 = 0x02, on = 1;
    int r = ipv6 ? setsockopt(fd, IPPROTO_IPV6, IPV6_TCLASS, &ect0, sizeof(ect0)) |
                       setsockopt(fd, IPPROTO_IPV6, IPV6_RECVTCLASS, &on, sizeof(on))
                 : setsockopt(fd, IPPROTO_IP, IP_TOS, &ect0, sizeof(ect0)) |
                       setsockopt(fd, IPPROTO_IP, IP_RECVTOS, &on, sizeof(on));
    return r ? udp_err(errno) : 0;
}

static int udp_bind(int fd, bool ipv6, const uint8_t *gid, uint16_t port)
{
    union udp_sa sa;
    socklen_t len;
    sa_from_gid(&sa, &len, ipv6, gid, port);
    return bind(fd, &sa.sa, len);
}

/* Claim 127.a.b.c, walking from the seed: consecutive seeds (pids) get
 * distinct addresses, and a taken one (EADDRINUSE) costs one more bind.
 * Host bytes 0 and 255 look like network/broadcast addresses to tools, and
 * 127.0.0.1 is left to programs that expect to own it. */
static int udp_bind_auto(int fd, uint32_t seed, uint16_t port, uint8_t *gid)
{
    memcpy(gid, v4_prefix, sizeof(v4_prefix));
    for (uint32_t i = 0; i < SR_UDP_AUTO_TRIES; i++) {
        uint32_t host = (seed + i) & 0xffffffu;
        if ((host & 0xff) == 0 || (host & 0xff) == 0xff || host == 1)
            continue;
        gid[12] = 127;
        gid[13] = (uint8_t)(host >> 16);
        gid[14] = (uint8_t)(host >> 8);
        gid[15] = (uint8_t)host;
        if (udp_bind(fd, false, gid, port) == 0)
            return 0;
        if (errno != EADDRINUSE)
            return udp_err(errno);
    }
    errno = EADDRINUSE;
    return SR_ERR_LIMIT;
}

static void udp_free_held(struct sr_udp *u)
{
    if (!u->held)
        return;
    for (int i = 0; i < UDP_HELD; i++)
        free(u->held[i].slot);
    free(u->held);
    u->held = NULL;
}

static void udp_close_paths(struct sr_udp *u)
{
    for (uint8_t i = 1; i < u->npaths; i++)
        close(u->path_fd[i]);
    u->npaths = 1;
}

/* Multipath's send sockets (sr_udp_cfg.paths), on the bound address. */
static int udp_open_paths(struct sr_udp *u, const struct sr_udp_cfg *cfg)
{
    uint32_t want = SR_MIN((uint32_t)cfg->paths, (uint32_t)SR_UDP_PATHS_MAX);
    if (want <= 1)
        return 0;
    /* They receive nothing a peer sends (that goes to the bound port):
     * small receive buffers. */
    struct sr_udp_cfg pc = *cfg;
    pc.rcvbuf = 4096;
    while (u->npaths < want) {
        int fd = udp_socket(u->ipv6, &pc);
        if (fd < 0)
            return udp_err(errno);
        union udp_sa sa;
        socklen_t len = sizeof(sa);
        if (udp_bind(fd, u->ipv6, u->addr, 0) != 0 || getsockname(fd, &sa.sa, &len) != 0) {
            int e = errno;
            close(fd);
            return udp_err(e);
        }
        u->path_fd[u->npaths] = fd;
        u->path_port[u->npaths] = ntohs(u->ipv6 ? sa.in6.sin6_port : sa.in.sin_port);
        u->npaths++;
    }
    return 0;
}

int sr_udp_open(const struct sr_udp_cfg *cfg, struct sr_udp **out)
{
    static const uint8_t zero[16];
    if (!cfg || !out)
        return SR_ERR_INVAL;
    bool autoaddr = memcmp(cfg->addr, zero, 16) == 0;
    bool ipv6 = !autoaddr && !gid_is_v4(cfg->addr);
    /* A wildcard bind would leave the ICRC's destination address unknown. */
    if (!autoaddr && !ipv6 && memcmp(cfg->addr + 12, zero, 4) == 0)
        return SR_ERR_INVAL;

    int err;
    struct sr_udp *u = calloc(1, sizeof(*u));
    if (!u)
        return SR_ERR_NOMEM;
    u->ipv6 = ipv6;
    u->port = cfg->port ? cfg->port : SR_ROCE_UDP_PORT;
    u->npaths = 1;
    u->gso_max = ipv6 ? UDP_GSO_MAX_V6 : UDP_GSO_MAX_V4;
    u->txp = calloc(SR_UDP_BATCH, sizeof(*u->txp));
    u->txm = calloc(SR_UDP_BATCH, sizeof(*u->txm));
    u->tx_iov = calloc((size_t)SR_UDP_BATCH * UDP_PKT_IOV, sizeof(*u->tx_iov));
    u->tx_copy = malloc(UDP_TX_COPY);
    if (!u->txp || !u->txm || !u->tx_iov || !u->tx_copy) {
        err = SR_ERR_NOMEM;
        goto err_free;
    }
    u->fd = udp_socket(ipv6, cfg);
    if (u->fd < 0) {
        err = udp_err(errno);
        goto err_free;
    }
    /* Both are per socket and optional: a kernel without them (before 4.18
     * / 5.0) refuses the option and the driver goes without. */
    int off = 0, on = 1;
    u->gso = !cfg->no_gso && setsockopt(u->fd, SOL_UDP, UDP_SEGMENT, &off, sizeof(off)) == 0;
    u->gro = !cfg->no_gro && setsockopt(u->fd, SOL_UDP, UDP_GRO, &on, sizeof(on)) == 0;
    if (cfg->ecn) {
        err = udp_ecn_setup(u->fd, ipv6);
        if (err)
            goto err_close;
        u->ecn = true;
    }
    /* Large slots only cost address space: a datagram touches the pages it
     * fills. */
    u->rx_slot = u->gro ? UDP_RX_GRO : UDP_RX_DATA;
    /* With GRO a message holds up to 64 KiB: 16 of them (1 MiB) per call
     * keep what was just received in cache for the ICRC and the copy that
     * follow, which a batch of 64 (4 MiB) would not. */
    u->rx_vlen = u->gro ? UDP_RX_GRO_VLEN : SR_UDP_BATCH;
    u->rx_mem = aligned_alloc(64, (size_t)u->rx_vlen * u->rx_slot);
    if (!u->rx_mem) {
        err = SR_ERR_NOMEM;
        goto err_close;
    }
    for (uint32_t i = 0; i < u->rx_vlen; i++) {
        u->rx_iov[i].iov_base = u->rx_mem + (size_t)i * u->rx_slot;
        u->rx_iov[i].iov_len = u->rx_slot;
        u->rx_msg[i].msg_hdr.msg_iov = &u->rx_iov[i];
        u->rx_msg[i].msg_hdr.msg_iovlen = 1;
        u->rx_msg[i].msg_hdr.msg_name = &u->rx_name[i];
    }
    if (autoaddr) {
        err = udp_bind_auto(u->fd, cfg->auto_seed, u->port, u->addr);
        if (err)
            goto err_close;
    } else {
        memcpy(u->addr, cfg->addr, 16);
        if (udp_bind(u->fd, ipv6, u->addr, u->port) != 0) {
            err = udp_err(errno);
            goto err_close;
        }
    }
    u->path_fd[0] = u->fd;
    u->path_port[0] = u->port;
    err = udp_open_paths(u, cfg);
    if (err)
        goto err_close;
    if (cfg->fault.on) {
        u->fault = cfg->fault;
        u->rng = cfg->fault.seed * 0x9e3779b97f4a7c15ull + u->port + 1;
        u->held = calloc(UDP_HELD, sizeof(*u->held));
        if (!u->held) {
            err = SR_ERR_NOMEM;
            goto err_close;
        }
        for (int i = 0; i < UDP_HELD; i++) {
            u->held[i].slot = aligned_alloc(64, UDP_RX_DATA);
            if (!u->held[i].slot) {
                err = SR_ERR_NOMEM;
                goto err_close;
            }
        }
    }
    *out = u;
    return 0;

err_close:;
    int e = errno;
    udp_close_paths(u);
    close(u->fd);
    errno = e;
    udp_free_held(u);
err_free:
    free(u->rx_mem);
    free(u->tx_copy);
    free(u->tx_iov);
    free(u->txm);
    free(u->txp);
    free(u);
    return err;
}

void sr_udp_close(struct sr_udp *u)
{
    if (!u)
        return;
    udp_close_paths(u);
    close(u->fd);
    udp_free_held(u);
    free(u->rx_mem);
    free(u->tx_copy);
    free(u->tx_iov);
    free(u->txm);
    free(u->txp);
    free(u);
}

const uint8_t *sr_udp_addr(const struct sr_udp *u)
{
    return u->addr;
}

uint16_t sr_udp_port(const struct sr_udp *u)
{
    return u->port;
}

int sr_udp_fd(const struct sr_udp *u)
{
    return u->fd;
}

void sr_udp_stats(const struct sr_udp *u, struct sr_udp_stats *out)
{
    *out = u->stats;
}

bool sr_udp_trains(const struct sr_udp *u)
{
    return u->gso;
}

const struct sr_udp_stats *sr_udp_counters(const struct sr_udp *u)
{
    return &u->stats;
}

/* The batch calls without libc's wrappers: they are cancellation points,
 * and entering and leaving asynchronous-cancel mode around each
 * non-blocking call cost a few percent of a polling loop. Nothing here
 * blocks, so nothing is lost for thread cancellation. */
static int udp_sendmmsg(int fd, struct mmsghdr *m, unsigned n)
{
    return (int)syscall(SYS_sendmmsg, fd, m, n, MSG_DONTWAIT);
}

static int udp_recvmmsg(int fd, struct mmsghdr *m, unsigned n)
{
    return (int)syscall(SYS_recvmmsg, fd, m, n, MSG_DONTWAIT, NULL);
}

/* The send socket of t (sr_udp_cfg.paths). */
static uint8_t udp_path(const struct sr_udp *u, const struct sr_tx_pkt *t)
{
    return (uint8_t)(t->path % u->npaths);
}

/* Everything but the sendmsg: checks, ICRC (of the datagram with IPv4
 * identification ip_id, the segment's index in its train; IPv6 has none),
 * the iovec. Returns the number of iovec entries (at most UDP_PKT_IOV) or
 * a negative SR_ERR_*. */
static int udp_tx_prepare(struct sr_udp *u, const struct sr_tx_pkt *t, uint16_t ip_id,
                          struct iovec *iov, uint8_t *tail, size_t *tlen)
{
    if (!t || !t->hdr || !t->dgid || t->hdr_len < SR_BTH_LEN || t->pad_len > 3 ||
        t->iov_cnt > SR_UDP_MAX_IOV || (t->iov_cnt && !t->iov) || ip_id >= UDP_GSO_MAX_SEGS)
        return SR_ERR_INVAL;
    if (gid_is_v4(t->dgid) == u->ipv6)
        return SR_ERR_INVAL; /* a device speaks only the family it is bound to */
    *tlen = (size_t)t->hdr_len + t->payload_len + t->pad_len + SR_ICRC_LEN;

    /* The ICRC with identification 0, from the flow's cached prefix; the
     * headers, the payload and the pad are fed to it where they lie. */
    uint32_t reg;
    int err = udp_pfx(u, false, t->dgid, u->path_port[udp_path(u, t)], *tlen, &reg);
    if (err)
        return err;
    struct sr_icrc_ctx c;
    err = sr_icrc_begin_prefix(&c, reg, t->hdr, t->hdr_len);
    if (err)
        return err;

    int n = 0;
    iov[n++] = (struct iovec){.iov_base = (void *)t->hdr, .iov_len = t->hdr_len};
    uint64_t sum = 0;
    for (uint32_t i = 0; i < t->iov_cnt; i++) {
        if (!t->iov[i].len)
            continue;
        SR_DMA_BEGIN(); /* registered memory, read by the device */
        sr_icrc_update(&c, t->iov[i].base, t->iov[i].len);
        SR_DMA_END();
        /* sendmsg only reads; the cast drops const for struct iovec. */
        iov[n++] = (struct iovec){.iov_base = (void *)t->iov[i].base, .iov_len = t->iov[i].len};
        sum += t->iov[i].len;
    }
    if (sum != t->payload_len)
        return SR_ERR_INVAL;
    memset(tail, 0, t->pad_len);
    sr_icrc_update(&c, tail, t->pad_len);
    uint32_t icrc = sr_icrc_final(&c);
    if (ip_id && !u->ipv6) /* a later segment of a train */
        icrc ^= udp_id_terms(u, SR_IPV4_HDR_LEN + SR_UDP_HDR_LEN + *tlen)[ip_id];
    sr_put_le32(tail + t->pad_len, icrc);
    iov[n++] = (struct iovec){.iov_base = tail, .iov_len = t->pad_len + SR_ICRC_LEN};
    return n;
}

/* One sendmsg per packet, no offload. */
int sr_udp_send(struct sr_udp *u, const struct sr_tx_pkt *t)
{
    struct iovec iov[UDP_PKT_IOV];
    uint8_t tail[3 + SR_ICRC_LEN];
    size_t tlen = 0;
    int n = udp_tx_prepare(u, t, 0, iov, tail, &tlen);
    if (n < 0) {
        u->stats.tx_drops++;
        return n;
    }

    union udp_sa sa;
    socklen_t salen;
    sa_from_gid(&sa, &salen, u->ipv6, t->dgid, SR_ROCE_UDP_PORT);
    struct msghdr mh = {
        .msg_name = &sa,
        .msg_namelen = salen,
        .msg_iov = iov,
        .msg_iovlen = (size_t)n,
    };
    ssize_t r;
    do {
        SR_DMA_BEGIN();
        r = sendmsg(u->path_fd[udp_path(u, t)], &mh, MSG_DONTWAIT);
        SR_DMA_END();
    } while (r < 0 && errno == EINTR);
    if (r < 0) {
        /* EAGAIN/ENOBUFS (queue full), ECONNREFUSED, ENETUNREACH ...: the
         * packet is lost like on a wire; the transport retransmits. */
        u->stats.tx_drops++;
        return udp_err(errno);
    }
    u->stats.tx_pkts++;
    u->stats.tx_bytes += tlen;
    return 0;
}

int sr_udp_flush(struct sr_udp *u)
{
    for (uint32_t i = 0; i < u->txm_cnt; i++) {
        struct udp_txmsg *m = &u->txm[i];
        struct msghdr *mh = &u->tx_msg[i].msg_hdr;
        *mh = (struct msghdr){
            .msg_name = &m->sa,
            .msg_namelen = m->salen,
            .msg_iov = u->tx_iov + m->iov_first,
            .msg_iovlen = m->iov_cnt,
        };
        if (m->segs > 1) {
            mh->msg_control = m->ctl.buf;
            mh->msg_controllen = sizeof(m->ctl.buf);
            struct cmsghdr *cm = CMSG_FIRSTHDR(mh);
            cm->cmsg_level = SOL_UDP;
            cm->cmsg_type = UDP_SEGMENT;
            cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
            uint16_t seg = (uint16_t)m->seg;
            memcpy(CMSG_DATA(cm), &seg, sizeof(seg));
        }
    }
    uint32_t done = 0;
    int err = 0;
    while (done < u->txm_cnt) {
        /* A run of messages from one socket. Runs keep the queue's order
         * on the wire: a receiver without selective acknowledgement
         * rewinds on every packet that overtakes another. */
        uint32_t end = done + 1;
        while (end < u->txm_cnt && u->txm[end].path == u->txm[done].path)
            end++;
        SR_DMA_BEGIN(); /* the kernel gathers payloads from registered memory */
        int r = udp_sendmmsg(u->path_fd[u->txm[done].path], u->tx_msg + done, end - done);
        SR_DMA_END();
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            /* The first message of the rest failed (queue full, peer
             * unreachable ...): it is lost like on a wire; go on with the
             * others, the transport retransmits. A GSO send the path
             * cannot take (no checksum offload: EIO; EINVAL) turns GSO
             * off for good. */
            int e = r < 0 ? errno : EAGAIN;
            const struct udp_txmsg *m = &u->txm[done];
            if (m->segs > 1 && (e == EIO || e == EINVAL))
                u->gso = false;
            err = udp_err(e);
            u->stats.tx_drops += m->segs;
            done++;
            continue;
        }
        for (uint32_t i = done; i < done + (uint32_t)r; i++) {
            u->stats.tx_pkts += u->txm[i].segs;
            u->stats.tx_bytes += u->txm[i].bytes;
            u->stats.tx_gso_sends += u->txm[i].segs > 1;
        }
        done += (uint32_t)r;
    }
    u->txp_cnt = u->txm_cnt = u->tx_iov_used = u->tx_copy_used = u->tx_prot = 0;
    return err;
}

static bool udp_owned(const struct sr_udp *u, const void *p)
{
    const uint8_t *b = p;
    return (b >= (const uint8_t *)u->txp && b < (const uint8_t *)(u->txp + SR_UDP_BATCH)) ||
           (b >= u->tx_copy && b < u->tx_copy + UDP_TX_COPY);
}

/* Instead of a flush: copy every queued payload piece still in the
 * caller's memory into the arena, so that memory may change before the
 * queue is sent. false (nothing copied) when they are too many bytes. */
static bool udp_tx_protect(struct sr_udp *u)
{
    size_t need = 0;
    for (uint32_t i = u->tx_prot; i < u->tx_iov_used; i++)
        if (!udp_owned(u, u->tx_iov[i].iov_base))
            need += u->tx_iov[i].iov_len;
    if (need > UDP_TX_COPY_MAX || u->tx_copy_used + need > UDP_TX_COPY)
        return false;
    for (uint32_t i = u->tx_prot; i < u->tx_iov_used; i++) {
        struct iovec *v = &u->tx_iov[i];
        if (udp_owned(u, v->iov_base))
            continue;
        uint8_t *dst = u->tx_copy + u->tx_copy_used;
        SR_DMA_BEGIN(); /* registered memory, read by the device */
        memcpy(dst, v->iov_base, v->iov_len);
        SR_DMA_END();
        v->iov_base = dst;
        u->tx_copy_used += (uint32_t)v->iov_len;
    }
    u->tx_prot = u->tx_iov_used;
    return true;
}

int sr_udp_queue(struct sr_udp *u, const struct sr_tx_pkt *t)
{
    if (u->txp_cnt == SR_UDP_BATCH)
        sr_udp_flush(u);
    if (!t || !t->hdr || !t->dgid || t->hdr_len > SR_MAX_HDR_LEN || t->iov_cnt > SR_UDP_MAX_IOV) {
        u->stats.tx_drops++;
        return SR_ERR_INVAL;
    }
    /* Join the train of the last message when the kernel can cut this
     * packet from it: same peer, not longer than its segments, room left. */
    size_t tlen = (size_t)t->hdr_len + t->payload_len + t->pad_len + SR_ICRC_LEN;
    struct udp_txmsg *m = u->txm_cnt ? &u->txm[u->txm_cnt - 1] : NULL;
    bool join = m && u->gso && !m->closed && tlen <= m->seg && m->segs < UDP_GSO_MAX_SEGS &&
                m->bytes + tlen <= u->gso_max && m->iov_cnt + UDP_PKT_IOV <= UDP_IOV_MAX &&
                memcmp(m->dgid, t->dgid, 16) == 0 && m->path == udp_path(u, t);

    struct udp_txpkt *p = &u->txp[u->txp_cnt];
    memcpy(p->hdr, t->hdr, t->hdr_len);
    struct sr_tx_pkt copy = *t;
    copy.hdr = p->hdr;
    struct iovec *iov = u->tx_iov + u->tx_iov_used;
    int n = udp_tx_prepare(u, &copy, join ? (uint16_t)m->segs : 0, iov, p->tail, &tlen);
    if (n < 0) {
        u->stats.tx_drops++;
        return n;
    }
    if (join) {
        /* The train's last entry is the previous segment's pad + ICRC: a
         * copy in front of this header, and one entry for both (the
         * kernel's copy pays per entry). */
        struct iovec *prev = iov - 1;
        size_t pl = prev->iov_len;
        uint8_t *lead = p->lead + sizeof(p->lead) - pl; /* hdr follows lead */
        memcpy(lead, prev->iov_base, pl);
        *prev = (struct iovec){.iov_base = lead, .iov_len = pl + iov[0].iov_len};
        memmove(iov, iov + 1, (size_t)(n - 1) * sizeof(*iov));
        n--;
        m->segs++;
        m->bytes += (uint32_t)tlen;
        m->iov_cnt += (uint32_t)n;
        m->closed = tlen < m->seg;
    } else {
        m = &u->txm[u->txm_cnt++];
        sa_from_gid(&m->sa, &m->salen, u->ipv6, t->dgid, SR_ROCE_UDP_PORT);
        memcpy(m->dgid, t->dgid, 16);
        m->seg = m->bytes = (uint32_t)tlen;
        m->segs = 1;
        m->iov_first = u->tx_iov_used;
        m->iov_cnt = (uint32_t)n;
        m->closed = false;
        m->path = udp_path(u, t);
    }
    u->tx_iov_used += (uint32_t)n;
    u->txp_cnt++;
    if (t->flush)
        sr_udp_fence(u);
    return 0;
}

void sr_udp_fence(struct sr_udp *u)
{
    if (!udp_tx_protect(u))
        sr_udp_flush(u);
}

static void gid_from_sa(const union udp_sa *sa, uint8_t *gid, uint16_t *port)
{
    if (sa->sa.sa_family == AF_INET6) {
        memcpy(gid, &sa->in6.sin6_addr, 16);
        *port = ntohs(sa->in6.sin6_port);
    } else {
        /* ::ffff:a.b.c.d in two 8-byte writes: udp_pfx reads the address
         * back as 8-byte words at once, and a read spanning two smaller
         * writes still in flight stalls (7% of the receiver's time). */
        uint8_t low[8] = {v4_prefix[8], v4_prefix[9], v4_prefix[10], v4_prefix[11]};
        memcpy(low + 4, &sa->in.sin_addr, 4);
        memset(gid, 0, 8);
        memcpy(gid + 8, low, 8);
        *port = ntohs(sa->in.sin_port);
    }
}

/* Does pkt (len bytes, ICRC last) carry the ICRC of a datagram from
 * src:sport to this device (with an identification a GSO train uses)? */
static bool udp_icrc_ok(struct sr_udp *u, const uint8_t *pkt, size_t len, const uint8_t *src,
                        uint16_t sport)
{
    uint32_t reg;
    if (udp_pfx(u, true, src, sport, len, &reg) != 0)
        return false;
    struct sr_icrc_ctx c;
    if (sr_icrc_begin_prefix(&c, reg, pkt, SR_BTH_LEN) != 0)
        return false;
    sr_icrc_update(&c, pkt + SR_BTH_LEN, len - SR_BTH_LEN - SR_ICRC_LEN);
    uint32_t diff = sr_get_le32(pkt + len - SR_ICRC_LEN) ^ sr_icrc_final(&c);
    if (diff == 0)
        return true;
    if (u->ipv6)
        return false;
    const uint32_t *term = udp_id_terms(u, SR_IPV4_HDR_LEN + SR_UDP_HDR_LEN + len);
    for (int id = 1; id < UDP_GSO_MAX_SEGS; id++)
        if (term[id] == diff)
            return true;
    return false;
}

/* Check one datagram and hand it on when valid. */
static void udp_rx_deliver(struct sr_udp *u, uint8_t *pkt, size_t len, const union udp_sa *name,
                           sr_udp_rx_fn cb, void *arg)
{
    if (len < SR_BTH_LEN + SR_ICRC_LEN) {
        u->stats.rx_short_drops++;
        return;
    }
    uint8_t src[16];
    uint16_t sport;
    gid_from_sa(name, src, &sport);
    if (!udp_icrc_ok(u, pkt, len, src, sport)) {
        u->stats.rx_icrc_drops++;
        return;
    }
    u->stats.rx_pkts++;
    u->stats.rx_bytes += len;
    cb(arg, pkt, len, src);
}

static uint64_t udp_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* xorshift64*: a uniform double in [0, 1) from the fault stream */
static double udp_rand(struct sr_udp *u)
{
    u->rng ^= u->rng >> 12;
    u->rng ^= u->rng << 25;
    u->rng ^= u->rng >> 27;
    return (double)((u->rng * 0x2545f4914f6cdd1dull) >> 11) * (1.0 / 9007199254740992.0);
}

static void udp_hold(struct sr_udp *u, const uint8_t *pkt, size_t len, const union udp_sa *name,
                     uint64_t release_ns)
{
    if (u->held_cnt == UDP_HELD) {
        u->stats.fault_lost++; /* nowhere to keep it: lost like on a full queue */
        return;
    }
    struct udp_held *h = &u->held[u->held_cnt++];
    memcpy(h->slot, pkt, len);
    h->len = (uint32_t)len;
    h->ecn = u->rx_ecn;
    h->name = *name;
    h->release_ns = release_ns;
}

/* SOFTRDMA_FAULT: what the network would have done to this datagram. */
static void udp_rx_faulty(struct sr_udp *u, uint8_t *pkt, size_t len, const union udp_sa *name,
                          sr_udp_rx_fn cb, void *arg)
{
    const struct sr_fault_cfg *f = &u->fault;
    if (f->loss > 0 && udp_rand(u) < f->loss) {
        u->stats.fault_lost++;
        return;
    }
    if (f->corrupt > 0 && len && udp_rand(u) < f->corrupt) {
        size_t at = (size_t)(udp_rand(u) * (double)len);
        pkt[at] ^= (uint8_t)(1u << (u->rng & 7));
        u->stats.fault_corrupted++;
    }
    int copies = 1;
    if (f->dup > 0 && udp_rand(u) < f->dup) {
        copies = 2;
        u->stats.fault_dup++;
    }
    bool reorder = f->reorder > 0 && udp_rand(u) < f->reorder;
    for (int c = 0; c < copies; c++) {
        if (reorder) {
            u->stats.fault_reordered++;
            udp_hold(u, pkt, len, name, udp_now() + f->reorder_ns);
        } else if (f->delay_ns) {
            u->stats.fault_delayed++;
            udp_hold(u, pkt, len, name, udp_now() + f->delay_ns);
        } else {
            udp_rx_deliver(u, pkt, len, name, cb, arg);
        }
    }
}

/* Deliver held datagrams whose time has come, earliest first. */
static void udp_release_held(struct sr_udp *u, sr_udp_rx_fn cb, void *arg)
{
    uint64_t now = udp_now();
    for (;;) {
        uint32_t best = UINT32_MAX;
        for (uint32_t i = 0; i < u->held_cnt; i++)
            if (u->held[i].release_ns <= now &&
                (best == UINT32_MAX || u->held[i].release_ns < u->held[best].release_ns))
                best = i;
        if (best == UINT32_MAX)
            return;
        struct udp_held h = u->held[best];
        /* swap-remove; the slot buffer moves with its entry */
        u->held[best] = u->held[--u->held_cnt];
        u->held[u->held_cnt] = h;
        u->rx_ecn = h.ecn;
        udp_rx_deliver(u, h.slot, h.len, &h.name, cb, arg);
    }
}

uint64_t sr_udp_next_deadline(const struct sr_udp *u)
{
    uint64_t d = UINT64_MAX;
    for (uint32_t i = 0; i < u->held_cnt; i++)
        if (u->held[i].release_ns < d)
            d = u->held[i].release_ns;
    return d;
}

/* The segment size of a GRO batch (UDP_GRO control message), or 0. */
static int udp_gro_size(struct msghdr *mh)
{
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm))
        if (cm->cmsg_level == SOL_UDP && cm->cmsg_type == UDP_GRO &&
            cm->cmsg_len >= CMSG_LEN(sizeof(int))) {
            int g;
            memcpy(&g, CMSG_DATA(cm), sizeof(g));
            return g;
        }
    return 0;
}

/* A received datagram, or a GRO batch of them when 0 < gro < len. */
static void udp_rx_msg(struct sr_udp *u, uint8_t *pkt, size_t len, size_t gro,
                       const union udp_sa *name, sr_udp_rx_fn cb, void *arg)
{
    size_t seg = len;
    if (gro > 0 && gro < len) {
        seg = gro;
        u->stats.rx_gro_bufs++;
    }
    size_t off = 0;
    do { /* once for an empty datagram too (counted as short) */
        size_t n = SR_MIN(seg, len - off);
        if (n > UDP_RX_DATA)
            u->stats.rx_long_drops++; /* larger than any RoCEv2 packet */
        else if (u->fault.on)
            udp_rx_faulty(u, pkt + off, n, name, cb, arg);
        else
            udp_rx_deliver(u, pkt + off, n, name, cb, arg);
    } while ((off += seg) < len);
}

/* The ECN field of a received message (IP_TOS or IPV6_TCLASS control
 * message; RFC 3168 5), or 0 without one. IPv4's is one byte, IPv6's an
 * int (ip(7), ipv6(7)). */
static uint8_t udp_ecn_of(struct msghdr *mh)
{
    for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
        if (cm->cmsg_level == IPPROTO_IP && cm->cmsg_type == IP_TOS && cm->cmsg_len >= CMSG_LEN(1))
            return *(const uint8_t *)CMSG_DATA(cm) & 3;
        if (cm->cmsg_level == IPPROTO_IPV6 && cm->cmsg_type == IPV6_TCLASS &&
            cm->cmsg_len >= CMSG_LEN(sizeof(int))) {
            int tc;
            memcpy(&tc, CMSG_DATA(cm), sizeof(tc));
            return (uint8_t)(tc & 3);
        }
    }
    return 0;
}

uint8_t sr_udp_rx_ecn(const struct sr_udp *u)
{
    return u->rx_ecn;
}

static void udp_rx_one(struct sr_udp *u, int i, sr_udp_rx_fn cb, void *arg)
{
    struct mmsghdr *m = &u->rx_msg[i];
    if (m->msg_hdr.msg_flags & MSG_TRUNC) {
        u->stats.rx_long_drops++;
        return;
    }
    if (u->ecn)
        u->rx_ecn = udp_ecn_of(&m->msg_hdr); /* one for a whole GRO batch (sr_udp.h) */
    int g = u->gro ? udp_gro_size(&m->msg_hdr) : 0;
    udp_rx_msg(u, u->rx_iov[i].iov_base, m->msg_len, g > 0 ? (size_t)g : 0, &u->rx_name[i], cb,
               arg);
}

int sr_udp_rx_inject(struct sr_udp *u, uint8_t *buf, size_t len, size_t gro, const uint8_t *src_gid,
                     uint16_t src_port, sr_udp_rx_fn cb, void *arg)
{
    if (!u || !cb || (!buf && len) || !src_gid || gid_is_v4(src_gid) == u->ipv6)
        return SR_ERR_INVAL;
    union udp_sa name;
    socklen_t salen;
    sa_from_gid(&name, &salen, u->ipv6, src_gid, src_port);
    u->rx_ecn = 0;
    udp_rx_msg(u, buf, len, gro, &name, cb, arg);
    return 0;
}

static int udp_recv(struct sr_udp *u, sr_udp_rx_fn cb, void *arg, int max, bool lone)
{
    if (!u || !cb || max < 0)
        return SR_ERR_INVAL;
    if (u->held_cnt)
        udp_release_held(u, cb, arg);
    int got = 0;
    while (got < max) {
        bool one = lone && u->rx_idle;
        unsigned want = (unsigned)SR_MIN(max - got, one ? 1 : (int)u->rx_vlen);
        for (unsigned i = 0; i < want; i++) {
            /* The kernel overwrites both on every call. */
            u->rx_msg[i].msg_hdr.msg_namelen = sizeof(u->rx_name[i]);
            u->rx_msg[i].msg_hdr.msg_flags = 0;
            if (u->gro || u->ecn) {
                u->rx_msg[i].msg_hdr.msg_control = u->rx_ctl[i].buf;
                u->rx_msg[i].msg_hdr.msg_controllen = sizeof(u->rx_ctl[i].buf);
            }
        }
        int r;
        do {
            r = udp_recvmmsg(u->fd, u->rx_msg, want);
        } while (r < 0 && errno == EINTR);
        if (r < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                u->rx_idle = true;
                break;
            }
            /* A later call reports the error again if it persists. */
            return got ? got : udp_err(errno);
        }
        u->rx_idle = false;
        for (int i = 0; i < r; i++)
            udp_rx_one(u, i, cb, arg);
        got += r;
        if ((unsigned)r < want || one)
            break; /* queue drained (or likely so): save the EAGAIN round trip */
    }
    return got;
}

int sr_udp_recv(struct sr_udp *u, sr_udp_rx_fn cb, void *arg, int max)
{
    return udp_recv(u, cb, arg, max, false);
}

/* After a call that found nothing, ask for one message: what comes to a
 * socket an application polls dry is most often a lone datagram (a
 * ping-pong's message and its ACK, in one GRO batch), and a larger vlen
 * makes the kernel try for a second one before returning, some 0.1 us of
 * every round trip. */
int sr_udp_poll(struct sr_udp *u, sr_udp_rx_fn cb, void *arg, int max)
{
    return udp_recv(u, cb, arg, max, true);
}
