/* shm_ring_fuzz.c: libFuzzer harness for the shared-memory driver's
 * receive path (sr_shm_ring_parse): the records a sender wrote into its
 * ring, whose lengths, wrap marks and head the receiver cannot trust.
 *
 * Input: bytes 0..7 the producer's head as an offset from the tail (any
 * value), bytes 8..11 the tail (the receiver's own, so 64-byte aligned;
 * any position in the ring), byte 12 the most packets to take; the rest
 * fills a 64 KiB ring starting at the tail's position, repeated.
 * Properties beyond "no crash, no sanitizer report": every packet handed
 * on lies inside the ring, is BTH + ICRC to SR_SHM_MAX_PKT long and comes
 * from the ring's sender; the new tail never passes the head and is the
 * head whenever the ring was broken.
 */
#include "sr_shm.h"
#include "sr_wire.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { RING = 65536 };
static uint8_t ring[RING];
static const uint8_t gid[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 1, 2, 3};

struct ctx {
    int pkts;
    uint32_t pid; /* the sender's, or 0: references refused */
};

static void on_pkt(void *arg, const uint8_t *pkt, size_t len, const uint8_t *src, uint32_t ref_pid)
{
    struct ctx *c = arg;
    /* references only from a sender the caller vouched for */
    if (pkt < ring || pkt + len > ring + RING || len < SR_BTH_LEN + SR_ICRC_LEN ||
        len > SR_SHM_MAX_PKT || memcmp(src, gid, 16) != 0 || (ref_pid && ref_pid != c->pid))
        abort();
    c->pkts++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 13)
        return 0;
    uint64_t span;
    uint32_t t32;
    memcpy(&span, data, 8);
    memcpy(&t32, data + 8, 4);
    int max = data[12] ? data[12] : 1000;
    data += 13;
    size -= 13;
    /* high tails too: head and tail count bytes since the slot was claimed */
    uint64_t tail = ((uint64_t)t32 << 16) & ~(uint64_t)63;
    uint64_t head = tail + (span % (2 * (uint64_t)RING + 1));
    if (span >> 63)
        head = tail + span; /* far beyond: a head the producer never wrote */
    memset(ring, 0, RING);
    for (size_t i = 0; size && i < RING; i++)
        ring[(tail + i) % RING] = data[i % size];
    struct ctx c = {.pid = t32 & 1 ? 4242 : 0};
    struct sr_shm_parse r;
    sr_shm_ring_parse(ring, RING, head, tail, gid, c.pid, on_pkt, &c, max, &r);
    if (r.pkts != c.pkts || r.pkts > max || r.tail - tail > head - tail ||
        (r.bad && r.tail != head))
        abort();
    return 0;
}
