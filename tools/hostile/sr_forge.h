/* sr_forge.h: hostile RoCEv2 traffic for tests and tools. Owns a plain UDP
 * socket on a loopback address of its own (port 4791, so that the victim's
 * ACKs and NAKs come back to it) and builds datagrams with the project's
 * codec whose ICRC is exactly what the receiver checks, or deliberately not.
 *
 * The receiver (src/drivers/udp/udp.c) computes the ICRC over the IPv4
 * header the kernel would have sent: DF, identification 0, protocol 17,
 * the source address and port from recvmsg, its own bound address and
 * port. sr_forge_icrc_* rebuild that same pseudo header, so a forged packet
 * passes the ICRC check and reaches the transport engine, where the checks
 * under test live.
 *
 * Only IPv4 loopback (127.0.0.0/8) addresses are used. No globals: every
 * call takes the socket or the addresses it works on. */
#ifndef SR_FORGE_H
#define SR_FORGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sr_wire.h"

struct sr_forge {
    int fd;
    uint8_t gid[16]; /* IPv4-mapped ::ffff:127.a.b.c */
    uint16_t port;   /* always 4791: a RoCEv2 peer's port */
};

/* The variant fields of the pseudo IPv4 header the ICRC covers: the
 * receiver assumes ip_id 0; tests set it to prove that a different
 * header gives a different ICRC. */
struct sr_forge_l3 {
    const uint8_t *src_gid, *dst_gid;
    uint16_t sport, dport;
    uint16_t ip_id;
};

/* Claim 127.x.y.z:4791 with x in 192..254 (the devices' auto-claim walks
 * from the pid and stays below 127.64.0.0), walking from seed until a bind
 * succeeds. 0 or -errno. */
int sr_forge_open(struct sr_forge *f, uint32_t seed);
void sr_forge_close(struct sr_forge *f);

/* ICRC of the transport packet tp[0..len) (BTH first, ICRC slot last) as
 * seen with the pseudo header l3; sr_forge_icrc_fill stores it in the
 * slot. len must be at least BTH + ICRC. */
int sr_forge_icrc(const struct sr_forge_l3 *l3, const uint8_t *tp, size_t len, uint32_t *icrc);
int sr_forge_icrc_fill(const struct sr_forge_l3 *l3, uint8_t *tp, size_t len);
/* Does tp carry the ICRC it would have with l3 and an IPv4 identification
 * of 0..63 (a segment of a GSO train; a UDP socket does not see which)? */
bool sr_forge_icrc_ok(const struct sr_forge_l3 *l3, const uint8_t *tp, size_t len);

/* Encode pkt (sr_wire_encode) into out and fill the ICRC the receiver at
 * dst_gid:4791 expects from f. Returns the transport length or a negative
 * SR_ERR_*. */
int sr_forge_build(const struct sr_forge *f, const uint8_t *dst_gid, const struct sr_pkt *pkt,
                   uint8_t *out, size_t cap);
/* The l3 description of a datagram from f to dst_gid:4791. */
struct sr_forge_l3 sr_forge_l3_to(const struct sr_forge *f, const uint8_t *dst_gid);

/* Send one datagram to dst_gid:4791. 0 or -errno (EAGAIN/ENOBUFS are
 * retried for a bounded while first: loopback only fills up briefly). */
int sr_forge_send(const struct sr_forge *f, const uint8_t *dst_gid, const void *buf, size_t len);
/* One datagram within timeout_ms: its length (0 is a valid empty
 * datagram), -ETIMEDOUT, or -errno. src_gid (16 bytes) and sport may be
 * NULL. */
int sr_forge_recv(const struct sr_forge *f, void *buf, size_t cap, uint8_t *src_gid,
                  uint16_t *sport, int timeout_ms);

/* "127.a.b.c" of an IPv4-mapped GID; buf holds at least 16 bytes. */
const char *sr_forge_ntoa(const uint8_t *gid, char *buf);
/* GID of a dotted IPv4 address; 0 or -EINVAL. */
int sr_forge_aton(const char *s, uint8_t *gid);

/* splitmix64: the one reproducible random stream of the hostile tools. */
static inline uint64_t sr_forge_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

#endif
