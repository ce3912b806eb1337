/* udp_rx_fuzz.c: libFuzzer harness for the UDP driver's receive path: GRO
 * batches split into datagrams, length checks, and the ICRC with the IPv4
 * identification window of GSO trains (sr_udp_rx_inject).
 *
 * Input: byte 0 picks the GRO segment size (0: a plain datagram) and
 * whether to seal each segment with a valid ICRC (computed for an
 * identification taken from the input, so deliveries happen and the
 * window's lookup is exercised); the rest is the received buffer.
 * Properties beyond "no crash, no sanitizer report": every delivered
 * packet lies inside the buffer, is at least BTH + ICRC long and comes
 * from the injected source; every datagram of the buffer is counted once,
 * delivered or dropped (ICRC, short, long).
 */
#include "sr_udp.h"
#include "sr_wire.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct sr_udp *dev;
static const uint8_t src_gid[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 9, 8, 7};

struct ctx {
    const uint8_t *lo, *hi;
    size_t delivered;
};

static void on_pkt(void *arg, const uint8_t *pkt, size_t len, const uint8_t *gid)
{
    struct ctx *c = arg;
    if (pkt < c->lo || pkt + len > c->hi || len < SR_BTH_LEN + SR_ICRC_LEN ||
        memcmp(gid, src_gid, 16) != 0)
        abort();
    c->delivered++;
}

/* Full IPv4 packet for the ICRC: header as the driver rebuilds it. */
static void seal(uint8_t *tp, size_t len, uint16_t ip_id)
{
    uint8_t *ip = malloc(28 + len);
    if (!ip)
        return;
    struct sr_l3_addr a = {.src = {127, 9, 8, 7}, .src_port = SR_ROCE_UDP_PORT, .ip_id = ip_id};
    memcpy(a.dst, sr_udp_addr(dev) + 12, 4);
    if (sr_l3_encode(&a, len, ip, 28 + len) == 28) {
        memcpy(ip + 28, tp, len);
        if (sr_icrc_fill(ip, 28 + len) == 0)
            memcpy(tp + len - SR_ICRC_LEN, ip + 28 + len - SR_ICRC_LEN, SR_ICRC_LEN);
    }
    free(ip);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!dev) {
        struct sr_udp_cfg cfg = {.auto_seed = (uint32_t)getpid() * 7919u};
        if (sr_udp_open(&cfg, &dev) != 0)
            abort();
    }
    if (size < 1)
        return 0;
    static const size_t gros[8] = {0, 20, 33, 64, 300, 1040, 4112, 4124};
    size_t gro = gros[data[0] & 7];
    bool sealed = data[0] & 8;
    size_t len = size - 1;
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf)
        return 0;
    memcpy(buf, data + 1, len);
    size_t seg = gro && gro < len ? gro : len;
    if (sealed)
        for (size_t off = 0; off < len; off += seg) {
            size_t n = len - off < seg ? len - off : seg;
            if (n >= SR_BTH_LEN + SR_ICRC_LEN && n <= 4096 + 128)
                seal(buf + off, n, (uint16_t)((data[0] >> 4) * 4 + (off / seg) % 4));
        }
    struct sr_udp_stats before, after;
    sr_udp_stats(dev, &before);
    struct ctx c = {.lo = buf, .hi = buf + len};
    if (sr_udp_rx_inject(dev, buf, len, gro, src_gid, SR_ROCE_UDP_PORT, on_pkt, &c) != 0)
        abort();
    sr_udp_stats(dev, &after);
    size_t dgrams = len == 0 ? 1 : (len + seg - 1) / seg;
    size_t counted =
        (size_t)((after.rx_pkts - before.rx_pkts) + (after.rx_icrc_drops - before.rx_icrc_drops) +
                 (after.rx_short_drops - before.rx_short_drops) +
                 (after.rx_long_drops - before.rx_long_drops));
    if (counted != dgrams || after.rx_pkts - before.rx_pkts != c.delivered)
        abort();
    free(buf);
    return 0;
}
