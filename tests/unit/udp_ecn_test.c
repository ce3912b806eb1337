/* udp_ecn_test.c: ECN in the UDP driver, on loopback (127.0.0.0/8 and ::1).
 * With cfg.ecn a device sends ECT(0) and reports each received datagram's
 * ECN field (sr_udp_rx_ecn) through GSO trains and GRO batches: runs of
 * CE-marked and ECT(0) packets, interleaved, each arrive with their own
 * mark (IPv4 and IPv6). Without cfg.ecn nothing is reported. Every wait is
 * bounded by a poll() timeout and a count. */
#include "sr_test.h"
#include "sr_udp.h"
#include "sr_util.h"
#include "sr_wire.h"

#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

enum { WAIT_MS = 2000, RUN = 8, RUNS = 16, NPKT = RUN * RUNS, PAYLOAD = 1024 };

static const uint8_t v6_loopback[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};

struct ecn_log {
    struct sr_udp *u;
    int n;
    uint8_t ecn[NPKT]; /* by PSN */
    bool seen[NPKT];
    int bad_psn;
};

static void ecn_cb(void *arg, const uint8_t *pkt, size_t len, const uint8_t *src)
{
    struct ecn_log *log = arg;
    (void)len;
    (void)src;
    uint32_t psn = sr_get_be24(pkt + 9);
    if (psn >= NPKT) {
        log->bad_psn++;
        return;
    }
    log->ecn[psn] = sr_udp_rx_ecn(log->u);
    log->seen[psn] = true;
    log->n++;
}

static void rx_until(struct sr_udp *u, struct ecn_log *log, int want)
{
    for (int i = 0; i < 10000 && log->n < want; i++) {
        int r = sr_udp_recv(u, ecn_cb, log, 64);
        SR_CHECK(r >= 0);
        if (r < 0)
            break;
        if (r > 0)
            continue;
        struct pollfd pfd = {.fd = sr_udp_fd(u), .events = POLLIN};
        if (poll(&pfd, 1, WAIT_MS) <= 0)
            break;
    }
}

/* An RC SEND MIDDLE of PAYLOAD bytes with this PSN (what it is matters
 * little: the driver moves datagrams). */
static void queue_pkt(struct sr_udp *u, const uint8_t *dgid, uint32_t psn, const uint8_t *payload)
{
    struct sr_pkt p = {0};
    p.bth.opcode = SR_OP_RC | SR_OP_SEND_MIDDLE;
    p.bth.pkey = 0xffff;
    p.bth.dest_qp = 0x11;
    p.bth.psn = psn;
    uint8_t hdr[SR_MAX_HDR_LEN];
    int hl = sr_wire_encode_hdr(&p, hdr, sizeof(hdr));
    SR_CHECK(hl > 0);
    struct sr_iov iov = {payload, PAYLOAD};
    struct sr_tx_pkt t = {.hdr = hdr,
                          .hdr_len = (uint32_t)hl,
                          .iov = &iov,
                          .iov_cnt = 1,
                          .payload_len = PAYLOAD,
                          .dgid = dgid};
    SR_CHECK_EQ(sr_udp_queue(u, &t), 0);
}

/* The sender's TOS / traffic class, as congestion marks it on the way:
 * the ECN field is masked out of the ICRC (IBA Annex A17.3.3), so the
 * packets stay valid. */
static void set_ecn(struct sr_udp *u, bool v6, int ecn)
{
    int tos = ecn;
    int r = v6 ? setsockopt(sr_udp_fd(u), IPPROTO_IPV6, IPV6_TCLASS, &tos, sizeof(tos))
               : setsockopt(sr_udp_fd(u), IPPROTO_IP, IP_TOS, &tos, sizeof(tos));
    SR_CHECK_EQ(r, 0);
}

static bool open_pair(bool v6, bool rx_ecn, struct sr_udp **tx, struct sr_udp **rx)
{
    uint32_t seed = (uint32_t)getpid() * 7919u;
    struct sr_udp_cfg c = {.ecn = true, .auto_seed = seed};
    if (v6) {
        /* ::1 only: one of the two on another port */
        memcpy(c.addr, v6_loopback, 16);
        c.port = (uint16_t)(20000 + seed % 20000);
    }
    int e = sr_udp_open(&c, tx);
    if (e == SR_ERR_NOTSUP || (v6 && e))
        return false; /* no IPv6 here */
    SR_CHECK_EQ(e, 0);
    struct sr_udp_cfg d = {.ecn = rx_ecn, .auto_seed = seed + 1};
    if (v6)
        memcpy(d.addr, v6_loopback, 16);
    e = sr_udp_open(&d, rx);
    if (v6 && e) {
        sr_udp_close(*tx);
        return false;
    }
    SR_CHECK_EQ(e, 0);
    return e == 0;
}

/* Runs of RUN packets, alternately CE and ECT(0), each run one GSO train
 * (one flush), so the receiver gets GRO batches of one mark each. */
static void test_runs(bool v6)
{
    struct sr_udp *tx, *rx;
    if (!open_pair(v6, true, &tx, &rx)) {
        printf("  (no IPv6 loopback: skipped)\n");
        return;
    }
    static uint8_t payload[PAYLOAD];
    memset(payload, 0x5a, sizeof(payload));
    uint8_t want[NPKT];
    for (int r = 0; r < RUNS; r++) {
        int ecn = r % 2 ? 2 : 3; /* CE, ECT(0), CE, ... */
        set_ecn(tx, v6, ecn);
        for (int k = 0; k < RUN; k++) {
            queue_pkt(tx, sr_udp_addr(rx), (uint32_t)(r * RUN + k), payload);
            want[r * RUN + k] = (uint8_t)ecn;
        }
        SR_CHECK_EQ(sr_udp_flush(tx), 0);
    }
    struct ecn_log log = {.u = rx};
    rx_until(rx, &log, NPKT);
    SR_CHECK_EQ(log.n, NPKT);
    SR_CHECK_EQ(log.bad_psn, 0);
    int wrong = 0;
    for (int i = 0; i < NPKT; i++)
        wrong += !log.seen[i] || log.ecn[i] != want[i];
    SR_CHECK_EQ(wrong, 0);
    struct sr_udp_stats st;
    sr_udp_stats(rx, &st);
    /* batches happened (loopback keeps a GSO send whole for a GRO socket),
     * so the marks above were read per batch, not per datagram */
    if (sr_udp_trains(tx))
        SR_CHECK(st.rx_gro_bufs > 0);
    sr_udp_close(tx);
    sr_udp_close(rx);
}

/* The sender's default is ECT(0); a receiver without cfg.ecn reads none. */
static void test_default_and_off(void)
{
    static uint8_t payload[PAYLOAD];
    struct sr_udp *tx, *rx;
    SR_CHECK(open_pair(false, true, &tx, &rx));
    queue_pkt(tx, sr_udp_addr(rx), 1, payload);
    SR_CHECK_EQ(sr_udp_flush(tx), 0);
    struct ecn_log log = {.u = rx};
    rx_until(rx, &log, 1);
    SR_CHECK(log.seen[1]);
    SR_CHECK_EQ(log.ecn[1], 2); /* ECT(0) */
    sr_udp_close(rx);
    sr_udp_close(tx);

    SR_CHECK(open_pair(false, false, &tx, &rx));
    set_ecn(tx, false, 3);
    queue_pkt(tx, sr_udp_addr(rx), 2, payload);
    SR_CHECK_EQ(sr_udp_flush(tx), 0);
    struct ecn_log off = {.u = rx};
    rx_until(rx, &off, 1);
    SR_CHECK(off.seen[2]);
    SR_CHECK_EQ(off.ecn[2], 0); /* not asked for: not reported */
    sr_udp_close(rx);
    sr_udp_close(tx);
}

static void test_runs_v4(void)
{
    test_runs(false);
}
static void test_runs_v6(void)
{
    test_runs(true);
}

int main(void)
{
    SR_RUN(test_default_and_off);
    SR_RUN(test_runs_v4);
    SR_RUN(test_runs_v6);
    return SR_TEST_RESULT();
}
