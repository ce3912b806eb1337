/* icrc_test.c: the RoCEv2 ICRC (Annex A17) and IP/UDP encapsulation against
 * vectors from outside this project:
 *   - a CNP captured on a Mellanox ConnectX-4 Lx NIC (published in scapy's
 *     RoCE test suite), IPv4;
 *   - scapy's UC SEND ONLY example (IPv4, pad 2, with its IP checksum 0xb4d5,
 *     UDP checksum 0xaca2 and ICRC 0x78f353f3);
 *   - an IPv6 RC SEND ONLY packet whose ICRC was computed with Python's
 *     zlib.crc32 over the Annex A17 masked pseudo-packet (an implementation
 *     independent of icrc.c).
 */
#include "sr_test.h"
#include "sr_util.h"
#include "sr_wire.h"

static size_t unhex(const char *s, uint8_t *out, size_t cap)
{
    size_t n = 0;
    while (s[0] && s[1] && n < cap) {
        if (s[0] == ' ' || s[0] == '\n') {
            s++;
            continue;
        }
        unsigned v;
        sscanf(s, "%2x", &v);
        out[n++] = (uint8_t)v;
        s += 2;
    }
    return n;
}

/* ConnectX-4 Lx CNP, from the IPv4 header on (Ethernet header stripped). */
static const char cnp_cx4[] = "45c2 003c 718c 4000 4011 9161 0a00 1101 0a00"
                              "1201 0000 12b7 0028 0000 8100 ffff 4000"
                              "0118 0000 0000 0000 0000 0000 0000 0000"
                              "0000 0000 0000 82fd 002a";

/* scapy's UC SEND ONLY example with its ICRC. */
static const char uc_scapy[] = "45010040047840004011b4d5c0a80007c0a80007c00012b7002caca2"
                               "2460ffff000000d300cf1710"
                               "4630818be28935d90e9a95505401be885e500000"
                               "78f353f3";

static const char rc_v6[] = "612abcde0020114020010db800000000000000000000000120010db8"
                            "000000000000000000000002c00112b70020000004"
                            "00ffff0000001180000010303132333435363796bf9430";

static void test_crc32(void)
{
    SR_CHECK_EQ(sr_crc32(0, "123456789", 9), 0xcbf43926u); /* the CRC-32 check value */
    SR_CHECK_EQ(sr_crc32(0, "", 0), 0);
    /* Chaining equals one pass, at every split and alignment. */
    uint8_t data[100];
    for (size_t i = 0; i < sizeof(data); i++)
        data[i] = (uint8_t)(i * 13 + 1);
    uint32_t whole = sr_crc32(0, data, sizeof(data));
    for (size_t cut = 0; cut <= sizeof(data); cut++)
        SR_CHECK_EQ(sr_crc32(sr_crc32(0, data, cut), data + cut, sizeof(data) - cut), whole);
    for (size_t off = 1; off < 8; off++)
        SR_CHECK_EQ(sr_crc32(0, data + off, 50),
                    sr_crc32(sr_crc32(0, data + off, 3), data + off + 3, 47));
}

/* Bit at a time, straight from the definition: the independent reference
 * for the table and carry-less-multiply paths. */
static uint32_t crc32_bitwise(uint32_t crc, const uint8_t *p, size_t n)
{
    crc = ~crc;
    while (n--) {
        crc ^= *p++;
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}

/* Every length from 0 to 300 (below, at and across the 64- and 16-byte
 * steps of the folding path), then long buffers, at every alignment, from
 * random starting values. */
static void test_crc32_long(void)
{
    static uint8_t buf[70000 + 16];
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < sizeof(buf); i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        buf[i] = (uint8_t)x;
    }
    for (size_t len = 0; len <= 300; len++)
        for (size_t off = 0; off < 16; off += 5) {
            uint32_t init = (uint32_t)(x >> (len % 32));
            SR_CHECK_EQ(sr_crc32(init, buf + off, len), crc32_bitwise(init, buf + off, len));
        }
    static const size_t longs[] = {1023, 1024, 1279, 4096, 4100, 4133, 65536, 65599, 70000};
    for (size_t i = 0; i < sizeof(longs) / sizeof(longs[0]); i++)
        for (size_t off = 0; off < 16; off += 3) {
            SR_CHECK_EQ(sr_crc32(0, buf + off, longs[i]), crc32_bitwise(0, buf + off, longs[i]));
            SR_CHECK_EQ(sr_crc32(0xdeadbeef, buf + off, longs[i]),
                        crc32_bitwise(0xdeadbeef, buf + off, longs[i]));
        }
    /* All ones and all zeros: nothing special-cased. */
    memset(buf, 0xff, 4096);
    SR_CHECK_EQ(sr_crc32(0, buf, 4096), crc32_bitwise(0, buf, 4096));
    memset(buf, 0, 4096);
    SR_CHECK_EQ(sr_crc32(0, buf, 4096), crc32_bitwise(0, buf, 4096));
}

static void check_vector(const char *name, const char *hex, uint32_t want_icrc)
{
    uint8_t pkt[256];
    size_t len = unhex(hex, pkt, sizeof(pkt));
    sr_test_ctx = name;
    uint32_t icrc = 0;
    SR_CHECK_EQ(sr_icrc_compute(pkt, len, &icrc), 0);
    SR_CHECK_EQ(icrc, want_icrc);
    SR_CHECK_EQ(sr_icrc_verify(pkt, len), 0);

    /* Variant fields do not change it (and the packet still verifies). */
    uint8_t v[256];
    memcpy(v, pkt, len);
    bool v6 = (pkt[0] >> 4) == 6;
    size_t l3 = v6 ? SR_IPV6_HDR_LEN + SR_UDP_HDR_LEN : SR_IPV4_HDR_LEN + SR_UDP_HDR_LEN;
    if (v6) {
        v[0] ^= 0x0f;
        v[1] ^= 0xff;
        v[3] ^= 0x55;
        v[7] = 1;
    } else {
        v[1] = 0x03; /* ECN CE, as a switch would mark it */
        v[8] = 1;
        v[10] ^= 0xff;
    }
    v[l3 - 2] ^= 0x12; /* UDP checksum */
    v[l3 + 4] ^= 0xc0; /* FECN/BECN */
    SR_CHECK_EQ(sr_icrc_verify(v, len), 0);

    /* Every invariant byte does. */
    for (size_t i = 0; i < len - SR_ICRC_LEN; i++) {
        bool variant = v6 ? (i <= 3 || i == 7) : (i == 1 || i == 8 || i == 10 || i == 11);
        variant = variant || i == l3 - 2 || i == l3 - 1 || i == l3 + 4;
        if (variant)
            continue;
        memcpy(v, pkt, len);
        v[i] ^= i == 0 ? 0x10 : 0x01; /* byte 0: flip the version, not IHL/TC */
        int e = sr_icrc_verify(v, len);
        SR_CHECK(e == SR_ERR_WIRE_ICRC || e == SR_ERR_WIRE_L3);
    }

    /* Incremental form over scattered pieces gives the same value. */
    struct sr_icrc_ctx c;
    SR_CHECK_EQ(sr_icrc_begin(&c, pkt, l3 + SR_BTH_LEN), 0);
    size_t rest = len - SR_ICRC_LEN - l3 - SR_BTH_LEN;
    for (size_t i = 0; i < rest; i += 3)
        sr_icrc_update(&c, pkt + l3 + SR_BTH_LEN + i, rest - i < 3 ? rest - i : 3);
    SR_CHECK_EQ(sr_icrc_final(&c), want_icrc);

    /* fill writes the same bytes back */
    memcpy(v, pkt, len);
    memset(v + len - 4, 0, 4);
    SR_CHECK_EQ(sr_icrc_fill(v, len), 0);
    SR_CHECK_MEM(v, pkt, len);
}

static void test_vectors(void)
{
    check_vector("cx4-lx cnp", cnp_cx4, 0x2a00fd82u);
    check_vector("scapy uc", uc_scapy, 0xf353f378u);
    check_vector("ipv6 rc", rc_v6, 0x3094bf96u);

    /* The CNP also decodes as one. */
    uint8_t pkt[128];
    size_t len = unhex(cnp_cx4, pkt, sizeof(pkt));
    struct sr_pkt p;
    SR_CHECK_EQ(sr_wire_decode(pkt + 28, len - 28, 0, &p), 28);
    SR_CHECK_EQ(p.bth.opcode, SR_OP_CNP);
    SR_CHECK(p.bth.becn);
    SR_CHECK_EQ(p.bth.dest_qp, 0x118);
    SR_CHECK_EQ(p.bth.pkey, 0xffff);
}

/* Rebuild scapy's UC packet from fields with sr_wire + sr_l3: every byte,
 * including both checksums and the ICRC, must match. */
static void test_build_scapy_uc(void)
{
    uint8_t want[256], got[256];
    size_t len = unhex(uc_scapy, want, sizeof(want));
    static const uint8_t data[] = {0x46, 0x30, 0x81, 0x8b, 0xe2, 0x89, 0x35, 0xd9, 0x0e,
                                   0x9a, 0x95, 0x50, 0x54, 0x01, 0xbe, 0x88, 0x5e, 0x50};
    struct sr_pkt p = {0};
    p.bth = (struct sr_bth){
        .opcode = 0x24, .migreq = true, .pkey = 0xffff, .dest_qp = 211, .psn = 13571856};
    p.payload = data;
    p.payload_len = sizeof(data); /* 18 bytes: pad 2 */
    struct sr_l3_addr a = {.src = {192, 168, 0, 7},
                           .dst = {192, 168, 0, 7},
                           .src_port = 49152,
                           .tos = 1,
                           .ttl = 64,
                           .ip_id = 1144};
    size_t tlen = sr_wire_pkt_len(p.bth.opcode, p.payload_len);
    int hl = sr_l3_encode(&a, tlen, got, sizeof(got));
    SR_CHECK_EQ(hl, 28);
    SR_CHECK_EQ(sr_wire_encode(&p, got + hl, sizeof(got) - (size_t)hl), tlen);
    SR_CHECK_EQ(sr_icrc_fill(got, (size_t)hl + tlen), 0);
    SR_CHECK_EQ(sr_l3_udp_csum(got, (size_t)hl + tlen), 0);
    SR_CHECK_EQ((size_t)hl + tlen, len);
    SR_CHECK_MEM(got, want, len);
}

static void test_build_v6(void)
{
    uint8_t want[256], got[256];
    size_t len = unhex(rc_v6, want, sizeof(want));
    static const uint8_t data[] = {0x30, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37};
    struct sr_pkt p = {0};
    p.bth = (struct sr_bth){
        .opcode = 0x04, .pkey = 0xffff, .dest_qp = 0x11, .ack_req = true, .psn = 0x10};
    p.payload = data;
    p.payload_len = sizeof(data);
    struct sr_l3_addr a = {
        .ipv6 = true, .src_port = 0xc001, .tos = 0x12, .ttl = 64, .flow_label = 0xabcde};
    memcpy(a.src, want + 8, 16);
    memcpy(a.dst, want + 24, 16);
    size_t tlen = sr_wire_pkt_len(p.bth.opcode, p.payload_len);
    int hl = sr_l3_encode(&a, tlen, got, sizeof(got));
    SR_CHECK_EQ(hl, 48);
    SR_CHECK_EQ(sr_wire_encode(&p, got + hl, sizeof(got) - (size_t)hl), tlen);
    SR_CHECK_EQ(sr_icrc_fill(got, (size_t)hl + tlen), 0);
    SR_CHECK_EQ((size_t)hl + tlen, len);
    SR_CHECK_MEM(got, want, len); /* the vector's UDP checksum is 0 */
    SR_CHECK_EQ(sr_l3_udp_csum(got, len), 0);
    /* A UDP checksum verifies to zero when summed with the pseudo-header. */
    SR_CHECK(got[48 - 2] != 0 || got[48 - 1] != 0);
}

/* The identification term: scapy's packet (identification 1144) against
 * the same packet with identification 0, and a 4 KiB packet for every
 * identification a GSO train uses and a few others, each against a full
 * recomputation. */
static void test_ipv4_id_term(void)
{
    uint8_t pkt[256];
    size_t len = unhex(uc_scapy, pkt, sizeof(pkt));
    sr_test_ctx = "id term scapy";
    SR_CHECK_EQ(sr_get_be16(pkt + 4), 1144);
    pkt[4] = pkt[5] = 0;
    uint32_t icrc0 = 0;
    SR_CHECK_EQ(sr_icrc_compute(pkt, len, &icrc0), 0);
    SR_CHECK(icrc0 != 0xf353f378u);
    SR_CHECK_EQ(icrc0 ^ sr_icrc_ipv4_id_term(len, 1144), 0xf353f378u);

    sr_test_ctx = "id term 4k";
    static uint8_t big[28 + 12 + 16 + 4096 + 4];
    struct sr_l3_addr a = {.src = {127, 0, 0, 2}, .dst = {127, 0, 0, 3}, .src_port = 4791};
    size_t blen = sizeof(big);
    SR_CHECK_EQ(sr_l3_encode(&a, blen - 28, big, blen), 28);
    for (size_t i = 28; i < blen; i++)
        big[i] = (uint8_t)(i * 31 + 7);
    SR_CHECK_EQ(sr_icrc_compute(big, blen, &icrc0), 0);
    static const uint16_t extra[] = {64, 255, 4096, 0xffff};
    for (unsigned k = 0; k < 64 + 4; k++) {
        uint16_t id = k < 64 ? (uint16_t)k : extra[k - 64];
        sr_put_be16(big + 4, id);
        uint32_t want = 0;
        SR_CHECK_EQ(sr_icrc_compute(big, blen, &want), 0);
        SR_CHECK_EQ(icrc0 ^ sr_icrc_ipv4_id_term(blen, id), want);
    }
    SR_CHECK_EQ(sr_icrc_ipv4_id_term(blen, 0), 0);
}

/* The table of terms (what the UDP driver caches per length) against a
 * full recomputation at every IPv4 length from the smallest RoCEv2 packet
 * to past a 4096-byte PMTU packet, each with a different identification
 * of the 64 a GSO train uses, plus the empty and too-short cases. */
static void test_ipv4_id_terms_every_len(void)
{
    static uint8_t pkt[28 + 12 + 16 + 4096 + 64];
    struct sr_l3_addr a = {.src = {127, 0, 0, 2}, .dst = {127, 0, 0, 3}, .src_port = 4791};
    for (size_t i = 0; i < sizeof(pkt); i++)
        pkt[i] = (uint8_t)(i * 13 + 5);
    uint32_t term[64];
    size_t min = 20 + 8 + 12 + 4;
    for (size_t len = min; len <= sizeof(pkt); len++) {
        sr_test_ctx = "id terms every length";
        SR_CHECK_EQ(sr_l3_encode(&a, len - 28, pkt, len), 28);
        uint32_t icrc0 = 0, want = 0;
        SR_CHECK_EQ(sr_icrc_compute(pkt, len, &icrc0), 0);
        uint16_t id = (uint16_t)(1 + len % 63);
        sr_put_be16(pkt + 4, id);
        SR_CHECK_EQ(sr_icrc_compute(pkt, len, &want), 0);
        sr_icrc_ipv4_id_terms(len, term, 64);
        SR_CHECK_EQ(term[0], 0);
        SR_CHECK_EQ(icrc0 ^ term[id], want);
        SR_CHECK_EQ(term[id], sr_icrc_ipv4_id_term(len, id));
        if (sr_test_failures)
            return;
    }
    sr_test_ctx = "id terms short";
    term[5] = 1;
    sr_icrc_ipv4_id_terms(min - 1, term, 64);
    SR_CHECK_EQ(term[5], 0);
    sr_icrc_ipv4_id_terms(min, term, 0); /* writes nothing */
}

/* sr_icrc_begin_l3 over addressing and a scattered packet equals the ICRC
 * of the whole packet as sr_l3_encode builds it (checksums and all), for
 * IPv4 and IPv6 and a destination port other than 4791. */
static void test_icrc_begin_l3(void)
{
    for (int v6 = 0; v6 < 2; v6++) {
        sr_test_ctx = v6 ? "begin_l3 v6" : "begin_l3 v4";
        struct sr_l3_addr a = {
            .ipv6 = v6 != 0, .src_port = 49152, .dst_port = 18515, .tos = 2, .ttl = 64, .ip_id = 7};
        for (int i = 0; i < 16; i++)
            a.src[i] = (uint8_t)(i + 1), a.dst[i] = (uint8_t)(0x80 + i);
        uint8_t pkt[SR_IPV6_HDR_LEN + SR_UDP_HDR_LEN + 300];
        size_t tlen = 12 + 16 + 200 + SR_ICRC_LEN;
        int hl = sr_l3_encode(&a, tlen, pkt, sizeof(pkt));
        SR_CHECK(hl > 0);
        SR_CHECK_EQ(sr_get_be16(pkt + hl - SR_UDP_HDR_LEN + 2), 18515);
        for (size_t i = 0; i < tlen; i++)
            pkt[hl + (int)i] = (uint8_t)(i * 7 + 3);
        uint32_t want = 0;
        SR_CHECK_EQ(sr_icrc_compute(pkt, (size_t)hl + tlen, &want), 0);
        struct sr_icrc_ctx c;
        SR_CHECK_EQ(sr_icrc_begin_l3(&c, &a, tlen, pkt + hl), 0);
        sr_icrc_update(&c, pkt + hl + SR_BTH_LEN, 16);
        sr_icrc_update(&c, pkt + hl + SR_BTH_LEN + 16, tlen - SR_BTH_LEN - 16 - SR_ICRC_LEN);
        SR_CHECK_EQ(sr_icrc_final(&c), want);
        SR_CHECK_EQ(sr_icrc_begin_l3(&c, &a, SR_BTH_LEN + SR_ICRC_LEN - 1, pkt + hl),
                    SR_ERR_WIRE_SHORT);
    }
}

/* The two-step start (the flow's prefix, then the transport headers, of
 * any length the caller covers at once) equals the one-shot ICRC, for
 * IPv4 and IPv6; over IPv4 a packet with identification k has the ICRC of
 * identification 0 plus k's term, which is how the UDP driver computes the
 * later segments of a GSO train from one cached prefix. */
static void test_icrc_prefix(void)
{
    for (int v6 = 0; v6 < 2; v6++) {
        struct sr_l3_addr a = {.ipv6 = v6 != 0, .src_port = 50000, .dst_port = SR_ROCE_UDP_PORT};
        for (int i = 0; i < 16; i++)
            a.src[i] = (uint8_t)(i + 9), a.dst[i] = (uint8_t)(0x40 + i);
        static uint8_t pkt[SR_IPV6_HDR_LEN + SR_UDP_HDR_LEN + 64 + 4096 + SR_ICRC_LEN];
        static const size_t hdrs[] = {SR_BTH_LEN, SR_BTH_LEN + 16, SR_MAX_HDR_LEN, 60};
        for (size_t h = 0; h < sizeof(hdrs) / sizeof(hdrs[0]); h++) {
            for (uint16_t id = 0; id < (v6 ? 1 : 64); id += 9) {
                sr_test_ctx = v6 ? "prefix v6" : "prefix v4";
                size_t tlen = hdrs[h] + 4096 + SR_ICRC_LEN;
                a.ip_id = id;
                int hl = sr_l3_encode(&a, tlen, pkt, sizeof(pkt));
                SR_CHECK(hl > 0);
                for (size_t i = 0; i < tlen; i++)
                    pkt[hl + (int)i] = (uint8_t)(i * 29 + h + id);
                pkt[hl + 4] = 0x40; /* BTH byte 4 (masked): not the ones it stands for */
                uint32_t want = 0;
                SR_CHECK_EQ(sr_icrc_compute(pkt, (size_t)hl + tlen, &want), 0);

                a.ip_id = 0;
                uint32_t reg = 0, reg2 = 0;
                SR_CHECK_EQ(sr_icrc_l3_prefix(&a, tlen, &reg), 0);
                if (id == 0) {
                    SR_CHECK_EQ(sr_icrc_prefix(pkt, (size_t)hl, &reg2), 0);
                    SR_CHECK_EQ(reg2, reg);
                }
                struct sr_icrc_ctx c;
                sr_icrc_begin_prefix(&c, reg, pkt + hl, hdrs[h]);
                sr_icrc_update(&c, pkt + hl + hdrs[h], 4096);
                uint32_t got = sr_icrc_final(&c);
                if (id)
                    got ^= sr_icrc_ipv4_id_term((size_t)hl + tlen, id);
                SR_CHECK_EQ(got, want);
            }
        }
        SR_CHECK_EQ(sr_icrc_l3_prefix(&a, SR_BTH_LEN + SR_ICRC_LEN - 1, &(uint32_t){0}),
                    SR_ERR_WIRE_SHORT);
    }
}

/* The incremental form over any cutting of a packet (many small pieces,
 * small then large, large then small, mixed; the UDP driver feeds headers,
 * scattered payload and pad) gives the one-shot value, whose independence
 * the vectors above establish. */
static void test_icrc_pieces(void)
{
    struct sr_l3_addr a = {.src_port = 49152, .dst_port = SR_ROCE_UDP_PORT, .ttl = 64};
    a.src[10] = a.src[11] = a.dst[10] = a.dst[11] = 0xff;
    a.src[12] = a.dst[12] = 127, a.src[15] = 1, a.dst[15] = 2;
    static uint8_t pkt[SR_IPV4_HDR_LEN + SR_UDP_HDR_LEN + 12 + 16 + 4096 + SR_ICRC_LEN];
    uint32_t x = 12345;
    for (size_t tlen = SR_BTH_LEN + SR_ICRC_LEN; tlen <= 12 + 16 + 4096 + SR_ICRC_LEN;
         tlen += tlen < 300 ? 1 : 997) {
        int hl = sr_l3_encode(&a, tlen, pkt, sizeof(pkt));
        SR_CHECK(hl > 0);
        for (size_t i = 0; i < tlen; i++)
            pkt[hl + (int)i] = (uint8_t)(i * 13 + tlen);
        uint32_t want = 0;
        SR_CHECK_EQ(sr_icrc_compute(pkt, (size_t)hl + tlen, &want), 0);
        for (int cut = 0; cut < 4; cut++) {
            struct sr_icrc_ctx c;
            SR_CHECK_EQ(sr_icrc_begin_l3(&c, &a, tlen, pkt + hl), 0);
            size_t off = SR_BTH_LEN, end = tlen - SR_ICRC_LEN;
            while (off < end) {
                x = x * 1103515245u + 12345u;
                size_t piece = cut == 0   ? 1 + (x >> 16) % 70                  /* small pieces */
                               : cut == 1 ? (off == SR_BTH_LEN ? 5 : end - off) /* small, rest */
                               : cut == 2 ? (end - off > 7 ? end - off - 7 : 1) /* large, 7 */
                                          : 1 + (x >> 16) % 300;                /* mixed */
                piece = SR_MIN(piece, end - off);
                sr_icrc_update(&c, pkt + hl + off, piece);
                off += piece;
            }
            SR_CHECK_EQ(sr_icrc_final(&c), want);
        }
    }
}

static void test_l3_errors(void)
{
    uint8_t pkt[128];
    size_t len = unhex(cnp_cx4, pkt, sizeof(pkt));
    uint32_t icrc;
    sr_test_ctx = "l3 errors";
    SR_CHECK_EQ(sr_icrc_compute(pkt, 0, &icrc), SR_ERR_WIRE_SHORT);
    SR_CHECK_EQ(sr_icrc_compute(pkt, 20, &icrc), SR_ERR_WIRE_SHORT);
    SR_CHECK_EQ(sr_icrc_compute(pkt, 28 + 12 + 3, &icrc), SR_ERR_WIRE_SHORT);
    pkt[9] = 6; /* TCP */
    SR_CHECK_EQ(sr_icrc_compute(pkt, len, &icrc), SR_ERR_WIRE_L3);
    pkt[9] = 17;
    pkt[0] = 0x46; /* IP options */
    SR_CHECK_EQ(sr_icrc_compute(pkt, len, &icrc), SR_ERR_WIRE_L3);
    pkt[0] = 0x55; /* version 5 */
    SR_CHECK_EQ(sr_icrc_compute(pkt, len, &icrc), SR_ERR_WIRE_L3);
    pkt[0] = 0x45;
    pkt[len - 1] ^= 1;
    SR_CHECK_EQ(sr_icrc_verify(pkt, len), SR_ERR_WIRE_ICRC);
    struct sr_l3_addr a = {0};
    SR_CHECK_EQ(sr_l3_encode(&a, 70000, pkt, sizeof(pkt)), SR_ERR_RANGE);
    SR_CHECK_EQ(sr_l3_encode(&a, 10, pkt, 27), SR_ERR_NOSPACE);
}

int main(void)
{
    SR_RUN(test_crc32);
    SR_RUN(test_crc32_long);
    SR_RUN(test_vectors);
    SR_RUN(test_build_scapy_uc);
    SR_RUN(test_build_v6);
    SR_RUN(test_ipv4_id_term);
    SR_RUN(test_ipv4_id_terms_every_len);
    SR_RUN(test_icrc_begin_l3);
    SR_RUN(test_icrc_prefix);
    SR_RUN(test_icrc_pieces);
    SR_RUN(test_l3_errors);
    return SR_TEST_RESULT();
}
