/* attack.c: the packet classes of hostile.forged_packets (the tables),
 * how a row becomes a RoCEv2 packet with the project's codec, and how
 * what the victim answers is checked against the row; also the bulk
 * classes (random bytes, lengths), the victim as requester facing a
 * hostile responder, READ-then-WRITE ordering, and the fuzz. */
#include "attack.h"
#include "sr_util.h"

#include <errno.h>
#include <infiniband/verbs.h> /* enum values only: the attacker does not link verbs */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

/* ---- the rows ---- */
/* Positive controls and IBA corner cases that must work, on HX_T_GOOD. */
static const struct row good_rows[] = {
    {"write_ok", HX_T_GOOD, RC(WRITE_ONLY), 0, VA_REGION, 0x800, KEY_A, 32, 32, .exp = X_ACK,
     .seed = 0x11},
    /* IBA 9.7.4.1.? (C9-?): a zero-length RDMA WRITE / READ checks no R_Key */
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
    {"cnp_on_rc_qp", HX_T_PING, SR_OP_CNP, 0, .exp = X_OTHER},
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

/* The UC QP (IBA 9.8.?): nothing is ever answered; a bad packet is
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

static const struct row barrier_row = {"barrier", HX_T_PING, RC(WRITE_ONLY), 0, VA_ABS, 0, KEY_BAD,
                                       0,         0,         .exp = X_ACK};

void hx_fail(struct att *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("hx attacker: FAIL [%s]: ", a->row ? a->row : "-");
    vprintf(fmt, ap);
    putchar('\n');
    fflush(stdout);
    va_end(ap);
    a->failures++;
}

static void fill_pat(uint8_t *p, uint32_t len, uint32_t seed, uint64_t pos)
{
    for (uint32_t i = 0; i < len; i++)
        p[i] = hx_pat(seed, pos + i);
}

static void declare(struct att *a, uint32_t area, uint32_t off, uint32_t len, uint32_t seed)
{
    if (a->done.n_decl >= HX_MAX_DECL) {
        hx_fail(a, "too many declared writes");
        return;
    }
    a->done.decl[a->done.n_decl++] = (struct hx_decl){area, off, len, seed};
}

static void declare_atomic(struct att *a, uint32_t off, uint64_t value)
{
    for (uint32_t i = 0; i < a->done.n_atomic; i++)
        if (a->done.atomic[i].off == off) {
            a->done.atomic[i].value = value;
            return;
        }
    if (a->done.n_atomic >= HX_MAX_ATOMIC) {
        hx_fail(a, "too many atomics");
        return;
    }
    a->done.atomic[a->done.n_atomic++] = (struct hx_atomic){.off = off, .value = value};
}

static uint64_t model_u64(const struct att *a, int64_t off)
{
    uint64_t v = 0;
    if (off >= 0 && off + 8 <= HX_REGION_LEN)
        memcpy(&v, a->model + off, 8);
    return v;
}

static uint32_t fake_qpn(uint32_t target)
{
    return FAKE_QPN_BASE + target;
}

/* A victim that died must not cost a timeout per remaining row. */
bool hx_victim_alive(struct att *a)
{
    if (a->reaped)
        return false;
    if (waitpid(a->victim, &a->status, WNOHANG) == a->victim)
        a->reaped = true;
    return !a->reaped;
}

/* ---- answers ---- */
struct want {
    uint32_t qpn;
    uint8_t op;
    uint32_t psn;
    int syn; /* exact AETH syndrome; -1: any ACK (type 000) */
    const uint8_t *payload;
    uint32_t len;
    bool check_orig;
    uint64_t orig;
};

static void describe(const struct sr_pkt *p, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s qpn 0x%x psn 0x%x syndrome 0x%02x len %u", sr_opcode_name(p->bth.opcode),
             p->bth.dest_qp, p->bth.psn, p->aeth.syndrome, p->payload_len);
}

/* Receive until w arrives; anything else that arrives is unexpected. */
static bool wait_resp(struct att *a, const struct want *w)
{
    uint8_t *buf = a->rx;
    uint64_t end = hx_now_ms() + RESP_MS;
    if (end > a->deadline_ms)
        end = a->deadline_ms;
    for (;;) {
        uint64_t now = hx_now_ms();
        if (now >= end)
            break;
        uint8_t src[16];
        uint16_t sport;
        int n = sr_forge_recv(&a->a, buf, MAX_DGRAM, src, &sport, (int)(end - now));
        if (n == -ETIMEDOUT)
            break;
        if (n < 0) {
            hx_fail(a, "recv: %s", strerror(-n));
            return false;
        }
        struct sr_forge_l3 l3 = {
            .src_gid = src, .dst_gid = a->a.gid, .sport = sport, .dport = a->a.port};
        struct sr_pkt p;
        char d[160];
        const char *why = memcmp(src, a->info.gid, 16)                ? "not from the victim"
                          : n < SR_BTH_LEN + SR_ICRC_LEN              ? "too short"
                          : !sr_forge_icrc_ok(&l3, buf, (size_t)n)    ? "bad ICRC"
                          : sr_wire_decode(buf, (size_t)n, 0, &p) < 0 ? "malformed"
                                                                      : NULL;
        if (why && !strcmp(why, "bad ICRC") && sr_wire_decode(buf, (size_t)n, 0, &p) >= 0 &&
            (sr_opcode_info(p.bth.opcode)->flags & SR_OPF_READ_RESP)) {
            a->stale_icrc++; /* KNOWN_BUG_TX_BATCH_ICRC_RACE: see run_read_write */
            continue;
        }
        if (why) {
            char hex[3 * 48 + 1] = "";
            for (int k = 0; k < n && k < 48; k++)
                snprintf(hex + 3 * k, 4, " %02x", buf[k]);
            hx_fail(a, "a datagram of %d bytes from the victim: %s:%s", n, why, hex);
            continue;
        }
        describe(&p, d, sizeof(d));
        if (a->mode == HX_MODE_FUZZ && p.bth.dest_qp != w->qpn)
            continue; /* answers to the fuzz are not checked, only the barrier's */
        bool match = p.bth.dest_qp == w->qpn && p.bth.opcode == w->op && p.bth.psn == w->psn;
        if (match && (p.hdrs & SR_HDR_BIT(SR_HDR_AETH)))
            match = w->syn < 0 ? SR_AETH_TYPE(p.aeth.syndrome) == SR_AETH_ACK
                               : p.aeth.syndrome == (uint8_t)w->syn;
        if (!match) {
            hx_fail(a, "unexpected answer %s (waiting for %s psn 0x%x syndrome %d)", d,
                    sr_opcode_name(w->op), w->psn, w->syn);
            continue;
        }
        if (w->payload && (p.payload_len != w->len || memcmp(p.payload, w->payload, w->len)))
            hx_fail(a, "answer %s: payload differs from the victim's memory", d);
        if (w->check_orig && p.atomic_orig != w->orig)
            hx_fail(a, "answer %s: original value 0x%" PRIx64 ", want 0x%" PRIx64, d, p.atomic_orig,
                    w->orig);
        return true;
    }
    hx_fail(a, "no %s psn 0x%x syndrome %d within %d ms", sr_opcode_name(w->op), w->psn, w->syn,
            RESP_MS);
    if (!hx_victim_alive(a)) {
        hx_fail(a, "the victim is gone: attack stopped");
        a->deadline_ms = hx_now_ms();
    }
    return false;
}

/* ---- building and sending a row ---- */
struct built {
    uint8_t buf[MAX_DGRAM];
    size_t len;
    uint32_t psn;
    uint32_t dst_qpn;
    const struct sr_forge *via;
};

static uint32_t row_qpn(const struct att *a, const struct row *r)
{
    switch (r->dst) {
    case D_UD:
        return a->info.ud_qpn;
    case D_UC:
        return a->info.uc_qpn;
    case D_LEGIT:
        return a->info.legit_qpn;
    case D_DEAD:
        return a->info.dead_qpn;
    case D_INIT:
        return a->info.init_qpn;
    case D_QPN:
        return r->qpn;
    default:
        return a->info.qpn[r->dst];
    }
}

static bool is_target(const struct row *r)
{
    return r->dst >= 0 && r->dst < HX_TARGETS;
}

/* Where a SEND's payload lands: positions of its pattern. */
static uint64_t send_pos(const struct att *a, const struct row *r)
{
    if (r->dst == D_UD)
        return (uint64_t)a->ud_delivered * HX_UD_SLOT + 40;
    return is_target(r) ? (uint64_t)r->dst * HX_RECV_SLOT : 0;
}

static int build_row(struct att *a, const struct row *r, struct built *b)
{
    const struct sr_opcode_info *info = sr_opcode_info(r->op);
    if (!info)
        return SR_ERR_WIRE_OPCODE;
    bool resp = info->flags & SR_OPF_RESPONSE;
    struct sr_pkt p = {0};
    p.bth.opcode = r->op;
    p.bth.pkey = 0xffff;
    p.bth.dest_qp = b->dst_qpn = row_qpn(a, r);
    uint32_t base = 0;
    if (is_target(r))
        base = resp ? a->info.sq_psn[r->dst] : a->t[r->dst].epsn;
    else if (r->dst == D_LEGIT)
        base = 0x424242;
    else if (r->dst == D_UC)
        base = a->uc_epsn;
    b->psn = r->fx & FX_REPLAY ? a->saved[r->slot].psn : sr_psn_add(base, (uint32_t)r->psn);
    p.bth.psn = b->psn;
    p.bth.ack_req = !resp && SR_OPCODE_TRANSPORT(r->op) == SR_OP_RC;

    uint64_t va = 0;
    switch (r->va) {
    case VA_REGION:
        va = a->info.region + (uint64_t)r->off;
        break;
    case VA_ABS:
        va = (uint64_t)r->off;
        break;
    case VA_LEGIT:
        va = a->info.legit_va + (uint64_t)r->off;
        break;
    }
    uint32_t key = r->key == KEY_A       ? a->info.rkey_a
                   : r->key == KEY_B     ? a->info.rkey_b
                   : r->key == KEY_BAD   ? a->info.rkey_a ^ 0xff /* same slot, wrong tag */
                   : r->key == KEY_LEGIT ? a->info.legit_rkey
                                         : 0;
    p.reth.va = va;
    p.reth.rkey = key;
    p.reth.dma_len = r->dma;
    p.atomic.va = va;
    p.atomic.rkey = key;
    p.atomic.swap_add = r->add;
    if (r->cmp == CMP_MODEL)
        p.atomic.compare = model_u64(a, r->off);
    else if (r->cmp == CMP_OTHER)
        p.atomic.compare = ~model_u64(a, r->off);
    p.aeth.syndrome = r->syn;
    if (SR_OPCODE_OP(r->op) == SR_OP_ATOMIC_ACK) {
        /* the bytes it leaves in the requester's buffer: a pattern */
        uint8_t orig[8];
        fill_pat(orig, 8, r->seed, HX_REQ_ATOMIC_OFF);
        memcpy(&p.atomic_orig, orig, 8);
    }
    p.deth.qkey = r->mut & MU_QKEY ? HX_UD_QKEY ^ 0x1000 : HX_UD_QKEY;
    p.deth.src_qp = UD_FAKE_QPN;
    p.imm = UD_IMM;
    p.xrc_srqn = 1;
    uint8_t *payload = a->payload;
    if (r->len && (info->flags & SR_OPF_PAYLOAD)) {
        uint64_t pos = info->flags & SR_OPF_SEND ? send_pos(a, r) : (uint64_t)r->off;
        fill_pat(payload, r->len, r->seed, pos);
        p.payload = payload;
        p.payload_len = r->len;
    }
    int n = sr_wire_encode(&p, b->buf, sizeof(b->buf));
    if (n < 0)
        return n;
    b->len = (size_t)n;

    uint32_t m = r->mut;
    if (m & MU_EXTRA) { /* payload where the opcode has none: before the ICRC slot */
        memset(b->buf + b->len - SR_ICRC_LEN, 0xab, r->arg);
        b->len += r->arg;
    }
    if (m & MU_TRUNC)
        b->len = r->arg;
    if (m & MU_OPCODE)
        b->buf[0] = (uint8_t)r->arg;
    if (m & MU_TVER)
        b->buf[1] |= 1;
    if (m & MU_PAD)
        b->buf[1] = (uint8_t)((b->buf[1] & ~0x30) | (r->arg << 4));
    if (m & MU_ACKREQ)
        b->buf[8] |= 0x80;

    b->via = m & MU_FROM_B ? &a->b : &a->a;
    struct sr_forge_l3 l3 = sr_forge_l3_to(b->via, a->info.gid);
    if (m & MU_IPID)
        l3.ip_id = 64;
    if (m & MU_IPID_GSO)
        l3.ip_id = 63;
    if (m & MU_WRONG_DST)
        l3.dst_gid = a->a.gid;
    if (m & MU_SPORT)
        l3.sport = SR_ROCE_UDP_PORT + 1;
    if (m & MU_SPOOF)
        l3.src_gid = a->a.gid;
    if (b->len >= SR_BTH_LEN + SR_ICRC_LEN) {
        int err = sr_forge_icrc_fill(&l3, b->buf, b->len);
        if (err)
            return err;
    }
    if (m & MU_ICRC_FLIP)
        b->buf[b->len - 1] ^= 0x01;
    if (m & MU_BODY_FLIP)
        b->buf[info->hdr_len] ^= 0x10;
    return 0;
}

static void count_drop(struct att *a, int exp)
{
    a->x.drop[exp]++;
    if (exp != X_SHORT && exp != X_LONG && exp != X_ICRC)
        a->x.delivered++;
}

/* Send one row and check what it must cause. */
static void run_row(struct att *a, const struct row *r)
{
    a->row = r->name;
    if (hx_now_ms() >= a->deadline_ms) {
        hx_fail(a, "scenario deadline reached");
        return;
    }
    struct built *b = malloc(sizeof(*b));
    if (!b) {
        hx_fail(a, "malloc");
        return;
    }
    int err = build_row(a, r, b);
    if (err) {
        hx_fail(a, "cannot build: %s", sr_err_name(err));
        free(b);
        return;
    }
    err = sr_forge_send(b->via, a->info.gid, b->buf, b->len);
    if (err) {
        hx_fail(a, "send: %s", strerror(-err));
        free(b);
        return;
    }
    struct tgt *t = is_target(r) ? &a->t[r->dst] : NULL;
    if (r->dst == D_UC)
        a->uc_epsn = sr_psn_add(b->psn, 1);
    uint32_t fq = is_target(r) ? fake_qpn((uint32_t)r->dst) : 0;
    if (r->fx & FX_DUP)
        a->x.duplicates++;
    if (r->fx & FX_ERR_RCVD)
        a->x.err_naks_rcvd++;
    if (r->fx & FX_RNR_RCVD)
        a->x.rnr_naks_rcvd++;
    const struct sr_opcode_info *info = sr_opcode_info(r->op);
    struct want w = {.qpn = fq, .op = SR_OP_RC | SR_OP_ACK, .psn = b->psn, .syn = -1};
    switch (r->exp) {
    case X_ACK:
        a->x.delivered++;
        if (!t || !wait_resp(a, &w))
            break;
        t->epsn = sr_psn_add(b->psn, 1);
        if (r->len && (info->flags & SR_OPF_WRITE)) {
            declare(a, HX_AREA_REGION, (uint32_t)r->off, r->len, r->seed);
            fill_pat(a->model + r->off, r->len, r->seed, (uint64_t)r->off);
        } else if (r->len && (info->flags & SR_OPF_SEND)) {
            declare(a, HX_AREA_RBUF, (uint32_t)send_pos(a, r), r->len, r->seed);
            a->done.recv_status[r->dst] = IBV_WC_SUCCESS;
            a->done.recv_len[r->dst] = r->len;
        }
        break;
    case X_NAK:
        a->x.delivered++;
        if (!t)
            break;
        w.syn = r->syn;
        if (r->syn == 0x60) {
            w.psn = t->epsn; /* IBA 9.7.5.1.2: the NAK names the expected PSN */
            a->x.seq_naks_sent++;
        } else {
            a->x.err_naks_sent++;
            t->dead = true;
        }
        wait_resp(a, &w);
        break;
    case X_RNR:
        a->x.delivered++;
        a->x.rnr_naks_sent++;
        w.syn = r->syn;
        if (t)
            wait_resp(a, &w);
        break;
    case X_READ: {
        a->x.delivered++;
        uint32_t npkts = r->dma ? (r->dma + HX_PATH_MTU - 1) / HX_PATH_MTU : 1;
        for (uint32_t k = 0; t && k < npkts; k++) {
            uint32_t chunk = r->dma ? SR_MIN(HX_PATH_MTU, r->dma - k * HX_PATH_MTU) : 0;
            w.op = SR_OP_RC | (npkts == 1       ? SR_OP_READ_RESP_ONLY
                               : k == 0         ? SR_OP_READ_RESP_FIRST
                               : k == npkts - 1 ? SR_OP_READ_RESP_LAST
                                                : SR_OP_READ_RESP_MIDDLE);
            w.psn = sr_psn_add(b->psn, k);
            w.payload = chunk ? a->model + r->off + (int64_t)k * HX_PATH_MTU : a->model;
            w.len = chunk;
            if (!wait_resp(a, &w))
                break;
        }
        if (t && !(r->fx & FX_REPLAY))
            t->epsn = sr_psn_add(b->psn, npkts);
        if (r->fx & FX_SAVE)
            a->saved[r->slot].psn = b->psn;
        break;
    }
    case X_ATOMIC: {
        a->x.delivered++;
        w.op = SR_OP_RC | SR_OP_ATOMIC_ACK;
        w.check_orig = true;
        uint64_t cur = model_u64(a, r->off);
        w.orig = r->fx & FX_REPLAY ? a->saved[r->slot].orig : cur;
        if (!t || !wait_resp(a, &w))
            break;
        if (r->fx & FX_REPLAY)
            break;
        t->epsn = sr_psn_add(b->psn, 1);
        uint64_t next = cur;
        if (SR_OPCODE_OP(r->op) == SR_OP_FETCH_ADD)
            next = cur + r->add;
        else if (r->cmp == CMP_MODEL) /* the compare value was the current one */
            next = r->add;
        memcpy(a->model + r->off, &next, 8);
        declare_atomic(a, (uint32_t)r->off, next);
        if (r->fx & FX_SAVE) {
            a->saved[r->slot].psn = b->psn;
            a->saved[r->slot].orig = cur;
        }
        break;
    }
    case X_DUP_ACK:
        a->x.delivered++;
        if (t) {
            w.psn = sr_psn_add(t->epsn, SR_PSN_MASK);
            wait_resp(a, &w);
        }
        break;
    case X_SILENT:
        a->x.delivered++;
        if (r->dst == D_UC && r->len && (info->flags & SR_OPF_WRITE)) {
            declare(a, HX_AREA_REGION, (uint32_t)r->off, r->len, r->seed);
            fill_pat(a->model + r->off, r->len, r->seed, (uint64_t)r->off);
        }
        if (r->dst == D_UD) {
            declare(a, HX_AREA_UDBUF, a->ud_delivered * HX_UD_SLOT, 40, HX_SEED_ANY); /* GRH */
            declare(a, HX_AREA_UDBUF, (uint32_t)send_pos(a, r), r->len, r->seed);
            a->ud_delivered++;
        }
        break;
    default:
        count_drop(a, r->exp);
        break;
    }
    free(b);
}

static void barrier(struct att *a)
{
    run_row(a, &barrier_row);
}

/* After an error NAK the QP is in Error: a valid request is now dropped. */
static void after_death(struct att *a, int target)
{
    struct row r = barrier_row;
    r.name = "valid_write_after_error_nak";
    r.dst = target;
    r.exp = X_NO_QP;
    run_row(a, &r);
}

static void run_rows(struct att *a, const struct row *rows, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (rows[i].mut & MU_FROM_B)
            barrier(a); /* order across our two sockets is not guaranteed */
        run_row(a, &rows[i]);
    }
    barrier(a);
}

static void run_fatal(struct att *a)
{
    for (size_t i = 0; i < SR_ARRAY_SIZE(fatal_rows); i++) {
        struct row r = fatal_rows[i];
        if (r.dst == 0)
            r.dst = HX_T_FIRST_FATAL + (int)i;
        /* A valid request first: the QP, its PSN and our packets are right,
         * so the NAK below is the defect's doing. */
        struct row pre = {"valid_request_first",
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
            pre.op = RC(READ_REQ);
            pre.off = 0x1800;
            pre.len = 0;
            pre.exp = X_READ;
        }
        run_row(a, &pre);
        run_row(a, &r);
        after_death(a, r.dst);
        a->done.state[r.dst] = IBV_QPS_ERR;
        a->done.event[r.dst] = r.syn == 0x62 ? IBV_EVENT_QP_ACCESS_ERR : IBV_EVENT_QP_REQ_ERR;
        /* its receive: flushed, or failed with a length error */
        a->done.recv_status[r.dst] =
            SR_OPCODE_OP(r.op) == SR_OP_SEND_ONLY ? IBV_WC_LOC_LEN_ERR : IBV_WC_WR_FLUSH_ERR;
    }
    barrier(a);
}

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

static void run_requester(struct att *a)
{
    a->row = "victim_requests";
    uint32_t s = a->info.sq_psn[HX_T_SPARE];
    struct sr_forge_l3 l3 = {
        .src_gid = a->info.gid, .dst_gid = a->a.gid, .sport = SR_ROCE_UDP_PORT, .dport = a->a.port};
    bool read_seen = false, atomic_seen = false;
    uint64_t end = hx_now_ms() + RESP_MS;
    while ((!read_seen || !atomic_seen) && hx_now_ms() < end) {
        int n = sr_forge_recv(&a->a, a->rx, MAX_DGRAM, NULL, NULL, (int)(end - hx_now_ms()));
        struct sr_pkt p;
        if (n < 0 || !sr_forge_icrc_ok(&l3, a->rx, (size_t)n) ||
            sr_wire_decode(a->rx, (size_t)n, 0, &p) < 0 || p.bth.dest_qp != fake_qpn(HX_T_SPARE)) {
            hx_fail(a, "not one of the victim's requests (%d bytes)", n);
            continue;
        }
        if (p.bth.opcode == RC(READ_REQ))
            read_seen = p.bth.psn == s && p.reth.va == HX_REQ_VA && p.reth.rkey == HX_REQ_RKEY &&
                        p.reth.dma_len == HX_REQ_READ_LEN;
        else if (p.bth.opcode == RC(FETCH_ADD))
            atomic_seen = p.bth.psn == sr_psn_add(s, 1) && p.atomic.va == HX_REQ_VA + HX_PAGE &&
                          p.atomic.rkey == HX_REQ_RKEY && p.atomic.swap_add == HX_REQ_ADD;
        else
            hx_fail(a, "unexpected %s from the victim", sr_opcode_name(p.bth.opcode));
    }
    if (!read_seen || !atomic_seen) {
        hx_fail(a, "the victim's READ (%d) and FETCH_ADD (%d) did not arrive as posted", read_seen,
                atomic_seen);
        return;
    }
    for (size_t i = 0; i < SR_ARRAY_SIZE(requester_rows); i++) {
        const struct row *r = &requester_rows[i];
        run_row(a, r);
        if (r->exp != X_SILENT)
            continue;
        if (SR_OPCODE_OP(r->op) == SR_OP_ATOMIC_ACK)
            declare(a, HX_AREA_LBUF, HX_REQ_ATOMIC_OFF, 8, r->seed);
        else
            declare(a, HX_AREA_LBUF, 0, r->len, r->seed);
    }
    a->done.req_status[0] = a->done.req_status[1] = IBV_WC_SUCCESS;
    barrier(a);
}

/* ---- a READ and a WRITE to the same bytes, back to back ----
 * The responder executes requests in order (IBA 9.7.5.1): the READ
 * response carries the bytes from before the WRITE, under an ICRC that
 * matches them. Sent without waiting in between, so that both usually
 * land in one receive batch of the victim. */
static void run_read_write(struct att *a)
{
    enum { PAIRS = 16, LEN = 64, OFF = 0x1900 };
    struct built *rb = malloc(sizeof(*rb)), *wb = malloc(sizeof(*wb));
    if (!rb || !wb) {
        free(rb);
        free(wb);
        return;
    }
    unsigned stale_icrc = 0, new_bytes = 0;
    struct tgt *t = &a->t[HX_T_GOOD];
    struct sr_forge_l3 l3 = {
        .src_gid = a->info.gid, .dst_gid = a->a.gid, .sport = SR_ROCE_UDP_PORT, .dport = a->a.port};
    for (int k = 0; k < PAIRS && hx_now_ms() < a->deadline_ms; k++) {
        int64_t off = OFF + k * LEN;
        struct row rd = {
            "read_then_write_same_bytes", HX_T_GOOD, RC(READ_REQ), 0, VA_REGION, off, KEY_A, LEN};
        struct row wr = {"read_then_write_same_bytes",
                         HX_T_GOOD,
                         RC(WRITE_ONLY),
                         1,
                         VA_REGION,
                         off,
                         KEY_A,
                         LEN,
                         LEN,
                         .seed = 0x90 + (uint32_t)k};
        a->row = rd.name;
        if (build_row(a, &rd, rb) || build_row(a, &wr, wb) ||
            sr_forge_send(&a->a, a->info.gid, rb->buf, rb->len) ||
            sr_forge_send(&a->a, a->info.gid, wb->buf, wb->len)) {
            hx_fail(a, "cannot send");
            break;
        }
        a->x.delivered += 2;
        bool got_read = false, got_ack = false;
        uint64_t end = hx_now_ms() + RESP_MS;
        while ((!got_read || !got_ack) && hx_now_ms() < end) {
            uint8_t src[16];
            int n = sr_forge_recv(&a->a, a->rx, MAX_DGRAM, src, NULL, (int)(end - hx_now_ms()));
            struct sr_pkt p;
            if (n < 0 || sr_wire_decode(a->rx, (size_t)n, 0, &p) < 0) {
                hx_fail(a, "no valid answer (%d)", n);
                continue;
            }
            bool icrc = sr_forge_icrc_ok(&l3, a->rx, (size_t)n);
            if (p.bth.opcode == RC(ACK) && p.bth.psn == wb->psn && icrc) {
                got_ack = true;
            } else if (p.bth.opcode == RC(READ_RESP_ONLY) && p.bth.psn == rb->psn &&
                       p.payload_len == LEN) {
                got_read = true;
                bool old = !memcmp(p.payload, a->model + off, LEN);
                uint8_t later[LEN];
                fill_pat(later, LEN, wr.seed, (uint64_t)off);
                bool newer = !memcmp(p.payload, later, LEN);
                stale_icrc += !icrc;
                new_bytes += newer;
                if (icrc && !old)
                    hx_fail(a, "pair %d: the READ response (valid ICRC) carries %s bytes", k,
                            newer ? "the later WRITE's" : "unknown");
            } else {
                hx_fail(a, "unexpected answer %s psn 0x%x", sr_opcode_name(p.bth.opcode),
                        p.bth.psn);
            }
        }
        if (!got_read || !got_ack)
            hx_fail(a, "pair %d: READ response %d, ACK %d", k, got_read, got_ack);
        t->epsn = sr_psn_add(wb->psn, 1);
        fill_pat(a->model + off, LEN, wr.seed, (uint64_t)off);
        declare(a, HX_AREA_REGION, (uint32_t)off, LEN, wr.seed);
    }
    if (stale_icrc)
        printf("[attacker] KNOWN_BUG_TX_BATCH_ICRC_RACE: check skipped: %u of %d READ "
               "responses left with an ICRC that does not match their payload (%u of them "
               "carrying the bytes of the WRITE that followed the READ): the UDP driver "
               "computes the ICRC when it queues a packet (sr_udp_queue) but the kernel "
               "gathers the payload from registered memory at sr_udp_flush, after the rest "
               "of the receive batch ran; a real requester drops the response and, on retry, "
               "reads the later WRITE's bytes\n",
               stale_icrc, PAIRS, new_bytes);
    else
        printf("hx attacker: ok %-28s %d READ responses carry the bytes from before the WRITE "
               "that followed them\n",
               "read_then_write_same_bytes", PAIRS);
    free(rb);
    free(wb);
    barrier(a);
}

/* ---- bulk classes: random bytes, lengths, ICRC-valid noise ---- */
static void send_raw(struct att *a, const uint8_t *buf, size_t len, int exp)
{
    int err = sr_forge_send(&a->a, a->info.gid, buf, len);
    if (err)
        hx_fail(a, "send %zu bytes: %s", len, strerror(-err));
    else
        count_drop(a, exp);
}

static void random_fill(struct att *a, uint8_t *p, size_t len)
{
    for (size_t i = 0; i < len; i++)
        p[i] = (uint8_t)sr_forge_rand(&a->rng);
}

static void run_bulk(struct att *a)
{
    uint8_t *buf = a->raw;
    struct sr_forge_l3 l3 = sr_forge_l3_to(&a->a, a->info.gid);
    a->row = "random_shorter_than_bth_icrc";
    for (size_t len = 0; len < SR_BTH_LEN + SR_ICRC_LEN; len++) {
        random_fill(a, buf, len);
        send_raw(a, buf, len, X_SHORT);
    }
    barrier(a);
    a->row = "random_bytes";
    for (int i = 0; i < 256; i++) {
        size_t len = 16 + sr_forge_rand(&a->rng) % 1400;
        random_fill(a, buf, len);
        if (sr_forge_icrc_ok(&l3, buf, len)) /* 2^-32: keep the class pure */
            buf[len - 1] ^= 1;
        send_raw(a, buf, len, X_ICRC);
        if (i % BULK_BARRIER == BULK_BARRIER - 1)
            barrier(a);
    }
    barrier(a);
    /* The receive buffer holds a 4096-byte payload and headers: 4224 bytes
     * (src/drivers/udp/udp.c); one more is truncated by the kernel. */
    a->row = "random_longer_than_receive_buffer";
    static const size_t lens[] = {4224, 4225, 4500, 8192, 9000, 16384, MAX_DGRAM};
    for (size_t i = 0; i < SR_ARRAY_SIZE(lens); i++) {
        random_fill(a, buf, lens[i]);
        if (sr_forge_icrc_ok(&l3, buf, lens[i]))
            buf[lens[i] - 1] ^= 1;
        send_raw(a, buf, lens[i], lens[i] > 4224 ? X_LONG : X_ICRC);
        barrier(a);
    }
    /* Random bodies with a valid ICRC: the QPN is looked up first. */
    a->row = "random_body_valid_icrc_unknown_qpn";
    for (int i = 0; i < 128; i++) {
        size_t len = 16 + sr_forge_rand(&a->rng) % 1000;
        random_fill(a, buf, len);
        sr_put_be24(buf + 5, 0x700000u + (uint32_t)i);
        sr_forge_icrc_fill(&l3, buf, len);
        send_raw(a, buf, len, X_NO_QP);
        if (i % BULK_BARRIER == BULK_BARRIER - 1)
            barrier(a);
    }
    barrier(a);
}

/* ---- fuzz: valid packets with a few bytes changed, ICRC fixed ---- */
static void run_fuzz(struct att *a)
{
    static const uint8_t ops[] = {
        RC(WRITE_ONLY),
        RC(WRITE_FIRST),
        RC(WRITE_MIDDLE),
        RC(WRITE_LAST),
        RC(READ_REQ),
        RC(FETCH_ADD),
        RC(CMP_SWAP),
        RC(SEND_ONLY),
        RC(SEND_FIRST),
        RC(ACK),
        RC(READ_RESP_ONLY),
        RC(ATOMIC_ACK),
        SR_OP_UD | SR_OP_SEND_ONLY,
    };
    static const int dsts[] = {HX_T_SPARE,           HX_T_GOOD, HX_T_SEQ, HX_T_FIRST_FATAL,
                               HX_T_FIRST_FATAL + 1, D_UD,      D_UC,     D_LEGIT};
    struct built *b = malloc(sizeof(*b));
    if (!b)
        return;
    struct sr_forge_l3 l3 = sr_forge_l3_to(&a->a, a->info.gid);
    a->row = "fuzz";
    for (int i = 0; i < FUZZ_PKTS && hx_now_ms() < a->deadline_ms; i++) {
        uint64_t r = sr_forge_rand(&a->rng);
        struct row row = {"fuzz",
                          dsts[r % SR_ARRAY_SIZE(dsts)],
                          ops[(r >> 8) % SR_ARRAY_SIZE(ops)],
                          (int32_t)((r >> 16) % 5) - 2,
                          VA_REGION,
                          (int64_t)((r >> 24) % (HX_A_LEN / 8)) * 8 - 64,
                          KEY_A,
                          (uint32_t)(r >> 40) % 96,
                          0,
                          .syn = (uint8_t)(r >> 48),
                          .seed = (uint32_t)(r >> 56),
                          .add = r};
        if (row.dst == D_UD)
            row.op = SR_OP_UD | SR_OP_SEND_ONLY;
        if (row.dst == D_UC) /* UC has SENDs and WRITEs only */
            row.op = sr_opcode_info(SR_OP_UC | SR_OPCODE_OP(row.op))
                         ? (uint8_t)(SR_OP_UC | SR_OPCODE_OP(row.op))
                         : UC(WRITE_ONLY);
        const struct sr_opcode_info *info = sr_opcode_info(row.op);
        if (info->flags & SR_OPF_PAYLOAD)
            row.len = info->flags & (SR_OPF_FIRST | SR_OPF_MIDDLE) ? HX_PATH_MTU : row.dma % 72;
        if (SR_OPCODE_OP(row.op) == SR_OP_WRITE_ONLY)
            row.dma = row.len;
        if (build_row(a, &row, b))
            continue;
        if (i % 8 == 0)
            goto send; /* some valid packets keep the QPs' state moving */
        /* 1-3 bytes changed anywhere but the destination QPN (whose
         * barrier QP must survive) and the ICRC */
        int flips = 1 + (int)(sr_forge_rand(&a->rng) % 3);
        for (int k = 0; k < flips && b->len > 12 + SR_ICRC_LEN; k++) {
            uint64_t q = sr_forge_rand(&a->rng);
            size_t at = (size_t)(q % SR_MIN(b->len - SR_ICRC_LEN, 72));
            if (at >= 5 && at <= 7)
                continue;
            b->buf[at] ^= (uint8_t)(1 + (q >> 32) % 255);
        }
        sr_forge_icrc_fill(&l3, b->buf, b->len);
    send:;
        int err = sr_forge_send(&a->a, a->info.gid, b->buf, b->len);
        if (err)
            hx_fail(a, "send: %s", strerror(-err));
        else
            a->x.delivered++;
        if (i % 32 == 31)
            barrier(a);
    }
    free(b);
    barrier(a);
    /* granted: all of MR A and every receive buffer's own bytes */
    declare(a, HX_AREA_REGION, HX_A_OFF, HX_A_LEN, HX_SEED_ANY);
    for (int t = 0; t < HX_TARGETS; t++)
        declare(a, HX_AREA_RBUF, (uint32_t)t * HX_RECV_SLOT, HX_RECV_LEN, HX_SEED_ANY);
    for (int k = 0; k < HX_UD_RECVS; k++)
        declare(a, HX_AREA_UDBUF, (uint32_t)k * HX_UD_SLOT, HX_UD_RECV_LEN, HX_SEED_ANY);
}

/* ---- entry points ---- */
void hx_attack_init(struct att *a)
{
    for (uint32_t i = 0; i < HX_REGION_LEN; i++)
        a->model[i] = hx_pat(HX_SEED_REGION, i);
    for (int i = 0; i < HX_TARGETS; i++) {
        a->t[i].epsn = a->info.rq_psn[i];
        a->done.state[i] = a->mode == HX_MODE_CLASSES ? IBV_QPS_RTS : -1;
        a->done.recv_status[i] = a->mode == HX_MODE_CLASSES ? -1 : -2;
        a->done.event[i] = a->mode == HX_MODE_CLASSES ? -1 : -2;
    }
    a->uc_epsn = a->info.uc_rq_psn;
    a->done.req_status[0] = a->done.req_status[1] = -1;
    a->done.ud_src_qpn = a->mode == HX_MODE_CLASSES ? UD_FAKE_QPN : 0xffffffffu;
    a->done.uc_state = a->mode == HX_MODE_CLASSES ? IBV_QPS_RTS : -1;
}

void hx_attack_run(struct att *a)
{
    if (a->mode == HX_MODE_CLASSES) {
        run_requester(a); /* first: its requests wait in our socket */
        run_rows(a, good_rows, SR_ARRAY_SIZE(good_rows));
        run_rows(a, seq_rows, SR_ARRAY_SIZE(seq_rows));
        run_rows(a, malformed_rows, SR_ARRAY_SIZE(malformed_rows));
        run_rows(a, noqp_rows, SR_ARRAY_SIZE(noqp_rows));
        run_rows(a, ud_rows, SR_ARRAY_SIZE(ud_rows));
        run_rows(a, uc_rows, SR_ARRAY_SIZE(uc_rows));
        run_rows(a, legit_rows, SR_ARRAY_SIZE(legit_rows));
        run_read_write(a);
        run_fatal(a);
        run_bulk(a);
        a->done.ud_recvs = (int32_t)a->ud_delivered;
    } else {
        run_fuzz(a);
        a->done.ud_recvs = -1;
    }
    barrier(a);
}
