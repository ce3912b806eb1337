/* srdma-wire: command-line front end of src/wire.
 *
 *   srdma-wire --sample-pcap FILE [--ipv6]
 *       Write a pcap holding one RoCEv2 packet of every opcode src/wire
 *       supports (Ethernet / IPv4 or IPv6 / UDP 4791, correct IP and UDP
 *       checksums and ICRC), and print one line per packet describing the
 *       fields that were encoded, for conformance checks against tshark.
 *   srdma-wire --opcodes
 *       Print the opcode table.
 */
#include "sr_util.h"
#include "sr_wire.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SAMPLE_PMTU = 256, ETH_HDR_LEN = 14 };

struct pcap_writer {
    FILE *f;
    uint32_t ts;
};

static int pcap_open(struct pcap_writer *w, const char *path)
{
    uint8_t hdr[24] = {0};
    sr_put_le32(hdr, 0xa1b2c3d4); /* microsecond pcap, little-endian */
    hdr[4] = 2;                   /* version 2.4 */
    hdr[6] = 4;
    sr_put_le32(hdr + 16, 65535); /* snaplen */
    sr_put_le32(hdr + 20, 1);     /* LINKTYPE_ETHERNET */
    w->f = fopen(path, "wb");
    if (!w->f)
        return -errno;
    w->ts = 0;
    return fwrite(hdr, sizeof(hdr), 1, w->f) == 1 ? 0 : -EIO;
}

static int pcap_write(struct pcap_writer *w, const uint8_t *frame, size_t len)
{
    uint8_t rec[16];
    sr_put_le32(rec, 1796000000u + w->ts / 1000000u); /* fixed, reproducible timestamps */
    sr_put_le32(rec + 4, w->ts % 1000000u);
    sr_put_le32(rec + 8, (uint32_t)len);
    sr_put_le32(rec + 12, (uint32_t)len);
    w->ts += 10;
    if (fwrite(rec, sizeof(rec), 1, w->f) != 1 || fwrite(frame, len, 1, w->f) != 1)
        return -EIO;
    return 0;
}

/* Fields of sample packet i for opcode op: distinct per packet so that a
 * decoder mixing up offsets shows. */
static void sample_pkt(struct sr_pkt *p, const struct sr_opcode_info *info, uint8_t op, unsigned i,
                       const uint8_t *payload)
{
    memset(p, 0, sizeof(*p));
    p->bth.opcode = op;
    p->bth.pkey = 0xffff;
    p->bth.dest_qp = 0x000100 + i;
    p->bth.psn = sr_psn_add(0xfffff0, i); /* crosses the 2^24 wrap */
    p->bth.se = (info->flags & SR_OPF_SOLICIT) && (i & 1);
    p->bth.ack_req =
        (info->flags & (SR_OPF_REQUEST)) && (info->flags & (SR_OPF_LAST | SR_OPF_ONLY));
    p->bth.becn = op == SR_OP_CNP;
    p->reth = (struct sr_reth){
        .va = 0x00007f0000001000ull + i * 0x1000u, .rkey = 0x1000 + i, .dma_len = 8192};
    p->aeth = (struct sr_aeth){.syndrome = 0x1f, .msn = 0x000200 + i};
    if (op == (SR_OP_RC | SR_OP_ACK) && (i & 1))
        p->aeth.syndrome = SR_AETH_NAK | SR_NAK_PSN_SEQ;
    else if (op == (SR_OP_RC | SR_OP_ACK)) /* held 20 us, to a SACK peer (docs/WIRE.md) */
        p->bth.resv7 = SR_BTH_RESV7_SACK | 13;
    p->atomic = (struct sr_atomic_eth){.va = 0x00007f0000002000ull + 8u * i,
                                       .rkey = 0x2000 + i,
                                       .swap_add = 0x1111111111111111ull * (i % 15 + 1),
                                       .compare = op == (SR_OP_RC | SR_OP_CMP_SWAP) ? 42 + i : 0};
    p->atomic_orig = 0x0123456789abcdefull + i;
    p->imm = 0xc0de0000u + i;
    p->ieth_rkey = 0x3000 + i;
    p->deth = (struct sr_deth){.qkey = 0x11111111, .src_qp = 0x000300 + i};
    p->hdrs = info->hdrs;
    if (info->flags & SR_OPF_PAYLOAD) {
        p->payload = payload;
        p->payload_len = (info->flags & (SR_OPF_FIRST | SR_OPF_MIDDLE)) ? SAMPLE_PMTU : 1 + i % 37;
    }
    if (info->flags & SR_OPF_ONLY) /* a single-packet WRITE moves exactly its payload */
        p->reth.dma_len = p->payload_len;
    if (info->flags & SR_OPF_SACK) { /* softrdma's SACK: two 64-bit words of bitmap */
        p->payload_len = 16;
        p->sack.base_psn = sr_psn_add(p->bth.psn, 2);
    }
}

/* One line per packet: the fields as encoded, as "name=value" pairs with the
 * names tshark uses (infiniband.<hdr>.<field>), values in decimal. */
static void describe(FILE *out, unsigned i, const struct sr_pkt *p)
{
    fprintf(out,
            "%u opcode=%u name=%s bth.se=%d bth.m=%d bth.padcnt=%u bth.tver=0 bth.p_key=%u "
            "bth.destqp=%u bth.a=%d bth.psn=%u",
            i, p->bth.opcode, sr_opcode_name(p->bth.opcode), p->bth.se, p->bth.migreq,
            sr_wire_pad_len(p->payload_len), p->bth.pkey, p->bth.dest_qp, p->bth.ack_req,
            p->bth.psn);
    if (p->hdrs & SR_HDR_BIT(SR_HDR_RETH))
        fprintf(out, " reth.va=%" PRIu64 " reth.r_key=%u reth.dmalen=%u", p->reth.va, p->reth.rkey,
                p->reth.dma_len);
    if (p->hdrs & SR_HDR_BIT(SR_HDR_AETH))
        fprintf(out, " aeth.syndrome=%u aeth.msn=%u", p->aeth.syndrome, p->aeth.msn);
    if (p->hdrs & SR_HDR_BIT(SR_HDR_ATOMIC_ETH))
        fprintf(out,
                " atomiceth.va=%" PRIu64 " atomiceth.r_key=%u atomiceth.swapdt=%" PRIu64
                " atomiceth.cmpdt=%" PRIu64,
                p->atomic.va, p->atomic.rkey, p->atomic.swap_add, p->atomic.compare);
    if (p->hdrs & SR_HDR_BIT(SR_HDR_ATOMIC_ACK_ETH))
        fprintf(out, " atomicacketh.origremdt=%" PRIu64, p->atomic_orig);
    if (p->hdrs & SR_HDR_BIT(SR_HDR_IMMDT))
        fprintf(out, " immdt=%u", p->imm);
    if (p->hdrs & SR_HDR_BIT(SR_HDR_IETH))
        fprintf(out, " ieth=%u", p->ieth_rkey);
    if (p->hdrs & SR_HDR_BIT(SR_HDR_DETH))
        fprintf(out, " deth.q_key=%u deth.srcqp=%u", p->deth.qkey, p->deth.src_qp);
    fprintf(out, " payload_len=%u\n", p->payload_len);
}

static int write_samples(const char *path, bool ipv6)
{
    struct pcap_writer w;
    int err = pcap_open(&w, path);
    if (err) {
        fprintf(stderr, "srdma-wire: %s: %s\n", path, strerror(-err));
        return 1;
    }
    static uint8_t payload[SR_MAX_PMTU];
    for (size_t k = 0; k < sizeof(payload); k++)
        payload[k] = (uint8_t)(k ^ 0x5a);

    static uint8_t frame[ETH_HDR_LEN + SR_IPV6_HDR_LEN + SR_UDP_HDR_LEN + SR_MAX_HDR_LEN +
                         SR_MAX_PMTU + SR_ICRC_LEN];
    static const uint8_t eth[ETH_HDR_LEN] = {0x02, 0x00, 0x00, 0x00, 0x00, 0x02, /* dst */
                                             0x02, 0x00, 0x00, 0x00, 0x00, 0x01, /* src */
                                             0x08, 0x00};
    unsigned n = 0;
    bool acked_twice = false;
    for (unsigned op = 0; op < 256; op++) {
        const struct sr_opcode_info *info = sr_opcode_info((uint8_t)op);
        /* XRC is left out: Wireshark 4.0 names XRC opcodes but cannot
         * dissect their headers, so the capture could not be checked. */
        if (!info || SR_OPCODE_TRANSPORT(op) == SR_OP_XRC)
            continue;
        struct sr_pkt p;
        sample_pkt(&p, info, (uint8_t)op, n, payload);
        struct sr_l3_addr a = {.ipv6 = ipv6,
                               .src_port = (uint16_t)(0xc000 | n),
                               .ttl = 64,
                               .ip_id = 0,
                               .tos = 0x02 /* ECT(0) */};
        if (ipv6) {
            static const uint8_t s6[16] = {0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
            memcpy(a.src, s6, 16);
            memcpy(a.dst, s6, 16);
            a.dst[15] = 2;
            a.flow_label = 0x12345;
        } else {
            static const uint8_t s4[4] = {127, 0, 0, 1};
            memcpy(a.src, s4, 4);
            memcpy(a.dst, s4, 4);
            a.dst[3] = 2;
        }
        memcpy(frame, eth, ETH_HDR_LEN);
        if (ipv6) {
            frame[12] = 0x86;
            frame[13] = 0xdd;
        }
        uint8_t *ip = frame + ETH_HDR_LEN;
        size_t tlen = sr_wire_pkt_len((uint8_t)op, p.payload_len);
        int hl = sr_l3_encode(&a, tlen, ip, sizeof(frame) - ETH_HDR_LEN);
        int tl =
            hl < 0 ? hl : sr_wire_encode(&p, ip + hl, sizeof(frame) - ETH_HDR_LEN - (size_t)hl);
        if (tl < 0) {
            fprintf(stderr, "srdma-wire: encoding %s: %s\n", info->name, sr_strerror(tl));
            fclose(w.f);
            return 1;
        }
        size_t ip_len = (size_t)hl + (size_t)tl;
        if ((err = sr_icrc_fill(ip, ip_len)) || (err = sr_l3_udp_csum(ip, ip_len)) ||
            (err = pcap_write(&w, frame, ETH_HDR_LEN + ip_len))) {
            fprintf(stderr, "srdma-wire: %s: %s\n", info->name,
                    err < -99 ? sr_strerror(err) : strerror(-err));
            fclose(w.f);
            return 1;
        }
        describe(stdout, n, &p);
        n++;
        if (op == (SR_OP_RC | SR_OP_ACK) && !acked_twice) {
            acked_twice = true; /* once more: a NAK and a held ACK, by parity */
            op--;
        }
    }
    if (fclose(w.f)) {
        fprintf(stderr, "srdma-wire: %s: %s\n", path, strerror(errno));
        return 1;
    }
    fprintf(stderr, "srdma-wire: wrote %u packets to %s\n", n, path);
    return 0;
}

static void list_opcodes(void)
{
    printf("%-4s %-36s %-7s %s\n", "op", "name", "hdrlen", "headers");
    static const char *const hdr_names[SR_HDR_NUM] = {
        "RETH", "AETH", "AtomicETH", "AtomicAckETH", "ImmDt", "IETH", "DETH", "CNP-pad", "XRCETH"};
    for (unsigned op = 0; op < 256; op++) {
        const struct sr_opcode_info *info = sr_opcode_info((uint8_t)op);
        if (!info)
            continue;
        printf("0x%02x %-36s %-7u BTH", op, info->name, info->hdr_len);
        for (int h = 0; h < SR_HDR_NUM; h++)
            if (info->hdrs & SR_HDR_BIT(h))
                printf(" %s@%u", hdr_names[h], info->off[h]);
        printf("%s\n", (info->flags & SR_OPF_PAYLOAD) ? " +payload" : "");
    }
}

static void usage(FILE *f)
{
    fprintf(f, "usage: srdma-wire --sample-pcap FILE [--ipv6]\n"
               "       srdma-wire --opcodes\n");
}

int main(int argc, char **argv)
{
    const char *pcap = NULL;
    bool ipv6 = false, opcodes = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--sample-pcap") && i + 1 < argc) {
            pcap = argv[++i];
        } else if (!strcmp(argv[i], "--ipv6")) {
            ipv6 = true;
        } else if (!strcmp(argv[i], "--opcodes")) {
            opcodes = true;
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (opcodes) {
        list_opcodes();
        return 0;
    }
    if (!pcap) {
        usage(stderr);
        return 2;
    }
    return write_samples(pcap, ipv6);
}
