/* ecn_gro.c: both ends of the ECN-through-GRO test (ecn_gro.sh), on the
 * UDP driver (src/drivers/udp) with cfg.ecn.
 *   ecn_gro send SRC DST RUN RUNS   runs of RUN datagrams, alternately CE
 *                                   and ECT(0), each run one sendmmsg
 *   ecn_gro recv ADDR RUN RUNS      receives them (GRO on) and checks that
 *                                   every datagram reports the mark its run
 *                                   was sent with
 * The sender's marks are what a congested switch would have written: the
 * ECN field is masked out of the ICRC (IBA Annex A17.3.3), so the packets
 * stay valid. The receiver prints "pkts= wrong= gro_bufs=" and exits 0
 * only when every datagram came with its own mark; it gives up after 10 s. */
#include "sr_udp.h"
#include "sr_util.h"
#include "sr_wire.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { PAYLOAD = 1024, MAX_PKTS = 1 << 16 };

static void gid_of(const char *a, uint8_t gid[16])
{
    struct in_addr v4;
    if (inet_pton(AF_INET, a, &v4) != 1) {
        fprintf(stderr, "ecn_gro: %s is not an IPv4 address\n", a);
        exit(2);
    }
    memset(gid, 0, 16);
    gid[10] = gid[11] = 0xff;
    memcpy(gid + 12, &v4, 4);
}

static int mark_of(uint32_t psn, uint32_t run)
{
    return (psn / run) % 2 ? 2 : 3; /* CE, ECT(0), CE, ... */
}

struct rx {
    struct sr_udp *u;
    uint32_t run, total, got, wrong;
    uint8_t *seen;
};

static void rx_cb(void *arg, const uint8_t *pkt, size_t len, const uint8_t *src)
{
    struct rx *r = arg;
    (void)len;
    (void)src;
    uint32_t psn = sr_get_be24(pkt + 9);
    if (psn >= r->total || r->seen[psn])
        return;
    r->seen[psn] = 1;
    r->got++;
    if (sr_udp_rx_ecn(r->u) != mark_of(psn, r->run)) {
        if (r->wrong < 5)
            fprintf(stderr, "psn %u: ECN %u, sent %d\n", psn, sr_udp_rx_ecn(r->u),
                    mark_of(psn, r->run));
        r->wrong++;
    }
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: ecn_gro send SRC DST RUN RUNS | recv ADDR RUN RUNS\n");
        return 2;
    }
    bool send = strcmp(argv[1], "send") == 0;
    struct sr_udp_cfg c = {.ecn = true, .no_gso = true};
    gid_of(argv[2], c.addr);
    int a = send ? 4 : 3;
    uint32_t run = (uint32_t)atoi(argv[a]), runs = (uint32_t)atoi(argv[a + 1]);
    if (!run || !runs || (uint64_t)run * runs > MAX_PKTS)
        return 2;
    struct sr_udp *u;
    int err = sr_udp_open(&c, &u);
    if (err) {
        fprintf(stderr, "ecn_gro: sr_udp_open: %d\n", err);
        return 1;
    }
    if (send) {
        uint8_t dst[16];
        gid_of(argv[3], dst);
        static uint8_t payload[PAYLOAD];
        for (uint32_t r = 0; r < runs; r++) {
            int tos = mark_of(r * run, run);
            setsockopt(sr_udp_fd(u), IPPROTO_IP, IP_TOS, &tos, sizeof(tos));
            for (uint32_t k = 0; k < run; k++) {
                struct sr_pkt p = {0};
                p.bth.opcode = SR_OP_RC | SR_OP_SEND_MIDDLE;
                p.bth.pkey = 0xffff;
                p.bth.dest_qp = 0x11;
                p.bth.psn = r * run + k;
                uint8_t hdr[SR_MAX_HDR_LEN];
                int hl = sr_wire_encode_hdr(&p, hdr, sizeof(hdr));
                struct sr_iov iov = {payload, PAYLOAD};
                struct sr_tx_pkt t = {.hdr = hdr,
                                      .hdr_len = (uint32_t)hl,
                                      .iov = &iov,
                                      .iov_cnt = 1,
                                      .payload_len = PAYLOAD,
                                      .dgid = dst};
                sr_udp_queue(u, &t);
            }
            sr_udp_flush(u); /* one sendmmsg per run */
            if (r % 4 == 3) {
                /* room for the receiver: the veth ring holds 256 frames */
                struct timespec gap = {0, 200000};
                nanosleep(&gap, NULL);
            }
        }
        struct sr_udp_stats st;
        sr_udp_stats(u, &st);
        printf("sent=%llu drops=%llu\n", (unsigned long long)st.tx_pkts,
               (unsigned long long)st.tx_drops);
        sr_udp_close(u);
        return 0;
    }
    struct rx r = {.u = u, .run = run, .total = run * runs, .seen = calloc(run * runs, 1)};
    printf("ready\n");
    fflush(stdout);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < 100000 && r.got < r.total; i++) {
        if (sr_udp_recv(u, rx_cb, &r, 64) > 0)
            continue;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec - t0.tv_sec > 10)
            break;
        struct pollfd pfd = {.fd = sr_udp_fd(u), .events = POLLIN};
        if (poll(&pfd, 1, 1000) == 0 && r.got)
            break; /* a second of silence after traffic: what was lost is lost */
    }
    struct sr_udp_stats st;
    sr_udp_stats(u, &st);
    printf("pkts=%u of %u wrong=%u gro_bufs=%llu\n", r.got, r.total, r.wrong,
           (unsigned long long)st.rx_gro_bufs);
    free(r.seen);
    sr_udp_close(u);
    return r.wrong == 0 && r.got > 0 ? 0 : 1;
}
