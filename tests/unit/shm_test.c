/* shm_test.c: the shared-memory driver. Devices live in a private
 * directory under /dev/shm; addresses are made up (nothing binds them). */
#include "sr_bulk.h"
#include "sr_shm.h"
#include "sr_test.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char dir[64];

static void gid_of(uint8_t gid[16], uint32_t host)
{
    memset(gid, 0, 16);
    gid[10] = gid[11] = 0xff;
    gid[12] = 127;
    gid[13] = (uint8_t)(host >> 16);
    gid[14] = (uint8_t)(host >> 8);
    gid[15] = (uint8_t)host;
}

/* Send and publish at once (sr_shm_flush), like a burst of one. */
static int xsend(struct sr_shm *s, const struct sr_tx_pkt *t)
{
    int r = sr_shm_send(s, t);
    sr_shm_flush(s);
    return r;
}

static struct sr_shm *dev_open(uint32_t host, uint16_t port)
{
    struct sr_shm_cfg c = {.port = port, .dir = dir};
    gid_of(c.gid, host);
    struct sr_shm *s = NULL;
    SR_CHECK_EQ(sr_shm_open(&c, &s), 0);
    return s;
}

/* A packet: a 12-byte "BTH" carrying seq, then payload bytes (seq + i),
 * split in two pieces. */
struct pkt {
    uint8_t hdr[12];
    uint8_t payload[4096];
    struct sr_iov iov[2];
    uint8_t dgid[16];
    struct sr_tx_pkt t;
};

static const struct sr_tx_pkt *pkt_make(struct pkt *p, uint32_t to, uint32_t seq, uint32_t len,
                                        uint32_t pad)
{
    memset(p->hdr, 0, sizeof(p->hdr));
    memcpy(p->hdr + 8, &seq, 4);
    for (uint32_t i = 0; i < len; i++)
        p->payload[i] = (uint8_t)(seq + i);
    uint32_t half = len / 3;
    p->iov[0] = (struct sr_iov){p->payload, half};
    p->iov[1] = (struct sr_iov){p->payload + half, len - half};
    gid_of(p->dgid, to);
    p->t = (struct sr_tx_pkt){.hdr = p->hdr,
                              .hdr_len = 12,
                              .iov = p->iov,
                              .iov_cnt = 2,
                              .payload_len = len,
                              .pad_len = pad,
                              .dgid = p->dgid};
    return &p->t;
}

struct rx {
    int n;
    uint32_t next_seq;
    uint32_t len[8]; /* payload length of each expected packet, by seq % 8 */
    uint32_t pad;
    uint8_t src[16];
    int bad;
};

static void rx_cb(void *arg, const uint8_t *pkt, size_t len, const uint8_t *src, uint32_t ref_pid)
{
    (void)ref_pid;
    struct rx *r = arg;
    uint32_t seq;
    memcpy(&seq, pkt + 8, 4);
    uint32_t plen = r->len[seq % 8];
    bool ok = seq == r->next_seq && len == 12 + plen + r->pad + 4;
    for (uint32_t i = 0; ok && i < plen; i++)
        ok = pkt[12 + i] == (uint8_t)(seq + i);
    for (uint32_t i = 0; ok && i < r->pad + 4; i++)
        ok = pkt[12 + plen + i] == 0;
    if (!ok)
        r->bad++;
    memcpy(r->src, src, 16);
    r->next_seq = seq + 1;
    r->n++;
}

static void test_roundtrip(void)
{
    struct sr_shm *a = dev_open(1, 4791), *b = dev_open(2, 4791), *d = dev_open(4, 5000);
    struct pkt p;
    /* what sr_shm_reaches says is where sr_shm_send puts it */
    uint8_t g[16];
    gid_of(g, 2);
    SR_CHECK(sr_shm_reaches(a, g));
    gid_of(g, 3);
    SR_CHECK(!sr_shm_reaches(a, g));
    gid_of(g, 4);
    SR_CHECK(!sr_shm_reaches(a, g));
    /* no mailbox: another driver's */
    SR_CHECK_EQ(xsend(a, pkt_make(&p, 3, 0, 10, 0)), SR_SHM_REMOTE);
    /* a mailbox on another port: senders look for 4791 only, like UDP */
    SR_CHECK_EQ(xsend(a, pkt_make(&p, 4, 0, 10, 0)), SR_SHM_REMOTE);
    SR_CHECK_EQ(xsend(a, pkt_make(&p, 2, 0, 1000, 2)), 0);
    struct rx r = {.len = {1000}, .pad = 2};
    SR_CHECK(sr_shm_pending(b));
    SR_CHECK_EQ(sr_shm_recv(b, rx_cb, &r, 64), 1);
    SR_CHECK_EQ(r.bad, 0);
    uint8_t ga[16];
    gid_of(ga, 1);
    SR_CHECK_MEM(r.src, ga, 16);
    SR_CHECK(!sr_shm_pending(b));
    SR_CHECK_EQ(sr_shm_recv(b, rx_cb, &r, 64), 0);
    struct sr_shm_stats sa, sb;
    sr_shm_stats(a, &sa);
    sr_shm_stats(b, &sb);
    SR_CHECK_EQ(sa.tx_pkts, 1);
    SR_CHECK_EQ(sa.tx_bytes, 12 + 1000 + 2 + 4);
    SR_CHECK_EQ(sa.peers, 1);
    SR_CHECK_EQ(sb.rx_pkts, 1);
    SR_CHECK_EQ(sb.senders, 1);
    /* malformed: short header, pad > 3, pieces that do not add up, too big */
    pkt_make(&p, 2, 1, 10, 0);
    p.t.hdr_len = 11;
    SR_CHECK_EQ(xsend(a, &p.t), SR_ERR_INVAL);
    pkt_make(&p, 2, 1, 10, 4);
    SR_CHECK_EQ(xsend(a, &p.t), SR_ERR_INVAL);
    pkt_make(&p, 2, 1, 10, 0);
    p.t.payload_len = 11;
    SR_CHECK_EQ(xsend(a, &p.t), SR_ERR_INVAL);
    pkt_make(&p, 2, 1, 10, 0);
    p.t.payload_len = p.iov[1].len = SR_SHM_MAX_PKT;
    SR_CHECK_EQ(xsend(a, &p.t), SR_ERR_INVAL);
    SR_CHECK_EQ(sr_shm_recv(b, rx_cb, &r, 64), 0);
    sr_shm_close(a);
    sr_shm_close(b);
    sr_shm_close(d);
}

/* Many rounds of mixed sizes: the ring wraps several times, every packet
 * arrives once, in order, intact; a partial drain (max) resumes. */
static void test_wrap(void)
{
    struct sr_shm *a = dev_open(1, 4791), *b = dev_open(2, 4791);
    struct rx r = {.len = {1, 4096, 333, 4000, 64, 2048, 7, 3000}};
    struct pkt p;
    uint32_t seq = 0;
    uint64_t bytes = 0;
    int sent = 0, got = 0, fails = 0;
    while (bytes < 3ull * SR_SHM_RING) {
        for (int k = 0; k < 200; k++, seq++) {
            fails += xsend(a, pkt_make(&p, 2, seq, r.len[seq % 8], 0)) != 0;
            bytes += r.len[seq % 8];
            sent++;
        }
        got += sr_shm_recv(b, rx_cb, &r, 50);
        got += sr_shm_recv(b, rx_cb, &r, 1000);
    }
    SR_CHECK_EQ(fails, 0);
    SR_CHECK_EQ(got, sent);
    SR_CHECK_EQ(r.bad, 0);
    SR_CHECK_EQ(r.next_seq, seq);
    sr_shm_close(a);
    sr_shm_close(b);
}

/* A receiver that falls behind: what does not fit its ring waits in the
 * sender's backlog and goes in, in order, as room appears (sends
 * interleaved with partial drains); nothing is dropped. */
static void test_backlog(void)
{
    struct sr_shm *a = dev_open(1, 4791), *b = dev_open(2, 4791);
    struct pkt p;
    /* 4096 + 12 + 4 + 8 bytes: 65 aligned lines per record */
    const uint32_t fit = SR_SHM_RING / 4160, total = 3 * fit + 100;
    uint32_t seq = 0;
    int fails = 0;
    for (; seq < 2 * fit; seq++)
        fails += xsend(a, pkt_make(&p, 2, seq, 4096, 0)) != 0;
    SR_CHECK_EQ(fails, 0);
    struct sr_shm_stats st;
    sr_shm_stats(a, &st);
    SR_CHECK_EQ(st.tx_queued, fit);
    SR_CHECK_EQ(st.tx_drops, 0);
    SR_CHECK(!sr_shm_flush(a)); /* the ring is still full */
    struct rx r = {.len = {4096, 4096, 4096, 4096, 4096, 4096, 4096, 4096}};
    uint32_t got = 0;
    for (int round = 0; round < 10000 && got < total; round++) {
        got += (uint32_t)sr_shm_recv(b, rx_cb, &r, 300);
        if (seq < total) /* new packets queue behind the backlog */
            fails += xsend(a, pkt_make(&p, 2, seq++, 4096, 0)) != 0;
        sr_shm_flush(a);
    }
    SR_CHECK_EQ(fails, 0);
    SR_CHECK_EQ(got, total);
    SR_CHECK_EQ(r.bad, 0);
    SR_CHECK_EQ(r.next_seq, total);
    SR_CHECK(sr_shm_flush(a));
    sr_shm_stats(a, &st);
    SR_CHECK_EQ(st.tx_drops, 0);
    sr_shm_close(a);
    sr_shm_close(b);
}

/* A burst is published whole: nothing of it is seen before the flush
 * (an ACK and the request it rides with arrive together). */
static void test_burst(void)
{
    struct sr_shm *a = dev_open(1, 4791), *b = dev_open(2, 4791);
    struct pkt p;
    struct rx r = {.len = {10, 20, 10, 20, 10, 20, 10, 20}};
    SR_CHECK_EQ(sr_shm_send(a, pkt_make(&p, 2, 0, 10, 0)), 0);
    SR_CHECK_EQ(sr_shm_send(a, pkt_make(&p, 2, 1, 20, 0)), 0);
    SR_CHECK(!sr_shm_pending(b));
    SR_CHECK_EQ(sr_shm_recv(b, rx_cb, &r, 64), 0);
    SR_CHECK(sr_shm_flush(a));
    SR_CHECK_EQ(sr_shm_recv(b, rx_cb, &r, 64), 2);
    SR_CHECK_EQ(r.bad, 0);
    sr_shm_close(a);
    sr_shm_close(b);
}

static bool readable(int fd)
{
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    return poll(&pfd, 1, 0) == 1;
}

/* A sleeping receiver is rung once; an awake one is not; one that has a
 * packet waiting is told not to sleep. */
static void test_doorbell(void)
{
    struct sr_shm *a = dev_open(1, 4791), *b = dev_open(2, 4791);
    struct pkt p;
    struct rx r = {.len = {100, 100, 100, 100, 100, 100, 100, 100}};
    SR_CHECK(sr_shm_sleep(b));
    SR_CHECK(!readable(sr_shm_fd(b)));
    SR_CHECK_EQ(xsend(a, pkt_make(&p, 2, 0, 100, 0)), 0);
    SR_CHECK_EQ(xsend(a, pkt_make(&p, 2, 1, 100, 0)), 0);
    SR_CHECK(readable(sr_shm_fd(b)));
    struct sr_shm_stats st;
    sr_shm_stats(a, &st);
    SR_CHECK_EQ(st.tx_bells, 1);
    sr_shm_wake(b, true);
    SR_CHECK(!readable(sr_shm_fd(b)));
    SR_CHECK(!sr_shm_sleep(b)); /* two packets wait */
    SR_CHECK_EQ(xsend(a, pkt_make(&p, 2, 2, 100, 0)), 0);
    sr_shm_stats(a, &st);
    SR_CHECK_EQ(st.tx_bells, 1);
    SR_CHECK_EQ(sr_shm_recv(b, rx_cb, &r, 64), 3);
    SR_CHECK_EQ(r.bad, 0);
    SR_CHECK(!readable(sr_shm_fd(b)));
    sr_shm_close(a);
    sr_shm_close(b);
}

static int dir_count(void)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

/* A receiver that closed makes its senders turn to UDP; a sender that
 * closed frees its slot once its packets are read; a device closing
 * removes its files. */
static void test_close(void)
{
    struct sr_shm *a = dev_open(1, 4791), *b = dev_open(2, 4791);
    SR_CHECK_EQ(dir_count(), 4);
    struct pkt p;
    struct rx r = {.len = {10, 10, 10, 10, 10, 10, 10, 10}};
    SR_CHECK_EQ(xsend(a, pkt_make(&p, 2, 0, 10, 0)), 0);
    sr_shm_close(a);
    struct sr_shm_stats st;
    sr_shm_stats(b, &st);
    SR_CHECK_EQ(st.senders, 1);
    SR_CHECK_EQ(sr_shm_recv(b, rx_cb, &r, 64), 1); /* still delivered */
    sr_shm_stats(b, &st);
    SR_CHECK_EQ(st.senders, 0);
    SR_CHECK_EQ(dir_count(), 2);

    a = dev_open(1, 4791);
    SR_CHECK_EQ(xsend(a, pkt_make(&p, 2, 1, 10, 0)), 0);
    sr_shm_close(b);
    SR_CHECK_EQ(xsend(a, pkt_make(&p, 2, 2, 10, 0)), SR_SHM_REMOTE);
    sr_shm_stats(a, &st);
    SR_CHECK_EQ(st.peers, 0);
    SR_CHECK_EQ(xsend(a, pkt_make(&p, 2, 3, 10, 0)), SR_SHM_REMOTE);
    sr_shm_close(a);
    SR_CHECK_EQ(dir_count(), 0);
}

/* SR_SHM_SLOTS senders at once; one more gets UDP. */
static void test_slots(void)
{
    struct statvfs fs; /* 65 rings of 4 MiB: a small /dev/shm (containers) cannot */
    if (statvfs(dir, &fs) == 0 && (uint64_t)fs.f_bavail * fs.f_frsize < (300ull << 20)) {
        printf("test_slots: skipped, less than 300 MiB free in %s\n", dir);
        return;
    }
    struct sr_shm *b = dev_open(2, 4791), *s[SR_SHM_SLOTS + 1];
    struct pkt p;
    int ok = 0;
    for (int i = 0; i <= SR_SHM_SLOTS; i++) {
        s[i] = dev_open(100 + (uint32_t)i, 4791);
        ok += s[i] && xsend(s[i], pkt_make(&p, 2, 0, 10, 0)) == 0;
    }
    SR_CHECK_EQ(ok, SR_SHM_SLOTS);
    SR_CHECK_EQ(xsend(s[SR_SHM_SLOTS], pkt_make(&p, 2, 0, 10, 0)), SR_SHM_REMOTE);
    struct rx r = {.len = {10, 10, 10, 10, 10, 10, 10, 10}};
    int got = 0;
    for (int i = 0; i < SR_SHM_SLOTS; i++) {
        r.next_seq = 0; /* every sender starts at 0; one packet per call */
        got += sr_shm_recv(b, rx_cb, &r, 1);
    }
    SR_CHECK_EQ(got, SR_SHM_SLOTS);
    SR_CHECK_EQ(r.bad, 0);
    for (int i = 0; i <= SR_SHM_SLOTS; i++)
        sr_shm_close(s[i]);
    sr_shm_close(b);
}

/* A record whose length breaks the ring (a sender that scribbled over
 * it): its packets are dropped and counted, the ring goes on. */
/* The path of host's mailbox (port 4791) in dir, opened read-write. */
static int mailbox_open(uint32_t host)
{
    char needle[32], path[400] = "";
    snprintf(needle, sizeof(needle), "7f%06x-4791", (unsigned)host);
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));)
        if (strstr(e->d_name, needle) && !strstr(e->d_name, ".bell"))
            snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    if (d)
        closedir(d);
    return open(path, O_RDWR);
}

static void test_corrupt(void)
{
    struct sr_shm *a = dev_open(1, 4791), *b = dev_open(2, 4791);
    struct pkt p;
    struct rx r = {.len = {10, 10, 10, 10, 10, 10, 10, 10}};
    SR_CHECK_EQ(xsend(a, pkt_make(&p, 2, 0, 10, 0)), 0);
    SR_CHECK_EQ(xsend(a, pkt_make(&p, 2, 1, 10, 0)), 0);
    /* the layout (shm.c): 8 KiB header, slot 0's control page, its ring */
    int fd = mailbox_open(2);
    SR_CHECK(fd >= 0);
    uint32_t bad = SR_SHM_RING; /* longer than the ring */
    SR_CHECK_EQ(pwrite(fd, &bad, 4, 8192 + 4096), 4);
    close(fd);
    SR_CHECK_EQ(sr_shm_recv(b, rx_cb, &r, 64), 0);
    struct sr_shm_stats st;
    sr_shm_stats(b, &st);
    SR_CHECK_EQ(st.rx_bad, 1);
    r.next_seq = 2;
    SR_CHECK_EQ(xsend(a, pkt_make(&p, 2, 2, 10, 0)), 0);
    SR_CHECK_EQ(sr_shm_recv(b, rx_cb, &r, 64), 1);
    SR_CHECK_EQ(r.bad, 0);
    sr_shm_close(a);
    sr_shm_close(b);
}

/* A child process opens a device, sends to b and dies without closing:
 * its slot in b's mailbox is reclaimed (b's sweep), its own mailbox is
 * removed by the next device to open. */
static struct sr_shm *dev_open_bulk(uint32_t host)
{
    struct sr_shm_cfg c = {.port = 4791, .dir = dir, .bulk_min = 32768};
    gid_of(c.gid, host);
    struct sr_shm *s = NULL;
    SR_CHECK_EQ(sr_shm_open(&c, &s), 0);
    return s;
}

struct ref_rx {
    int n;
    uint32_t pid;
    uint64_t addr; /* carried in the payload */
};

static void ref_cb(void *arg, const uint8_t *pkt, size_t len, const uint8_t *src, uint32_t ref_pid)
{
    (void)src;
    struct ref_rx *r = arg;
    r->n++;
    r->pid = ref_pid;
    if (len >= 12 + 8)
        memcpy(&r->addr, pkt + 12, 8);
}

/* References (sr_bulk.h): only from a sender the receiver could read
 * with process_vm_readv, which it probes once; never from itself; a
 * flagged record from anyone else is dropped, never handed on. */
static void test_bulk(void)
{
    struct sr_shm *a = dev_open_bulk(1), *b = dev_open_bulk(2);
    struct pkt p;
    uint8_t gb[16];
    gid_of(gb, 2);
    SR_CHECK_EQ(sr_shm_bulk_to(a, gb), 0); /* not probed yet */
    SR_CHECK_EQ(xsend(a, pkt_make(&p, 2, 0, 10, 0)), 0);
    struct ref_rx r = {0};
    SR_CHECK_EQ(sr_shm_recv(b, ref_cb, &r, 64), 1);
    SR_CHECK_EQ(r.pid, 0);
    /* a and b are one process: b must not read "a's" memory, its own */
    SR_CHECK_EQ(sr_shm_bulk_to(a, gb), 0);
    pkt_make(&p, 2, 1, 10, 0);
    p.t.bulk = true;
    SR_CHECK_EQ(xsend(a, &p.t), SR_ERR_INVAL);

    /* another process: probed, then its references come with its pid */
    int ready[2], done[2];
    SR_CHECK_EQ(pipe(ready), 0);
    SR_CHECK_EQ(pipe(done), 0);
    pid_t pid = fork();
    if (pid == 0) {
        static uint8_t secret[4096];
        for (int i = 0; i < 4096; i++)
            secret[i] = (uint8_t)(i * 7 + 3);
        struct sr_shm *c = dev_open_bulk(9);
        struct pkt q;
        int ok = c && xsend(c, pkt_make(&q, 2, 0, 10, 0)) == 0;
        char x = 0;
        ok = ok && read(ready[0], &x, 1) == 1; /* b received it (and probed) */
        ok = ok && sr_shm_bulk_to(c, gb) == 32768;
        uint64_t addr = (uint64_t)(uintptr_t)secret;
        pkt_make(&q, 2, 1, 8, 0);
        memcpy(q.payload, &addr, 8);
        q.iov[0] = (struct sr_iov){q.payload, 8};
        q.t.iov_cnt = 1;
        q.t.bulk = true;
        ok = ok && xsend(c, &q.t) == 0;
        ok = ok && read(done[0], &x, 1) == 1;
        _exit(ok ? 0 : 1);
    }
    struct ref_rx rc = {0};
    for (int i = 0; i < 2000 && rc.n < 1; i++) {
        sr_shm_recv(b, ref_cb, &rc, 64);
        if (!rc.n)
            usleep(1000);
    }
    SR_CHECK_EQ(rc.n, 1);
    SR_CHECK_EQ(rc.pid, 0);
    SR_CHECK_EQ(write(ready[1], "x", 1), 1);
    for (int i = 0; i < 2000 && rc.n < 2; i++) {
        sr_shm_recv(b, ref_cb, &rc, 64);
        if (rc.n < 2)
            usleep(1000);
    }
    SR_CHECK_EQ(rc.n, 2);
    SR_CHECK_EQ(rc.pid, (uint32_t)pid);
    uint8_t got[4096] = {0};
    struct sr_bulk_seg l = {(uint64_t)(uintptr_t)got, sizeof(got)}, rm = {rc.addr, sizeof(got)};
    SR_CHECK_EQ(sr_shm_copy(rc.pid, false, &l, 1, &rm, 1), 0);
    SR_CHECK(got[0] == 3 && got[4095] == (uint8_t)(4095 * 7 + 3));
    rm.len = 64u << 20; /* far beyond what the child has mapped there */
    l.len = 64u << 20;
    uint8_t *big = malloc(64u << 20);
    if (big) {
        l.addr = (uint64_t)(uintptr_t)big;
        SR_CHECK(sr_shm_copy(rc.pid, false, &l, 1, &rm, 1) != 0); /* never partial as whole */
        free(big);
    }
    SR_CHECK_EQ(write(done[1], "x", 1), 1);
    int status = -1;
    waitpid(pid, &status, 0);
    SR_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    l = (struct sr_bulk_seg){(uint64_t)(uintptr_t)got, sizeof(got)};
    rm.len = sizeof(got);
    SR_CHECK(sr_shm_copy(rc.pid, false, &l, 1, &rm, 1) != 0); /* gone: ESRCH */
    close(ready[0]), close(ready[1]), close(done[0]), close(done[1]);

    /* a flagged record in a ring: dropped unless its sender was vouched for */
    static uint8_t ring[4096];
    uint32_t rh[2] = {12 + 4 + 4, 1};
    memset(ring, 0, sizeof(ring));
    memcpy(ring, rh, 8);
    uint8_t g[16];
    gid_of(g, 5);
    struct sr_shm_parse pr;
    struct ref_rx rr = {0};
    sr_shm_ring_parse(ring, sizeof(ring), 64, 0, g, 0, ref_cb, &rr, 8, &pr);
    SR_CHECK_EQ(pr.pkts, 0);
    SR_CHECK_EQ(pr.refused, 1);
    SR_CHECK_EQ(pr.tail, 64);
    SR_CHECK_EQ(rr.n, 0);
    sr_shm_ring_parse(ring, sizeof(ring), 64, 0, g, 77, ref_cb, &rr, 8, &pr);
    SR_CHECK_EQ(rr.n, 1);
    SR_CHECK_EQ(rr.pid, 77);
    sr_shm_close(a);
    sr_shm_close(b);
}

static void test_dead_process(void)
{
    struct sr_shm *b = dev_open(2, 4791);
    pid_t pid = fork();
    if (pid == 0) {
        struct sr_shm *c = dev_open(9, 4791);
        struct pkt p;
        _exit(c && xsend(c, pkt_make(&p, 2, 0, 10, 0)) == 0 ? 0 : 1);
    }
    int status = -1;
    waitpid(pid, &status, 0);
    SR_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    SR_CHECK_EQ(dir_count(), 4); /* b's and the dead child's */
    struct sr_shm_stats st;
    sr_shm_stats(b, &st);
    SR_CHECK_EQ(st.senders, 1);
    struct rx r = {.len = {10, 10, 10, 10, 10, 10, 10, 10}};
    SR_CHECK_EQ(sr_shm_recv(b, rx_cb, &r, 64), 1);
    for (int i = 0; i < 64; i++)
        if (sr_shm_sleep(b))
            sr_shm_wake(b, false);
    sr_shm_stats(b, &st);
    SR_CHECK_EQ(st.senders, 0);
    struct sr_shm *a = dev_open(1, 4791);
    SR_CHECK_EQ(dir_count(), 4); /* b's and a's */
    sr_shm_close(a);
    sr_shm_close(b);
}

/* A sender that died between claiming a slot and making it LIVE: the
 * receiver's sweep frees the slot. One CLAIMED with pid 0 (being claimed
 * just now) and one CLAIMED by a live process stay as they are. */
static void test_dead_claimer(void)
{
    struct sr_shm *b = dev_open(2, 4791);
    pid_t dead = fork();
    if (dead == 0)
        _exit(0);
    waitpid(dead, NULL, 0);
    struct stat ns;
    SR_CHECK_EQ(stat("/proc/self/ns/pid", &ns), 0);
    uint64_t pidns = (uint64_t)ns.st_ino;
    /* the layout (shm.c): the slot table at 192, 64 bytes a slot: state
     * (CLAIMED = 1), pid, gid, pidns */
    int fd = mailbox_open(2);
    SR_CHECK(fd >= 0);
    const uint32_t claimed = 1, pids[3] = {(uint32_t)dead, 0, (uint32_t)getpid()};
    for (int i = 0; i < 3; i++) {
        off_t at = 192 + 64 * (3 + i);
        SR_CHECK_EQ(pwrite(fd, &claimed, 4, at), 4);
        SR_CHECK_EQ(pwrite(fd, &pids[i], 4, at + 4), 4);
        SR_CHECK_EQ(pwrite(fd, &pidns, 8, at + 24), 8);
    }
    for (int i = 0; i < 64; i++) /* a sweep every 64 sleeps */
        if (sr_shm_sleep(b))
            sr_shm_wake(b, false);
    for (int i = 0; i < 3; i++) {
        uint32_t st[2];
        SR_CHECK_EQ(pread(fd, st, 8, 192 + 64 * (3 + i)), 8);
        SR_CHECK_EQ(st[0], i == 0 ? 0u : claimed);
        SR_CHECK_EQ(st[1], i == 0 ? 0u : pids[i]);
    }
    close(fd);
    sr_shm_close(b);
}

/* The address's receiver crashed and a new process took the address
 * (here: a second device replaces the first's mailbox): the sender finds
 * out when the old ring stays full and moves to the new mailbox. */
static void test_restart(void)
{
    struct sr_shm *a = dev_open(1, 4791), *b = dev_open(2, 4791);
    struct pkt p;
    SR_CHECK_EQ(xsend(a, pkt_make(&p, 2, 0, 10, 0)), 0);
    struct sr_shm *b2 = dev_open(2, 4791); /* b is never read again */
    uint32_t seq = 1;
    int fails = 0;
    for (; seq < 2 * (SR_SHM_RING / 4160); seq++)
        fails += xsend(a, pkt_make(&p, 2, seq, 4096, 0)) != 0;
    SR_CHECK_EQ(fails, 0);
    struct rx r = {.len = {4096, 4096, 4096, 4096, 4096, 4096, 4096, 4096}};
    int got = sr_shm_recv(b2, rx_cb, &r, 100000);
    SR_CHECK(got > 0);
    SR_CHECK_EQ(r.bad, 1); /* the first one it sees follows a gap */
    SR_CHECK_EQ(r.next_seq, seq);
    sr_shm_close(a);
    sr_shm_close(b2);
    sr_shm_close(b);
}

/* A packet a sends to device 2 (b) arrives. */
static void check_reaches(struct sr_shm *a, struct sr_shm *b)
{
    struct pkt p;
    SR_CHECK_EQ(xsend(a, pkt_make(&p, 2, 0, 10, 0)), 0);
    struct rx r = {.len = {10}};
    SR_CHECK_EQ(sr_shm_recv(b, rx_cb, &r, 64), 1);
}

/* A forked child that exits does not close its parent's mailbox; a FIFO
 * under a mailbox's name does not hang a device's open. */
static void test_fork_fifo(void)
{
    struct sr_shm *b = dev_open(2, 4791);
    pid_t pid = fork();
    if (pid == 0) {
        sr_shm_unlink(b); /* what the library's exit handler does */
        _exit(0);
    }
    waitpid(pid, NULL, 0);
    SR_CHECK_EQ(dir_count(), 2);
    struct stat st;
    char fifo[200];
    SR_CHECK_EQ(stat("/proc/self/ns/net", &st), 0);
    snprintf(fifo, sizeof(fifo), "%s/softrdma-%lu-fifo", dir, (unsigned long)st.st_ino);
    SR_CHECK_EQ(mkfifo(fifo, 0600), 0);
    alarm(20); /* a hang fails the test instead of stalling it */
    struct sr_shm *a = dev_open(1, 4791);
    alarm(0);
    check_reaches(a, b);
    unlink(fifo);
    sr_shm_close(a);
    sr_shm_close(b);
}

/* Sets path's access and modification times back by age seconds. */
static void age_file(const char *path, int age)
{
    struct timespec t[2] = {{.tv_sec = time(NULL) - age}, {.tv_sec = time(NULL) - age}};
    SR_CHECK_EQ(utimensat(AT_FDCWD, path, t, AT_SYMLINK_NOFOLLOW), 0);
}

/* The path of the one file in dir whose name ends in suffix: how many
 * there are. */
static int find_file(const char *suffix, char *path, size_t size)
{
    DIR *d = opendir(dir);
    int found = 0;
    size_t sl = strlen(suffix);
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (n > sl && !strcmp(e->d_name + n - sl, suffix)) {
            snprintf(path, size, "%s/%s", dir, e->d_name);
            found++;
        }
    }
    if (d)
        closedir(d);
    return found;
}

/* A doorbell (a UNIX socket bound at path), its times set back by age s;
 * its socket's descriptor when kept open (bound), else -1 (nobody bound). */
static int make_bell(const char *path, int age, bool keep)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
    SR_CHECK(fd >= 0);
    SR_CHECK_EQ(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    if (!keep) {
        close(fd);
        fd = -1;
    }
    age_file(path, age);
    return fd;
}

/* A mailbox left under its temporary name, or a doorbell left without a
 * mailbox and unbound (an open that died before the rename), is removed
 * by the next open's sweep once it is a minute old. Left alone: young
 * ones (an open in progress elsewhere), an old doorbell still bound (an
 * open that stalled), and the old doorbell of a live device. */
static void test_stale_tmp(void)
{
    struct sr_shm *b = dev_open(2, 4791);
    struct stat st;
    SR_CHECK_EQ(stat("/proc/self/ns/net", &st), 0);
    unsigned long ns = (unsigned long)st.st_ino;
    char old_tmp[200], young_tmp[200], old_bell[200], young_bell[200], bound_bell[200];
    char b_bell[200];
    snprintf(old_tmp, sizeof(old_tmp), "%s/softrdma-%lu-x.4791.12345.tmp", dir, ns);
    snprintf(young_tmp, sizeof(young_tmp), "%s/softrdma-%lu-y.4791.12346.tmp", dir, ns);
    snprintf(old_bell, sizeof(old_bell), "%s/softrdma-%lu-x.4791.bell", dir, ns);
    snprintf(young_bell, sizeof(young_bell), "%s/softrdma-%lu-y.4791.bell", dir, ns);
    snprintf(bound_bell, sizeof(bound_bell), "%s/softrdma-%lu-z.4791.bell", dir, ns);
    SR_CHECK_EQ(find_file(".bell", b_bell, sizeof(b_bell)), 1); /* b's */
    age_file(b_bell, 120);
    int fd = open(old_tmp, O_RDWR | O_CREAT | O_EXCL, 0600);
    SR_CHECK(fd >= 0);
    close(fd);
    age_file(old_tmp, 120);
    fd = open(young_tmp, O_RDWR | O_CREAT | O_EXCL, 0600);
    SR_CHECK(fd >= 0);
    close(fd);
    (void)make_bell(old_bell, 120, false);
    (void)make_bell(young_bell, 0, false);
    int bound = make_bell(bound_bell, 120, true);
    SR_CHECK_EQ(dir_count(), 7); /* b's mailbox and doorbell, and the five */
    struct sr_shm *a = dev_open(1, 4791);
    SR_CHECK(access(old_tmp, F_OK) != 0);
    SR_CHECK_EQ(access(young_tmp, F_OK), 0);
    SR_CHECK(access(old_bell, F_OK) != 0);
    SR_CHECK_EQ(access(young_bell, F_OK), 0);
    SR_CHECK_EQ(access(bound_bell, F_OK), 0);
    SR_CHECK_EQ(access(b_bell, F_OK), 0);
    SR_CHECK_EQ(dir_count(), 7); /* the two old ones out, a's two in */
    check_reaches(a, b);         /* b's mailbox is intact */
    close(bound);
    unlink(young_tmp);
    unlink(young_bell);
    unlink(bound_bell);
    sr_shm_close(a);
    sr_shm_close(b);
}

/* The receiver is killed while its ring is full and the sender has a
 * backlog: the sender lets go (its sends turn to UDP, the backlog goes),
 * instead of keeping packets nobody will read. */
static void test_killed_receiver(void)
{
    int pipefd[2];
    SR_CHECK_EQ(pipe(pipefd), 0);
    pid_t pid = fork();
    if (pid == 0) {
        struct sr_shm *b = dev_open(2, 4791);
        char c = b ? 'y' : 'n';
        (void)!write(pipefd[1], &c, 1);
        pause();
        _exit(0);
    }
    char c = 0;
    SR_CHECK_EQ(read(pipefd[0], &c, 1), 1);
    SR_CHECK_EQ(c, 'y');
    struct sr_shm *a = dev_open(1, 4791);
    struct pkt p;
    uint32_t seq = 0;
    int fails = 0;
    for (; seq < SR_SHM_RING / 4160 + 10; seq++)
        fails += xsend(a, pkt_make(&p, 2, seq, 4096, 0)) != 0;
    SR_CHECK_EQ(fails, 0);
    SR_CHECK(!sr_shm_flush(a)); /* ring full, a backlog */
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    int remote = 0;
    for (int i = 0; i < 1000 && !remote; i++)
        remote = xsend(a, pkt_make(&p, 2, seq++, 4096, 0)) == SR_SHM_REMOTE;
    SR_CHECK(remote);
    SR_CHECK(sr_shm_flush(a)); /* nothing left to move */
    struct sr_shm_stats st;
    sr_shm_stats(a, &st);
    SR_CHECK_EQ(st.peers, 0);
    sr_shm_close(a);
    close(pipefd[0]);
    close(pipefd[1]);
}

static void rm_dir(void)
{
    DIR *d = opendir(dir);
    char path[400];
    for (struct dirent *e; d && (e = readdir(d));)
        if (e->d_name[0] != '.') {
            snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
            unlink(path);
        }
    if (d)
        closedir(d);
    rmdir(dir);
}

int main(void)
{
    snprintf(dir, sizeof(dir), "/dev/shm/srshm_test.XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp /dev/shm");
        return 77;
    }
    SR_RUN(test_roundtrip);
    SR_RUN(test_wrap);
    SR_RUN(test_burst);
    SR_RUN(test_backlog);
    SR_RUN(test_doorbell);
    SR_RUN(test_close);
    SR_RUN(test_slots);
    SR_RUN(test_corrupt);
    SR_RUN(test_dead_process);
    SR_RUN(test_dead_claimer);
    SR_RUN(test_restart);
    SR_RUN(test_fork_fifo);
    SR_RUN(test_killed_receiver);
    SR_RUN(test_stale_tmp);
    SR_RUN(test_bulk);
    rm_dir();
    return SR_TEST_RESULT();
}
