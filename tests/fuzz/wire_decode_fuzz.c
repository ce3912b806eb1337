/* wire_decode_fuzz.c: libFuzzer harness for the RoCEv2 decoder.
 *
 * Input byte 0 picks the PMTU (0 = unchecked, or 256 << n); the rest is a
 * transport packet. Properties checked beyond "no crash, no sanitizer report":
 *   - a successful decode returns a header length inside the buffer and a
 *     payload that lies inside it too;
 *   - re-encoding the decoded packet reproduces the input's headers and
 *     payload (fields the codec ignores, reserved bits, aside);
 *   - the ICRC and L3 parsers accept any bytes without reading out of bounds.
 */
#include "sr_wire.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    static const uint32_t pmtus[8] = {0, 256, 512, 1024, 2048, 4096, 4096, 0};
    uint32_t pmtu = pmtus[data[0] & 7];
    const uint8_t *pkt_bytes = data + 1;
    size_t len = size - 1;

    /* Copy into an exactly-sized heap buffer so ASan sees any overread. */
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf)
        return 0;
    memcpy(buf, pkt_bytes, len);

    struct sr_pkt pkt;
    int hl = sr_wire_decode(buf, len, pmtu, &pkt);
    if (hl >= 0) {
        if ((size_t)hl + pkt.payload_len + SR_ICRC_LEN > len)
            abort();
        if (pkt.payload_len && (pkt.payload < buf || pkt.payload + pkt.payload_len > buf + len))
            abort();
        uint8_t out[SR_MAX_HDR_LEN + 8];
        int hl2 = sr_wire_encode_hdr(&pkt, out, sizeof(out));
        if (hl2 != hl)
            abort();
        /* Compare the fields the codec defines: opcode, flags, pkey, QPN,
         * PSN and every extension header byte. */
        if (out[0] != buf[0] || (out[1] & 0xf0) != (buf[1] & 0xf0) || memcmp(out + 2, buf + 2, 2) ||
            (out[4] & 0xc0) != (buf[4] & 0xc0) || memcmp(out + 5, buf + 5, 3) ||
            (out[8] & 0x80) != (buf[8] & 0x80) || memcmp(out + 9, buf + 9, 3))
            abort();
        const struct sr_opcode_info *info = sr_opcode_info(buf[0]);
        for (int h = 0; h < SR_HDR_NUM; h++) {
            if (!(info->hdrs & SR_HDR_BIT(h)) || h == SR_HDR_CNP_PAD)
                continue;
            size_t off = info->off[h];
            if (h == SR_HDR_DETH) { /* byte 4 of the DETH is reserved */
                if (memcmp(out + off, buf + off, 4) || memcmp(out + off + 5, buf + off + 5, 3))
                    abort();
            } else if (h == SR_HDR_XRCETH) { /* byte 0 of the XRCETH is reserved */
                if (memcmp(out + off + 1, buf + off + 1, 3))
                    abort();
            } else if (h == SR_HDR_AETH) {
                if (memcmp(out + off, buf + off, 4))
                    abort();
            } else {
                static const uint8_t lens[SR_HDR_NUM] = {[SR_HDR_RETH] = SR_RETH_LEN,
                                                         [SR_HDR_ATOMIC_ETH] = SR_ATOMIC_ETH_LEN,
                                                         [SR_HDR_ATOMIC_ACK_ETH] =
                                                             SR_ATOMIC_ACK_ETH_LEN,
                                                         [SR_HDR_IMMDT] = SR_IMMDT_LEN,
                                                         [SR_HDR_IETH] = SR_IETH_LEN};
                if (memcmp(out + off, buf + off, lens[h]))
                    abort();
            }
        }
    }

    /* The same bytes as an IP packet: ICRC and UDP checksum code paths. */
    uint32_t icrc;
    (void)sr_icrc_compute(buf, len, &icrc);
    (void)sr_icrc_verify(buf, len);
    struct sr_icrc_ctx c;
    if (sr_icrc_begin(&c, buf, len) == 0)
        (void)sr_icrc_final(&c);
    free(buf);
    return 0;
}
