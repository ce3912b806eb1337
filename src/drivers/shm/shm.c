/* shm.c: the shared-memory driver (see sr_shm.h).
 *
 * Mailbox file: a header (identity, the receiver's sleeping flag, the mask
 * of slots it must look at, the slot table), then per slot one page of
 * ring control (producer's head, consumer's tail, each on its own cache
 * line) and SR_SHM_RING bytes of ring. Head and tail count bytes since the
 * slot was claimed. A record is a 64-byte aligned {u32 len, u32 zero,
 * packet}; a record that would run past the end of the ring is preceded
 * by a wrap mark (len = SHM_WRAP) and starts at the ring's beginning.
 *
 * Slot life: FREE -> CLAIMED (a sender's CAS) -> LIVE (ring reset, space
 * reserved, mask bit set) -> CLOSED (the sender is done) -> FREE (the
 * receiver, once the ring is drained, clears the mask bit first). Only the
 * receiver frees, so a sender never claims a ring the receiver still reads.
 * A slot's pid is 0 while it is FREE; a claimer writes its own right after
 * its CAS, so a slot CLAIMED by a process that died before making it LIVE
 * is freed by the receiver's sweep (one CLAIMED with pid 0 is being
 * claimed just now and is left alone).
 *
 * Wake-up (Dekker): the receiver stores sleeping = 1, then looks at every
 * ring; a sender publishes its head, then loads sleeping. With sequentially
 * consistent accesses one of the two sees the other: the receiver finds
 * the packet, or the sender rings. */
#include "sr_shm.h"
#include "sr_bulk.h"
#include "sr_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define SHM_MAGIC   0x53524d42u /* "SRMB" */
#define SHM_VERSION 2u
#define SHM_WRAP    UINT32_MAX
/* A record's second word: the packet's payload is a reference to the
 * sender's memory (sr_bulk.h), not data. */
#define SHM_REC_BULK 1u

enum {
    SHM_HDR_BYTES = 8192,
    SHM_CTL_BYTES = 4096,
    SHM_SLOT_BYTES = SHM_CTL_BYTES + SR_SHM_RING,
    SHM_REC_HDR = 8,
    SHM_ALIGN = 64,
    SHM_SWEEP_EVERY = 64, /* sleeps between looks for dead senders */
    /* A mailbox under its temporary name, or a doorbell without a
     * mailbox and with nobody bound to it, older than this was left by an
     * open that died before the rename (an open takes milliseconds). Its
     * header may be blank, so the name's pid is all it has, and a pid
     * means nothing outside its namespace: age decides. */
    SHM_TMP_STALE_S = 60,
};
/* Unpublished bytes after which a burst is published without waiting for
 * sr_shm_flush (a stream's packets are not held back). */
#define SHM_PUBLISH_BYTES 32768u
/* A sender's backlog per peer, for packets the ring has no room for (a
 * receiver that fell behind): grows from MIN up to MAX, then drops. The
 * transport's windows (2048 packets per QP) bound what can be in flight. */
#define SHM_BACKLOG_MIN (1u << 20)
#define SHM_BACKLOG_MAX (256u << 20)

enum { SLOT_FREE, SLOT_CLAIMED, SLOT_LIVE, SLOT_CLOSED };
enum { SHM_BULK_UNKNOWN, SHM_BULK_OK, SHM_BULK_NO };

struct shm_slot {
    _Atomic uint32_t state;
    _Atomic uint32_t pid; /* the sender's process, for the dead-sender sweep; 0 when FREE */
    uint8_t gid[16];
    _Atomic uint64_t pidns; /* where pid means that process */
    /* Bulk data by reference (sr_bulk.h): the sender offers the word at
     * probe_addr in its memory, holding probe_val; the receiver reads it
     * with process_vm_readv once and says in bulk whether it can copy
     * from the sender (SHM_BULK_*). The sender sends references only
     * after SHM_BULK_OK. */
    uint64_t probe_addr, probe_val;
    _Atomic uint32_t bulk;
    uint8_t pad[12];
};

struct shm_hdr {
    uint32_t magic, version, slots, ring_bytes;
    uint32_t pid;            /* the receiver's process */
    _Atomic uint32_t closed; /* the receiver closed the device */
    uint64_t pidns;          /* and its pid namespace (for the stale-file sweep) */
    alignas(64) _Atomic uint32_t sleeping;
    alignas(64) _Atomic uint64_t active;
    alignas(64) struct shm_slot slot[SR_SHM_SLOTS];
};
_Static_assert(sizeof(struct shm_slot) == 64, "slot is a cache line");
_Static_assert(sizeof(struct shm_hdr) <= SHM_HDR_BYTES, "header fits");
_Static_assert(SR_SHM_SLOTS <= 64, "slots fit the active mask");

struct shm_ctl {
    alignas(64) _Atomic uint64_t head;
    alignas(64) _Atomic uint64_t tail;
};

enum peer_kind { PEER_REMOTE, PEER_SHM };

struct shm_peer {
    uint8_t gid[16];
    enum peer_kind kind;
    struct shm_hdr *hdr; /* the peer's mailbox header */
    uint8_t *ring;       /* our slot: control page, then the ring */
    unsigned slot;
    uint64_t head, tail_seen, published; /* ours, the receiver's last look, what it may read */
    unsigned long ino;                   /* the mailbox file attached */
    unsigned full;                       /* ring-full events since the last liveness check */
    bool dirty;                          /* records committed, not yet published */
    struct sockaddr_un bell;
    /* Packets the ring had no room for, in ring record format, waiting to
     * go in order: [bl_off, bl_len) of bl. */
    uint8_t *bl;
    size_t bl_cap, bl_off, bl_len;
};

struct sr_shm {
    uint8_t gid[16];
    uint16_t port;
    char dir[64];
    char path[160]; /* our mailbox */
    char bell_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    unsigned long netns, pidns;
    uint32_t pid;        /* the process that opened the device (not a forked child) */
    struct shm_hdr *hdr; /* our mailbox, mapped whole */
    size_t map_len;
    int bell_fd; /* our doorbell (bound) */
    int ring_fd; /* unbound, for ringing peers' doorbells */
    unsigned rx_next, sleeps;
    uint32_t peer_cnt, last;
    uint32_t backlogged; /* peers with a backlog */
    uint32_t dirty;      /* peers with records not yet published */
    struct shm_peer peer[SR_SHM_PEERS];
    struct sr_shm_stats stats;
    uint32_t bulk_min;      /* sr_shm_cfg.bulk_min; 0: no references either way */
    _Atomic uint64_t probe; /* what receivers read from us to test process_vm_readv */
};

static size_t shm_file_bytes(void)
{
    return SHM_HDR_BYTES + (size_t)SR_SHM_SLOTS * SHM_SLOT_BYTES;
}

static size_t slot_offset(unsigned i)
{
    return SHM_HDR_BYTES + (size_t)i * SHM_SLOT_BYTES;
}

static uint32_t rec_bytes(uint32_t len)
{
    return (SHM_REC_HDR + len + SHM_ALIGN - 1) & ~(uint32_t)(SHM_ALIGN - 1);
}

static void shm_name(const struct sr_shm *s, const uint8_t *gid, uint16_t port, char *out,
                     size_t size)
{
    char hex[33];
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", gid[i]);
    snprintf(out, size, "%s/softrdma-%lu-%s-%u", s->dir, s->netns, hex, port);
}

/* The doorbell's address; false when it does not fit a socket address. */
static bool bell_addr(const char *mailbox, struct sockaddr_un *sa)
{
    static const char suffix[] = ".bell";
    size_t n = strlen(mailbox);
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    if (n + sizeof(suffix) > sizeof(sa->sun_path))
        return false;
    memcpy(sa->sun_path, mailbox, n);
    memcpy(sa->sun_path + n, suffix, sizeof(suffix));
    return true;
}

/* The network namespace: only devices in the same one share mailboxes
 * (the same address may mean another device in another namespace). The
 * pid namespace: only there does a pid name a process. */
static unsigned long ns_id(const char *which)
{
    struct stat st;
    return stat(which, &st) == 0 ? (unsigned long)st.st_ino : 0;
}

static bool pid_gone(uint32_t pid)
{
    return pid && kill((pid_t)pid, 0) < 0 && errno == ESRCH;
}

/* The mailbox's receiver closed its device, or died (a pid in another
 * pid namespace cannot be judged: it is taken as alive). */
static bool receiver_gone(struct shm_hdr *h, unsigned long pidns)
{
    return atomic_load(&h->closed) || (h->pidns == pidns && pid_gone(h->pid));
}

/* Is there a mailbox under the first n bytes of name (a doorbell's)?
 * Yes when the name is too long to tell. */
static bool has_mailbox(int dir_fd, const char *name, size_t n)
{
    char box[256];
    if (n >= sizeof(box))
        return true;
    memcpy(box, name, n);
    box[n] = 0;
    struct stat st;
    return fstatat(dir_fd, box, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* Is nobody bound to the doorbell named name in s's directory? */
static bool bell_dead(const struct sr_shm *s, const char *name)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if ((size_t)snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s", s->dir, name) >=
        sizeof(sa.sun_path))
        return false;
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    bool dead = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno == ECONNREFUSED;
    close(fd);
    return dead;
}

/* Removes the mailboxes (and doorbells) of this namespace whose receiver
 * died without closing its device (killed, crashed): they hold the rings
 * senders reserved. Another pid namespace's are left alone. Also removes
 * what an open killed before its rename left: the mailbox under its
 * temporary name and a doorbell without a mailbox. */
static void sweep_stale(const struct sr_shm *s, unsigned long pidns)
{
    DIR *d = opendir(s->dir);
    if (!d)
        return;
    char prefix[48];
    int plen = snprintf(prefix, sizeof(prefix), "softrdma-%lu-", s->netns);
    struct dirent *e;
    for (int seen = 0; (e = readdir(d)) && seen < 4096; seen++) {
        const char *name = e->d_name;
        size_t n = strlen(name);
        if (strncmp(name, prefix, (size_t)plen))
            continue;
        bool is_bell = n > 5 && !strcmp(name + n - 5, ".bell");
        if (is_bell || (n > 4 && !strcmp(name + n - 4, ".tmp"))) {
            /* a doorbell goes with its mailbox (below), or when it has
             * none and nobody is bound to it (its open died before the
             * rename) */
            struct stat t, now;
            bool left = !fstatat(dirfd(d), name, &t, AT_SYMLINK_NOFOLLOW) &&
                        (is_bell ? S_ISSOCK(t.st_mode) : S_ISREG(t.st_mode)) &&
                        t.st_uid == geteuid() && time(NULL) - t.st_mtime > SHM_TMP_STALE_S &&
                        (!is_bell || (!has_mailbox(dirfd(d), name, n - 5) && bell_dead(s, name)));
            /* the name may have been taken by a new owner since */
            if (left && !fstatat(dirfd(d), name, &now, AT_SYMLINK_NOFOLLOW) &&
                now.st_ino == t.st_ino)
                unlinkat(dirfd(d), name, 0);
            continue;
        }
        /* O_NONBLOCK: a FIFO under such a name must not hang the open */
        int fd = openat(dirfd(d), name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        if (fd < 0)
            continue;
        struct shm_hdr h;
        struct stat st, now;
        bool stale = !fstat(fd, &st) && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
                     pread(fd, &h, offsetof(struct shm_hdr, sleeping), 0) ==
                         (ssize_t)offsetof(struct shm_hdr, sleeping) &&
                     h.magic == SHM_MAGIC && h.version == SHM_VERSION && h.pidns == pidns &&
                     receiver_gone(&h, pidns);
        close(fd);
        /* the name may have been taken by a new owner since */
        if (!stale || fstatat(dirfd(d), name, &now, AT_SYMLINK_NOFOLLOW) || now.st_ino != st.st_ino)
            continue;
        char bell[300];
        snprintf(bell, sizeof(bell), "%s.bell", name);
        unlinkat(dirfd(d), name, 0);
        unlinkat(dirfd(d), bell, 0);
    }
    closedir(d);
}

int sr_shm_open(const struct sr_shm_cfg *cfg, struct sr_shm **out)
{
    const char *dir = cfg->dir ? cfg->dir : "/dev/shm";
    struct sr_shm *s = calloc(1, sizeof(*s));
    if (!s)
        return SR_ERR_NOMEM;
    s->bell_fd = s->ring_fd = -1;
    memcpy(s->gid, cfg->gid, 16);
    s->port = cfg->port;
    s->netns = ns_id("/proc/self/ns/net");
    unsigned long pidns = s->pidns = ns_id("/proc/self/ns/pid");
    s->pid = (uint32_t)getpid();
    s->bulk_min = cfg->bulk_min;
    /* any value will do that a process reading another's memory by
     * mistake would not find there: this one's address, time and pid */
    atomic_store(&s->probe, ((uint64_t)(uintptr_t)s ^ (uint64_t)time(NULL) << 20 ^ s->pid) | 1);
    int err = SR_ERR_INVAL;
    if (strlen(dir) >= sizeof(s->dir))
        goto err_free;
    err = SR_ERR_NOTSUP; /* no /proc: namespaces cannot be told apart */
    if (!s->netns || !s->pidns)
        goto err_free;
    err = SR_ERR_INVAL;
    snprintf(s->dir, sizeof(s->dir), "%s", dir);
    shm_name(s, s->gid, s->port, s->path, sizeof(s->path));
    struct sockaddr_un sa;
    if (!bell_addr(s->path, &sa))
        goto err_free;
    memcpy(s->bell_path, sa.sun_path, sizeof(s->bell_path));
    sweep_stale(s, pidns);

    /* The doorbell first, then the mailbox under a temporary name,
     * initialised, renamed into place: a sender sees no mailbox or a
     * complete one. The address is ours (its UDP socket is bound), so
     * files under these names were left by a process that is gone. */
    s->bell_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    s->ring_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s->bell_fd < 0 || s->ring_fd < 0) {
        err = SR_ERR_LIMIT;
        goto err_free;
    }
    unlink(s->bell_path);
    if (bind(s->bell_fd, (struct sockaddr *)&sa, sizeof(sa)))
        goto err_free;
    char tmp[sizeof(s->path) + 24];
    snprintf(tmp, sizeof(tmp), "%s.%d.tmp", s->path, (int)getpid());
    int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        goto err_bell;
    s->map_len = shm_file_bytes();
    if (ftruncate(fd, (off_t)s->map_len) || posix_fallocate(fd, 0, SHM_HDR_BYTES)) {
        err = SR_ERR_NOMEM;
        goto err_tmp;
    }
    void *m = mmap(NULL, s->map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    if (m == MAP_FAILED) {
        err = SR_ERR_NOMEM;
        goto err_tmp;
    }
    s->hdr = m;
    s->hdr->version = SHM_VERSION;
    s->hdr->slots = SR_SHM_SLOTS;
    s->hdr->ring_bytes = SR_SHM_RING;
    s->hdr->pid = (uint32_t)getpid();
    s->hdr->pidns = pidns;
    s->hdr->magic = SHM_MAGIC;
    if (rename(tmp, s->path))
        goto err_map;
    close(fd);
    *out = s;
    return 0;

err_map:
    munmap(s->hdr, s->map_len);
err_tmp:
    close(fd);
    unlink(tmp);
err_bell:
    unlink(s->bell_path);
err_free:
    if (s->bell_fd >= 0)
        close(s->bell_fd);
    if (s->ring_fd >= 0)
        close(s->ring_fd);
    free(s);
    return err;
}

static bool backlog_empty(const struct shm_peer *p);

static struct shm_ctl *peer_ctl(const struct shm_peer *p)
{
    return (struct shm_ctl *)p->ring;
}

static void peer_detach(struct sr_shm *s, struct shm_peer *p)
{
    if (p->kind != PEER_SHM)
        return;
    atomic_store_explicit(&p->hdr->slot[p->slot].state, SLOT_CLOSED, memory_order_release);
    munmap(p->ring, SHM_SLOT_BYTES);
    munmap(p->hdr, SHM_HDR_BYTES);
    if (!backlog_empty(p))
        s->backlogged--;
    if (p->dirty) {
        p->dirty = false;
        s->dirty--;
    }
    free(p->bl);
    p->bl = NULL;
    p->bl_cap = p->bl_off = p->bl_len = 0;
    p->kind = PEER_REMOTE;
    s->stats.peers--;
}

void sr_shm_unlink(struct sr_shm *s)
{
    if ((uint32_t)getpid() != s->pid)
        return; /* a forked child exiting: the mailbox is its parent's */
    atomic_store(&s->hdr->closed, 1);
    unlink(s->path);
    unlink(s->bell_path);
}

void sr_shm_close(struct sr_shm *s)
{
    if (!s)
        return;
    sr_shm_unlink(s);
    for (uint32_t i = 0; i < s->peer_cnt; i++)
        peer_detach(s, &s->peer[i]);
    munmap(s->hdr, s->map_len);
    close(s->bell_fd);
    close(s->ring_fd);
    free(s);
}

int sr_shm_fd(const struct sr_shm *s)
{
    return s->bell_fd;
}

/* Map gid's mailbox and claim a slot in it; false when it has none we
 * can use (the peer then stays remote). */
static bool peer_attach(struct sr_shm *s, struct shm_peer *p)
{
    char path[sizeof(s->path)];
    shm_name(s, p->gid, SR_SHM_DEFAULT_PORT, path, sizeof(path));
    int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return false;
    struct stat st;
    struct shm_hdr *h = MAP_FAILED;
    uint8_t *ring = MAP_FAILED;
    unsigned i = SR_SHM_SLOTS;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
        (size_t)st.st_size < shm_file_bytes() || !bell_addr(path, &p->bell))
        goto fail;
    h = mmap(NULL, SHM_HDR_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (h == MAP_FAILED || h->magic != SHM_MAGIC || h->version != SHM_VERSION ||
        h->slots != SR_SHM_SLOTS || h->ring_bytes != SR_SHM_RING ||
        receiver_gone(h, s->pidns)) /* closed, or a dead receiver's not swept yet */
        goto fail;
    for (i = 0; i < SR_SHM_SLOTS; i++) {
        uint32_t free_state = SLOT_FREE;
        if (atomic_compare_exchange_strong(&h->slot[i].state, &free_state, SLOT_CLAIMED))
            break;
    }
    if (i == SR_SHM_SLOTS)
        goto fail;
    /* ours from here: should this process die before the slot is LIVE,
     * the receiver's sweep finds it by this pid */
    atomic_store(&h->slot[i].pidns, s->pidns);
    atomic_store(&h->slot[i].pid, (uint32_t)getpid());
    /* Reserve the ring's pages now: a full tmpfs is then UDP, not SIGBUS. */
    if (posix_fallocate(fd, (off_t)slot_offset(i), SHM_SLOT_BYTES))
        goto fail;
    ring =
        mmap(NULL, SHM_SLOT_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)slot_offset(i));
    if (ring == MAP_FAILED)
        goto fail;
    close(fd);
    p->hdr = h;
    p->ring = ring;
    p->slot = i;
    p->head = p->tail_seen = p->published = 0;
    struct shm_ctl *c = peer_ctl(p);
    atomic_store_explicit(&c->head, 0, memory_order_relaxed);
    atomic_store_explicit(&c->tail, 0, memory_order_relaxed);
    memcpy(h->slot[i].gid, s->gid, 16);
    h->slot[i].probe_addr = s->bulk_min ? (uint64_t)(uintptr_t)&s->probe : 0;
    h->slot[i].probe_val = atomic_load(&s->probe);
    atomic_store(&h->slot[i].bulk, SHM_BULK_UNKNOWN);
    p->ino = (unsigned long)st.st_ino;
    p->full = 0;
    atomic_store_explicit(&h->slot[i].state, SLOT_LIVE, memory_order_release);
    atomic_fetch_or(&h->active, 1ull << i);
    p->kind = PEER_SHM;
    return true;

fail:
    if (i < SR_SHM_SLOTS) {
        atomic_store(&h->slot[i].pid, 0);
        atomic_store(&h->slot[i].state, SLOT_FREE);
    }
    if (h != MAP_FAILED)
        munmap(h, SHM_HDR_BYTES);
    close(fd);
    return false;
}

/* The peer entry for gid (attached on first use); NULL when the table is
 * full and gid is not in it. */
static struct shm_peer *peer_find(struct sr_shm *s, const uint8_t *gid)
{
    if (s->last < s->peer_cnt && !memcmp(s->peer[s->last].gid, gid, 16))
        return &s->peer[s->last];
    for (uint32_t i = 0; i < s->peer_cnt; i++)
        if (!memcmp(s->peer[i].gid, gid, 16)) {
            s->last = i;
            return &s->peer[i];
        }
    if (s->peer_cnt == SR_SHM_PEERS)
        return NULL;
    struct shm_peer *p = &s->peer[s->peer_cnt];
    memset(p, 0, sizeof(*p));
    memcpy(p->gid, gid, 16);
    p->kind = PEER_REMOTE;
    if (peer_attach(s, p))
        s->stats.peers++;
    s->last = s->peer_cnt++;
    return p;
}

static void ring_bell(struct sr_shm *s, struct shm_peer *p)
{
    static const uint8_t one = 1;
    /* EAGAIN: bells already queued wake it; ECONNREFUSED: it is gone */
    if (sendto(s->ring_fd, &one, 1, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&p->bell,
               sizeof(p->bell)) == 1)
        s->stats.tx_bells++;
}

/* Room for a record of len bytes at the ring's head (after a wrap mark
 * when the end is too near); NULL when the ring is full. */
static uint8_t *ring_claim(struct shm_peer *p, uint32_t len)
{
    uint32_t rec = rec_bytes(len);
    uint8_t *data = p->ring + SHM_CTL_BYTES;
    uint32_t pos = (uint32_t)(p->head % SR_SHM_RING), room = SR_SHM_RING - pos;
    uint64_t need = room < rec ? room + rec : rec;
    if (p->head + need - p->tail_seen > SR_SHM_RING) {
        p->tail_seen = atomic_load_explicit(&peer_ctl(p)->tail, memory_order_acquire);
        if (p->head + need - p->tail_seen > SR_SHM_RING)
            return NULL;
    }
    if (room < rec) { /* room >= SHM_ALIGN: records are aligned */
        uint32_t wrap[2] = {SHM_WRAP, 0};
        memcpy(data + pos, wrap, sizeof(wrap));
        p->head += room;
        pos = 0;
    }
    return data + pos;
}

/* Adds the record written at the claimed place; the receiver sees it at
 * the next ring_publish. */
static void ring_commit(struct shm_peer *p, uint32_t len)
{
    p->head += rec_bytes(len);
}

static void ring_notify(struct sr_shm *s, struct shm_peer *p);

/* Makes everything committed visible at once (a held ACK and the request
 * it rides with arrive together, as in one GSO send), and rings. */
static void ring_publish(struct sr_shm *s, struct shm_peer *p)
{
    if (p->published == p->head)
        return;
    p->published = p->head;
    atomic_store_explicit(&peer_ctl(p)->head, p->head, memory_order_release);
    ring_notify(s, p);
}

/* After publishing: ring the receiver if it went to sleep. */
static void ring_notify(struct sr_shm *s, struct shm_peer *p)
{
    atomic_thread_fence(memory_order_seq_cst); /* pairs with sr_shm_sleep */
    if (atomic_load_explicit(&p->hdr->sleeping, memory_order_relaxed) &&
        atomic_exchange(&p->hdr->sleeping, 0))
        ring_bell(s, p);
}

static bool backlog_empty(const struct shm_peer *p)
{
    return p->bl_off == p->bl_len;
}

/* The receiver closed its device, died, or its address has another
 * mailbox now (it crashed and a new process took the address). */
static bool peer_gone(const struct sr_shm *s, const struct shm_peer *p)
{
    if (receiver_gone(p->hdr, s->pidns))
        return true;
    char path[sizeof(s->path)];
    shm_name(s, p->gid, SR_SHM_DEFAULT_PORT, path, sizeof(path));
    struct stat st;
    return stat(path, &st) || (unsigned long)st.st_ino != p->ino;
}

/* A full ring: is its receiver still there? Asked at the first full ring
 * and every 256th after (two system calls). */
static bool peer_check(const struct sr_shm *s, struct shm_peer *p)
{
    return ++p->full % 256 == 1 && peer_gone(s, p);
}

/* Leaves a gone receiver's mailbox (its ring and the backlog are lost:
 * the transport retransmits) and attaches to the address's new one, if
 * any; false: the address is not reachable here any more. */
static bool peer_renew(struct sr_shm *s, struct shm_peer *p)
{
    peer_detach(s, p);
    if (!peer_attach(s, p))
        return false;
    s->stats.peers++;
    return true;
}

/* Moves backlogged records into the ring while it has room; true when
 * the backlog is empty. */
static bool backlog_flush(struct sr_shm *s, struct shm_peer *p)
{
    bool moved = false;
    while (!backlog_empty(p)) {
        uint32_t len;
        memcpy(&len, p->bl + p->bl_off, 4);
        uint8_t *r = ring_claim(p, len);
        if (!r)
            break;
        memcpy(r, p->bl + p->bl_off, SHM_REC_HDR + len);
        ring_commit(p, len);
        p->bl_off += rec_bytes(len);
        moved = true;
    }
    if (moved) {
        ring_publish(s, p);
    } else if (peer_check(s, p)) {
        peer_renew(s, p); /* the backlog went with the old mailbox */
        return true;
    }
    if (!backlog_empty(p))
        return false;
    p->bl_off = p->bl_len = 0;
    s->backlogged--;
    return true;
}

/* Room for a record in the backlog (grown, compacted); NULL at the cap. */
static uint8_t *backlog_claim(struct shm_peer *p, uint32_t len)
{
    size_t rec = rec_bytes(len);
    if (p->bl_len + rec > p->bl_cap && p->bl_off) {
        memmove(p->bl, p->bl + p->bl_off, p->bl_len - p->bl_off);
        p->bl_len -= p->bl_off;
        p->bl_off = 0;
    }
    if (p->bl_len + rec > p->bl_cap) {
        size_t cap = p->bl_cap ? 2 * p->bl_cap : SHM_BACKLOG_MIN;
        while (cap < p->bl_len + rec)
            cap *= 2;
        uint8_t *n = cap <= SHM_BACKLOG_MAX ? realloc(p->bl, cap) : NULL;
        if (!n)
            return NULL;
        p->bl = n;
        p->bl_cap = cap;
    }
    uint8_t *r = p->bl + p->bl_len;
    p->bl_len += rec;
    return r;
}

bool sr_shm_reaches(struct sr_shm *s, const uint8_t *gid)
{
    const struct shm_peer *p = s && gid ? peer_find(s, gid) : NULL;
    return p && p->kind == PEER_SHM;
}

int sr_shm_send(struct sr_shm *s, const struct sr_tx_pkt *t)
{
    if (!t || !t->hdr || !t->dgid || t->hdr_len < SR_BTH_LEN || t->pad_len > 3 ||
        (t->iov_cnt && !t->iov))
        return SR_ERR_INVAL;
    uint64_t len64 = (uint64_t)t->hdr_len + t->payload_len + t->pad_len + SR_ICRC_LEN;
    if (len64 > SR_SHM_MAX_PKT)
        return SR_ERR_INVAL;
    struct shm_peer *p = peer_find(s, t->dgid);
    if (!p || p->kind != PEER_SHM)
        return SR_SHM_REMOTE;
    if (atomic_load_explicit(&p->hdr->closed, memory_order_relaxed) && !peer_renew(s, p))
        return SR_SHM_REMOTE; /* its packets go to UDP from now on */
    uint64_t sum = 0;
    for (uint32_t i = 0; i < t->iov_cnt; i++)
        sum += t->iov[i].len;
    if (sum != t->payload_len)
        return SR_ERR_INVAL;
    /* a reference never to a receiver that said it cannot follow one; one
     * that has not looked yet probes before it reads the record (and drops
     * it if the probe fails): a READ's answer may be under way before the
     * requester saw this sender's first packet */
    if (t->bulk &&
        atomic_load_explicit(&p->hdr->slot[p->slot].bulk, memory_order_relaxed) == SHM_BULK_NO)
        return SR_ERR_INVAL;

    /* Packets keep their order: while some wait in the backlog, new ones
     * queue behind them. */
    uint32_t len = (uint32_t)len64;
    bool queued = !backlog_empty(p) && !backlog_flush(s, p);
    if (p->kind != PEER_SHM)
        return SR_SHM_REMOTE; /* backlog_flush found it gone */
    uint8_t *r = queued ? NULL : ring_claim(p, len);
    if (!r && peer_check(s, p)) {
        if (!peer_renew(s, p))
            return SR_SHM_REMOTE;
        r = ring_claim(p, len);
    }
    bool in_ring = r != NULL;
    if (!r) {
        bool was_empty = backlog_empty(p);
        r = backlog_claim(p, len);
        if (!r) {
            s->stats.tx_drops++;
            return SR_ERR_BUSY;
        }
        if (was_empty)
            s->backlogged++;
        s->stats.tx_queued++;
    }
    uint32_t rh[2] = {len, t->bulk ? SHM_REC_BULK : 0};
    memcpy(r, rh, sizeof(rh));
    uint8_t *w = r + SHM_REC_HDR;
    memcpy(w, t->hdr, t->hdr_len);
    w += t->hdr_len;
    for (uint32_t i = 0; i < t->iov_cnt; i++) {
        SR_DMA_BEGIN(); /* registered memory, read by the device */
        memcpy(w, t->iov[i].base, t->iov[i].len);
        SR_DMA_END();
        w += t->iov[i].len;
    }
    memset(w, 0, t->pad_len + SR_ICRC_LEN);
    s->stats.tx_pkts++;
    s->stats.tx_bytes += len;
    if (in_ring) {
        ring_commit(p, len);
        if (p->head - p->published >= SHM_PUBLISH_BYTES)
            ring_publish(s, p); /* a bulk burst streams: the receiver starts early */
        else if (!p->dirty) {
            p->dirty = true;
            s->dirty++;
        }
    }
    return 0;
}

bool sr_shm_backlogged(const struct sr_shm *s)
{
    return s->backlogged != 0;
}

bool sr_shm_flush(struct sr_shm *s)
{
    for (uint32_t i = 0; (s->dirty || s->backlogged) && i < s->peer_cnt; i++) {
        struct shm_peer *p = &s->peer[i];
        if (p->dirty) {
            p->dirty = false;
            s->dirty--;
            if (p->kind == PEER_SHM)
                ring_publish(s, p);
        }
        if (p->kind == PEER_SHM && !backlog_empty(p))
            backlog_flush(s, p);
    }
    return s->backlogged == 0;
}

static struct shm_ctl *own_ctl(const struct sr_shm *s, unsigned i)
{
    return (struct shm_ctl *)((uint8_t *)s->hdr + slot_offset(i));
}

static void slot_free(struct sr_shm *s, unsigned i)
{
    atomic_fetch_and(&s->hdr->active, ~(1ull << i));
    /* the ring's pages go back to the system; the next sender reserves
     * them again */
    (void)madvise((uint8_t *)s->hdr + slot_offset(i), SHM_SLOT_BYTES, MADV_REMOVE);
    atomic_store(&s->hdr->slot[i].pid, 0);
    atomic_store_explicit(&s->hdr->slot[i].state, SLOT_FREE, memory_order_release);
}

void sr_shm_ring_parse(const uint8_t *ring, uint32_t ring_bytes, uint64_t head, uint64_t tail,
                       const uint8_t *gid, uint32_t ref_pid, sr_shm_rx_fn cb, void *arg, int max,
                       struct sr_shm_parse *out)
{
    *out = (struct sr_shm_parse){.tail = tail};
    if (head - tail > ring_bytes) { /* a head the producer never wrote */
        out->bad = true;
        out->tail = head;
        return;
    }
    while (tail != head && out->pkts < max) {
        uint32_t pos = (uint32_t)(tail % ring_bytes), room = ring_bytes - pos;
        if (room < SHM_REC_HDR || (pos & (SHM_ALIGN - 1))) {
            out->bad = true;
            tail = head;
            break;
        }
        uint32_t rh[2];
        memcpy(rh, ring + pos, sizeof(rh)); /* read once: the producer may write on */
        if (rh[0] == SHM_WRAP && head - tail >= room) {
            tail += room;
            continue;
        }
        if (rh[0] < SR_BTH_LEN + SR_ICRC_LEN || rh[0] > SR_SHM_MAX_PKT || rec_bytes(rh[0]) > room ||
            rec_bytes(rh[0]) > head - tail) {
            out->bad = true; /* a broken ring: what is in it is lost */
            tail = head;
            break;
        }
        if (!(rh[1] & SHM_REC_BULK)) {
            cb(arg, ring + pos + SHM_REC_HDR, rh[0], gid, 0);
        } else if (ref_pid) {
            cb(arg, ring + pos + SHM_REC_HDR, rh[0], gid, ref_pid);
        } else {
            out->refused++; /* a reference from a sender we cannot copy from */
            tail += rec_bytes(rh[0]);
            continue;
        }
        out->pkts++;
        out->bytes += rh[0];
        tail += rec_bytes(rh[0]);
    }
    out->tail = tail;
}

/* Can we copy from this slot's sender (process_vm_readv, which needs
 * ptrace access to it: man 2 process_vm_readv)? Asked once per sender,
 * the answer left in the slot for it to read. Only a sender of our pid
 * namespace other than ourselves, whose word at probe_addr holds what it
 * said. */
static uint32_t slot_probe(struct sr_shm *s, struct shm_slot *sl)
{
    uint32_t pid = atomic_load(&sl->pid);
    uint64_t want = sl->probe_val, got = 0;
    bool ok = s->bulk_min && sl->probe_addr && pid && pid != s->pid &&
              atomic_load(&sl->pidns) == s->pidns;
    if (ok) {
        struct iovec l = {.iov_base = &got, .iov_len = sizeof(got)};
        struct iovec r = {.iov_base = (void *)(uintptr_t)sl->probe_addr, .iov_len = sizeof(got)};
        ok = process_vm_readv((pid_t)pid, &l, 1, &r, 1, 0) == (ssize_t)sizeof(got) && got == want;
    }
    uint32_t v = ok ? SHM_BULK_OK : SHM_BULK_NO;
    atomic_store(&sl->bulk, v);
    return v;
}

int sr_shm_copy(uint32_t pid, bool to_peer, const struct sr_bulk_seg *local, uint32_t local_cnt,
                const struct sr_bulk_seg *remote, uint32_t remote_cnt)
{
    struct iovec l[SR_MAX_SGE], r[SR_MAX_SGE];
    uint64_t want = 0, rwant = 0;
    if (!pid || local_cnt > SR_MAX_SGE || remote_cnt > SR_MAX_SGE)
        return SR_ERR_INVAL;
    for (uint32_t i = 0; i < local_cnt; i++) {
        l[i] =
            (struct iovec){.iov_base = (void *)(uintptr_t)local[i].addr, .iov_len = local[i].len};
        want += local[i].len;
    }
    for (uint32_t i = 0; i < remote_cnt; i++) {
        r[i] =
            (struct iovec){.iov_base = (void *)(uintptr_t)remote[i].addr, .iov_len = remote[i].len};
        rwant += remote[i].len;
    }
    if (want != rwant)
        return SR_ERR_INVAL;
    /* Both calls stop at the first piece that faults and say how much
     * they moved: anything short of the whole is a failure (the engine
     * reports it, never a partial message as success). */
    ssize_t n = to_peer ? process_vm_writev((pid_t)pid, l, local_cnt, r, remote_cnt, 0)
                        : process_vm_readv((pid_t)pid, l, local_cnt, r, remote_cnt, 0);
    if (n == (ssize_t)want)
        return 0;
    return SR_ERR_INVAL; /* ESRCH: the peer is gone; EFAULT: its memory is */
}

uint32_t sr_shm_bulk_to(struct sr_shm *s, const uint8_t *gid)
{
    if (!s->bulk_min)
        return 0;
    struct shm_peer *p = peer_find(s, gid);
    if (!p || p->kind != PEER_SHM ||
        atomic_load_explicit(&p->hdr->slot[p->slot].bulk, memory_order_relaxed) != SHM_BULK_OK)
        return 0;
    return s->bulk_min;
}

/* Drains up to max records of slot i into cb; the count. */
static int slot_recv(struct sr_shm *s, unsigned i, sr_shm_rx_fn cb, void *arg, int max)
{
    struct shm_slot *sl = &s->hdr->slot[i];
    uint32_t state = atomic_load_explicit(&sl->state, memory_order_acquire);
    if (state != SLOT_LIVE && state != SLOT_CLOSED)
        return 0;
    struct shm_ctl *c = own_ctl(s, i);
    uint64_t head = atomic_load_explicit(&c->head, memory_order_acquire);
    uint64_t tail = atomic_load_explicit(&c->tail, memory_order_relaxed);
    uint8_t gid[16];
    memcpy(gid, sl->gid, 16);
    uint32_t bulk = atomic_load_explicit(&sl->bulk, memory_order_relaxed);
    if (bulk == SHM_BULK_UNKNOWN)
        bulk = slot_probe(s, sl);
    struct sr_shm_parse r;
    sr_shm_ring_parse((const uint8_t *)c + SHM_CTL_BYTES, SR_SHM_RING, head, tail, gid,
                      bulk == SHM_BULK_OK ? atomic_load(&sl->pid) : 0, cb, arg, max, &r);
    s->stats.rx_refused += (uint64_t)r.refused;
    s->stats.rx_pkts += (uint64_t)r.pkts;
    s->stats.rx_bytes += r.bytes;
    s->stats.rx_bad += r.bad;
    atomic_store_explicit(&c->tail, r.tail, memory_order_release);
    if (state == SLOT_CLOSED && r.tail == head)
        slot_free(s, i);
    return r.pkts;
}

int sr_shm_recv(struct sr_shm *s, sr_shm_rx_fn cb, void *arg, int max)
{
    uint64_t act = atomic_load_explicit(&s->hdr->active, memory_order_acquire);
    if (!act)
        return 0;
    /* start after the slot served first last time: no sender starves */
    unsigned start = s->rx_next % 64;
    uint64_t rot = start ? act >> start | act << (64 - start) : act;
    int n = 0;
    while (rot && n < max) {
        unsigned i = ((unsigned)__builtin_ctzll(rot) + start) % 64;
        rot &= rot - 1;
        n += slot_recv(s, i, cb, arg, max - n);
    }
    s->rx_next = start + 1;
    return n;
}

bool sr_shm_active(const struct sr_shm *s)
{
    return atomic_load_explicit(&s->hdr->active, memory_order_relaxed) != 0;
}

bool sr_shm_pending(const struct sr_shm *s)
{
    uint64_t act = atomic_load(&s->hdr->active);
    while (act) {
        unsigned i = (unsigned)__builtin_ctzll(act);
        act &= act - 1;
        struct shm_ctl *c = own_ctl(s, i);
        if (atomic_load(&c->head) != atomic_load_explicit(&c->tail, memory_order_relaxed))
            return true;
        if (atomic_load_explicit(&s->hdr->slot[i].state, memory_order_relaxed) == SLOT_CLOSED)
            return true; /* to be freed */
    }
    return false;
}

/* A slot CLAIMED by a process of this pid namespace that is gone (it
 * died before making the slot LIVE). */
static bool claimer_gone(const struct sr_shm *s, const struct shm_slot *sl)
{
    if (atomic_load(&sl->state) != SLOT_CLAIMED)
        return false;
    uint32_t pid = atomic_load(&sl->pid);
    if (!pid || atomic_load(&sl->pidns) != s->pidns || !pid_gone(pid))
        return false;
    /* that claimer may have given the slot up meanwhile and another taken
     * it (pid 0, then its own): only the dead one's, still CLAIMED */
    return atomic_load(&sl->state) == SLOT_CLAIMED && atomic_load(&sl->pid) == pid;
}

/* Frees the slots of senders whose process is gone and whose rings are
 * drained (a sender that closed frees its own through SLOT_CLOSED), and
 * those of claimers that died before their slot was LIVE. */
static void sweep_dead(struct sr_shm *s)
{
    for (unsigned i = 0; i < SR_SHM_SLOTS; i++)
        if (claimer_gone(s, &s->hdr->slot[i]))
            slot_free(s, i);
    uint64_t act = atomic_load(&s->hdr->active);
    while (act) {
        unsigned i = (unsigned)__builtin_ctzll(act);
        act &= act - 1;
        struct shm_slot *sl = &s->hdr->slot[i];
        struct shm_ctl *c = own_ctl(s, i);
        if (atomic_load(&sl->state) == SLOT_LIVE &&
            atomic_load(&c->head) == atomic_load(&c->tail) && sl->pidns == s->pidns &&
            pid_gone(sl->pid))
            slot_free(s, i);
    }
}

bool sr_shm_sleep(struct sr_shm *s)
{
    if (++s->sleeps % SHM_SWEEP_EVERY == 0)
        sweep_dead(s);
    atomic_store(&s->hdr->sleeping, 1);
    if (!sr_shm_pending(s))
        return true;
    atomic_store(&s->hdr->sleeping, 0);
    return false;
}

void sr_shm_wake(struct sr_shm *s, bool rang)
{
    atomic_store(&s->hdr->sleeping, 0);
    if (!rang)
        return;
    uint8_t buf[64];
    for (int i = 0; i < 1024; i++)
        if (recv(s->bell_fd, buf, sizeof(buf), MSG_DONTWAIT) < 0)
            break;
}

void sr_shm_stats(const struct sr_shm *s, struct sr_shm_stats *out)
{
    *out = s->stats;
    out->senders = (uint32_t)__builtin_popcountll(atomic_load(&s->hdr->active));
}
