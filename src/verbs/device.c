/* device.c: the soft device, its discovery and attributes: device list,
 * open/close, query_device(_ex), query_port (op and exported fallback),
 * GIDs, P_Keys, sysfs emulation, async events, string and rate helpers. */
#include "sv.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
    SV_VENDOR_ID = 0x5352, /* "SR": our own, not a hardware vendor's */
    SV_VENDOR_PART = 0x0001,
    /* Small (perftest queries every index), with room to spare: a table
     * with no empty slot cannot show ENODATA for one. */
    SV_GID_TBL_LEN = 16,
    SV_GID_USED = 4,
};

/* The GID table, shaped like a RoCE port's on an IP address (rxe, mlx5):
 * 1 = the link-local GID as RoCE v1, 2 = the address as RoCE v1, 3 = the
 * address as RoCE v2, so the usual `-x 3` / `-g 3` picks the address as
 * RoCE v2. Index 0, fe80:: on a real port, is the address as RoCE v2 too:
 * it has been softrdma's GID since the start and `-g 0` must keep working.
 * The wire is always RoCE v2 (UDP 4791); index 1 reaches no peer and a QP
 * cannot use it. */
struct sv_gid_slot {
    enum ibv_gid_type type;
    bool link_local;
};
static const struct sv_gid_slot sv_gid_slots[SV_GID_USED] = {
    {IBV_GID_TYPE_ROCE_V2, false},
    {IBV_GID_TYPE_IB, true},
    {IBV_GID_TYPE_IB, false},
    {IBV_GID_TYPE_ROCE_V2, false},
};

static const char sv_ibdev_path[] = "/sys/class/infiniband/srdma0";

int sv_errno(int err)
{
    switch (err) {
    case 0:
        return 0;
    case SR_ERR_NOMEM:
        return ENOMEM;
    case SR_ERR_BUSY:
        return EBUSY;
    case SR_ERR_NOTSUP:
        return EOPNOTSUPP;
    case SR_ERR_LIMIT:
        return ENOMEM;
    case SR_ERR_RANGE:
        return EINVAL;
    default:
        return EINVAL;
    }
}

/* ---- configuration ---- */
/* A microsecond setting: def when unset, a warning and def when not a
 * number in 0..max. */
static uint32_t env_us(const char *name, uint32_t def, uint32_t max)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return def;
    char *end;
    unsigned long v = strtoul(s, &end, 10);
    if (*end || v > max) {
        fprintf(stderr, "softrdma: %s=%s ignored (0..%u)\n", name, s, max);
        return def;
    }
    return (uint32_t)v;
}

/* The largest RoCE path MTU whose packets fit the link that carries addr
 * (IP, UDP, BTH, RETH, ImmDt, pad and ICRC around the payload; UDP
 * datagrams are sent with DF set, so a larger one would never arrive), or
 * 0 when no interface has that address. */
static uint32_t link_path_mtu(const uint8_t addr[16])
{
    bool v4 = memcmp(addr, "\0\0\0\0\0\0\0\0\0\0\xff\xff", 12) == 0;
    struct ifaddrs *ifs;
    if (getifaddrs(&ifs))
        return 0;
    int link = 0;
    for (struct ifaddrs *i = ifs; i && !link; i = i->ifa_next) {
        const struct sockaddr *sa = i->ifa_addr;
        bool match = sa && ((v4 && sa->sa_family == AF_INET &&
                             !memcmp(&((const struct sockaddr_in *)sa)->sin_addr, addr + 12, 4)) ||
                            (!v4 && sa->sa_family == AF_INET6 &&
                             !memcmp(&((const struct sockaddr_in6 *)sa)->sin6_addr, addr, 16)));
        if (!match)
            continue;
        struct ifreq r = {0};
        snprintf(r.ifr_name, sizeof(r.ifr_name), "%s", i->ifa_name);
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && ioctl(fd, SIOCGIFMTU, &r) == 0)
            link = r.ifr_mtu;
        if (fd >= 0)
            close(fd);
    }
    freeifaddrs(ifs);
    int overhead = (v4 ? 20 : 40) + 8 + 12 + 16 + 4 + 3 + 4;
    for (uint32_t m = 4096; m >= 256 && link > 0; m /= 2)
        if ((int)m + overhead <= link)
            return m;
    return link > 0 ? 256 : 0;
}

static void parse_config(struct sv_config *c)
{
    memset(c, 0, sizeof(*c));
    c->mtu = 4096;
    const char *a = getenv("SOFTRDMA_ADDR");
    if (a && *a) {
        struct in_addr v4;
        if (inet_pton(AF_INET, a, &v4) == 1) {
            c->addr[10] = c->addr[11] = 0xff;
            memcpy(c->addr + 12, &v4, 4);
            c->addr_set = true;
        } else if (inet_pton(AF_INET6, a, c->addr) == 1) {
            c->addr_set = true;
        } else {
            fprintf(stderr, "softrdma: SOFTRDMA_ADDR=%s is not an IPv4 or IPv6 address\n", a);
        }
    }
    const char *f = getenv("SOFTRDMA_FAULT");
    if (f && *f) {
        const char *bad = NULL;
        if (sr_fault_parse(f, &c->fault, &bad))
            fprintf(stderr,
                    "softrdma: SOFTRDMA_FAULT: cannot parse \"%s\" (want e.g. "
                    "loss=0.01,reorder=0.01,dup=0.001,corrupt=0.001,delay_us=50,seed=1)\n",
                    bad ? bad : f);
    }
    const char *st = getenv("SOFTRDMA_STATS");
    c->stats = st && *st && strcmp(st, "0") != 0;
    c->ack_delay_us = env_us("SOFTRDMA_ACK_DELAY_US", 20, 10000);
    c->handoff_us = env_us("SOFTRDMA_HANDOFF_US", 1000, 1000000);
    const char *g = getenv("SOFTRDMA_GSO");
    c->no_gso = g && strcmp(g, "0") == 0;
    const char *wo = getenv("SOFTRDMA_WRITE_ONLY");
    c->whole_writes = wo && strcmp(wo, "0") == 0;
    const char *sk = getenv("SOFTRDMA_SACK");
    c->no_sack = sk && strcmp(sk, "0") == 0;
    c->qdelay_us = env_us("SOFTRDMA_QDELAY_US", 0, 1000000);
    /* Injected faults live in the UDP driver: with them, everything goes
     * through it. */
    const char *sh = getenv("SOFTRDMA_SHM");
    c->no_shm = (sh && strcmp(sh, "0") == 0) || c->fault.on;
    c->shm_bulk = env_us("SOFTRDMA_SHM_BULK", SR_NIC_SHM_BULK_DEFAULT, 1u << 31);
    const char *br = getenv("SOFTRDMA_SHM_BULK_READ");
    c->shm_bulk_read = br && strcmp(br, "1") == 0;
    /* SOFTRDMA_CC: congestion control (docs/CONGESTION.md), DCQCN when
     * unset: it needs only ECN and CNPs, so any RoCEv2 peer takes it, and
     * where nothing marks it costs nothing measurable (bench/cc_ab.sh).
     * A bad value is reported and leaves it off. */
    sr_cc_cfg_default(&c->cc, 0);
    const char *cc = getenv("SOFTRDMA_CC");
    if (!cc || !*cc)
        cc = SR_CC_DEVICE_DEFAULT;
    char why[160];
    if (sr_cc_parse(cc, &c->cc, why, sizeof(why)))
        fprintf(stderr, "softrdma: %s; congestion control off\n", why);
    const char *m = getenv("SOFTRDMA_MTU");
    bool mtu_set = false;
    if (m && *m) {
        unsigned long v = strtoul(m, NULL, 10);
        mtu_set = v == 256 || v == 512 || v == 1024 || v == 2048 || v == 4096;
        if (mtu_set)
            c->mtu = (uint32_t)v;
        else
            fprintf(stderr, "softrdma: SOFTRDMA_MTU=%s ignored (256, 512, 1024, 2048 or 4096)\n",
                    m);
    }
    /* Multipath (docs/TUNING.md): entropy values per QP and the policy
     * that picks one per packet. */
    c->paths = (uint8_t)env_us("SOFTRDMA_PATHS", 1, 16);
    if (c->paths == 0)
        c->paths = 1;
    c->path_policy = 1;
    const char *pp = getenv("SOFTRDMA_PATH_POLICY");
    if (pp && *pp) {
        if (strcmp(pp, "adaptive") == 0)
            c->path_policy = 2;
        else if (strcmp(pp, "spray") != 0)
            fprintf(stderr, "softrdma: SOFTRDMA_PATH_POLICY=%s ignored (spray or adaptive)\n", pp);
    }
    c->path_burst = (uint8_t)env_us("SOFTRDMA_PATH_BURST", 1, 255);
    const char *pr = getenv("SOFTRDMA_PATH_REORDER");
    c->path_reorder = pr && *pr && strcmp(pr, "0") != 0;
    /* On a real link the active MTU follows the link's (loopback: 4096). */
    if (c->addr_set && !mtu_set) {
        uint32_t fit = link_path_mtu(c->addr);
        if (fit)
            c->mtu = fit;
    }
}

/* ---- the device ---- */
static struct sv_device sv_dev;
static pthread_once_t sv_once = PTHREAD_ONCE_INIT;
static atomic_bool sv_dev_ready;

/* The node GUID: an EUI-64 with our "SR" prefix and the locally
 * administered bit, its low 40 bits folded from the device address, so
 * that a device on one address has one GUID in every process. */
static __be64 guid_of(const uint8_t addr[16])
{
    uint64_t h = 0;
    for (int i = 0; i < 16; i++)
        h = (h << 8 | h >> 32) ^ addr[i];
    h &= 0xffffffffffull;
    return __builtin_bswap64(0x0253520000000000ull | h);
}

static void device_init(void)
{
    struct sv_device *d = &sv_dev;
    parse_config(&d->cfg);
    pthread_mutex_init(&d->lock, NULL);
    pthread_mutex_init(&d->live.lock, NULL);
    d->ibdev.node_type = IBV_NODE_CA;
    d->ibdev.transport_type = IBV_TRANSPORT_IB;
    snprintf(d->ibdev.name, sizeof(d->ibdev.name), "srdma0");
    snprintf(d->ibdev.dev_name, sizeof(d->ibdev.dev_name), "uverbs0");
    snprintf(d->ibdev.dev_path, sizeof(d->ibdev.dev_path), "/sys/class/infiniband_verbs/uverbs0");
    snprintf(d->ibdev.ibdev_path, sizeof(d->ibdev.ibdev_path), "%s", sv_ibdev_path);
    /* Until the device is opened and its address known, a GUID from the
     * configured address, or from the process (an automatic loopback
     * address is claimed at open). */
    if (d->cfg.addr_set)
        d->guid = guid_of(d->cfg.addr);
    else
        d->guid = __builtin_bswap64(0x02535200000000ull | ((uint64_t)getpid() & 0xffffffu));
    atomic_store(&sv_dev_ready, true);
}

struct sv_device *sv_device_get(void)
{
    pthread_once(&sv_once, device_init);
    return &sv_dev;
}

int sv_device_nic_get(struct sv_device *dev, struct sv_context *ctx, struct sr_nic **out)
{
    (void)ctx;
    pthread_mutex_lock(&dev->lock);
    int err = 0;
    if (!dev->nic) {
        struct sr_nic_cfg cfg = {0};
        if (dev->cfg.addr_set)
            memcpy(cfg.udp.addr, dev->cfg.addr, 16);
        cfg.udp.auto_seed = (uint32_t)getpid();
        cfg.udp.fault = dev->cfg.fault;
        cfg.udp.no_gso = dev->cfg.no_gso;
        cfg.no_shm = dev->cfg.no_shm;
        cfg.shm_bulk = dev->cfg.shm_bulk;
        cfg.shm_bulk_read = dev->cfg.shm_bulk_read;
        cfg.engine.whole_writes = dev->cfg.whole_writes;
        cfg.engine.sack = !dev->cfg.no_sack;
        cfg.engine.qdelay_ns = (uint64_t)dev->cfg.qdelay_us * 1000;
        cfg.engine.ack_delay_ns = (uint64_t)dev->cfg.ack_delay_us * 1000;
        cfg.handoff_ns = (uint64_t)dev->cfg.handoff_us * 1000;
        cfg.engine.ops.cq_event = sv_engine_cq_event;
        cfg.engine.ops.async_event = sv_engine_async_event;
        cfg.engine.ops_ctx = dev;
        cfg.engine.port_mtu = dev->cfg.mtu;
        cfg.engine.mem_ok = sv_mem_ok;
        cfg.engine.paths = dev->cfg.paths;
        cfg.engine.path_policy = dev->cfg.path_policy;
        cfg.engine.paths_reorder = dev->cfg.path_reorder;
        cfg.engine.path_burst = dev->cfg.path_burst;
        cfg.engine.paths_seed = (uint64_t)getpid();
        cfg.udp.paths = dev->cfg.paths;
        cfg.engine.cc = &dev->cfg.cc;
        cfg.udp.ecn = dev->cfg.cc.algo != SR_CC_NONE; /* ECT(0) only if it reacts */
        err = sr_nic_open(&cfg, &dev->nic);
        if (!err) {
            memcpy(dev->gid, sr_nic_gid(dev->nic), 16);
            dev->guid = guid_of(dev->gid);
        }
    }
    if (!err) {
        dev->nic_refs++;
        *out = dev->nic;
    }
    pthread_mutex_unlock(&dev->lock);
    return err;
}

/* SOFTRDMA_STATS=1: one line of counters on stderr when the device closes,
 * or at exit if it is still open.
 * The fields after malformed= account for every packet the device drops or
 * refuses (tests/hostile compares them with what an attacker sent); new
 * fields go at the end so that existing parsers keep working. */
static void print_stats(struct sv_device *dev)
{
    struct sr_engine_stats e;
    struct sr_udp_stats u;
    struct sr_shm_stats m;
    sr_nic_lock(dev->nic);
    sr_engine_stats(sr_nic_engine(dev->nic), &e);
    sr_nic_udp_stats(dev->nic, &u);
    sr_nic_shm_stats(dev->nic, &m);
    sr_nic_unlock(dev->nic);
    fprintf(stderr,
            "softrdma: stats tx_pkts=%llu rx_pkts=%llu retransmits=%llu timeouts=%llu probes=%llu "
            "seq_naks=%llu rnr_naks=%llu duplicates=%llu icrc_drops=%llu fault_lost=%llu "
            "fault_dup=%llu fault_reordered=%llu fault_corrupted=%llu fault_delayed=%llu "
            "malformed=%llu short_drops=%llu long_drops=%llu no_qp=%llu bad_peer=%llu "
            "qkey_drops=%llu other_drops=%llu seq_naks_sent=%llu rnr_naks_sent=%llu "
            "err_naks_sent=%llu err_naks_rcvd=%llu udp_rx_pkts=%llu udp_tx_drops=%llu "
            "udp_tx_pkts=%llu gso_sends=%llu gro_batches=%llu shm_tx_pkts=%llu "
            "shm_rx_pkts=%llu shm_tx_drops=%llu shm_bells=%llu shm_bad=%llu shm_peers=%u\n",
            (unsigned long long)e.tx_pkts, (unsigned long long)e.rx_pkts,
            (unsigned long long)e.retransmits, (unsigned long long)e.timeouts,
            (unsigned long long)e.probes, (unsigned long long)e.seq_naks_rcvd,
            (unsigned long long)e.rnr_naks_rcvd, (unsigned long long)e.rx_duplicate,
            (unsigned long long)u.rx_icrc_drops, (unsigned long long)u.fault_lost,
            (unsigned long long)u.fault_dup, (unsigned long long)u.fault_reordered,
            (unsigned long long)u.fault_corrupted, (unsigned long long)u.fault_delayed,
            (unsigned long long)e.rx_drop_malformed, (unsigned long long)u.rx_short_drops,
            (unsigned long long)u.rx_long_drops, (unsigned long long)e.rx_drop_no_qp,
            (unsigned long long)e.rx_drop_bad_peer, (unsigned long long)e.rx_drop_qkey,
            (unsigned long long)e.rx_drop_other, (unsigned long long)e.seq_naks_sent,
            (unsigned long long)e.rnr_naks_sent, (unsigned long long)e.err_naks_sent,
            (unsigned long long)e.err_naks_rcvd, (unsigned long long)u.rx_pkts,
            (unsigned long long)u.tx_drops, (unsigned long long)u.tx_pkts,
            (unsigned long long)u.tx_gso_sends, (unsigned long long)u.rx_gro_bufs,
            (unsigned long long)m.tx_pkts, (unsigned long long)m.rx_pkts,
            (unsigned long long)m.tx_drops, (unsigned long long)m.tx_bells,
            (unsigned long long)m.rx_bad, m.peers);
    if (dev->cfg.cc.algo != SR_CC_NONE) /* SOFTRDMA_CC: docs/CONGESTION.md */
        fprintf(stderr, "softrdma: cc algo=%s rx_ce=%llu cnps_sent=%llu cnps_rcvd=%llu\n",
                sr_cc_algo_name(dev->cfg.cc.algo), (unsigned long long)e.rx_ce,
                (unsigned long long)e.cnps_sent, (unsigned long long)e.cnps_rcvd);
    fprintf(stderr,
            "softrdma: stats-sack sack=%d sacks_sent=%llu sacks_rcvd=%llu sack_bad=%llu "
            "sack_resends=%llu sack_lost_resends=%llu ooo_stored=%llu ooo_drained=%llu "
            "ooo_dup=%llu ooo_overflow=%llu "
            "ooo_placed=%llu ooo_send_placed=%llu rph_bad=%llu\n",
            !dev->cfg.no_sack, (unsigned long long)e.sacks_sent, (unsigned long long)e.sacks_rcvd,
            (unsigned long long)e.sack_bad, (unsigned long long)e.sack_resends,
            (unsigned long long)e.sack_lost_resends, (unsigned long long)e.ooo_stored,
            (unsigned long long)e.ooo_drained, (unsigned long long)e.ooo_dup,
            (unsigned long long)e.ooo_overflow, (unsigned long long)e.ooo_placed,
            (unsigned long long)e.ooo_send_placed, (unsigned long long)e.rph_bad);
    /* the ECN echo between SACK peers (docs/WIRE.md) */
    fprintf(stderr,
            "softrdma: stats-ecn ece_sent=%llu ece_rcvd=%llu holds_sent=%llu holds_rcvd=%llu\n",
            (unsigned long long)e.ece_sent, (unsigned long long)e.ece_rcvd,
            (unsigned long long)e.ack_holds_sent, (unsigned long long)e.ack_holds_rcvd);
    fprintf(stderr,
            "softrdma: stats-readsel read_ooo_placed=%llu read_rereqs=%llu read_rereq_psns=%llu "
            "read_late=%llu read_rereq_lost=%llu\n",
            (unsigned long long)e.read_ooo_placed, (unsigned long long)e.read_rereqs,
            (unsigned long long)e.read_rereq_psns, (unsigned long long)e.read_late,
            (unsigned long long)e.read_rereq_lost);
    fprintf(stderr, "softrdma: stats-dsack dsacks_sent=%llu dsacks_rcvd=%llu sack_spurious=%llu\n",
            (unsigned long long)e.dsacks_sent, (unsigned long long)e.dsacks_rcvd,
            (unsigned long long)e.sack_spurious);
}

/* Most verbs programs exit with the device open: its mailbox must not
 * stay behind (peers would keep writing into it, and the rings they
 * reserved would stay allocated). Only the names go; nothing is torn down
 * under threads that may still run. A device left open (librdmacm keeps
 * its context for the process's life, as rdma-core's does) reports its
 * counters here. */
__attribute__((destructor)) static void device_fini(void)
{
    struct sv_device *d = &sv_dev;
    if (!atomic_load(&sv_dev_ready) || pthread_mutex_trylock(&d->lock))
        return;
    if (d->nic && d->cfg.stats)
        print_stats(d);
    if (d->nic)
        sr_nic_exiting(d->nic);
    pthread_mutex_unlock(&d->lock);
}

void sv_device_nic_put(struct sv_device *dev)
{
    pthread_mutex_lock(&dev->lock);
    if (--dev->nic_refs == 0) {
        /* Destroyed QPs lingering for the peer's last retransmissions keep
         * the NIC running a little longer (at most 1 s). */
        for (int i = 0; i < 200; i++) {
            sr_nic_lock(dev->nic);
            uint32_t z = sr_engine_zombies(sr_nic_engine(dev->nic));
            sr_nic_unlock(dev->nic);
            if (!z)
                break;
            usleep(5000);
        }
        if (dev->cfg.stats)
            print_stats(dev);
        sr_nic_close(dev->nic);
        dev->nic = NULL;
    }
    pthread_mutex_unlock(&dev->lock);
}

SV_EXPORT struct ibv_device **ibv_get_device_list(int *num_devices)
{
    struct sv_device *d = sv_device_get();
    struct ibv_device **list = calloc(2, sizeof(*list));
    if (!list) {
        errno = ENOMEM;
        return NULL;
    }
    list[0] = &d->ibdev;
    if (num_devices)
        *num_devices = 1;
    return list;
}

SV_EXPORT void ibv_free_device_list(struct ibv_device **list)
{
    free(list);
}

SV_EXPORT const char *ibv_get_device_name(struct ibv_device *device)
{
    if (!sv_is_device(device)) {
        errno = EINVAL;
        return NULL;
    }
    return device->name;
}

SV_EXPORT __be64 ibv_get_device_guid(struct ibv_device *device)
{
    if (!sv_is_device(device)) {
        errno = EINVAL;
        return 0;
    }
    return sr_container_of(device, struct sv_device, ibdev)->guid;
}

SV_EXPORT int ibv_get_device_index(struct ibv_device *device)
{
    if (!sv_is_device(device)) {
        errno = EINVAL;
        return -1;
    }
    return 0;
}

static int sv_query_port(struct ibv_context *context, uint8_t port_num,
                         struct ibv_port_attr *port_attr, size_t port_attr_len);
static int sv_query_device_ex(struct ibv_context *context,
                              const struct ibv_query_device_ex_input *input,
                              struct ibv_device_attr_ex *attr, size_t attr_size);

/* A context on cmd_fd, which it owns from here on (closed by
 * ibv_close_device, or now if this fails); -1: a new one. */
static struct ibv_context *open_ctx(struct sv_device *dev, int cmd_fd)
{
    struct sv_context *ctx = calloc(1, sizeof(*ctx));
    if (!ctx) {
        errno = ENOMEM;
        goto err_fd;
    }
    int err = sv_device_nic_get(dev, ctx, &ctx->nic);
    if (err) {
        errno = err == SR_ERR_NOMEM ? ENOMEM : EADDRNOTAVAIL;
        goto err_ctx;
    }
    if (sv_evq_init(&ctx->async))
        goto err_nic;
    ctx->dev = dev;
    struct ibv_context *c = &ctx->vctx.context;
    c->device = &dev->ibdev;
    /* A real descriptor, as a kernel provider's /dev/infiniband/uverbsN:
     * programs poll, dup and fstat it (pyverbs, shared-PD imports). */
    c->cmd_fd = cmd_fd >= 0 ? cmd_fd : memfd_create("softrdma-cmd", MFD_CLOEXEC);
    struct stat st;
    if (c->cmd_fd < 0 || fstat(c->cmd_fd, &st))
        goto err_evq;
    ctx->cmd_dev = st.st_dev;
    ctx->cmd_ino = st.st_ino;
    c->async_fd = ctx->async.rfd;
    c->num_comp_vectors = 1;
    pthread_mutex_init(&c->mutex, NULL);
    c->abi_compat = __VERBS_ABI_IS_EXTENDED;
    ctx->vctx.sz = sizeof(ctx->vctx);
    sv_init_ops(ctx);
    ctx->vctx.query_port = sv_query_port;
    ctx->vctx.query_device_ex = sv_query_device_ex;
    sv_live_add(c, SV_K_CTX);
    return c;

err_evq : {
    int e = errno;
    sv_evq_fini(&ctx->async);
    cmd_fd = ctx->vctx.context.cmd_fd;
    errno = e;
}
err_nic:
    sv_device_nic_put(dev);
err_ctx:
    free(ctx);
err_fd:
    if (cmd_fd >= 0) {
        int e = errno;
        close(cmd_fd);
        errno = e;
    }
    return NULL;
}

SV_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *device)
{
    if (!sv_is_device(device)) {
        errno = EINVAL;
        return NULL;
    }
    return open_ctx(sr_container_of(device, struct sv_device, ibdev), -1);
}

static bool same_file(const void *obj, const void *arg)
{
    const struct sv_context *c = sv_ctx((struct ibv_context *)obj);
    const struct stat *st = arg;
    return c->cmd_dev == st->st_dev && c->cmd_ino == st->st_ino;
}

/* ibv_import_device(3): cmd_fd is a dup of a live context's cmd_fd (its
 * memfd: the same file); the new context shares that one's objects, which
 * ibv_import_pd/_mr/_dm reach by handle. Within this process only: the
 * engine objects live in its memory. The context owns cmd_fd. */
SV_EXPORT struct ibv_context *ibv_import_device(int cmd_fd)
{
    struct stat st;
    if (cmd_fd < 0 || fstat(cmd_fd, &st)) {
        errno = EBADF;
        return NULL;
    }
    if (!sv_live_find(SV_K_CTX, same_file, &st)) {
        errno = EOPNOTSUPP; /* not ours, or another process's */
        return NULL;
    }
    return open_ctx(sv_device_get(), cmd_fd);
}

SV_EXPORT int ibv_close_device(struct ibv_context *context)
{
    if (!sv_live_is(context, SV_K_CTX))
        return EINVAL;
    sv_live_del(context);
    struct sv_context *ctx = sv_ctx(context);
    sv_device_nic_put(ctx->dev);
    sv_evq_fini(&ctx->async);
    close(context->cmd_fd);
    pthread_mutex_destroy(&context->mutex);
    free(ctx);
    return 0;
}

/* ---- attributes ---- */
static void fill_device_attr(struct sv_device *d, struct ibv_device_attr *a)
{
    memset(a, 0, sizeof(*a));
    snprintf(a->fw_ver, sizeof(a->fw_ver), "softrdma-0.1");
    a->node_guid = d->guid;
    a->sys_image_guid = d->guid;
    a->max_mr_size = UINT64_MAX;
    /* as a real port: 4 KiB, 2 MiB and 1 GiB pages */
    a->page_size_cap = 4096 | (2u << 20) | (1u << 30);
    a->vendor_id = SV_VENDOR_ID;
    a->vendor_part_id = SV_VENDOR_PART;
    a->hw_ver = 1;
    a->max_qp = 16384; /* the engine's default table */
    a->max_qp_wr = 1 << 15;
    a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_PORT_ACTIVE_EVENT |
                          IBV_DEVICE_XRC | IBV_DEVICE_N_NOTIFY_CQ;
    /* Memory windows: type 1 and type 2B (a type 2 window is tied to the
     * QP and PD it was bound through), what rxe and mlx5 offer, so
     * applications that pick a path by these bits take the common one. */
    a->device_cap_flags |= IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B;
    a->max_mw = 65535; /* the engine's default window table, slot 0 unused */
    a->max_sge = SR_MAX_SGE;
    a->max_sge_rd = SR_MAX_SGE;
    a->max_cq = 16384;
    a->max_cqe = 1 << 22;
    a->max_mr = 65535;
    a->max_pd = 4096;
    a->max_qp_rd_atom = SR_MAX_RD_ATOMIC;
    a->max_res_rd_atom = SR_MAX_RD_ATOMIC * 1024;
    a->max_qp_init_rd_atom = SR_MAX_RD_ATOMIC;
    a->atomic_cap = IBV_ATOMIC_HCA;
    a->max_ah = 1 << 20;
    a->max_srq = 4096;
    a->max_srq_wr = 1 << 15;
    a->max_srq_sge = SR_MAX_SGE;
    a->max_pkeys = 1;
    a->local_ca_ack_delay = 15;
    a->phys_port_cnt = 1;
}

SV_EXPORT int ibv_query_device(struct ibv_context *context, struct ibv_device_attr *attr)
{
    if (!sv_live_is(context, SV_K_CTX) || !attr)
        return EINVAL;
    fill_device_attr(sv_ctx(context)->dev, attr);
    return 0;
}

/* The extended attributes, consistent with the legacy ones. */
static void fill_device_attr_ex(struct ibv_device_attr_ex *x)
{
    x->device_cap_flags_ex = (uint32_t)x->orig_attr.device_cap_flags;
    x->phys_port_cnt_ex = x->orig_attr.phys_port_cnt;
    /* On-demand paging: a software NIC pins nothing, so every MR may be
     * ODP, explicit or implicit (the whole address space); each access
     * still goes through the key, bounds and mapping checks. */
    uint32_t odp = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE |
                   IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV;
    x->odp_caps.general_caps = IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT;
    x->odp_caps.per_transport_caps.rc_odp_caps = odp;
    x->odp_caps.per_transport_caps.uc_odp_caps =
        odp & ~(uint32_t)(IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC);
    x->odp_caps.per_transport_caps.ud_odp_caps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV;
    x->xrc_odp_caps = odp;
    /* Completion timestamps count nanoseconds: a 1 GHz "HCA clock". */
    x->completion_timestamp_mask = UINT64_MAX;
    x->hca_core_clock = SV_HCA_CLOCK_KHZ;
    x->max_dm_size = SV_MAX_DM_SIZE;
}

static int sv_query_device_ex(struct ibv_context *context,
                              const struct ibv_query_device_ex_input *input,
                              struct ibv_device_attr_ex *attr, size_t attr_size)
{
    /* EINVAL, not EOPNOTSUPP: the header's fallback would memset attr */
    if (!attr || (input && input->comp_mask))
        return EINVAL;
    if (attr_size < sizeof(attr->orig_attr))
        return EINVAL;
    struct ibv_device_attr_ex x;
    memset(&x, 0, sizeof(x));
    fill_device_attr(sv_ctx(context)->dev, &x.orig_attr);
    fill_device_attr_ex(&x);
    /* a caller built against an older header gets the prefix it knows */
    memset(attr, 0, attr_size);
    memcpy(attr, &x, SR_MIN(attr_size, sizeof(x)));
    return 0;
}

static enum ibv_mtu mtu_enum(uint32_t bytes)
{
    switch (bytes) {
    case 256:
        return IBV_MTU_256;
    case 512:
        return IBV_MTU_512;
    case 1024:
        return IBV_MTU_1024;
    case 2048:
        return IBV_MTU_2048;
    default:
        return IBV_MTU_4096;
    }
}

static void fill_port_attr(struct sv_device *d, struct ibv_port_attr *p)
{
    p->state = IBV_PORT_ACTIVE;
    p->max_mtu = IBV_MTU_4096;
    p->active_mtu = mtu_enum(d->cfg.mtu);
    p->gid_tbl_len = SV_GID_TBL_LEN;
    /* IP_BASED_GIDS: the GIDs come from IP addresses, as on a RoCE port */
    p->port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS;
    p->max_msg_sz = SR_MAX_MSG_LEN;
    p->bad_pkey_cntr = 0;
    p->qkey_viol_cntr = 0;
    p->pkey_tbl_len = 1;
    p->lid = 0;
    p->sm_lid = 0;
    p->lmc = 0;
    p->max_vl_num = 1;
    p->sm_sl = 0;
    p->subnet_timeout = 0;
    p->init_type_reply = 0;
    p->active_width = 2;  /* 4x */
    p->active_speed = 32; /* EDR-class figure; the real rate is what the host moves */
    p->phys_state = 5;    /* LinkUp */
}

static int sv_query_port(struct ibv_context *context, uint8_t port_num,
                         struct ibv_port_attr *port_attr, size_t port_attr_len)
{
    if (!port_attr || !sv_live_is(context, SV_K_CTX))
        return EINVAL;
    if (port_num != 1)
        return EINVAL;
    struct ibv_port_attr p;
    memset(&p, 0, sizeof(p));
    fill_port_attr(sv_ctx(context)->dev, &p);
    p.link_layer = IBV_LINK_LAYER_ETHERNET;
    memset(port_attr, 0, port_attr_len);
    memcpy(port_attr, &p, SR_MIN(port_attr_len, sizeof(p)));
    return 0;
}

struct _compat_ibv_port_attr;
/* The exported fallback writes only the 48-byte compat struct (ABI notes). */
#undef ibv_query_port
SV_EXPORT int ibv_query_port(struct ibv_context *context, uint8_t port_num,
                             struct _compat_ibv_port_attr *port_attr);
int ibv_query_port(struct ibv_context *context, uint8_t port_num,
                   struct _compat_ibv_port_attr *port_attr)
{
    return sv_query_port(context, port_num, (struct ibv_port_attr *)port_attr,
                         offsetof(struct ibv_port_attr, link_layer));
}

/* GID slot index of the device's table: the GID, false for an empty slot. */
static bool gid_at(const struct sv_device *d, uint32_t index, uint8_t gid[16],
                   enum ibv_gid_type *type)
{
    if (index >= SV_GID_USED)
        return false;
    const struct sv_gid_slot *s = &sv_gid_slots[index];
    if (s->link_local) {
        /* fe80::/64 with the node GUID as interface id (IBA A16.3-style) */
        memset(gid, 0, 16);
        gid[0] = 0xfe;
        gid[1] = 0x80;
        memcpy(gid + 8, &d->guid, 8);
    } else {
        memcpy(gid, d->gid, 16);
    }
    if (type)
        *type = s->type;
    return true;
}

bool sv_gid_index_usable(const struct sv_device *d, uint32_t index)
{
    (void)d;
    return index < SV_GID_USED && !sv_gid_slots[index].link_local;
}

SV_EXPORT int ibv_query_gid(struct ibv_context *context, uint8_t port_num, int index,
                            union ibv_gid *gid)
{
    if (!gid || !sv_live_is(context, SV_K_CTX) || port_num != 1 || index < 0 ||
        index >= SV_GID_TBL_LEN) {
        errno = EINVAL;
        return -1;
    }
    if (!gid_at(sv_ctx(context)->dev, (uint32_t)index, gid->raw, NULL))
        memset(gid, 0, sizeof(*gid)); /* an empty slot reads as zero */
    return 0;
}

/* IBVERBS_PRIVATE_34: sysfs GID type, 0 = IB/RoCE v1, 1 = RoCE v2. */
SV_EXPORT int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num, unsigned int index,
                                 int *type);
int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num, unsigned int index, int *type)
{
    if (!type || !sv_live_is(context, SV_K_CTX)) {
        errno = EINVAL;
        return -1;
    }
    uint8_t g[16];
    enum ibv_gid_type t;
    if (port_num != 1 || index >= SV_GID_TBL_LEN)
        return -1;
    if (!gid_at(sv_ctx(context)->dev, index, g, &t))
        t = IBV_GID_TYPE_IB; /* what sysfs shows for an empty slot */
    *type = t == IBV_GID_TYPE_ROCE_V2;
    return 0;
}

SV_EXPORT int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port_num, uint32_t gid_index,
                                struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size)
{
    if (!entry || !sv_live_is(context, SV_K_CTX))
        return EINVAL;
    if (flags || entry_size < sizeof(*entry))
        return EINVAL;
    if (port_num != 1 || gid_index >= SV_GID_TBL_LEN)
        return EINVAL;
    uint8_t g[16];
    enum ibv_gid_type t;
    if (!gid_at(sv_ctx(context)->dev, gid_index, g, &t))
        return ENODATA; /* empty slot */
    memset(entry, 0, entry_size);
    memcpy(entry->gid.raw, g, 16);
    entry->gid_index = gid_index;
    entry->port_num = port_num;
    entry->gid_type = t;
    entry->ndev_ifindex = 1; /* lo */
    return 0;
}

SV_EXPORT ssize_t _ibv_query_gid_table(struct ibv_context *context, struct ibv_gid_entry *entries,
                                       size_t max_entries, uint32_t flags, size_t entry_size)
{
    if (!entries || !sv_live_is(context, SV_K_CTX))
        return -EINVAL;
    if (flags || entry_size < sizeof(*entries))
        return -EINVAL;
    if (max_entries < SV_GID_USED)
        return -EINVAL; /* rdma-core: the buffer must hold every valid entry */
    for (uint32_t i = 0; i < SV_GID_USED; i++) {
        struct ibv_gid_entry *e = (void *)((char *)entries + i * entry_size);
        int r = _ibv_query_gid_ex(context, 1, i, e, 0, entry_size);
        if (r)
            return -r;
    }
    return SV_GID_USED;
}

/* sysfs answers about the GID table (ports/1/gids/N, gid_attrs/types/N,
 * gid_attrs/ndevs/N), agreeing with ibv_query_gid_ex. 0 and the text in
 * buf, or -1 for a file we do not emulate. */
static int gid_sysfs(const struct sv_device *d, const char *file, char *buf, size_t size)
{
    unsigned idx;
    int n = -1;
    char kind[16];
    if (sscanf(file, "ports/1/gids/%u", &idx) == 1 && idx < SV_GID_TBL_LEN) {
        uint8_t g[16] = {0};
        gid_at(d, idx, g, NULL); /* an empty slot reads as zero */
        n = 0;
        for (int i = 0; i < 16 && n >= 0 && (size_t)n < size; i += 2)
            n += snprintf(buf + n, size - (size_t)n, "%s%02x%02x", i ? ":" : "", g[i], g[i + 1]);
    } else if (sscanf(file, "ports/1/gid_attrs/%15[a-z]/%u", kind, &idx) == 2 &&
               idx < SV_GID_TBL_LEN) {
        uint8_t g[16];
        enum ibv_gid_type t;
        if (!gid_at(d, idx, g, &t))
            return -1; /* the kernel answers EINVAL for an empty slot */
        if (!strcmp(kind, "types"))
            n = snprintf(buf, size, "%s", t == IBV_GID_TYPE_ROCE_V2 ? "RoCE v2" : "IB/RoCE v1");
        else if (!strcmp(kind, "ndevs"))
            n = snprintf(buf, size, "lo");
    }
    if (n < 0)
        return -1;
    return n < (int)size ? n : (int)size - 1;
}

SV_EXPORT int ibv_query_pkey(struct ibv_context *context, uint8_t port_num, int index, __be16 *pkey)
{
    if (!pkey || !sv_live_is(context, SV_K_CTX)) {
        errno = EINVAL;
        return -1;
    }
    /* rdma-core reads ports/<port>/pkeys/<index> from sysfs: past the
     * table, that file does not exist */
    errno = ENOENT;
    if (port_num != 1 || index != 0)
        return -1;
    *pkey = htons(0xffff);
    return 0;
}

SV_EXPORT int ibv_get_pkey_index(struct ibv_context *context, uint8_t port_num, __be16 pkey)
{
    if (!sv_live_is(context, SV_K_CTX)) {
        errno = EINVAL;
        return -1;
    }
    errno = ENOENT; /* not found: rdma-core's ibv_query_pkey ran past the table */
    return port_num == 1 && ntohs(pkey) == 0xffff ? 0 : -1;
}

/* ---- async events ---- */
void sv_async_post(struct sv_context *ctx, enum ibv_event_type type, void *obj)
{
    sv_evq_post(&ctx->async, (int)type, obj);
}

SV_EXPORT int ibv_get_async_event(struct ibv_context *context, struct ibv_async_event *event)
{
    if (!event || !sv_live_is(context, SV_K_CTX)) {
        errno = EINVAL;
        return -1;
    }
    struct sv_ev r;
    if (sv_evq_get(&sv_ctx(context)->async, &r))
        return -1;
    memset(event, 0, sizeof(*event));
    event->event_type = (enum ibv_event_type)r.type;
    switch (event->event_type) {
    case IBV_EVENT_CQ_ERR:
        event->element.cq = r.obj;
        break;
    case IBV_EVENT_SRQ_LIMIT_REACHED:
    case IBV_EVENT_SRQ_ERR:
        event->element.srq = r.obj;
        break;
    case IBV_EVENT_PORT_ACTIVE:
    case IBV_EVENT_PORT_ERR:
        event->element.port_num = 1;
        break;
    default:
        event->element.qp = r.obj;
        break;
    }
    return 0;
}

SV_EXPORT void ibv_ack_async_event(struct ibv_async_event *event)
{
    (void)event;
}

/* ---- sysfs emulation: the clients read a few files of the device ---- */
/* Exported by libibverbs but declared only in rdma-core's private headers. */
SV_EXPORT int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size);
SV_EXPORT const char *ibv_get_sysfs_path(void);
SV_EXPORT int ibv_dontfork_range(void *base, size_t size);
SV_EXPORT int ibv_dofork_range(void *base, size_t size);

SV_EXPORT int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)
{
    if (!dir || !file || !buf) {
        errno = EINVAL;
        return -1;
    }
    if (size == 0)
        return -1;
    if (!strcmp(dir, sv_ibdev_path)) {
        const char *v = NULL;
        if (!strcmp(file, "board_id"))
            v = "SOFTRDMA_0001";
        else if (!strcmp(file, "fw_ver"))
            v = "softrdma-0.1";
        else if (!strcmp(file, "node_type"))
            v = "1: CA";
        else if (!strcmp(file, "hw_rev"))
            v = "1";
        if (!v)
            return gid_sysfs(sv_device_get(), file, buf, size);
        int n = snprintf(buf, size, "%s", v);
        return n < (int)size ? n : (int)size - 1;
    }
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t len = read(fd, buf, size - 1);
    close(fd);
    if (len <= 0)
        return -1;
    buf[len] = '\0';
    if (buf[len - 1] == '\n')
        buf[--len] = '\0';
    return (int)len;
}

/* rdma-core's libibverbs/sysfs.c: the sysfs mount point, which librdmacm,
 * UCX, libfabric and Open MPI ask for before anything else. */
SV_EXPORT const char *ibv_get_sysfs_path(void)
{
    return "/sys";
}

/* ---- strings ---- */
SV_EXPORT const char *ibv_node_type_str(enum ibv_node_type node_type)
{
    static const char *const n[] = {"unknown",           "InfiniBand channel adapter",
                                    "InfiniBand switch", "InfiniBand router",
                                    "iWARP NIC",         "usNIC",
                                    "usNIC UDP",         "unspecified"};
    return node_type >= 0 && (size_t)node_type < SR_ARRAY_SIZE(n) ? n[node_type] : "unknown";
}

SV_EXPORT const char *ibv_port_state_str(enum ibv_port_state port_state)
{
    static const char *const s[] = {"PORT_NOP",   "PORT_DOWN",   "PORT_INIT",
                                    "PORT_ARMED", "PORT_ACTIVE", "PORT_ACTIVE_DEFER"};
    return (size_t)port_state < SR_ARRAY_SIZE(s) ? s[port_state] : "unknown";
}

SV_EXPORT const char *ibv_event_type_str(enum ibv_event_type event)
{
    static const char *const e[] = {"CQ error",
                                    "local work queue catastrophic error",
                                    "invalid request local work queue error",
                                    "local access violation work queue error",
                                    "communication established",
                                    "send queue drained",
                                    "path migrated",
                                    "path migration request error",
                                    "local catastrophic error",
                                    "port active",
                                    "port error",
                                    "LID change",
                                    "P_Key change",
                                    "SM change",
                                    "SRQ catastrophic error",
                                    "SRQ limit reached",
                                    "last WQE reached",
                                    "client reregistration",
                                    "GID table change",
                                    "WQ fatal error"};
    return (size_t)event < SR_ARRAY_SIZE(e) ? e[event] : "unknown";
}

SV_EXPORT const char *ibv_wc_status_str(enum ibv_wc_status status)
{
    static const char *const s[] = {"success",
                                    "local length error",
                                    "local QP operation error",
                                    "local EE context operation error",
                                    "local protection error",
                                    "Work Request Flushed Error",
                                    "memory management operation error",
                                    "bad response error",
                                    "local access error",
                                    "remote invalid request error",
                                    "remote access error",
                                    "remote operation error",
                                    "transport retry counter exceeded",
                                    "RNR retry counter exceeded",
                                    "local RDD violation error",
                                    "remote invalid RD request",
                                    "aborted error",
                                    "invalid EE context number",
                                    "invalid EE context state",
                                    "fatal error",
                                    "response timeout error",
                                    "general error",
                                    "TM error",
                                    "TM rendezvous error"};
    return (size_t)status < SR_ARRAY_SIZE(s) ? s[status] : "unknown";
}

/* ---- rates (IBA Table 219-style encodings as rdma-core numbers them) ---- */
static const struct {
    enum ibv_rate rate;
    int mult;
    int mbps;
} rates[] = {
    {IBV_RATE_2_5_GBPS, 1, 2500},   {IBV_RATE_5_GBPS, 2, 5000},     {IBV_RATE_10_GBPS, 4, 10000},
    {IBV_RATE_20_GBPS, 8, 20000},   {IBV_RATE_30_GBPS, 12, 30000},  {IBV_RATE_40_GBPS, 16, 40000},
    {IBV_RATE_60_GBPS, 24, 60000},  {IBV_RATE_80_GBPS, 32, 80000},  {IBV_RATE_120_GBPS, 48, 120000},
    {IBV_RATE_14_GBPS, 0, 14062},   {IBV_RATE_56_GBPS, 0, 56250},   {IBV_RATE_112_GBPS, 0, 112500},
    {IBV_RATE_168_GBPS, 0, 168750}, {IBV_RATE_25_GBPS, 0, 25781},   {IBV_RATE_100_GBPS, 0, 103125},
    {IBV_RATE_200_GBPS, 0, 206250}, {IBV_RATE_300_GBPS, 0, 309375}, {IBV_RATE_28_GBPS, 0, 28125},
    {IBV_RATE_50_GBPS, 0, 53125},   {IBV_RATE_400_GBPS, 0, 425000}, {IBV_RATE_600_GBPS, 0, 637500},
};

SV_EXPORT int ibv_rate_to_mult(enum ibv_rate rate)
{
    for (size_t i = 0; i < SR_ARRAY_SIZE(rates); i++)
        if (rates[i].rate == rate && rates[i].mult)
            return rates[i].mult;
    return -1;
}

SV_EXPORT enum ibv_rate mult_to_ibv_rate(int mult)
{
    for (size_t i = 0; i < SR_ARRAY_SIZE(rates); i++)
        if (rates[i].mult && rates[i].mult == mult)
            return rates[i].rate;
    return IBV_RATE_MAX;
}

SV_EXPORT int ibv_rate_to_mbps(enum ibv_rate rate)
{
    for (size_t i = 0; i < SR_ARRAY_SIZE(rates); i++)
        if (rates[i].rate == rate)
            return rates[i].mbps;
    return -1;
}

SV_EXPORT enum ibv_rate mbps_to_ibv_rate(int mbps)
{
    for (size_t i = 0; i < SR_ARRAY_SIZE(rates); i++)
        if (rates[i].mbps == mbps)
            return rates[i].rate;
    return IBV_RATE_MAX;
}

/* ---- fork and misc ---- */
SV_EXPORT int ibv_fork_init(void)
{
    return 0;
}
SV_EXPORT enum ibv_fork_status ibv_is_fork_initialized(void)
{
    return IBV_FORK_UNNEEDED;
}
SV_EXPORT int ibv_dontfork_range(void *base, size_t size)
{
    (void)base, (void)size;
    return 0;
}
SV_EXPORT int ibv_dofork_range(void *base, size_t size)
{
    (void)base, (void)size;
    return 0;
}
