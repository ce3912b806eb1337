/* sr_wire.h: the RoCEv2 wire codec (IBTA Vol 1 ch. 9 transport headers,
 * Annex A17 RoCEv2 encapsulation). Pure: no I/O, no allocation, no globals
 * but constant tables.
 *
 * Ownership: decode never copies; sr_pkt.payload points into the caller's
 * buffer and is valid as long as that buffer is. Encode writes only into the
 * caller-owned buffer it is given and never past its capacity.
 *
 * Packet layout handled here ("transport packet"):
 *     BTH | extension headers per opcode | payload | pad (0..3) | ICRC (4)
 * The IP/UDP encapsulation and the ICRC are handled by sr_icrc_* and
 * sr_l3_* below.
 */
#ifndef SR_WIRE_H
#define SR_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sr_err.h"

/* ---- sizes ---- */
enum {
    SR_BTH_LEN = 12,
    SR_RETH_LEN = 16,
    SR_AETH_LEN = 4,
    SR_ATOMIC_ETH_LEN = 28,
    SR_ATOMIC_ACK_ETH_LEN = 8,
    SR_IMMDT_LEN = 4,
    SR_IETH_LEN = 4,
    SR_DETH_LEN = 8,
    SR_XRCETH_LEN = 4,
    SR_SACKETH_LEN = 8,
    SR_RPETH_LEN = 8,    /* softrdma's receive placement header (docs/WIRE.md) */
    SR_CNP_PAD_LEN = 16, /* RoCEv2 CNP: 16 reserved bytes after the BTH */
    SR_ICRC_LEN = 4,
    SR_GRH_LEN = 40,
    SR_ROCE_UDP_PORT = 4791,
    SR_MAX_HDR_LEN = SR_BTH_LEN + SR_XRCETH_LEN + SR_ATOMIC_ETH_LEN, /* largest header stack */
    SR_MIN_PMTU = 256,
    SR_MAX_PMTU = 4096,
};

/* ---- opcodes (IBTA Vol 1 Table 38; RoCEv2 CNP per Annex A17) ---- */
enum sr_opcode {
    SR_OP_RC = 0x00,
    SR_OP_UC = 0x20,
    SR_OP_UD = 0x60,
    SR_OP_XRC = 0xa0,

    /* low 5 bits, shared by RC/UC/UD */
    SR_OP_SEND_FIRST = 0x00,
    SR_OP_SEND_MIDDLE = 0x01,
    SR_OP_SEND_LAST = 0x02,
    SR_OP_SEND_LAST_IMM = 0x03,
    SR_OP_SEND_ONLY = 0x04,
    SR_OP_SEND_ONLY_IMM = 0x05,
    SR_OP_WRITE_FIRST = 0x06,
    SR_OP_WRITE_MIDDLE = 0x07,
    SR_OP_WRITE_LAST = 0x08,
    SR_OP_WRITE_LAST_IMM = 0x09,
    SR_OP_WRITE_ONLY = 0x0a,
    SR_OP_WRITE_ONLY_IMM = 0x0b,
    SR_OP_READ_REQ = 0x0c,
    SR_OP_READ_RESP_FIRST = 0x0d,
    SR_OP_READ_RESP_MIDDLE = 0x0e,
    SR_OP_READ_RESP_LAST = 0x0f,
    SR_OP_READ_RESP_ONLY = 0x10,
    SR_OP_ACK = 0x11,
    SR_OP_ATOMIC_ACK = 0x12,
    SR_OP_CMP_SWAP = 0x13,
    SR_OP_FETCH_ADD = 0x14,
    SR_OP_SEND_LAST_INV = 0x16,
    SR_OP_SEND_ONLY_INV = 0x17,
    SR_OP_ATOMIC_WRITE = 0x1d, /* IBTA 1.5: RC only */

    SR_OP_CNP = 0x81,
    /* softrdma's selective acknowledgement (docs/WIRE.md): a
     * manufacturer-specific opcode (IBA Table 38: transport 111b), sent
     * only to a requester that advertised SR_BTH_RESV7_SACK. */
    SR_OP_SACK = 0xf0,
};

/* Bit 6 of the BTH's Resv7 (byte 8; IBA 9.2: transmitted as 0, ignored on
 * receipt, covered by the ICRC): a softrdma requester that takes
 * selective acknowledgements sets it on its RC and XRC requests. */
#define SR_BTH_RESV7_SACK 0x40
/* SACKETH flags: a CE-marked request arrived since the last
 * acknowledgement (ECN echo, for congestion control). */
#define SR_SACK_F_ECE 0x01
/* Bit 5 of Resv7 on a response that carries SR_BTH_RESV7_SACK: the ECN
 * echo on an ACK, NAK, READ response or ATOMIC ACKNOWLEDGE (a SACK uses
 * SR_SACK_F_ECE); docs/WIRE.md. */
#define SR_BTH_RESV7_ECE 0x20
/* SACKETH flags: D-SACK (RFC 2883), a request arrived again that the
 * responder had already received; its PSN is in SACKETH bytes 2..4. */
#define SR_SACK_F_DSACK 0x02
/* SACKETH flags: this responder places SENDs that carry an RPETH
 * (docs/WIRE.md); the requester adds one to its RC SENDs from then on. */
#define SR_SACK_F_RPH 0x04
/* Bit 5 of Resv7 on an RC SEND request, from a requester that sets
 * SR_BTH_RESV7_SACK and was told SR_SACK_F_RPH: an RPETH follows the
 * opcode's headers (docs/WIRE.md). Covered by the ICRC like the rest of
 * Resv7; on responses the same bit is the ECN echo. */
#define SR_BTH_RESV7_RPH 0x20

#define SR_OPCODE_TRANSPORT(op) ((op)&0xe0)
#define SR_OPCODE_OP(op)        ((op)&0x1f)

/* Which headers an opcode carries (bit set in sr_opcode_info.hdrs and
 * sr_pkt.hdrs). The index is also the slot in sr_opcode_info.off[]. */
enum sr_hdr_idx {
    SR_HDR_RETH,
    SR_HDR_AETH,
    SR_HDR_ATOMIC_ETH,
    SR_HDR_ATOMIC_ACK_ETH,
    SR_HDR_IMMDT,
    SR_HDR_IETH,
    SR_HDR_DETH,
    SR_HDR_CNP_PAD,
    SR_HDR_XRCETH,
    SR_HDR_SACKETH, /* SR_OP_SACK only: flags and the bitmap's base PSN */
    SR_HDR_RPETH,   /* an RC SEND with SR_BTH_RESV7_RPH (no opcode's own) */
    SR_HDR_NUM,
};
#define SR_HDR_BIT(idx) (1u << (idx))

/* Opcode class flags. */
enum sr_op_flag {
    SR_OPF_PAYLOAD = 1u << 0,   /* may carry a payload */
    SR_OPF_FIRST = 1u << 1,     /* first packet of a multi-packet message */
    SR_OPF_MIDDLE = 1u << 2,    /* middle packet */
    SR_OPF_LAST = 1u << 3,      /* last packet */
    SR_OPF_ONLY = 1u << 4,      /* single-packet message */
    SR_OPF_SEND = 1u << 5,      /* SEND family (consumes a receive WQE) */
    SR_OPF_WRITE = 1u << 6,     /* RDMA WRITE family */
    SR_OPF_READ_REQ = 1u << 7,  /* RDMA READ request */
    SR_OPF_ATOMIC = 1u << 8,    /* atomic request */
    SR_OPF_REQUEST = 1u << 9,   /* sent by a requester */
    SR_OPF_RESPONSE = 1u << 10, /* sent by a responder (ACK, READ RESP, ATOMIC ACK) */
    SR_OPF_READ_RESP = 1u << 11,
    SR_OPF_IMM = 1u << 12,     /* carries ImmDt */
    SR_OPF_INV = 1u << 13,     /* carries IETH (send with invalidate) */
    SR_OPF_SOLICIT = 1u << 14, /* SE bit is meaningful (last/only send, write w/ imm) */
    SR_OPF_CNP = 1u << 15,
    SR_OPF_ATOMIC_WRITE = 1u << 16, /* ATOMIC WRITE: RETH + 8 bytes stored at once */
    SR_OPF_SACK = 1u << 17,         /* softrdma's selective acknowledgement */
};

struct sr_opcode_info {
    const char *name;        /* "RC_SEND_FIRST" ... ; NULL for an unknown opcode */
    uint32_t hdrs;           /* SR_HDR_BIT() set of extension headers */
    uint32_t flags;          /* SR_OPF_* */
    uint8_t hdr_len;         /* BTH + all extension headers */
    uint8_t off[SR_HDR_NUM]; /* offset of each present header from BTH start */
};

/* Table lookup; NULL when the opcode is not one softrdma knows. */
const struct sr_opcode_info *sr_opcode_info(uint8_t opcode);
/* Name for traces; "UNKNOWN" for an unknown opcode. */
const char *sr_opcode_name(uint8_t opcode);

/* ---- decoded header structs (host byte order) ---- */
struct sr_bth {
    uint8_t opcode;
    bool se;         /* solicited event */
    bool migreq;     /* M bit */
    uint8_t pad_cnt; /* filled by decode; encode derives it from payload_len */
    uint8_t tver;    /* must be 0 */
    uint16_t pkey;
    bool fecn, becn;  /* RoCEv2 uses the BTH reserved byte's top bits */
    uint32_t dest_qp; /* 24 bits */
    bool ack_req;
    uint8_t resv7; /* the 7 reserved bits after AckReq; SR_BTH_RESV7_SACK */
    uint32_t psn;  /* 24 bits */
};

struct sr_reth {
    uint64_t va;
    uint32_t rkey;
    uint32_t dma_len;
};

/* AETH syndrome (IBTA Vol 1 9.7.5.1, Table 43). Bits 6:5 select the type. */
enum sr_aeth_type {
    SR_AETH_ACK = 0x00,     /* 000ccccc: credit count */
    SR_AETH_RNR_NAK = 0x20, /* 001ttttt: RNR timer */
    SR_AETH_NAK = 0x60,     /* 011nnnnn: NAK code */
};
enum sr_nak_code {
    SR_NAK_PSN_SEQ = 0,
    SR_NAK_INVALID_REQ = 1,
    SR_NAK_REMOTE_ACCESS = 2,
    SR_NAK_REMOTE_OP = 3,
    SR_NAK_INVALID_RD_REQ = 4,
};
#define SR_AETH_TYPE(syn)       ((syn)&0x60)
#define SR_AETH_VALUE(syn)      ((syn)&0x1f)
#define SR_AETH_NO_CREDIT_LIMIT 0x1f /* credit field 11111: no end-to-end flow control */

struct sr_aeth {
    uint8_t syndrome;
    uint32_t msn; /* 24 bits */
};

struct sr_atomic_eth {
    uint64_t va;
    uint32_t rkey;
    uint64_t swap_add; /* swap data (CMP_SWAP) or add data (FETCH_ADD) */
    uint64_t compare;
};

struct sr_deth {
    uint32_t qkey;
    uint32_t src_qp; /* 24 bits */
};

/* One transport packet. Only the headers named in hdrs are meaningful. */
struct sr_pkt {
    struct sr_bth bth;
    uint32_t hdrs;
    struct sr_reth reth;
    struct sr_aeth aeth;
    struct sr_atomic_eth atomic;
    uint64_t atomic_orig; /* AtomicAckETH: original remote data */
    uint32_t imm;         /* ImmDt, as the 32-bit big-endian value on the wire */
    uint32_t ieth_rkey;   /* IETH: R_Key to invalidate */
    uint32_t xrc_srqn;    /* XRCETH: the target XRC SRQ (24 bits) */
    struct {
        uint8_t flags;      /* SR_SACK_F_* */
        uint32_t base_psn;  /* PSN of the payload bitmap's first bit (24 bits) */
        uint32_t dsack_psn; /* SR_SACK_F_DSACK: the PSN that arrived again (24 bits) */
    } sack;                 /* SACKETH; the bitmap is the payload */
    struct {
        uint32_t msg; /* the receive WQE: messages before it that took one */
        uint32_t off; /* the payload's byte offset in its message */
    } rph;            /* RPETH, with SR_BTH_RESV7_RPH on an RC SEND */
    struct sr_deth deth;
    const uint8_t *payload; /* decode: points into the buffer; encode: source */
    uint32_t payload_len;   /* payload bytes, pad excluded */
};

/* Decode a transport packet: buf starts at the BTH, len runs through the
 * ICRC (which is not checked here; see sr_icrc_verify). pmtu (256..4096)
 * bounds the payload; pass 0 to skip the PMTU checks.
 *
 * Returns the header length (BTH + extension headers) or a negative
 * SR_ERR_WIRE_*. Header checks come first; the two length checks
 * (SR_ERR_WIRE_MTU, SR_ERR_WIRE_SEGMENT) come last and leave *pkt fully
 * decoded, so a responder can answer them with NAK Invalid Request. */
int sr_wire_decode(const uint8_t *buf, size_t len, uint32_t pmtu, struct sr_pkt *pkt);

/* Encode the BTH and the opcode's extension headers only (zero-copy senders
 * append payload, sr_wire_pad_len() zero bytes and the ICRC themselves).
 * pad_cnt is derived from payload_len. Returns the header length or
 * SR_ERR_WIRE_OPCODE / SR_ERR_NOSPACE / SR_ERR_RANGE (a 24-bit field
 * overflows, or payload on an opcode without one). With cap at least
 * SR_MAX_HDR_LEN, the bytes after the header up to it are zeroed: the
 * payload must not already be in buf. */
int sr_wire_encode_hdr(const struct sr_pkt *pkt, uint8_t *buf, size_t cap);

/* Encode a whole transport packet: headers, a copy of payload, zero pad and a
 * zeroed 4-byte ICRC slot (fill it with sr_icrc_fill once the IP/UDP headers
 * are in front). Returns the total length or a negative SR_ERR_*. */
int sr_wire_encode(const struct sr_pkt *pkt, uint8_t *buf, size_t cap);

/* Whether a packet with this opcode and Resv7 carries an RPETH after the
 * opcode's headers: an RC SEND request with SR_BTH_RESV7_RPH. */
static inline bool sr_wire_has_rph(uint8_t opcode, uint8_t resv7)
{
    if (!(resv7 & SR_BTH_RESV7_RPH) || SR_OPCODE_TRANSPORT(opcode) != SR_OP_RC)
        return false;
    const struct sr_opcode_info *info = sr_opcode_info(opcode);
    return info && (info->flags & SR_OPF_SEND);
}

static inline uint32_t sr_wire_pad_len(uint32_t payload_len)
{
    return (0u - payload_len) & 3u;
}

/* Total transport-packet length for an opcode and payload (headers, payload,
 * pad, ICRC) without an RPETH (sr_wire_has_rph, which adds SR_RPETH_LEN),
 * or 0 for an unknown opcode. */
size_t sr_wire_pkt_len(uint8_t opcode, uint32_t payload_len);

/* ---- PSN arithmetic, modulo 2^24 ---- */
#define SR_PSN_MASK 0xffffffu

/* The one PSN helper: signed distance a - b in the 24-bit circle, in
 * [-2^23, 2^23). Every PSN comparison goes through it. */
static inline int32_t sr_psn_diff(uint32_t a, uint32_t b)
{
    uint32_t d = (a - b) & SR_PSN_MASK;
    return d & 0x800000u ? (int32_t)d - 0x1000000 : (int32_t)d;
}
static inline uint32_t sr_psn_add(uint32_t psn, uint32_t n)
{
    return (psn + n) & SR_PSN_MASK;
}
static inline bool sr_psn_lt(uint32_t a, uint32_t b)
{
    return sr_psn_diff(a, b) < 0;
}
static inline bool sr_psn_le(uint32_t a, uint32_t b)
{
    return sr_psn_diff(a, b) <= 0;
}

/* ---- ICRC (IBTA Vol 1 Annex A17.3.3) ----
 * CRC-32 (IEEE 802.3 polynomial) over: 8 bytes of 0xFF standing for the
 * absent LRH, the IP header with its variant fields set to all ones (IPv4:
 * TOS, TTL, header checksum; IPv6: traffic class, flow label, hop limit),
 * the UDP header with its checksum set to all ones, the BTH with its
 * reserved/FECN/BECN byte set to all ones, then the rest of the packet up to
 * the ICRC. The result is stored least-significant byte first.
 *
 * `ip` points at the IPv4 or IPv6 header (version from the first nibble);
 * `len` runs through the ICRC. IPv4 options and IPv6 extension headers are
 * not RoCEv2 and are rejected with SR_ERR_WIRE_L3. */
int sr_icrc_compute(const uint8_t *ip, size_t len, uint32_t *icrc);
int sr_icrc_fill(uint8_t *ip, size_t len);
/* 0 when the ICRC matches, SR_ERR_WIRE_ICRC when not, other SR_ERR_* when the
 * encapsulation is malformed. */
int sr_icrc_verify(const uint8_t *ip, size_t len);

/* Incremental form for senders that scatter the payload: start over the
 * IP+UDP+transport headers (hdr_len bytes from ip), add payload and pad
 * pieces, then finish. */
struct sr_icrc_ctx {
    uint32_t crc;
};
struct sr_l3_addr;
int sr_icrc_begin(struct sr_icrc_ctx *c, const uint8_t *ip, size_t hdr_len);
/* The same for a transport packet of tlen bytes (ICRC included) that is
 * not in one buffer with its IP/UDP header: the header is the one a
 * describes (sr_l3_encode's), bth the packet's first SR_BTH_LEN bytes;
 * feed the bytes after the BTH with sr_icrc_update. */
int sr_icrc_begin_l3(struct sr_icrc_ctx *c, const struct sr_l3_addr *a, size_t tlen,
                     const uint8_t *bth);
/* sr_icrc_begin_l3 in two steps, for senders and receivers that see many
 * packets of one flow and length: the register after the 8 ones and the
 * masked IP + UDP header (the same for all of them; sr_icrc_prefix takes
 * the header bytes from ip, len at least the IP + UDP header), then a
 * packet's transport headers (the BTH and whatever follows it that the
 * caller wants covered now; SR_ERR_WIRE_SHORT below SR_BTH_LEN bytes). */
int sr_icrc_prefix(const uint8_t *ip, size_t len, uint32_t *reg);
int sr_icrc_l3_prefix(const struct sr_l3_addr *a, size_t tlen, uint32_t *reg);
int sr_icrc_begin_prefix(struct sr_icrc_ctx *c, uint32_t reg, const uint8_t *hdr, size_t hdr_len);
void sr_icrc_update(struct sr_icrc_ctx *c, const void *data, size_t len);
uint32_t sr_icrc_final(const struct sr_icrc_ctx *c);

/* The ICRC of an IPv4 packet of ip_len bytes (IPv4 total length, ICRC
 * included) with identification id equals the ICRC with identification 0
 * xor this term. A UDP socket does not see the identification, and Linux
 * numbers the segments of a GSO send 0, 1, 2, ...: receivers use this to
 * accept them without recomputing the CRC per candidate, senders to
 * compute a train's segments from one cached prefix. */
uint32_t sr_icrc_ipv4_id_term(size_t ip_len, uint16_t id);
/* term[id] = sr_icrc_ipv4_id_term(ip_len, id) for id in [0, n), n at most
 * 65536, at the cost of about one term (one power of x for the length). */
void sr_icrc_ipv4_id_terms(size_t ip_len, uint32_t *term, uint32_t n);

/* Plain CRC-32 (IEEE, reflected, as zlib's crc32): crc = sr_crc32(0, p, n). */
uint32_t sr_crc32(uint32_t crc, const void *data, size_t len);

/* ---- IP/UDP encapsulation (headers built into caller buffers) ---- */
struct sr_l3_addr {
    bool ipv6;
    uint8_t src[16]; /* IPv4 uses the first 4 bytes */
    uint8_t dst[16];
    uint16_t src_port; /* UDP source port (flow entropy) */
    uint16_t dst_port; /* UDP destination port; 0 = 4791 (RoCEv2) */
    uint8_t tos;       /* IPv4 TOS / IPv6 traffic class (DSCP + ECN) */
    uint8_t ttl;       /* TTL / hop limit */
    uint16_t ip_id;    /* IPv4 identification */
    uint32_t flow_label;
};

enum {
    SR_IPV4_HDR_LEN = 20,
    SR_IPV6_HDR_LEN = 40,
    SR_UDP_HDR_LEN = 8,
};

/* Write IP + UDP headers for a UDP payload of udp_payload_len bytes (the
 * transport packet, ICRC included). IPv4 gets DF and a valid header
 * checksum; the UDP checksum is left 0 here (set it with sr_l3_udp_csum once
 * the payload is in place). Returns the header length written. */
int sr_l3_encode(const struct sr_l3_addr *a, size_t udp_payload_len, uint8_t *buf, size_t cap);
/* Compute and store the UDP checksum of a complete IP packet. */
int sr_l3_udp_csum(uint8_t *ip, size_t len);
/* Internet checksum helper (RFC 1071), folded and complemented. */
uint16_t sr_inet_csum(const void *data, size_t len, uint32_t sum);

#endif
