/* sr_udp.h: the UDP driver. It moves RoCEv2 datagrams (IBTA Vol 1 Annex
 * A17: transport packet in a UDP datagram to port 4791) over one
 * non-blocking UDP socket, and owns that socket, the device's address, the
 * receive batch buffers and the ICRC of everything it sends and receives.
 * It knows nothing about RDMA beyond the BTH length: no decoding, no QPs.
 *
 * Addresses are 16-byte GIDs: an IPv6 address, or IPv4-mapped
 * (::ffff:a.b.c.d) for IPv4. A device speaks one family, the one it is
 * bound to.
 *
 * ICRC: a UDP socket never sees the IP header the ICRC covers, so both
 * directions compute it over the header Linux produces for this socket
 * (see udp.c). Peers that put other invariant values in the IP header (a
 * non-zero IPv4 identification, IP options, IPv6 extension headers) fail
 * the check and are dropped as corrupt.
 *
 * Errors are negative SR_ERR_* codes; when a system call is the cause,
 * errno is left as that call set it, for logs further up:
 *     SR_ERR_BUSY    address in use (open); socket queue full (send)
 *     SR_ERR_LIMIT   no free auto address; out of file descriptors
 *     SR_ERR_NOMEM   out of memory
 *     SR_ERR_NOTSUP  address family not available on this host
 *     SR_ERR_RANGE   datagram too large for the path (EMSGSIZE) or for UDP
 *     SR_ERR_INVAL   bad argument, address not local, destination of the
 *                    other family, unreachable destination, other errors
 *
 * Threads: no globals, no static buffers; one struct sr_udp is used by one
 * thread at a time (the caller serialises), distinct ones are independent.
 */
#ifndef SR_UDP_H
#define SR_UDP_H

#include <stddef.h>
#include <stdint.h>

#include "sr_engine.h" /* struct sr_tx_pkt */
#include "sr_fault.h"
#include "sr_err.h"

enum {
    SR_UDP_BATCH = 64,        /* datagrams per recvmmsg */
    SR_UDP_MAX_IOV = 64,      /* payload pieces per packet (>= SR_MAX_SGE) */
    SR_UDP_AUTO_TRIES = 4096, /* loopback addresses tried by auto-claim */
    SR_UDP_PATHS_MAX = 16,    /* send sockets (sr_udp_cfg.paths) */
};

struct sr_udp;

struct sr_udp_cfg {
    /* Address to bind: IPv6, or IPv4-mapped. All zero: claim a free
     * loopback address 127.a.b.c, so that any number of processes on one
     * host each get their own RoCE address with no configuration. */
    uint8_t addr[16];
    uint16_t port;             /* UDP port to bind; 0 = 4791 (others send to 4791 only) */
    uint32_t auto_seed;        /* auto-claim starts at 127.0.0.0 + (seed mod 2^24), e.g. the pid */
    uint32_t sndbuf, rcvbuf;   /* socket buffer bytes to request; 0 = 8 MiB */
    struct sr_fault_cfg fault; /* injected faults on receive (off unless fault.on) */
    bool no_gso;               /* no UDP GSO on send (SOFTRDMA_GSO=0) */
    bool no_gro;               /* no UDP GRO on receive (tests) */
    /* Multipath: a socket can send from its bound port only, so paths
     * (up to SR_UDP_PATHS_MAX) sockets send: the bound one, and paths - 1
     * more on the same address with ports of the kernel's choosing. A
     * packet's sr_tx_pkt.path (modulo paths) picks the socket, and so its
     * UDP source port, the flow entropy ECMP hashes. 0 or 1: the bound
     * socket only. The others only send: peers send to port 4791. */
    uint8_t paths;
    /* ECN (RFC 3168): send every datagram ECT(0) and read each received
     * datagram's ECN field (sr_udp_rx_ecn). For congestion control: a
     * sender marks itself ECN-capable only when it reacts to CNPs. */
    bool ecn;
};

/* Open and bind the device's socket. *out is set only on success. */
int sr_udp_open(const struct sr_udp_cfg *cfg, struct sr_udp **out);
/* Close the socket and free everything; NULL is a no-op. */
void sr_udp_close(struct sr_udp *u);

/* The bound address as a 16-byte GID (IPv4-mapped for IPv4). */
const uint8_t *sr_udp_addr(const struct sr_udp *u);
/* The bound UDP port (4791 unless cfg.port said otherwise). */
uint16_t sr_udp_port(const struct sr_udp *u);
/* The non-blocking socket, to poll (POLLIN means sr_udp_recv has work). */
int sr_udp_fd(const struct sr_udp *u);

/* Send one transport packet to t->dgid, UDP port 4791, with one sendmsg
 * (never GSO):
 * t->hdr, the t->iov pieces straight from their memory (never copied),
 * t->pad_len zero bytes, then the 4-byte ICRC computed here. t->src_port is
 * not used: the UDP source port is the bound port of the socket t->path
 * picks (sr_udp_cfg.paths).
 *
 * Returns 0, or a negative SR_ERR_* when the packet was not sent: every call
 * counts one tx_pkts or one tx_drops. A full socket queue (EAGAIN, ENOBUFS)
 * is SR_ERR_BUSY; the transport retransmits. Compatible with
 * sr_engine_ops.tx through a one-line wrapper; t is not kept. */
int sr_udp_send(struct sr_udp *u, const struct sr_tx_pkt *t);

/* Called once per valid datagram: pkt is the transport packet (BTH through
 * ICRC, len bytes, ICRC verified) and src_gid the sender's address. Both
 * point into the driver's buffers and are valid only during the call. The
 * callback may call sr_udp_send but not sr_udp_recv or sr_udp_close. */
typedef void (*sr_udp_rx_fn)(void *arg, const uint8_t *pkt, size_t len, const uint8_t *src_gid);

/* In an sr_udp_rx_fn callback: the IP ECN field of the datagram being
 * delivered (RFC 3168 5: 0 not-ECT, 1 ECT(1), 2 ECT(0), 3 CE); 0 when
 * cfg.ecn is off. Every datagram of one GRO batch has the same: the
 * kernel does not merge datagrams whose TOS or traffic class differ
 * (inet_gro_receive, ipv6_gro_receive). */
uint8_t sr_udp_rx_ecn(const struct sr_udp *u);

/* Read up to max datagrams without blocking (recvmmsg, SR_UDP_BATCH at a
 * time), check each one's length and ICRC, and hand the valid ones to cb in
 * arrival order. Datagrams from any source port are accepted (the RoCEv2
 * source port is flow entropy).
 *
 * Returns the number of datagrams read (valid or not), 0 when none was
 * waiting, or a negative SR_ERR_* on a socket error with nothing read. */
int sr_udp_recv(struct sr_udp *u, sr_udp_rx_fn cb, void *arg, int max);

/* sr_udp_recv for an application thread polling for a reply (a
 * ping-pong): when the last call of either function hit an empty socket,
 * this one reads one datagram (one GRO batch) and returns, sparing the
 * kernel's try for a second one. Otherwise, as sr_udp_recv. The cost: a
 * second datagram already queued behind the first waits for the next
 * call; an application that got its completion from the first and then
 * waits elsewhere (polling memory) leaves it to the NIC thread. */
int sr_udp_poll(struct sr_udp *u, sr_udp_rx_fn cb, void *arg, int max);

/* What sr_udp_recv does with one received message, for fuzzers and tests:
 * buf (len bytes, writable: fault injection may flip a bit) as a datagram
 * from src_gid:src_port, or as a GRO batch of gro-byte datagrams when
 * 0 < gro < len. 0 or SR_ERR_INVAL. */
int sr_udp_rx_inject(struct sr_udp *u, uint8_t *buf, size_t len, size_t gro, const uint8_t *src_gid,
                     uint16_t src_port, sr_udp_rx_fn cb, void *arg);

/* Batched sending: sr_udp_queue prepares a packet like sr_udp_send (payload
 * still read from the caller's memory, which must stay unchanged until the
 * flush) and sr_udp_flush sends everything queued with sendmmsg. A full
 * queue (SR_UDP_BATCH) flushes by itself, and so does a packet with
 * t->flush, unless the caller's bytes queued so far are few (8 KiB): they
 * are then copied, which honours the same contract for less than a
 * system call. Consecutive packets of one size
 * to one peer (the last may be shorter) leave as one UDP GSO send unless
 * cfg.no_gso. */
int sr_udp_queue(struct sr_udp *u, const struct sr_tx_pkt *t);
int sr_udp_flush(struct sr_udp *u);
/* What a flush-flagged packet asks for (sr_tx_pkt.flush): the payload of
 * everything queued is copied (small) or sent (sr_udp_flush), so the
 * memory it came from may change. */
void sr_udp_fence(struct sr_udp *u);

struct sr_udp_stats {
    uint64_t tx_pkts, tx_bytes; /* datagrams sent, UDP payload bytes (ICRC included) */
    uint64_t tx_drops;          /* packets queued or given to sr_udp_send but not sent */
    uint64_t tx_gso_sends;      /* GSO sends (each of two or more datagrams) */
    uint64_t rx_pkts, rx_bytes; /* datagrams handed to the callback, their bytes */
    uint64_t rx_icrc_drops;     /* ICRC mismatch */
    uint64_t rx_short_drops;    /* shorter than BTH + ICRC */
    uint64_t rx_long_drops;     /* larger than a receive buffer (truncated by the kernel) */
    uint64_t rx_gro_bufs;       /* receives that held a GRO batch of two or more */
    /* injected faults (SOFTRDMA_FAULT) */
    uint64_t fault_lost, fault_dup, fault_reordered, fault_corrupted, fault_delayed;
};

/* Earliest time (CLOCK_MONOTONIC ns) at which sr_udp_recv has a held
 * datagram to deliver (delay or reordering faults); UINT64_MAX if none. */
uint64_t sr_udp_next_deadline(const struct sr_udp *u);
void sr_udp_stats(const struct sr_udp *u, struct sr_udp_stats *out);
/* Whether queued packets leave in GSO trains (UDP_SEGMENT works here). */
bool sr_udp_trains(const struct sr_udp *u);
/* The live counters, for a caller that reads one or two of them often. */
const struct sr_udp_stats *sr_udp_counters(const struct sr_udp *u);

#endif
