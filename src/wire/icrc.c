/* icrc.c: CRC-32 (slice-by-8) and the RoCEv2 invariant CRC (IBTA Vol 1
 * Annex A17.3.3): the variant fields of the IP, UDP and BTH headers are
 * replaced by ones in a copy, and an 8-byte all-ones block stands in for
 * the LRH that RoCEv2 does not carry. */
#include "sr_util.h"
#include "sr_wire.h"

/* Slice-by-8 tables and folding constants for the reflected IEEE
 * polynomial, generated at build time by crc_gen.c (constant data, no
 * run-time initialisation). */
#include "crc32_tables.h"

/* Eight bytes (p[0..7], as lo and hi read from memory) in one step. */
static inline uint32_t crc32_step8(uint32_t c, uint32_t lo, uint32_t hi)
{
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    lo = __builtin_bswap32(lo);
    hi = __builtin_bswap32(hi);
#endif
    lo ^= c;
    return crc_tab[7][lo & 0xff] ^ crc_tab[6][(lo >> 8) & 0xff] ^ crc_tab[5][(lo >> 16) & 0xff] ^
           crc_tab[4][lo >> 24] ^ crc_tab[3][hi & 0xff] ^ crc_tab[2][(hi >> 8) & 0xff] ^
           crc_tab[1][(hi >> 16) & 0xff] ^ crc_tab[0][hi >> 24];
}

static uint32_t crc32_table(uint32_t c, const uint8_t *p, size_t n)
{
    while (n && ((uintptr_t)p & 7)) {
        c = crc_tab[0][(c ^ *p++) & 0xff] ^ (c >> 8);
        n--;
    }
    while (n >= 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
        c = crc32_step8(c, lo, hi);
        p += 8;
        n -= 8;
    }
    while (n--)
        c = crc_tab[0][(c ^ *p++) & 0xff] ^ (c >> 8);
    return c;
}

#if defined(__x86_64__)
#include <immintrin.h>

/* Carry-less-multiply CRC-32 (PCLMULQDQ), for buffers of 64 bytes or more.
 * The buffer is read as 128-bit blocks in the reflected layout (bit 0 of
 * byte 0 is the highest power). Four accumulators run 64 bytes apart; each
 * step replaces a block X = A x^64 + B by the congruent (mod P) block
 * A (x^(64+D) mod P) + B (x^D mod P), which lines up with the block D bits
 * later and is xor-ed into it. What is left is one block congruent to the
 * whole buffer at the same end position, so its table CRC (from a zero
 * register) is the buffer's; the unfolded tail goes through the table. */
__attribute__((target("pclmul,sse2"))) static inline __m128i fold(__m128i x, __m128i k)
{
    return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

__attribute__((target("pclmul,sse2"))) static uint32_t crc32_clmul(uint32_t c, const uint8_t *p,
                                                                   size_t n)
{
    const __m128i k512 = _mm_set_epi64x((long long)crc_fold512[1], (long long)crc_fold512[0]);
    const __m128i k128 = _mm_set_epi64x((long long)crc_fold128[1], (long long)crc_fold128[0]);
    /* The running register enters as the first four bytes' complement. */
    __m128i x0 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)p), _mm_cvtsi32_si128((int)c));
    __m128i x1 = _mm_loadu_si128((const __m128i *)(p + 16));
    __m128i x2 = _mm_loadu_si128((const __m128i *)(p + 32));
    __m128i x3 = _mm_loadu_si128((const __m128i *)(p + 48));
    p += 64;
    n -= 64;
    for (; n >= 64; p += 64, n -= 64) {
        /* A packet's payload is often one page of a large buffer, where the
         * hardware prefetcher stops: ask for a kilobyte ahead, into the
         * next page too (a prefetch never faults). */
        _mm_prefetch((const char *)p + 1024, _MM_HINT_T0);
        x0 = _mm_xor_si128(fold(x0, k512), _mm_loadu_si128((const __m128i *)p));
        x1 = _mm_xor_si128(fold(x1, k512), _mm_loadu_si128((const __m128i *)(p + 16)));
        x2 = _mm_xor_si128(fold(x2, k512), _mm_loadu_si128((const __m128i *)(p + 32)));
        x3 = _mm_xor_si128(fold(x3, k512), _mm_loadu_si128((const __m128i *)(p + 48)));
    }
    x1 = _mm_xor_si128(x1, fold(x0, k128));
    x2 = _mm_xor_si128(x2, fold(x1, k128));
    x3 = _mm_xor_si128(x3, fold(x2, k128));
    for (; n >= 16; p += 16, n -= 16)
        x3 = _mm_xor_si128(fold(x3, k128), _mm_loadu_si128((const __m128i *)p));
    uint8_t rest[16];
    _mm_storeu_si128((__m128i *)rest, x3);
    return crc32_table(crc32_table(0, rest, sizeof(rest)), p, n);
}

static uint32_t crc32_raw(uint32_t c, const uint8_t *p, size_t n)
{
    if (n >= 64 && __builtin_cpu_supports("pclmul"))
        return crc32_clmul(c, p, n);
    return crc32_table(c, p, n);
}
#else
static uint32_t crc32_raw(uint32_t c, const uint8_t *p, size_t n)
{
    return crc32_table(c, p, n);
}
#endif

uint32_t sr_crc32(uint32_t crc, const void *data, size_t len)
{
    return ~crc32_raw(~crc, data, len);
}

/* Product of two residues mod P in the CRC register's layout (bit 31 holds
 * x^0, bit 0 x^31). */
static uint32_t gf_mul(uint32_t a, uint32_t b)
{
    uint32_t p = 0;
    for (uint32_t m = 1u << 31; m; m >>= 1) {
        if (a & m)
            p ^= b;
        b = (b >> 1) ^ (0xedb88320u & (0u - (b & 1u))); /* b *= x */
    }
    return p;
}

/* x^(8n) mod P: what n zero bytes do to the register; one product per
 * set bit of n, from the generated powers x^(8 * 2^k). */
static uint32_t gf_xpow8(size_t n)
{
    uint32_t r = 1u << 31; /* x^0 */
    for (unsigned k = 0; n; n >>= 1, k++)
        if (n & 1)
            r = gf_mul(r, crc_xpow8[k]);
    return r;
}

/* The CRC is linear: flipping bits of the identification (IP header bytes
 * 4-5) changes the ICRC by the register those two bytes leave from zero,
 * carried through the covered bytes after them (x^(8 * shift)). */
static uint32_t id_term_at(uint32_t shift_pow, uint16_t id)
{
    uint8_t be[2] = {(uint8_t)(id >> 8), (uint8_t)id};
    return gf_mul(crc32_table(0, be, 2), shift_pow);
}

static bool id_len_ok(size_t ip_len)
{
    return ip_len >= SR_IPV4_HDR_LEN + SR_UDP_HDR_LEN + SR_BTH_LEN + SR_ICRC_LEN;
}

uint32_t sr_icrc_ipv4_id_term(size_t ip_len, uint16_t id)
{
    if (!id_len_ok(ip_len))
        return 0;
    return id_term_at(gf_xpow8(ip_len - 6 - SR_ICRC_LEN), id);
}

void sr_icrc_ipv4_id_terms(size_t ip_len, uint32_t *term, uint32_t n)
{
    if (!n)
        return;
    term[0] = 0;
    if (!id_len_ok(ip_len)) {
        memset(term, 0, n * sizeof(*term));
        return;
    }
    /* One power for the length, one product per identification bit; the
     * other identifications are sums of those (linear in id). */
    uint32_t pow = gf_xpow8(ip_len - 6 - SR_ICRC_LEN);
    for (uint32_t b = 1; b < n; b <<= 1) {
        uint32_t col = id_term_at(pow, (uint16_t)b);
        for (uint32_t id = b; id < 2 * b && id < n; id++)
            term[id] = term[id - b] ^ col;
    }
}

/* Length of the IP + UDP headers in front of the BTH, after checking that
 * this is RoCEv2 encapsulation we can mask: IPv4 without options or IPv6
 * without extension headers, UDP. */
static int l3_hdr_len(const uint8_t *ip, size_t len)
{
    if (len < 1)
        return SR_ERR_WIRE_SHORT;
    switch (ip[0] >> 4) {
    case 4:
        if (len < SR_IPV4_HDR_LEN + SR_UDP_HDR_LEN)
            return SR_ERR_WIRE_SHORT;
        if ((ip[0] & 0x0f) != 5 || ip[9] != 17)
            return SR_ERR_WIRE_L3;
        return SR_IPV4_HDR_LEN + SR_UDP_HDR_LEN;
    case 6:
        if (len < SR_IPV6_HDR_LEN + SR_UDP_HDR_LEN)
            return SR_ERR_WIRE_SHORT;
        if (ip[6] != 17)
            return SR_ERR_WIRE_L3;
        return SR_IPV6_HDR_LEN + SR_UDP_HDR_LEN;
    default:
        return SR_ERR_WIRE_L3;
    }
}

/* The variant fields of an IP + UDP header copy (l3 bytes) set to ones. */
static void mask_l3(uint8_t *h, int l3)
{
    if (l3 == SR_IPV4_HDR_LEN + SR_UDP_HDR_LEN) {
        h[1] = 0xff;          /* TOS: DSCP + ECN */
        h[8] = 0xff;          /* TTL */
        h[10] = h[11] = 0xff; /* header checksum */
    } else {
        h[0] |= 0x0f;              /* traffic class, high nibble */
        h[1] = h[2] = h[3] = 0xff; /* traffic class low nibble + flow label */
        h[7] = 0xff;               /* hop limit */
    }
    uint8_t *udp = h + l3 - SR_UDP_HDR_LEN;
    udp[6] = udp[7] = 0xff; /* UDP checksum */
}

/* The register after the 8 ones and the masked IP + UDP header (l3 bytes
 * at ip, already checked). */
static uint32_t prefix_of(const uint8_t *ip, int l3)
{
    uint8_t m[8 + SR_IPV6_HDR_LEN + SR_UDP_HDR_LEN];
    memset(m, 0xff, 8);
    memcpy(m + 8, ip, (size_t)l3);
    mask_l3(m + 8, l3);
    return crc32_raw(0xffffffffu, m, 8 + (size_t)l3);
}

int sr_icrc_prefix(const uint8_t *ip, size_t len, uint32_t *reg)
{
    int l3 = l3_hdr_len(ip, len);
    if (l3 < 0)
        return l3;
    *reg = prefix_of(ip, l3);
    return 0;
}

int sr_icrc_begin_prefix(struct sr_icrc_ctx *c, uint32_t reg, const uint8_t *hdr, size_t hdr_len)
{
    if (hdr_len < SR_BTH_LEN)
        return SR_ERR_WIRE_SHORT;
    /* The BTH's first 8 bytes with byte 4 (FECN, BECN, reserved) set to
     * ones, in registers: a masked copy in memory read back in words would
     * wait for the byte written into it, and with it for every store still
     * queued before it (the copy of the previous packet into its MR). */
    uint32_t lo, hi;
    memcpy(&lo, hdr, 4);
    memcpy(&hi, hdr + 4, 4);
    static const union {
        uint8_t b[4];
        uint32_t w;
    } ones0 = {.b = {0xff}};
    c->crc = crc32_raw(crc32_step8(reg, lo, hi | ones0.w), hdr + 8, hdr_len - 8);
    return 0;
}

int sr_icrc_begin(struct sr_icrc_ctx *c, const uint8_t *ip, size_t hdr_len)
{
    int l3 = l3_hdr_len(ip, hdr_len);
    if (l3 < 0)
        return l3;
    return sr_icrc_begin_prefix(c, prefix_of(ip, l3), ip + l3, hdr_len - (size_t)l3);
}

void sr_icrc_update(struct sr_icrc_ctx *c, const void *data, size_t len)
{
    c->crc = crc32_raw(c->crc, data, len);
}

uint32_t sr_icrc_final(const struct sr_icrc_ctx *c)
{
    return ~c->crc;
}

int sr_icrc_compute(const uint8_t *ip, size_t len, uint32_t *icrc)
{
    int l3 = l3_hdr_len(ip, len);
    if (l3 < 0)
        return l3;
    if (len < (size_t)l3 + SR_BTH_LEN + SR_ICRC_LEN)
        return SR_ERR_WIRE_SHORT;
    struct sr_icrc_ctx c;
    size_t body = len - SR_ICRC_LEN;
    int err = sr_icrc_begin(&c, ip, body);
    if (err)
        return err;
    *icrc = sr_icrc_final(&c);
    return 0;
}

int sr_icrc_fill(uint8_t *ip, size_t len)
{
    uint32_t icrc;
    int err = sr_icrc_compute(ip, len, &icrc);
    if (err)
        return err;
    sr_put_le32(ip + len - SR_ICRC_LEN, icrc);
    return 0;
}

int sr_icrc_verify(const uint8_t *ip, size_t len)
{
    uint32_t icrc;
    int err = sr_icrc_compute(ip, len, &icrc);
    if (err)
        return err;
    uint8_t want[4];
    sr_put_le32(want, icrc);
    return memcmp(want, ip + len - SR_ICRC_LEN, 4) ? SR_ERR_WIRE_ICRC : 0;
}
