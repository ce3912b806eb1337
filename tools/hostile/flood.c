/* srdma-flood: floods a live softrdma device with valid-looking RoCEv2
 * packets (correct ICRC, well-formed headers) that the device must drop or
 * answer without growing: RDMA WRITEs whose PSN lies ahead of the expected
 * one (one sequence NAK, then silence) or behind it (duplicates: re-ACKed),
 * duplicate READ requests it never answered, and packets to QPNs that do
 * not exist.
 *
 * Driven over stdin/stdout so a test can connect a QP to it first:
 *   -> addr 127.a.b.c               the address it claimed (port 4791)
 *   <- go <ip> <qpn> <epsn> <rkey> <va> <count>
 *   -> done sent=<n> answers=<n> errors=<n>
 * `srdma-flood --once <ip> <qpn> <epsn> <rkey> <va> <count>` skips the
 * dialogue (handy by hand against ibv_rc_pingpong and friends).
 *
 * Loopback only: the destination must be in 127.0.0.0/8. */
#include "sr_forge.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct flood_target {
    uint8_t gid[16];
    uint32_t qpn, epsn, rkey;
    uint64_t va;
    uint64_t count;
};

struct flood_result {
    uint64_t sent, answers, errors;
};

enum {
    FLOOD_PAYLOAD = 64,
    FLOOD_DRAIN_EVERY = 64, /* read the victim's answers so our queue never fills */
    FLOOD_MAX_COUNT = 100000000,
};

static void drain(const struct sr_forge *f, struct flood_result *r)
{
    uint8_t buf[4096 + 128];
    for (int i = 0; i < 1024; i++) {
        if (sr_forge_recv(f, buf, sizeof(buf), NULL, NULL, 0) < 0)
            return;
        r->answers++;
    }
}

/* One packet of the mix: i % 4 picks the kind, rng the numbers. */
static int flood_pkt(const struct sr_forge *f, const struct flood_target *t, uint64_t i,
                     uint64_t *rng, uint8_t *buf, size_t cap)
{
    static const uint8_t payload[FLOOD_PAYLOAD] = {0};
    struct sr_pkt p = {0};
    p.bth.pkey = 0xffff;
    p.bth.dest_qp = t->qpn;
    p.bth.ack_req = true;
    uint64_t r = sr_forge_rand(rng);
    /* Ahead of the expected PSN by 1 .. 2^23-1, or behind it by 1 .. 2^23:
     * the two halves of the 24-bit circle (IBA 9.7.5.1.2). */
    uint32_t ahead = sr_psn_add(t->epsn, 1 + (uint32_t)(r % 0x7ffffeu));
    uint32_t behind = sr_psn_add(t->epsn, SR_PSN_MASK + 1 - 1 - (uint32_t)(r % 0x7fffffu));
    switch (i % 4) {
    case 0:
    case 1:
        p.bth.opcode = SR_OP_RC | SR_OP_WRITE_ONLY;
        p.bth.psn = i % 4 == 0 ? ahead : behind;
        p.reth.va = t->va;
        p.reth.rkey = t->rkey;
        p.reth.dma_len = FLOOD_PAYLOAD;
        p.payload = payload;
        p.payload_len = FLOOD_PAYLOAD;
        break;
    case 2: /* a duplicate READ that was never answered: dropped */
        p.bth.opcode = SR_OP_RC | SR_OP_READ_REQ;
        p.bth.psn = behind;
        p.reth.va = t->va;
        p.reth.rkey = t->rkey;
        p.reth.dma_len = FLOOD_PAYLOAD;
        break;
    default: /* QPNs from 2^23 up: beyond any device's QP table */
        p.bth.opcode = SR_OP_RC | SR_OP_WRITE_ONLY;
        p.bth.dest_qp = 0x800000u | (uint32_t)(r >> 40 & 0x7fffffu);
        p.bth.psn = (uint32_t)r & SR_PSN_MASK;
        p.reth.va = t->va;
        p.reth.rkey = t->rkey;
        p.reth.dma_len = FLOOD_PAYLOAD;
        p.payload = payload;
        p.payload_len = FLOOD_PAYLOAD;
        break;
    }
    return sr_forge_build(f, t->gid, &p, buf, cap);
}

static void flood(const struct sr_forge *f, const struct flood_target *t, struct flood_result *r)
{
    uint64_t rng = 0x5eed0000u ^ t->qpn;
    uint8_t buf[256];
    memset(r, 0, sizeof(*r));
    for (uint64_t i = 0; i < t->count; i++) {
        int n = flood_pkt(f, t, i, &rng, buf, sizeof(buf));
        if (n < 0 || sr_forge_send(f, t->gid, buf, (size_t)n) != 0)
            r->errors++;
        else
            r->sent++;
        if (i % FLOOD_DRAIN_EVERY == 0)
            drain(f, r);
    }
    drain(f, r);
}

static int parse_target(char **argv, struct flood_target *t)
{
    char *end;
    if (sr_forge_aton(argv[0], t->gid) != 0 || t->gid[12] != 127)
        return -EINVAL; /* loopback only */
    t->qpn = (uint32_t)strtoul(argv[1], &end, 0);
    t->epsn = (uint32_t)strtoul(argv[2], &end, 0) & SR_PSN_MASK;
    t->rkey = (uint32_t)strtoul(argv[3], &end, 0);
    t->va = strtoull(argv[4], &end, 0);
    t->count = strtoull(argv[5], &end, 0);
    if (t->qpn > SR_PSN_MASK || t->count > FLOOD_MAX_COUNT)
        return -EINVAL;
    return 0;
}

int main(int argc, char **argv)
{
    struct sr_forge f;
    int err = sr_forge_open(&f, (uint32_t)getpid() * 7919u);
    if (err) {
        fprintf(stderr, "srdma-flood: cannot claim a loopback address: %s\n", strerror(-err));
        return 2;
    }
    char a[16];
    struct flood_target t;
    struct flood_result r;
    if (argc == 8 && !strcmp(argv[1], "--once")) {
        if (parse_target(argv + 2, &t)) {
            fprintf(stderr, "srdma-flood: bad target\n");
            return 2;
        }
        flood(&f, &t, &r);
        printf("done sent=%" PRIu64 " answers=%" PRIu64 " errors=%" PRIu64 "\n", r.sent, r.answers,
               r.errors);
        return r.errors ? 1 : 0;
    }
    printf("addr %s\n", sr_forge_ntoa(f.gid, a));
    fflush(stdout);
    char line[256];
    /* one "go" per line until EOF: a test may flood in several rounds */
    for (int round = 0; round < 64 && fgets(line, sizeof(line), stdin); round++) {
        char *tok[7];
        int n = 0;
        for (char *s = strtok(line, " \n"); s && n < 7; s = strtok(NULL, " \n"))
            tok[n++] = s;
        if (n != 7 || strcmp(tok[0], "go") || parse_target(tok + 1, &t)) {
            fprintf(stderr, "srdma-flood: want: go <ip> <qpn> <epsn> <rkey> <va> <count>\n");
            return 2;
        }
        flood(&f, &t, &r);
        printf("done sent=%" PRIu64 " answers=%" PRIu64 " errors=%" PRIu64 "\n", r.sent, r.answers,
               r.errors);
        fflush(stdout);
    }
    sr_forge_close(&f);
    return 0;
}
