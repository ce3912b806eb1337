/* l3.c: IPv4/IPv6 + UDP headers for RoCEv2 (Annex A17.4: UDP destination
 * port 4791; the source port carries flow entropy), and the Internet
 * checksums. Used by the capture writer, the simulator and anything that
 * needs the full packet for the ICRC. */
#include "sr_util.h"
#include "sr_wire.h"

uint16_t sr_inet_csum(const void *data, size_t len, uint32_t sum)
{
    const uint8_t *p = data;
    uint64_t s = sum;
    while (len >= 2) {
        s += (uint32_t)(p[0] << 8 | p[1]);
        p += 2;
        len -= 2;
    }
    if (len)
        s += (uint32_t)p[0] << 8;
    while (s >> 16)
        s = (s & 0xffff) + (s >> 16);
    return (uint16_t)~s;
}

/* sr_l3_encode without the IPv4 header checksum (left 0). */
static int l3_fill(const struct sr_l3_addr *a, size_t udp_payload_len, uint8_t *buf, size_t cap)
{
    size_t ip_len = a->ipv6 ? SR_IPV6_HDR_LEN : SR_IPV4_HDR_LEN;
    size_t udp_len = SR_UDP_HDR_LEN + udp_payload_len;
    if (cap < ip_len + SR_UDP_HDR_LEN)
        return SR_ERR_NOSPACE;
    if (udp_len > 0xffff || (!a->ipv6 && udp_len + ip_len > 0xffff) || a->flow_label > 0xfffff)
        return SR_ERR_RANGE;

    memset(buf, 0, ip_len + SR_UDP_HDR_LEN);
    if (a->ipv6) {
        sr_put_be32(buf, 6u << 28 | (uint32_t)a->tos << 20 | a->flow_label);
        sr_put_be16(buf + 4, (uint16_t)udp_len);
        buf[6] = 17; /* next header: UDP */
        buf[7] = a->ttl;
        memcpy(buf + 8, a->src, 16);
        memcpy(buf + 24, a->dst, 16);
    } else {
        buf[0] = 0x45;
        buf[1] = a->tos;
        sr_put_be16(buf + 2, (uint16_t)(ip_len + udp_len));
        sr_put_be16(buf + 4, a->ip_id);
        buf[6] = 0x40; /* DF: RoCEv2 packets are never fragmented */
        buf[8] = a->ttl;
        buf[9] = 17;
        memcpy(buf + 12, a->src, 4);
        memcpy(buf + 16, a->dst, 4);
    }
    uint8_t *udp = buf + ip_len;
    sr_put_be16(udp, a->src_port);
    sr_put_be16(udp + 2, a->dst_port ? a->dst_port : SR_ROCE_UDP_PORT);
    sr_put_be16(udp + 4, (uint16_t)udp_len);
    return (int)(ip_len + SR_UDP_HDR_LEN);
}

int sr_l3_encode(const struct sr_l3_addr *a, size_t udp_payload_len, uint8_t *buf, size_t cap)
{
    int hl = l3_fill(a, udp_payload_len, buf, cap);
    if (hl > 0 && !a->ipv6)
        sr_put_be16(buf + 10, sr_inet_csum(buf, SR_IPV4_HDR_LEN, 0));
    return hl;
}

int sr_icrc_l3_prefix(const struct sr_l3_addr *a, size_t tlen, uint32_t *reg)
{
    if (tlen < SR_BTH_LEN + SR_ICRC_LEN)
        return SR_ERR_WIRE_SHORT;
    /* The ICRC masks the IPv4 header checksum: not computed. */
    uint8_t h[SR_IPV6_HDR_LEN + SR_UDP_HDR_LEN];
    int hl = l3_fill(a, tlen, h, sizeof(h));
    if (hl < 0)
        return hl;
    return sr_icrc_prefix(h, (size_t)hl, reg);
}

int sr_icrc_begin_l3(struct sr_icrc_ctx *c, const struct sr_l3_addr *a, size_t tlen,
                     const uint8_t *bth)
{
    uint32_t reg;
    int err = sr_icrc_l3_prefix(a, tlen, &reg);
    if (err)
        return err;
    return sr_icrc_begin_prefix(c, reg, bth, SR_BTH_LEN);
}

int sr_l3_udp_csum(uint8_t *ip, size_t len)
{
    if (len < 1)
        return SR_ERR_WIRE_SHORT;
    bool v6 = (ip[0] >> 4) == 6;
    size_t ip_len = v6 ? SR_IPV6_HDR_LEN : SR_IPV4_HDR_LEN;
    if ((ip[0] >> 4) != 4 && !v6)
        return SR_ERR_WIRE_L3;
    if (len < ip_len + SR_UDP_HDR_LEN)
        return SR_ERR_WIRE_SHORT;
    uint8_t *udp = ip + ip_len;
    size_t udp_len = sr_get_be16(udp + 4);
    if (udp_len < SR_UDP_HDR_LEN || udp_len > len - ip_len)
        return SR_ERR_WIRE_L3;

    /* Pseudo-header sum (RFC 768 / RFC 8200 8.1), then the datagram. */
    uint32_t sum = 0;
    const uint8_t *src = v6 ? ip + 8 : ip + 12;
    size_t alen = v6 ? 16 : 4;
    for (size_t i = 0; i < 2 * alen; i += 2)
        sum += (uint32_t)(src[i] << 8 | src[i + 1]);
    sum += 17;
    sum += (uint32_t)udp_len;
    udp[6] = udp[7] = 0;
    uint16_t c = sr_inet_csum(udp, udp_len, sum);
    if (c == 0)
        c = 0xffff; /* 0 means "no checksum" in IPv4 and is illegal in IPv6 */
    sr_put_be16(udp + 6, c);
    return 0;
}
