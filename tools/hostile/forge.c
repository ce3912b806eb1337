/* forge.c: the hostile sender's socket and its ICRC (see sr_forge.h). */
#include "sr_forge.h"
#include "sr_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum {
    FORGE_TRIES = 4096,
    FORGE_L3_LEN = SR_IPV4_HDR_LEN + SR_UDP_HDR_LEN,
    FORGE_SEND_RETRIES = 2000, /* x 50 us: a full loopback queue drains long before */
};

static const uint8_t v4_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

static void sa_of(const uint8_t *gid, uint16_t port, struct sockaddr_in *sa)
{
    memset(sa, 0, sizeof(*sa));
    sa->sin_family = AF_INET;
    sa->sin_port = htons(port);
    memcpy(&sa->sin_addr, gid + 12, 4);
}

int sr_forge_open(struct sr_forge *f, uint32_t seed)
{
    memset(f, 0, sizeof(*f));
    f->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (f->fd < 0)
        return -errno;
    /* DF with identification 0 on the wire, as a softrdma device sends:
     * captures of the attack then show what the receiver assumes. */
    int pmtu = IP_PMTUDISC_DO, off = 0, buf = 4 << 20;
    if (setsockopt(f->fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu)) != 0 ||
        setsockopt(f->fd, SOL_SOCKET, SO_REUSEADDR, &off, sizeof(off)) != 0) {
        int e = errno;
        close(f->fd);
        return -e;
    }
    /* Answers to a flood must not be what limits it; capped silently. */
    (void)setsockopt(f->fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
    (void)setsockopt(f->fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
    f->port = SR_ROCE_UDP_PORT;
    memcpy(f->gid, v4_prefix, sizeof(v4_prefix));
    for (uint32_t i = 0; i < FORGE_TRIES; i++) {
        uint32_t h = (seed + i * 0x9e37u) % (63u << 16);
        if ((h & 0xff) == 0 || (h & 0xff) == 0xff)
            continue;
        f->gid[12] = 127;
        f->gid[13] = (uint8_t)(192 + (h >> 16));
        f->gid[14] = (uint8_t)(h >> 8);
        f->gid[15] = (uint8_t)h;
        struct sockaddr_in sa;
        sa_of(f->gid, f->port, &sa);
        if (bind(f->fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
            return 0;
        if (errno != EADDRINUSE)
            break;
    }
    int e = errno;
    close(f->fd);
    f->fd = -1;
    return -e;
}

void sr_forge_close(struct sr_forge *f)
{
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
}

struct sr_forge_l3 sr_forge_l3_to(const struct sr_forge *f, const uint8_t *dst_gid)
{
    struct sr_forge_l3 l3 = {
        .src_gid = f->gid,
        .dst_gid = dst_gid,
        .sport = f->port,
        .dport = SR_ROCE_UDP_PORT,
    };
    return l3;
}

int sr_forge_icrc(const struct sr_forge_l3 *l3, const uint8_t *tp, size_t len, uint32_t *icrc)
{
    if (len < SR_BTH_LEN + SR_ICRC_LEN)
        return SR_ERR_WIRE_SHORT;
    struct sr_l3_addr a = {.src_port = l3->sport, .dst_port = l3->dport, .ip_id = l3->ip_id};
    memcpy(a.src, l3->src_gid + 12, 4);
    memcpy(a.dst, l3->dst_gid + 12, 4);
    struct sr_icrc_ctx c;
    int err = sr_icrc_begin_l3(&c, &a, len, tp);
    if (err)
        return err;
    sr_icrc_update(&c, tp + SR_BTH_LEN, len - SR_BTH_LEN - SR_ICRC_LEN);
    *icrc = sr_icrc_final(&c);
    return 0;
}

int sr_forge_icrc_fill(const struct sr_forge_l3 *l3, uint8_t *tp, size_t len)
{
    uint32_t icrc;
    int err = sr_forge_icrc(l3, tp, len, &icrc);
    if (err)
        return err;
    sr_put_le32(tp + len - SR_ICRC_LEN, icrc); /* as the receiver compares it */
    return 0;
}

bool sr_forge_icrc_ok(const struct sr_forge_l3 *l3, const uint8_t *tp, size_t len)
{
    uint32_t icrc;
    if (sr_forge_icrc(l3, tp, len, &icrc))
        return false;
    uint32_t got = sr_get_le32(tp + len - SR_ICRC_LEN);
    /* l3's identification, or (as softrdma's driver accepts) any other
     * that a segment of a GSO train carries: 0..63 */
    for (uint16_t id = 0; id < 64; id++)
        if (got == (icrc ^ sr_icrc_ipv4_id_term(FORGE_L3_LEN + len, (uint16_t)(id ^ l3->ip_id))))
            return true;
    return false;
}

int sr_forge_build(const struct sr_forge *f, const uint8_t *dst_gid, const struct sr_pkt *pkt,
                   uint8_t *out, size_t cap)
{
    int n = sr_wire_encode(pkt, out, cap);
    if (n < 0)
        return n;
    struct sr_forge_l3 l3 = sr_forge_l3_to(f, dst_gid);
    int err = sr_forge_icrc_fill(&l3, out, (size_t)n);
    return err ? err : n;
}

int sr_forge_send(const struct sr_forge *f, const uint8_t *dst_gid, const void *buf, size_t len)
{
    struct sockaddr_in sa;
    sa_of(dst_gid, SR_ROCE_UDP_PORT, &sa);
    for (int i = 0; i < FORGE_SEND_RETRIES; i++) {
        ssize_t r = sendto(f->fd, buf, len, MSG_DONTWAIT, (struct sockaddr *)&sa, sizeof(sa));
        if (r == (ssize_t)len)
            return 0;
        if (r >= 0)
            return -EMSGSIZE;
        if (errno != EAGAIN && errno != ENOBUFS && errno != EINTR)
            return -errno;
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    }
    return -EAGAIN;
}

int sr_forge_recv(const struct sr_forge *f, void *buf, size_t cap, uint8_t *src_gid,
                  uint16_t *sport, int timeout_ms)
{
    struct pollfd p = {.fd = f->fd, .events = POLLIN};
    int r;
    do {
        r = poll(&p, 1, timeout_ms);
    } while (r < 0 && errno == EINTR);
    if (r < 0)
        return -errno;
    if (r == 0)
        return -ETIMEDOUT;
    struct sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    ssize_t n = recvfrom(f->fd, buf, cap, MSG_DONTWAIT, (struct sockaddr *)&sa, &sl);
    if (n < 0)
        return errno == EAGAIN ? -ETIMEDOUT : -errno;
    if (src_gid) {
        memcpy(src_gid, v4_prefix, sizeof(v4_prefix));
        memcpy(src_gid + 12, &sa.sin_addr, 4);
    }
    if (sport)
        *sport = ntohs(sa.sin_port);
    return (int)n;
}

const char *sr_forge_ntoa(const uint8_t *gid, char *buf)
{
    snprintf(buf, 16, "%u.%u.%u.%u", gid[12], gid[13], gid[14], gid[15]);
    return buf;
}

int sr_forge_aton(const char *s, uint8_t *gid)
{
    struct in_addr a;
    if (inet_pton(AF_INET, s, &a) != 1)
        return -EINVAL;
    memcpy(gid, v4_prefix, sizeof(v4_prefix));
    memcpy(gid + 12, &a, 4);
    return 0;
}
