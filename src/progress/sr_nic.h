/* sr_nic.h: the progress layer: one soft NIC = an engine, the UDP driver
 * bound to the device address, the shared-memory driver for peers on this
 * host (packets to an address with a mailbox here go through it, all
 * others through UDP; both are received), a lock, and a thread that is the NIC
 * (receives, runs the responder, fires deadlines, transmits). The thread
 * blocks (ppoll) when there is nothing to do; the application thread can
 * also drive progress inline (sr_nic_progress) for latency.
 *
 * Locking: every engine call goes through sr_nic_lock/unlock. The engine
 * calls back (tx, cq_event, async_event) with the lock held. */
#ifndef SR_NIC_H
#define SR_NIC_H

#include "sr_engine.h"
#include "sr_shm.h"
#include "sr_udp.h"

struct sr_nic;

struct sr_nic_cfg {
    struct sr_udp_cfg udp;
    struct sr_engine_cfg engine; /* limits and cq/async callbacks; gid and tx are set here */
    /* Adaptive busy-polling of the NIC thread: after traffic it polls this
     * long before blocking, while no application thread has called a verb
     * for a millisecond (see nic.c). 0: always block. */
    uint64_t spin_ns;
    /* After an application thread polled (sr_nic_app_polls), the NIC
     * thread leaves the socket to it for this long (no wake-up per packet).
     * 0: the NIC thread always listens. */
    uint64_t handoff_ns;
    /* No shared-memory driver: every packet goes through UDP (and its
     * fault injection). */
    bool no_shm;
    const char *shm_dir; /* mailboxes' directory; NULL: /dev/shm */
};

int sr_nic_open(const struct sr_nic_cfg *cfg, struct sr_nic **out);
void sr_nic_close(struct sr_nic *nic);
struct sr_engine *sr_nic_engine(struct sr_nic *nic);
const uint8_t *sr_nic_gid(const struct sr_nic *nic);
void sr_nic_lock(struct sr_nic *nic);
void sr_nic_unlock(struct sr_nic *nic);
/* Monotonic time in ns: the engine's clock. */
uint64_t sr_nic_now(void);
/* With the lock held: send what the engine queued (after posting work or
 * modifying a QP; sr_nic_progress flushes by itself). */
void sr_nic_flush(struct sr_nic *nic);
/* With the lock held: after work was posted, make sure the NIC thread
 * notices a deadline earlier than the one it sleeps until. */
void sr_nic_kick(struct sr_nic *nic);
/* With the lock held: receive what is waiting and fire due timers. Returns
 * the number of packets processed. */
int sr_nic_progress(struct sr_nic *nic);
/* An application thread is about to block (it armed a CQ, polled an armed
 * CQ dry, or waits for a completion event): the NIC thread takes the
 * socket back at once. No lock needed. */
void sr_nic_app_blocks(struct sr_nic *nic);
/* With the lock held: sr_nic_app_blocks, and the ACKs held back for a
 * reply leave now (the thread is about to sleep: its peers may be waiting
 * for them to send what would wake it). */
void sr_nic_app_sleeps(struct sr_nic *nic);
/* With the lock held, right after sr_nic_progress: the application thread
 * polled and found nothing. ACKs held for 4 us or more leave: a thread
 * that was going to reply would have. */
void sr_nic_app_idle(struct sr_nic *nic);
/* An application thread polled a CQ (after_pass: it ran the NIC inline
 * with sr_nic_progress just now) and will be back: the NIC thread may
 * leave the socket to it for a while (the hand-off). */
void sr_nic_app_polls(struct sr_nic *nic, bool after_pass);
/* With the lock held, after sr_nic_progress: the pass received a bulk
 * sender's burst over UDP (256 KiB or more) while this side sent less
 * than an eighth of that since the last pass. The caller should then
 * sr_nic_app_nap, without the lock: on few CPUs the sending process needs
 * the time more than this one needs another poll. Held ACKs stay held
 * (their own timers bound them): one may be waiting for the reply this
 * thread is about to post. */
bool sr_nic_app_bulk(struct sr_nic *nic);
/* 10 us asleep (the NIC thread's bulk nap, for an application thread). */
void sr_nic_app_nap(void);
void sr_nic_udp_stats(struct sr_nic *nic, struct sr_udp_stats *out);
/* The process exits with the device open: peers stop using its
 * shared-memory mailbox, whose names go (sr_shm_unlink). No lock needed;
 * once. */
void sr_nic_exiting(struct sr_nic *nic);
/* All zero when the device has no shared-memory driver. */
void sr_nic_shm_stats(struct sr_nic *nic, struct sr_shm_stats *out);

#endif
