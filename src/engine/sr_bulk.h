/* sr_bulk.h: same-host bulk data by reference, the engine's side.
 *
 * Between two devices on one host the payload of a large message need not
 * travel through a ring of MTU-sized packets (two copies, one trip through
 * the engine per packet): the requester sends one packet whose payload
 * names the source (the host addresses and lengths of its gathered SGEs,
 * already checked against their L_Keys), and the responder, after every
 * check of IBA 9.7.5.1 (PSN, opcode, receive WQE and its lengths, R_Key,
 * bounds, access), copies straight from the requester's memory into the
 * checked target (one copy, sr_engine_cfg.bulk_copy: process_vm_readv in
 * the progress layer). The rule: the side that checks the R_Key does the
 * copy; the other side only offers memory of its own, for a WQE it has
 * outstanding (its source stays put until the ACK completes the WQE).
 *
 * Which messages: RC SEND, SEND with immediate or invalidate, RDMA WRITE,
 * WRITE with immediate and RDMA READ, not inline, of at least
 * bulk_to(dgid) bytes and more than one path MTU. Such a WQE takes one PSN: one SEND ONLY or
 * WRITE ONLY packet (with the RETH of the whole message) whose payload is
 * the reference, SR_BULK_SEG_LEN bytes per source piece:
 *     u64 address, u32 length, u32 zero (host byte order: same host).
 * The packet carries sr_tx_pkt.bulk; only a driver that can deliver it as
 * a reference takes it (the shared-memory driver marks its ring record).
 * A receiving driver hands such a record to sr_engine_rx_bulk with the
 * peer it came from (a process id known to the driver, never read from
 * the packet); the UDP driver never does, so no packet from the wire is
 * ever read as a reference.
 *
 * A copy that fails (the requester died: ESRCH; its source went away:
 * EFAULT) is the responder's Remote Operational Error (IBA 9.7.5.2.4,
 * class D: NAK, receive WQE completed in error, QP to Error), never a
 * partial message reported as success. The wire codec is unchanged: a
 * reference is an ordinary payload, and nothing to a UDP peer uses it.
 *
 * READ goes the other way (push): the request names the requester's sink
 * (checked against its L_Key, with Local Write) beside its headers, the
 * responder checks its R_Key and source range and writes the sink itself
 * (to_peer), then answers with one READ RESPONSE ONLY without payload,
 * which the requester accepts as its data only when it came as a
 * reference. A push that fails sends nothing: the requester retries and
 * fails the READ when its retries run out.
 *
 * What the requester's side must keep, as IBA 10.6.3 asks of any
 * outstanding work request: the source or sink stays registered and
 * mapped until the WQE completes. Memory deregistered and unmapped early
 * makes the copy fail (Remote Operational Error); memory reused early is
 * copied as it is then. A READ request still in the responder's ring when
 * the requester's QP has already flushed the WQE is pushed into a sink the
 * application may have reused. */
#ifndef SR_BULK_H
#define SR_BULK_H

#include "sr_engine.h"

enum { SR_BULK_SEG_LEN = 16 };

/* One piece of memory: a host address (this process's, or the peer's). */
struct sr_bulk_seg {
    uint64_t addr;
    uint64_t len;
};

/* A packet that a driver received as a reference from peer (its opaque
 * name for the sender, given back to bulk_copy). Everything else as
 * sr_engine_rx. */
void sr_engine_rx_bulk(struct sr_engine *e, const uint8_t *buf, size_t len, const uint8_t *src_gid,
                       uint64_t peer, uint64_t now_ns);

struct sr_bulk_stats {
    uint64_t tx_msgs, tx_bytes; /* messages sent by reference, their data */
    uint64_t rx_msgs, rx_bytes; /* messages copied in by reference, their data */
    uint64_t rx_refused;        /* references not acceptable (dropped) */
    uint64_t copy_errs;         /* copies that failed (Remote Operational Error) */
};
void sr_engine_bulk_stats(const struct sr_engine *e, struct sr_bulk_stats *out);

#endif
