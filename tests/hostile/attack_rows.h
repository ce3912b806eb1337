/* attack_rows.h: the packet-and-answer rows of hostile.forged_packets,
 * shared by the attacker (attack.c, across processes: a forged datagram to
 * a live victim over loopback) and by the in-process engine test
 * (tests/unit/engine_rows_test.c: the same packet handed to sr_engine_rx).
 * A row names its destination, the packet (opcode, PSN relative to the
 * target's, RETH/AtomicETH fields, payload, mutations) and what it must
 * cause (an answer, or a drop and which counter moves). Plain data: the
 * wire's opcode numbers and hostile.h's layout, nothing else. */
#ifndef ATTACK_ROWS_H
#define ATTACK_ROWS_H

#include "hostile.h"
#include "sr_util.h"
#include "sr_wire.h"

#include <stdint.h>

/* What the rows' packets carry besides their own fields. */
enum {
    FAKE_QPN_BASE = 0x5000, /* the attacker's QPN facing target i: FAKE_QPN_BASE + i */
    UD_FAKE_QPN = 0xabcde,  /* a UD SEND's DETH source QP */
    UD_IMM = 0xdeadbeef,    /* ImmDt of a SEND with immediate */
};

/* ---- what a row expects ---- */
enum hx_exp {
    X_ACK = 1,   /* ACK of this PSN */
    X_NAK,       /* NAK with .syn: the PSN itself, or the expected PSN for 0x60 */
    X_RNR,       /* RNR NAK (0x20 | min_rnr_timer) of this PSN */
    X_READ,      /* READ responses carrying the model's bytes */
    X_ATOMIC,    /* ATOMIC ACK with the model's original value */
    X_DUP_ACK,   /* duplicate: re-ACK of the last PSN received */
    X_SILENT,    /* processed, nothing comes back */
    X_SHORT,     /* udp short_drops */
    X_LONG,      /* udp long_drops */
    X_ICRC,      /* udp icrc_drops */
    X_MALFORMED, /* engine malformed */
    X_NO_QP,     /* engine no_qp */
    X_BAD_PEER,  /* engine bad_peer */
    X_QKEY,      /* engine qkey_drops */
    X_OTHER,     /* engine other_drops */
    X_UNCOUNTED, /* dropped per IBA, unanswered: the engine counts it in other_drops,
                  * which attacker.c checks with or without these */
    X_SACK_BAD,  /* engine sack_bad: a SACK never agreed to (docs/WIRE.md) */
    X_NUM,
};

/* Destinations besides the target QPs (indices 0 .. HX_TARGETS-1). */
enum { D_UD = 100, D_UC, D_LEGIT, D_DEAD, D_INIT, D_QPN };
enum { VA_NONE, VA_REGION, VA_ABS, VA_LEGIT };
enum { KEY_NONE, KEY_A, KEY_B, KEY_BAD, KEY_LEGIT };
enum { CMP_NONE, CMP_MODEL, CMP_OTHER };

/* How the packet is spoiled after encoding (the ICRC is recomputed after
 * the header mutations unless an ICRC mutation says otherwise). */
enum {
    MU_FROM_B = 1 << 0,    /* sent from the second address */
    MU_TRUNC = 1 << 1,     /* cut to .arg bytes (ICRC included) */
    MU_ICRC_FLIP = 1 << 2, /* last ICRC byte flipped */
    MU_BODY_FLIP = 1 << 3, /* a payload bit flipped after the ICRC */
    MU_IPID = 1 << 4,      /* ICRC over IPv4 identification 64 (outside a GSO train's) */
    MU_WRONG_DST = 1 << 5, /* ICRC for another destination address */
    MU_SPORT = 1 << 6,     /* ICRC for another UDP source port */
    MU_SPOOF = 1 << 7,     /* ICRC claims the first address, sent from the second */
    MU_OPCODE = 1 << 8,    /* BTH opcode byte set to .arg */
    MU_TVER = 1 << 9,      /* BTH TVer 1 */
    MU_PAD = 1 << 10,      /* BTH PadCnt set to .arg */
    MU_EXTRA = 1 << 11,    /* .arg payload bytes on an opcode without payload */
    MU_ACKREQ = 1 << 12,   /* AckReq on a response */
    MU_QKEY = 1 << 13,     /* wrong Q_Key */
    MU_IPID_GSO = 1 << 14, /* ICRC over IPv4 identification 63 (a GSO train's last) */
};

/* Side effects on the victim's counters and on our model. */
enum {
    FX_DUP = 1 << 0, /* PSN behind: rx duplicate */
    FX_ERR_RCVD = 1 << 1,
    FX_RNR_RCVD = 1 << 2,
    FX_SAVE = 1 << 3,   /* remember PSN and atomic result in .slot */
    FX_REPLAY = 1 << 4, /* resend at the PSN saved in .slot */
};

struct row {
    const char *name;
    int dst;     /* target index or D_* */
    uint8_t op;  /* full opcode */
    int32_t psn; /* relative: requests to the target's expected PSN, responses to its sq_psn */
    uint8_t va;
    int64_t off; /* VA_REGION: region offset; VA_ABS: the address; VA_LEGIT: offset */
    uint8_t key;
    uint32_t dma, len; /* RETH DMA length; payload bytes */
    uint32_t mut, arg;
    uint8_t exp;
    uint8_t syn; /* X_NAK / X_RNR: expected syndrome; responses: the syndrome sent */
    uint32_t seed;
    uint64_t add; /* FETCH_ADD add, CMP_SWAP swap */
    uint8_t cmp;
    uint8_t fx, slot;
    uint32_t qpn; /* D_QPN */
};

#define RC(x) (SR_OP_RC | SR_OP_##x)
#define UC(x) (SR_OP_UC | SR_OP_##x)

/* ---- the rows ---- */
/* Positive controls and IBA corner cases that must work, on HX_T_GOOD. */
static const struct row good_rows[] = {
    {"write_ok", HX_T_GOOD, RC(WRITE_ONLY), 0, VA_REGION, 0x800, KEY_A, 32, 32, .exp = X_ACK,
     .seed = 0x11},
    /* a zero-length RDMA WRITE / READ checks no R_Key */
    {"write_zero_len_any_rkey", HX_T_GOOD, RC(WRITE_ONLY), 0, VA_ABS, 0, KEY_BAD, 0, 0,
     .exp = X_ACK},
    {"read_zero_len_any_rkey", HX_T_GOOD, RC(READ_REQ), 0, VA_ABS, 0, KEY_BAD, 0, .exp = X_READ},
    {"read_ok", HX_T_GOOD, RC(READ_REQ), 0, VA_REGION, 0x1200, KEY_A, 256, .exp = X_READ,
     .fx = FX_SAVE, .slot = 0},
    {"read_mr_b_ok", HX_T_GOOD, RC(READ_REQ), 0, VA_REGION, HX_B_OFF + 100, KEY_B, 64,
     .exp = X_READ},
    {"read_three_packets", HX_T_GOOD, RC(READ_REQ), 0, VA_REGION, 0, KEY_A, 2500, .exp = X_READ},
    {"fetch_add_ok", HX_T_GOOD, RC(FETCH_ADD), 0, VA_REGION, 0x1008, KEY_A, .exp = X_ATOMIC,
     .add = 5, .fx = FX_SAVE, .slot = 1},
    {"cmp_swap_match", HX_T_GOOD, RC(CMP_SWAP), 0, VA_REGION, 0x1010, KEY_A, .exp = X_ATOMIC,
     .add = 0x1122334455667788ull, .cmp = CMP_MODEL},
    {"cmp_swap_mismatch", HX_T_GOOD, RC(CMP_SWAP), 0, VA_REGION, 0x1018, KEY_A, .exp = X_ATOMIC,
     .add = 0, .cmp = CMP_OTHER},
    {"send_ok", HX_T_GOOD, RC(SEND_ONLY), 0, .len = 32, .exp = X_ACK, .seed = 0x12},
    /* IBA 9.6.1.5: an RC QP takes packets from its peer's address only */
    {"write_from_other_address", HX_T_GOOD, RC(WRITE_ONLY), 0, VA_REGION, 0x880, KEY_A, 32, 32,
     MU_FROM_B, .exp = X_BAD_PEER, .seed = 0x13},
    {"read_from_other_address", HX_T_GOOD, RC(READ_REQ), 0, VA_REGION, 0, KEY_A, 64, 0, MU_FROM_B,
     .exp = X_BAD_PEER},
    /* IBA 9.7.5.1.4: a duplicate atomic is answered from the saved result,
     * never executed twice; a duplicate READ is executed again */
    {"fetch_add_duplicate_replayed", HX_T_GOOD, RC(FETCH_ADD), 0, VA_REGION, 0x1008, KEY_A,
     .exp = X_ATOMIC, .add = 5, .fx = FX_REPLAY | FX_DUP, .slot = 1},
    {"read_duplicate_reexecuted", HX_T_GOOD, RC(READ_REQ), 0, VA_REGION, 0x1200, KEY_A, 256,
     .exp = X_READ, .fx = FX_REPLAY | FX_DUP, .slot = 0},
    /* Annex A17.3.3: the ICRC covers IP (DF, identification), UDP ports and
     * the packet ... */
    {"write_icrc_flipped", HX_T_GOOD, RC(WRITE_ONLY), 0, VA_REGION, 0x900, KEY_A, 32, 32,
     MU_ICRC_FLIP, .exp = X_ICRC, .seed = 0x14},
    {"write_payload_flipped", HX_T_GOOD, RC(WRITE_ONLY), 0, VA_REGION, 0x900, KEY_A, 32, 32,
     MU_BODY_FLIP, .exp = X_ICRC, .seed = 0x14},
    {"write_icrc_over_ip_id_64", HX_T_GOOD, RC(WRITE_ONLY), 0, VA_REGION, 0x900, KEY_A, 32, 32,
     MU_IPID, .exp = X_ICRC, .seed = 0x14},
    /* ... where identifications 0..63 are those of a GSO train's segments */
    {"write_icrc_over_ip_id_63", HX_T_GOOD, RC(WRITE_ONLY), 0, VA_REGION, 0x9c0, KEY_A, 32, 32,
     MU_IPID_GSO, .exp = X_ACK, .seed = 0x16},
    {"write_icrc_for_other_dst", HX_T_GOOD, RC(WRITE_ONLY), 0, VA_REGION, 0x900, KEY_A, 32, 32,
     MU_WRONG_DST, .exp = X_ICRC, .seed = 0x14},
    {"write_icrc_for_other_sport", HX_T_GOOD, RC(WRITE_ONLY), 0, VA_REGION, 0x900, KEY_A, 32, 32,
     MU_SPORT, .exp = X_ICRC, .seed = 0x14},
    {"write_spoofed_source_in_icrc", HX_T_GOOD, RC(WRITE_ONLY), 0, VA_REGION, 0x900, KEY_A, 32, 32,
     MU_FROM_B | MU_SPOOF, .exp = X_ICRC, .seed = 0x14},
    {"write_ok_after_all_that", HX_T_GOOD, RC(WRITE_ONLY), 0, VA_REGION, 0x940, KEY_A, 32, 32,
     .exp = X_ACK, .seed = 0x15},
};

/* PSN window, duplicates, RNR (HX_T_SEQ has no receive posted), and
 * forged responses to its idle requester. */
static const struct row seq_rows[] = {
    {"write_ok", HX_T_SEQ, RC(WRITE_ONLY), 0, VA_REGION, 0xa00, KEY_A, 32, 32, .exp = X_ACK,
     .seed = 0x21},
    /* IBA 9.7.5.1.2: ahead of the expected PSN: one PSN sequence NAK ... */
    {"write_psn_far_ahead", HX_T_SEQ, RC(WRITE_ONLY), 0x7fffff, VA_REGION, 0xa20, KEY_A, 32, 32,
     .exp = X_NAK, .syn = 0x60, .seed = 0x22},
    /* ... then silence until the expected PSN arrives */
    {"write_psn_ahead_after_nak", HX_T_SEQ, RC(WRITE_ONLY), 5, VA_REGION, 0xa20, KEY_A, 32, 32,
     .exp = X_UNCOUNTED, .seed = 0x22},
    {"read_psn_ahead_after_nak", HX_T_SEQ, RC(READ_REQ), 6, VA_REGION, 0, KEY_A, 64,
     .exp = X_UNCOUNTED},
    {"write_at_expected_psn", HX_T_SEQ, RC(WRITE_ONLY), 0, VA_REGION, 0xa40, KEY_A, 32, 32,
     .exp = X_ACK, .seed = 0x23},
    /* duplicates (the 2^23 PSNs behind): re-ACKed, never executed again */
    {"write_duplicate_not_reexecuted", HX_T_SEQ, RC(WRITE_ONLY), -1, VA_REGION, 0xa40, KEY_A, 32,
     32, .exp = X_DUP_ACK, .seed = 0x24, .fx = FX_DUP},
    {"write_psn_far_behind", HX_T_SEQ, RC(WRITE_ONLY), -0x800000, VA_REGION, 0xa80, KEY_A, 32, 32,
     .exp = X_DUP_ACK, .seed = 0x25, .fx = FX_DUP},
    {"read_duplicate_never_answered", HX_T_SEQ, RC(READ_REQ), -100, VA_REGION, 0, KEY_A, 64,
     .exp = X_OTHER, .fx = FX_DUP},
    {"atomic_duplicate_never_answered", HX_T_SEQ, RC(FETCH_ADD), -50, VA_REGION, 0x1020, KEY_A,
     .exp = X_OTHER, .add = 1, .fx = FX_DUP},
    /* IBA 9.7.5.2.8: no receive WQE: RNR NAK, the QP stays usable */
    {"send_without_receive", HX_T_SEQ, RC(SEND_ONLY), 0, .len = 16, .exp = X_RNR,
     .syn = 0x20 | HX_RNR_TIMER, .seed = 0x27},
    {"write_ok_after_rnr", HX_T_SEQ, RC(WRITE_ONLY), 0, VA_REGION, 0xac0, KEY_A, 32, 32,
     .exp = X_ACK, .seed = 0x26},
    /* forged responses: nothing was requested */
    {"ack_of_unsent_psn", HX_T_SEQ, RC(ACK), 5, .exp = X_OTHER, .syn = 0x1f},
    {"read_response_unsolicited", HX_T_SEQ, RC(READ_RESP_ONLY), 0, .len = 64, .exp = X_OTHER,
     .syn = 0x1f, .seed = 0x28},
    {"atomic_ack_unsolicited", HX_T_SEQ, RC(ATOMIC_ACK), 0, .exp = X_OTHER, .syn = 0x1f},
    {"ack_repeating_last_psn", HX_T_SEQ, RC(ACK), -1, .exp = X_UNCOUNTED, .syn = 0x1f},
    {"nak_on_idle_qp", HX_T_SEQ, RC(ACK), -1, .exp = X_SILENT, .syn = 0x62, .fx = FX_ERR_RCVD},
    {"rnr_nak_on_idle_qp", HX_T_SEQ, RC(ACK), -1, .exp = X_SILENT, .syn = 0x21, .fx = FX_RNR_RCVD},
    {"nak_of_unsent_psn", HX_T_SEQ, RC(ACK), 100, .exp = X_OTHER, .syn = 0x62},
    /* IBA 9.7.5.1 Table 43: syndrome type 10 is reserved */
    {"ack_reserved_syndrome", HX_T_SEQ, RC(ACK), -1, .exp = X_MALFORMED, .syn = 0x40},
    {"ack_with_ackreq", HX_T_SEQ, RC(ACK), -1, .mut = MU_ACKREQ, .exp = X_MALFORMED, .syn = 0x1f},
    {"read_response_middle_short", HX_T_SEQ, RC(READ_RESP_MIDDLE), 0, .len = 64, .exp = X_MALFORMED,
     .seed = 0x29},
    /* softrdma's SACK (docs/WIRE.md) without the agreement: the attacker's
     * requests never advertised it and the SACK is unmarked, so it is
     * dropped and counted whatever it claims; with a NAK syndrome it is
     * malformed */
    {"sack_unagreed", HX_T_SEQ, SR_OP_SACK, -1, .len = 8, .exp = X_SACK_BAD, .syn = 0x1f,
     .seed = 0x2a},
    {"sack_unagreed_unsent_psn", HX_T_SEQ, SR_OP_SACK, 100, .len = 256, .exp = X_SACK_BAD,
     .syn = 0x1f, .seed = 0x2b},
    {"sack_bitmap_not_words", HX_T_SEQ, SR_OP_SACK, -1, .len = 12, .exp = X_SACK_BAD, .syn = 0x1f,
     .seed = 0x2c},
    {"sack_nak_syndrome", HX_T_SEQ, SR_OP_SACK, -1, .len = 8, .exp = X_MALFORMED, .syn = 0x60,
     .seed = 0x2d},
};

/* One error class per fresh QP (HX_T_FIRST_FATAL + i, or HX_T_NOWRITE). */
static const struct row fatal_rows[] = {
    {"write_bad_rkey", 0, RC(WRITE_ONLY), 0, VA_REGION, 0xc00, KEY_BAD, 32, 32, .exp = X_NAK,
     .syn = 0x62, .seed = 0x41},
    {"write_crossing_mr_end", 0, RC(WRITE_ONLY), 0, VA_REGION, HX_A_LEN - 16, KEY_A, 32, 32,
     .exp = X_NAK, .syn = 0x62, .seed = 0x42},
    {"write_to_read_only_mr", 0, RC(WRITE_ONLY), 0, VA_REGION, HX_B_OFF + 64, KEY_B, 32, 32,
     .exp = X_NAK, .syn = 0x62, .seed = 0x43},
    {"write_to_unregistered_page", 0, RC(WRITE_ONLY), 0, VA_REGION, HX_P3_OFF + 64, KEY_A, 32, 32,
     .exp = X_NAK, .syn = 0x62, .seed = 0x44},
    {"write_below_mr_into_guard", 0, RC(WRITE_ONLY), 0, VA_REGION, -64, KEY_A, 32, 32, .exp = X_NAK,
     .syn = 0x62, .seed = 0x45},
    {"write_first_va_wraps", 0, RC(WRITE_FIRST), 0, VA_ABS, -512, KEY_A, 4096, HX_PATH_MTU,
     .exp = X_NAK, .syn = 0x62, .seed = 0x46},
    {"write_dma_len_mismatch", 0, RC(WRITE_ONLY), 0, VA_REGION, 0xc40, KEY_A, 0xffffffffu, 32,
     .exp = X_NAK, .syn = 0x61, .seed = 0x47},
    {"read_past_mr_end", 0, RC(READ_REQ), 0, VA_REGION, HX_PAGE, KEY_A, 2 * HX_PAGE, .exp = X_NAK,
     .syn = 0x62},
    {"read_bad_rkey", 0, RC(READ_REQ), 0, VA_REGION, 0, KEY_BAD, 64, .exp = X_NAK, .syn = 0x62},
    {"read_unregistered_page_via_mr_b", 0, RC(READ_REQ), 0, VA_REGION, HX_P3_OFF, KEY_B, 64,
     .exp = X_NAK, .syn = 0x62},
    {"atomic_bad_rkey", 0, RC(FETCH_ADD), 0, VA_REGION, 0x1040, KEY_BAD, .exp = X_NAK, .syn = 0x62,
     .add = 1},
    {"atomic_on_mr_without_atomic", 0, RC(CMP_SWAP), 0, VA_REGION, HX_B_OFF + 8, KEY_B,
     .exp = X_NAK, .syn = 0x62, .add = 1, .cmp = CMP_MODEL},
    {"atomic_unaligned", 0, RC(FETCH_ADD), 0, VA_REGION, 0x1044, KEY_A, .exp = X_NAK, .syn = 0x61,
     .add = 1},
    {"atomic_past_mr_end", 0, RC(FETCH_ADD), 0, VA_REGION, HX_A_LEN, KEY_A, .exp = X_NAK,
     .syn = 0x62, .add = 1},
    {"write_payload_over_path_mtu", 0, RC(WRITE_ONLY), 0, VA_REGION, 0xd00, KEY_A, 2 * HX_PATH_MTU,
     2 * HX_PATH_MTU, .exp = X_NAK, .syn = 0x61, .seed = 0x48},
    {"write_middle_without_first", 0, RC(WRITE_MIDDLE), 0, .len = HX_PATH_MTU, .exp = X_NAK,
     .syn = 0x61, .seed = 0x49},
    {"send_longer_than_receive", 0, RC(SEND_ONLY), 0, .len = 2 * HX_RECV_LEN, .exp = X_NAK,
     .syn = 0x61, .seed = 0x4a},
    {"write_first_dma_over_2g", 0, RC(WRITE_FIRST), 0, VA_REGION, 0xe40, KEY_A, 0x80001000u,
     HX_PATH_MTU, .exp = X_NAK, .syn = 0x61, .seed = 0x4b},
    {"read_dma_over_2g", 0, RC(READ_REQ), 0, VA_REGION, 0, KEY_A, 0x80000001u, .exp = X_NAK,
     .syn = 0x61},
    /* last: its own QP, HX_T_NOWRITE (QP access without remote write) */
    {"write_qp_without_remote_write", HX_T_NOWRITE, RC(WRITE_ONLY), 0, VA_REGION, 0xe00, KEY_A, 32,
     32, .exp = X_NAK, .syn = 0x62, .seed = 0x4c},
};
_Static_assert(SR_ARRAY_SIZE(fatal_rows) - 1 == HX_TARGETS - HX_T_FIRST_FATAL,
               "one fresh target QP per fatal class");

/* fatal_rows[i] with its target filled in, and the valid request sent to
 * that fresh QP first: the QP, its PSN and the packets are right, so the
 * NAK that follows is the defect's doing. */
static inline struct row fatal_row(size_t i, struct row *pre)
{
    struct row r = fatal_rows[i];
    if (r.dst == 0)
        r.dst = HX_T_FIRST_FATAL + (int)i;
    *pre = (struct row){"valid_request_first",
                        r.dst,
                        RC(WRITE_ONLY),
                        0,
                        VA_REGION,
                        0x40 * r.dst,
                        KEY_A,
                        32,
                        32,
                        .exp = X_ACK,
                        .seed = 0x80 + (uint32_t)r.dst};
    if (r.dst == HX_T_NOWRITE) { /* its QP allows remote reads only */
        pre->op = RC(READ_REQ);
        pre->off = 0x1800;
        pre->len = 0;
        pre->exp = X_READ;
    }
    return r;
}

/* Decoding fails or the transport does not match the QP: dropped before
 * the responder; sent to HX_T_PING, whose peer is the attacker. */
static const struct row malformed_rows[] = {
    {"write_truncated_in_reth", HX_T_PING, RC(WRITE_ONLY), 0, VA_REGION, 0xf00, KEY_A, 32, 32,
     MU_TRUNC, 20, .exp = X_MALFORMED, .seed = 0x51},
    {"read_truncated_to_bth", HX_T_PING, RC(READ_REQ), 0, VA_REGION, 0, KEY_A, 64, 0, MU_TRUNC,
     SR_BTH_LEN + SR_ICRC_LEN, .exp = X_MALFORMED},
    {"atomic_truncated_in_atomiceth", HX_T_PING, RC(FETCH_ADD), 0, VA_REGION, 0x1000, KEY_A, 0, 0,
     MU_TRUNC, 36, .exp = X_MALFORMED},
    {"opcode_reserved_0x15", HX_T_PING, RC(WRITE_ONLY), 0, VA_REGION, 0xf00, KEY_A, 32, 32,
     MU_OPCODE, 0x15, .exp = X_MALFORMED, .seed = 0x51},
    {"opcode_reserved_0x1f", HX_T_PING, RC(WRITE_ONLY), 0, VA_REGION, 0xf00, KEY_A, 32, 32,
     MU_OPCODE, 0x1f, .exp = X_MALFORMED, .seed = 0x51},
    {"tver_1", HX_T_PING, RC(WRITE_ONLY), 0, VA_REGION, 0xf00, KEY_A, 32, 32, MU_TVER,
     .exp = X_MALFORMED, .seed = 0x51},
    {"send_pad_over_payload", HX_T_PING, RC(SEND_ONLY), 0, .mut = MU_PAD, .arg = 3,
     .exp = X_MALFORMED},
    {"read_with_payload", HX_T_PING, RC(READ_REQ), 0, VA_REGION, 0, KEY_A, 64, 0, MU_EXTRA, 4,
     .exp = X_MALFORMED},
    {"write_payload_not_multiple_of_4", HX_T_PING, RC(WRITE_ONLY), 0, VA_REGION, 0xf00, KEY_A, 30,
     30, MU_TRUNC, 28 + 32 + 4 - 2, .exp = X_MALFORMED, .seed = 0x51},
    {"write_first_with_pad", HX_T_PING, RC(WRITE_FIRST), 0, VA_REGION, 0xf00, KEY_A, 4096,
     HX_PATH_MTU, MU_PAD, 1, .exp = X_MALFORMED, .seed = 0x51},
    {"ud_opcode_on_rc_qp", HX_T_PING, SR_OP_UD | SR_OP_SEND_ONLY, 0, .len = 16, .exp = X_OTHER,
     .seed = 0x52},
    {"uc_opcode_on_rc_qp", HX_T_PING, SR_OP_UC | SR_OP_SEND_ONLY, 0, .len = 16, .exp = X_OTHER,
     .seed = 0x52},
    {"xrc_opcode_on_rc_qp", HX_T_PING, SR_OP_XRC | SR_OP_SEND_ONLY, 0, .len = 16, .exp = X_OTHER,
     .seed = 0x52},
    /* a CNP is congestion control's (Annex A17.9): taken, never answered */
    {"cnp_on_rc_qp", HX_T_PING, SR_OP_CNP, 0, .exp = X_SILENT},
};

/* Well-formed WRITEs to QPs that do not exist or are not ready. */
static const struct row noqp_rows[] = {
    {"qpn_0", D_QPN, RC(WRITE_ONLY), 0, VA_REGION, 0xf40, KEY_A, 32, 32, .exp = X_NO_QP,
     .seed = 0x53, .qpn = 0},
    {"qpn_1", D_QPN, RC(WRITE_ONLY), 0, VA_REGION, 0xf40, KEY_A, 32, 32, .exp = X_NO_QP,
     .seed = 0x53, .qpn = 1},
    {"qpn_below_first", D_QPN, RC(WRITE_ONLY), 0, VA_REGION, 0xf40, KEY_A, 32, 32, .exp = X_NO_QP,
     .seed = 0x53, .qpn = 0xf},
    {"qpn_last_table_slot", D_QPN, RC(WRITE_ONLY), 0, VA_REGION, 0xf40, KEY_A, 32, 32,
     .exp = X_NO_QP, .seed = 0x53, .qpn = 0x10 + 16383},
    {"qpn_past_table", D_QPN, RC(WRITE_ONLY), 0, VA_REGION, 0xf40, KEY_A, 32, 32, .exp = X_NO_QP,
     .seed = 0x53, .qpn = 0x10 + 16384},
    {"qpn_max", D_QPN, RC(WRITE_ONLY), 0, VA_REGION, 0xf40, KEY_A, 32, 32, .exp = X_NO_QP,
     .seed = 0x53, .qpn = 0xffffff},
    {"qpn_destroyed", D_DEAD, RC(WRITE_ONLY), 0, VA_REGION, 0xf40, KEY_A, 32, 32, .exp = X_NO_QP,
     .seed = 0x53},
    {"qpn_in_init", D_INIT, RC(WRITE_ONLY), 0, VA_REGION, 0xf40, KEY_A, 32, 32, .exp = X_NO_QP,
     .seed = 0x53},
};

/* The UD QP: any sender, but only with its Q_Key (IBA 10.2.4). */
static const struct row ud_rows[] = {
    {"ud_send_ok", D_UD, SR_OP_UD | SR_OP_SEND_ONLY, 0, .len = 64, .exp = X_SILENT, .seed = 0x61},
    {"ud_send_imm_ok", D_UD, SR_OP_UD | SR_OP_SEND_ONLY_IMM, 0, .len = 100, .exp = X_SILENT,
     .seed = 0x62},
    {"ud_send_no_receive_left", D_UD, SR_OP_UD | SR_OP_SEND_ONLY, 0, .len = 64, .exp = X_OTHER,
     .seed = 0x63},
    {"ud_wrong_qkey", D_UD, SR_OP_UD | SR_OP_SEND_ONLY, 0, .len = 64, .mut = MU_QKEY, .exp = X_QKEY,
     .seed = 0x63},
    {"ud_payload_over_port_mtu", D_UD, SR_OP_UD | SR_OP_SEND_ONLY, 0, .len = 4100,
     .exp = X_MALFORMED, .seed = 0x63},
    {"ud_truncated_deth", D_UD, SR_OP_UD | SR_OP_SEND_ONLY, 0, .len = 64, .mut = MU_TRUNC,
     .arg = 18, .exp = X_MALFORMED, .seed = 0x63},
    {"rc_opcode_on_ud_qp", D_UD, RC(WRITE_ONLY), 0, VA_REGION, 0xf80, KEY_A, 32, 32, .exp = X_OTHER,
     .seed = 0x63},
    {"ud_from_other_address", D_UD, SR_OP_UD | SR_OP_SEND_ONLY, 0, .len = 64, .mut = MU_FROM_B,
     .exp = X_OTHER, .seed = 0x63},
};

/* The UC QP: nothing is ever answered; a bad packet is
 * dropped with the rest of its message, and the QP stays up. */
static const struct row uc_rows[] = {
    {"uc_write_ok", D_UC, UC(WRITE_ONLY), 0, VA_REGION, 0xb00, KEY_A, 32, 32, .exp = X_SILENT,
     .seed = 0x35},
    {"uc_write_bad_rkey", D_UC, UC(WRITE_ONLY), 0, VA_REGION, 0xb40, KEY_BAD, 32, 32,
     .exp = X_OTHER, .seed = 0x36},
    {"uc_write_crossing_mr_end", D_UC, UC(WRITE_ONLY), 0, VA_REGION, HX_A_LEN - 16, KEY_A, 32, 32,
     .exp = X_OTHER, .seed = 0x36},
    {"uc_write_to_read_only_mr", D_UC, UC(WRITE_ONLY), 0, VA_REGION, HX_B_OFF, KEY_B, 32, 32,
     .exp = X_OTHER, .seed = 0x36},
    {"uc_write_over_path_mtu", D_UC, UC(WRITE_ONLY), 0, VA_REGION, 0xb80, KEY_A, 2 * HX_PATH_MTU,
     2 * HX_PATH_MTU, .exp = X_OTHER, .seed = 0x36},
    {"uc_write_first", D_UC, UC(WRITE_FIRST), 0, VA_REGION, 0x1400, KEY_A, 2 * HX_PATH_MTU,
     HX_PATH_MTU, .exp = X_SILENT, .seed = 0x37},
    /* a PSN gap: the rest of the message is dropped (the first packet's
     * bytes stay written) */
    {"uc_write_last_after_gap", D_UC, UC(WRITE_LAST), 1, .len = HX_PATH_MTU, .exp = X_OTHER,
     .seed = 0x38},
    {"uc_send_without_receive", D_UC, UC(SEND_ONLY), 0, .len = 16, .exp = X_OTHER, .seed = 0x39},
    {"uc_read_opcode_does_not_exist", D_UC, RC(READ_REQ), 0, VA_REGION, 0, KEY_A, 64,
     .mut = MU_OPCODE, .arg = SR_OP_UC | SR_OP_READ_REQ, .exp = X_MALFORMED},
    {"uc_write_ok_after_all_that", D_UC, UC(WRITE_ONLY), 0, VA_REGION, 0xbc0, KEY_A, 32, 32,
     .exp = X_SILENT, .seed = 0x3a},
};

/* The legitimate pair's QP: its peer is neither of our addresses. */
static const struct row legit_rows[] = {
    {"legit_write_from_attacker", D_LEGIT, RC(WRITE_ONLY), 0, VA_LEGIT, 0, KEY_LEGIT, 64, 64,
     .exp = X_BAD_PEER, .seed = 0x71},
    {"legit_write_from_other_address", D_LEGIT, RC(WRITE_ONLY), 0, VA_LEGIT, 0, KEY_LEGIT, 64, 64,
     MU_FROM_B, .exp = X_BAD_PEER, .seed = 0x71},
    {"legit_forged_nak", D_LEGIT, RC(ACK), 0, .exp = X_BAD_PEER, .syn = 0x62},
    {"legit_forged_ack", D_LEGIT, RC(ACK), 0, .exp = X_BAD_PEER, .syn = 0x1f},
    {"legit_forged_read_response", D_LEGIT, RC(READ_RESP_ONLY), 0, .len = 64, .exp = X_BAD_PEER,
     .syn = 0x1f, .seed = 0x72},
};

/* ---- the victim as requester: a hostile responder ----
 * The victim posted an RDMA READ (256 bytes into lbuf) and a FETCH_ADD
 * (into lbuf + 512) on HX_T_SPARE, whose peer we are. Responses that do
 * not fit what it asked for must change nothing (IBA 9.7.5.2: the
 * requester validates opcode, PSN and length of every response). */
static const struct row requester_rows[] = {
    {"read_response_longer_than_asked", HX_T_SPARE, RC(READ_RESP_ONLY), 0, .len = 512,
     .exp = X_OTHER, .syn = 0x1f, .seed = 0x6a},
    {"read_response_shorter_than_asked", HX_T_SPARE, RC(READ_RESP_ONLY), 0, .len = 128,
     .exp = X_OTHER, .syn = 0x1f, .seed = 0x6a},
    {"read_response_first_of_a_one_packet_read", HX_T_SPARE, RC(READ_RESP_FIRST), 0,
     .len = HX_PATH_MTU, .exp = X_OTHER, .syn = 0x1f, .seed = 0x6a},
    {"read_response_beyond_sent_psns", HX_T_SPARE, RC(READ_RESP_ONLY), 5, .len = HX_REQ_READ_LEN,
     .exp = X_OTHER, .syn = 0x1f, .seed = 0x6a},
    {"atomic_ack_for_the_read", HX_T_SPARE, RC(ATOMIC_ACK), 0, .exp = X_OTHER, .syn = 0x1f,
     .seed = 0x6a},
    {"read_response_for_the_atomic", HX_T_SPARE, RC(READ_RESP_ONLY), 1, .len = 8, .exp = X_OTHER,
     .syn = 0x1f, .seed = 0x6a},
    {"read_response_ok", HX_T_SPARE, RC(READ_RESP_ONLY), 0, .len = HX_REQ_READ_LEN, .exp = X_SILENT,
     .syn = 0x1f, .seed = 0x6b},
    {"read_response_again", HX_T_SPARE, RC(READ_RESP_ONLY), 0, .len = HX_REQ_READ_LEN,
     .exp = X_OTHER, .syn = 0x1f, .seed = 0x6c},
    {"atomic_ack_ok", HX_T_SPARE, RC(ATOMIC_ACK), 1, .exp = X_SILENT, .syn = 0x1f, .seed = 0x6d},
};

#endif
