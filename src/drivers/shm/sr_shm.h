/* sr_shm.h: the shared-memory driver. It moves the same transport packets
 * as the UDP driver (BTH through ICRC) between devices on one host and in
 * one network namespace, through rings in shared memory: no system call
 * per packet, no ICRC (memory does not corrupt datagrams), one copy on each
 * side (registered memory -> ring -> registered memory). A record may hold
 * a reference instead of a payload (sr_bulk.h): the receiver's engine then
 * copies the data once, straight from the sender (sr_shm_copy), and only
 * from a sender whose memory it could read when it probed it.
 *
 * Each device owns a mailbox named after its address and UDP port:
 * a file <dir>/softrdma-<netns inode>-<gid hex>-<port> holding a table of
 * sender slots and one single-producer single-consumer ring per slot,
 * and a doorbell, the AF_UNIX datagram socket <mailbox>.bell. A device
 * that sends to an address looks for that address's mailbox (port 4791,
 * like UDP) the first time; when there is none (another host, another
 * namespace, a peer with shared memory turned off) the packet is not sent
 * and the caller uses UDP for that address from then on. Otherwise it
 * claims a slot (space for the ring reserved with fallocate, so a full
 * /dev/shm means UDP, never SIGBUS) and writes its packets there. The
 * receiver polls the rings of its live slots; before it blocks it sets a
 * flag, and a sender that finds the flag set rings the doorbell (one
 * datagram), whose socket the receiver's NIC thread watches when it blocks.
 *
 * What sr_shm_send writes becomes visible at the next sr_shm_flush (the
 * end of every pass, post and ACK release), or once 32 KiB wait: a held
 * ACK and the request it rides with arrive together, as in one GSO send.
 *
 * When a receiver falls behind and its ring fills, the sender keeps the
 * packets in a backlog of its own (in order, up to 256 MiB per peer) and
 * moves them into the ring as room appears (sr_shm_flush): dropping them
 * would cost a retransmission of everything after them. Beyond the cap a
 * packet is dropped (SR_ERR_BUSY), as a full socket queue would.
 *
 * A peer that closed its device marks its mailbox closed; a sender that
 * sees it (or, when the ring stays full, finds the receiver dead or its
 * address given a new mailbox) leaves the mailbox, takes the address's
 * new one if there is one, and sends through UDP otherwise. Slots of
 * senders that closed or died are reused once their rings are drained.
 *
 * The files are created 0600: only processes of the same user (which may
 * ptrace each other anyway) share them. Records are checked against the
 * ring's bounds before they are handed on, so a corrupt ring costs its
 * packets, never memory outside the mapping.
 *
 * Threads: one struct sr_shm is used by one thread at a time (the caller
 * serialises), except sr_shm_wake. Errors are negative SR_ERR_* codes. */
#ifndef SR_SHM_H
#define SR_SHM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sr_engine.h" /* struct sr_tx_pkt */
#include "sr_err.h"

enum {
    SR_SHM_SLOTS = 64,          /* senders one mailbox takes at a time */
    SR_SHM_RING = 4u << 20,     /* ring bytes per sender */
    SR_SHM_PEERS = 64,          /* addresses one device sends to by shared memory */
    SR_SHM_MAX_PKT = 8192,      /* largest packet (BTH through ICRC) */
    SR_SHM_REMOTE = 1,          /* sr_shm_send: not a peer here, use another driver */
    SR_SHM_DEFAULT_PORT = 4791, /* the port senders look for (RoCEv2) */
};

struct sr_shm;

struct sr_shm_cfg {
    uint8_t gid[16]; /* this device's address (bound by its UDP socket, so unique) */
    uint16_t port;   /* its UDP port */
    const char *dir; /* where mailboxes live; NULL: /dev/shm */
    /* Bulk data by reference (sr_bulk.h): the smallest message sent as a
     * reference to a peer that can copy from us, and whether we copy from
     * peers at all; 0: neither (every byte through the rings). */
    uint32_t bulk_min;
};

/* Create this device's mailbox and doorbell (a stale pair left by a
 * process that had the same address is replaced; so are the mailboxes of
 * receivers in this namespace that died without closing theirs). *out
 * set on success. */
int sr_shm_open(const struct sr_shm_cfg *cfg, struct sr_shm **out);
/* Mark the mailbox closed, remove its names, release every slot held in
 * peers' mailboxes and unmap everything; NULL is a no-op. */
void sr_shm_close(struct sr_shm *s);
/* At process exit, with the device still open: mark the mailbox closed
 * and remove its names (peers stop writing; the memory goes with the
 * last mapping). Safe to call from any thread, once. */
void sr_shm_unlink(struct sr_shm *s);
/* The doorbell socket, to poll: readable after a sender rang. */
int sr_shm_fd(const struct sr_shm *s);

/* Write one packet (as sr_udp_send would send it: t->hdr, the t->iov
 * pieces, t->pad_len zero bytes, 4 ICRC bytes left zero) into the ring of
 * t->dgid's mailbox; the receiver sees it at the next sr_shm_flush, with
 * everything written since the last one (a burst arrives whole, as a GSO
 * send would). The payload is copied: t is not kept.
 * 0: sent. SR_SHM_REMOTE: t->dgid has no mailbox here (or no free slot):
 * nothing was sent, send it another way. SR_ERR_BUSY: ring and backlog
 * full, dropped.
 * SR_ERR_INVAL: malformed packet. */
int sr_shm_send(struct sr_shm *s, const struct sr_tx_pkt *t);

/* Whether packets to gid would go into its mailbox here (a process on
 * this host that shares memory with us), as far as is known now. */
bool sr_shm_reaches(struct sr_shm *s, const uint8_t *gid);

/* Called once per packet, with the sender's address: both valid only
 * during the call (pkt points into the ring). */
/* Publishes what sr_shm_send wrote (ringing sleeping receivers) and moves
 * backlogged packets into their rings as far as room allows; true when no
 * backlog is left (the caller must come back otherwise). */
bool sr_shm_flush(struct sr_shm *s);
/* Some packets wait in a backlog. */
bool sr_shm_backlogged(const struct sr_shm *s);

/* ref_pid: 0 for a packet; otherwise the packet's payload is a reference
 * to memory of that process, the sender (sr_engine_rx_bulk), known from
 * its slot and checked with a probe, never read from the packet. */
typedef void (*sr_shm_rx_fn)(void *arg, const uint8_t *pkt, size_t len, const uint8_t *src_gid,
                             uint32_t ref_pid);
/* Hand up to max waiting packets to cb, oldest first per sender. Returns
 * how many. cb may call sr_shm_send but not sr_shm_recv. */
int sr_shm_recv(struct sr_shm *s, sr_shm_rx_fn cb, void *arg, int max);
/* Some peer has a slot in this mailbox (sends, or sent, through it). */
bool sr_shm_active(const struct sr_shm *s);
/* What sr_shm_recv does with one sender's ring, for fuzzers and tests:
 * hands the records between tail and head of ring (ring_bytes, a multiple
 * of 64) to cb as packets from gid, up to max, checking every record
 * against the ring's bounds; a broken ring is dropped whole (bad). */
struct sr_shm_parse {
    uint64_t tail;  /* where the next look starts */
    int pkts;       /* packets handed to cb */
    int refused;    /* references skipped: ref_pid was 0 */
    uint64_t bytes; /* their bytes */
    bool bad;       /* the ring broke its bounds: tail moved to head */
};
void sr_shm_ring_parse(const uint8_t *ring, uint32_t ring_bytes, uint64_t head, uint64_t tail,
                       const uint8_t *gid, uint32_t ref_pid, sr_shm_rx_fn cb, void *arg, int max,
                       struct sr_shm_parse *out);
/* A packet is waiting. */
bool sr_shm_pending(const struct sr_shm *s);

/* About to block on sr_shm_fd: asks senders to ring. False when a packet
 * arrived meanwhile (poll again, do not block). Reclaims the slots of
 * senders that closed or died, now and then. */
bool sr_shm_sleep(struct sr_shm *s);
/* Back from blocking: senders stop ringing; rang: the doorbell was
 * readable, and is emptied. */
void sr_shm_wake(struct sr_shm *s, bool rang);

struct sr_shm_stats {
    uint64_t tx_pkts, tx_bytes; /* packets written to rings, their bytes */
    uint64_t tx_queued;         /* packets that waited in a backlog (ring full) */
    uint64_t tx_drops;          /* ring and backlog full */
    uint64_t tx_bells;          /* doorbells rung */
    uint64_t rx_pkts, rx_bytes; /* packets handed to the callback, their bytes */
    uint64_t rx_bad;            /* records that broke the ring's bounds (ring dropped) */
    uint64_t rx_refused;        /* references from senders we cannot copy from (dropped) */
    uint32_t peers;             /* addresses reached through shared memory */
    uint32_t senders;           /* slots in use in this mailbox */
};
void sr_shm_stats(const struct sr_shm *s, struct sr_shm_stats *out);

/* Bulk data by reference (sr_bulk.h). A sender's slot offers a word of
 * its memory; the receiver reads it once with process_vm_readv (which
 * needs ptrace access: the same user, and under Yama ptrace_scope 1 a
 * PR_SET_PTRACER from the sender; man 2 process_vm_readv) and records in
 * the slot whether it can copy from that sender. Until it said yes, and
 * whenever it said no, every byte goes through the ring. */
struct sr_bulk_seg;
/* The smallest message to send to gid by reference (cfg.bulk_min), or 0
 * when gid has not (yet) said it can copy from us. */
uint32_t sr_shm_bulk_to(struct sr_shm *s, const uint8_t *gid);
/* Copies between this process's local pieces and process pid's remote
 * ones (to_peer: process_vm_writev, else process_vm_readv), the same
 * total on both sides; 0, or SR_ERR_INVAL when not all of it moved (the
 * peer is gone, a piece is not mapped). */
int sr_shm_copy(uint32_t pid, bool to_peer, const struct sr_bulk_seg *local, uint32_t local_cnt,
                const struct sr_bulk_seg *remote, uint32_t remote_cnt);

#endif
