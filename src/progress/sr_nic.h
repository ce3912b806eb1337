/* sr_nic.h: the progress layer: one soft NIC = an engine, the UDP driver
 * bound to the device address, the shared-memory driver for peers on this
 * host (packets to an address with a mailbox here go through it, all
 * others through UDP; both are received), a lock, and a thread that is the NIC
 * (receives, runs the responder, fires deadlines, transmits). The thread
 * blocks (ppoll) when there is nothing to do; the application thread can
 * also drive progress inline (sr_nic_progress) for latency. When to do
 * which is the policy's (sr_progress.h); this layer gathers its inputs and
 * carries its decisions out.
 *
 * Locking: every engine call goes through sr_nic_lock/unlock. The engine
 * calls back (tx, cq_event, async_event) with the lock held. */
#ifndef SR_NIC_H
#define SR_NIC_H

#include "sr_engine.h"
#include "sr_progress.h"
#include "sr_shm.h"
#include "sr_udp.h"

struct sr_nic;

struct sr_nic_cfg {
    struct sr_udp_cfg udp;
    struct sr_engine_cfg engine; /* limits and cq/async callbacks; gid and tx are set here */
    /* The hand-off (sr_progress.h): after an application thread polled,
     * the NIC thread leaves the socket to it for this long, no wake-up per
     * packet. 0: the NIC thread always listens. SOFTRDMA_HANDOFF_US, kept:
     * tests/verbs/events_test.c and compat_test.c set it (a long hand-off
     * makes a late hand-back visible), and 0 is the way out for an
     * application whose polls the dense-gap rule misjudges. */
    uint64_t handoff_ns;
    /* No shared-memory driver: every packet goes through UDP (and its
     * fault injection). */
    bool no_shm;
    const char *shm_dir; /* mailboxes' directory; NULL: /dev/shm */
    /* The smallest RC SEND, WRITE or READ sent by reference to a same-host peer
     * that can copy from us (sr_bulk.h, SOFTRDMA_SHM_BULK); 0: none, and
     * we copy from nobody. */
    uint32_t shm_bulk;
    bool shm_bulk_read; /* SOFTRDMA_SHM_BULK_READ=1: READs by reference too */
};
/* SOFTRDMA_SHM_BULK when unset (docs/TUNING.md). */
#define SR_NIC_SHM_BULK_DEFAULT 32768u

int sr_nic_open(const struct sr_nic_cfg *cfg, struct sr_nic **out);
void sr_nic_close(struct sr_nic *nic);
struct sr_engine *sr_nic_engine(struct sr_nic *nic);
const uint8_t *sr_nic_gid(const struct sr_nic *nic);
void sr_nic_lock(struct sr_nic *nic);
void sr_nic_unlock(struct sr_nic *nic);
/* Monotonic time in ns: the engine's clock. */
uint64_t sr_nic_now(void);
/* With the lock held: send what the engine queued (after modifying a QP;
 * sr_nic_progress and sr_nic_posted flush by themselves). */
void sr_nic_flush(struct sr_nic *nic);
/* With the lock held: make sure the NIC thread notices a deadline earlier
 * than the one it sleeps until: the engine's, or that of a datagram the
 * UDP driver holds back (sr_progress_kick). */
void sr_nic_kick(struct sr_nic *nic);
/* With the lock held, after work was posted: its packets leave now
 * (flush; false: a pass due soon sends them) and the NIC thread notices
 * any earlier deadline. */
void sr_nic_posted(struct sr_nic *nic, bool flush);
/* With the lock held: an application thread's inline pass (a poll that
 * found nothing): receive what is waiting and fire due timers. Returns
 * the number of packets processed. */
int sr_nic_progress(struct sr_nic *nic);
/* With the lock held, at the end of a CQ poll: what it found (the
 * policy: sr_progress_polled). True: the caller should sr_nic_app_nap,
 * without the lock (its inline pass received a bulk sender's burst). */
bool sr_nic_polled(struct sr_nic *nic, const struct sr_progress_poll *poll);
/* The bulk nap, for an application thread. */
void sr_nic_app_nap(void);
/* With the lock held: an application thread will wait (it armed a CQ):
 * the ACKs held back for a reply leave now (its peers may be waiting for
 * them to send what would wake it) and the NIC thread takes the socket
 * back at once. */
void sr_nic_app_sleeps(struct sr_nic *nic);
/* Without the lock: an application thread is about to block (it waits for
 * a completion event): the NIC thread takes the socket back at once. */
void sr_nic_app_blocks(struct sr_nic *nic);
void sr_nic_udp_stats(struct sr_nic *nic, struct sr_udp_stats *out);
/* The process exits with the device open: peers stop using its
 * shared-memory mailbox, whose names go (sr_shm_unlink). No lock needed;
 * once. */
void sr_nic_exiting(struct sr_nic *nic);
/* All zero when the device has no shared-memory driver. */
void sr_nic_shm_stats(struct sr_nic *nic, struct sr_shm_stats *out);

#endif
