/* fabric_pcap.c: a link tap that writes what the link carries as a pcap
 * file of Ethernet frames (the IPv4 RoCEv2 packets behind an Ethernet II
 * header), readable by tcpdump, Wireshark and tshark. The caller owns the
 * FILE; this file only formats. Format: the libpcap file format with
 * nanosecond timestamps (magic 0xa1b23c4d), link type 1 (LINKTYPE_ETHERNET),
 * with the file header and packet records of draft-ietf-opsawg-pcap. */
#include "sr_fabric.h"
#include "sr_wire.h"

#include <stdio.h>
#include <string.h>

#define FAB_ETH_LEN 14

static void put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put_le16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void fab_pcap_write(void *ctx, uint64_t ts_ns, const uint8_t *data, uint32_t stored,
                           uint32_t len)
{
    struct sr_fabric_pcap *pc = ctx;
    uint8_t rec[16 + FAB_ETH_LEN];
    /* A header-only packet is written whole: its payload as zeros and its
     * ICRC computed over them, so that every frame is a well-formed
     * RoCEv2 packet of its length on the wire. */
    if (stored < len && len <= sizeof(pc->buf)) {
        memcpy(pc->buf, data, stored);
        memset(pc->buf + stored, 0, len - stored);
        sr_icrc_fill(pc->buf, len);
        data = pc->buf;
        stored = len;
    }
    put_le32(rec, (uint32_t)(ts_ns / 1000000000u));
    put_le32(rec + 4, (uint32_t)(ts_ns % 1000000000u));
    put_le32(rec + 8, stored + FAB_ETH_LEN);
    put_le32(rec + 12, len + FAB_ETH_LEN);
    memcpy(rec + 16, pc->dst_mac, 6);
    memcpy(rec + 22, pc->src_mac, 6);
    rec[28] = 0x08; /* EtherType IPv4 */
    rec[29] = 0x00;
    if (fwrite(rec, sizeof(rec), 1, pc->out) != 1 || fwrite(data, 1, stored, pc->out) != stored)
        pc->err = true;
    pc->pkts++;
}

int sr_fabric_pcap_start(struct sr_fabric *f, int link, FILE *out, struct sr_fabric_pcap *pc)
{
    struct sr_fabric_link_stats st;
    if (!f || !out || !pc || sr_fabric_link_stats(f, link, &st) < 0)
        return SR_ERR_INVAL;
    memset(pc, 0, sizeof(*pc));
    pc->out = out;
    /* Locally administered unicast MACs naming the two ends by node id. */
    const int ends[2] = {st.from, st.to};
    uint8_t *macs[2] = {pc->src_mac, pc->dst_mac};
    for (int i = 0; i < 2; i++) {
        macs[i][0] = 0x02;
        macs[i][1] = 0;
        put_le32(macs[i] + 2, (uint32_t)ends[i]);
    }
    uint8_t hdr[24];
    put_le32(hdr, 0xa1b23c4d); /* nanosecond timestamps */
    put_le16(hdr + 4, 2);
    put_le16(hdr + 6, 4);
    put_le32(hdr + 8, 0);  /* reserved (thiszone) */
    put_le32(hdr + 12, 0); /* reserved (sigfigs) */
    put_le32(hdr + 16, 65535);
    put_le32(hdr + 20, 1); /* LINKTYPE_ETHERNET */
    if (fwrite(hdr, sizeof(hdr), 1, out) != 1)
        return SR_ERR_NOSPACE;
    return sr_fabric_set_tap(f, link, fab_pcap_write, pc);
}
