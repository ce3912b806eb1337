/* opcode.c: the one opcode table (IBTA Vol 1 Table 38, 9.2 header order,
 * RoCEv2 CNP from Annex A17.9). For every opcode softrdma speaks: the
 * extension headers it carries, their offsets from the BTH, the total header
 * length, and class flags the engine dispatches on.
 *
 * Header order within a packet (IBA 9.2): BTH, XRCETH, DETH, RETH,
 * AtomicETH, AETH, AtomicAckETH, ImmDt, IETH. XRC requests carry the
 * XRCETH (IBA Annex A14, XRC); XRC responses do not. Offsets are computed
 * from that order at compile time, so an entry names only its headers. */
#include "sr_wire.h"

#define HB(h)           SR_HDR_BIT(SR_HDR_##h)
#define HAS(hdrs, h, n) (((hdrs)&HB(h)) ? (n) : 0)

#define OFF_XRCETH(x)     SR_BTH_LEN
#define OFF_DETH(x)       (SR_BTH_LEN + HAS(x, XRCETH, SR_XRCETH_LEN))
#define OFF_RETH(x)       (OFF_DETH(x) + HAS(x, DETH, SR_DETH_LEN))
#define OFF_ATOMIC(x)     (OFF_RETH(x) + HAS(x, RETH, SR_RETH_LEN))
#define OFF_AETH(x)       (OFF_ATOMIC(x) + HAS(x, ATOMIC_ETH, SR_ATOMIC_ETH_LEN))
#define OFF_ATOMIC_ACK(x) (OFF_AETH(x) + HAS(x, AETH, SR_AETH_LEN))
#define OFF_IMMDT(x)      (OFF_ATOMIC_ACK(x) + HAS(x, ATOMIC_ACK_ETH, SR_ATOMIC_ACK_ETH_LEN))
#define OFF_IETH(x)       (OFF_IMMDT(x) + HAS(x, IMMDT, SR_IMMDT_LEN))
#define OFF_CNP(x)        SR_BTH_LEN
#define OFF_SACKETH(x)    (OFF_IETH(x) + HAS(x, IETH, SR_IETH_LEN))
#define HDR_LEN(x)                                                                                 \
    (OFF_SACKETH(x) + HAS(x, SACKETH, SR_SACKETH_LEN) + HAS(x, CNP_PAD, SR_CNP_PAD_LEN))

#define OP(nm, x, fl)                                                                              \
    {                                                                                              \
        .name = nm, .hdrs = (x), .flags = (fl), .hdr_len = HDR_LEN(x),                             \
        .off = {                                                                                   \
            [SR_HDR_RETH] = OFF_RETH(x),         [SR_HDR_AETH] = OFF_AETH(x),                      \
            [SR_HDR_ATOMIC_ETH] = OFF_ATOMIC(x), [SR_HDR_ATOMIC_ACK_ETH] = OFF_ATOMIC_ACK(x),      \
            [SR_HDR_IMMDT] = OFF_IMMDT(x),       [SR_HDR_IETH] = OFF_IETH(x),                      \
            [SR_HDR_DETH] = OFF_DETH(x),         [SR_HDR_CNP_PAD] = OFF_CNP(x),                    \
            [SR_HDR_XRCETH] = OFF_XRCETH(x),     [SR_HDR_SACKETH] = OFF_SACKETH(x),                \
        },                                                                                         \
    }

#define F(f)      SR_OPF_##f
#define REQ_SEND  (F(PAYLOAD) | F(SEND) | F(REQUEST))
#define REQ_WRITE (F(PAYLOAD) | F(WRITE) | F(REQUEST))
#define RESP_READ (F(PAYLOAD) | F(RESPONSE) | F(READ_RESP))

/* SEND and RDMA WRITE opcodes shared by RC and UC: expand once per transport. */
#define SEND_WRITE_OPS(T, base) SEND_WRITE_OPS_X(T, base, 0)
#define SEND_WRITE_OPS_X(T, base, X)                                                               \
    [(base) |                                                                                      \
        SR_OP_SEND_FIRST] = OP(T "_SEND_FIRST", (X), REQ_SEND | F(FIRST)),                         \
        [(base) | SR_OP_SEND_MIDDLE] = OP(T "_SEND_MIDDLE", (X), REQ_SEND | F(MIDDLE)),            \
        [(base) | SR_OP_SEND_LAST] = OP(T "_SEND_LAST", (X), REQ_SEND | F(LAST) | F(SOLICIT)),     \
        [(base) | SR_OP_SEND_LAST_IMM] = OP(T "_SEND_LAST_WITH_IMMEDIATE", (X) | HB(IMMDT),        \
                                            REQ_SEND | F(LAST) | F(SOLICIT) | F(IMM)),             \
        [(base) | SR_OP_SEND_ONLY] = OP(T "_SEND_ONLY", (X), REQ_SEND | F(ONLY) | F(SOLICIT)),     \
        [(base) | SR_OP_SEND_ONLY_IMM] = OP(T "_SEND_ONLY_WITH_IMMEDIATE", (X) | HB(IMMDT),        \
                                            REQ_SEND | F(ONLY) | F(SOLICIT) | F(IMM)),             \
        [(base) | SR_OP_WRITE_FIRST] =                                                             \
            OP(T "_RDMA_WRITE_FIRST", (X) | HB(RETH), REQ_WRITE | F(FIRST)),                       \
        [(base) | SR_OP_WRITE_MIDDLE] = OP(T "_RDMA_WRITE_MIDDLE", (X), REQ_WRITE | F(MIDDLE)),    \
        [(base) | SR_OP_WRITE_LAST] = OP(T "_RDMA_WRITE_LAST", (X), REQ_WRITE | F(LAST)),          \
        [(base) | SR_OP_WRITE_LAST_IMM] = OP(T "_RDMA_WRITE_LAST_WITH_IMMEDIATE", (X) | HB(IMMDT), \
                                             REQ_WRITE | F(LAST) | F(SOLICIT) | F(IMM)),           \
        [(base) | SR_OP_WRITE_ONLY] =                                                              \
            OP(T "_RDMA_WRITE_ONLY", (X) | HB(RETH), REQ_WRITE | F(ONLY)),                         \
        [(base) | SR_OP_WRITE_ONLY_IMM] =                                                          \
            OP(T "_RDMA_WRITE_ONLY_WITH_IMMEDIATE", (X) | HB(RETH) | HB(IMMDT),                    \
               REQ_WRITE | F(ONLY) | F(SOLICIT) | F(IMM))

static const struct sr_opcode_info opcode_table[256] = {
    SEND_WRITE_OPS("RC", SR_OP_RC),
    [SR_OP_RC | SR_OP_READ_REQ] =
        OP("RC_RDMA_READ_REQUEST", HB(RETH), F(READ_REQ) | F(REQUEST) | F(ONLY)),
    [SR_OP_RC | SR_OP_READ_RESP_FIRST] =
        OP("RC_RDMA_READ_RESPONSE_FIRST", HB(AETH), RESP_READ | F(FIRST)),
    [SR_OP_RC | SR_OP_READ_RESP_MIDDLE] =
        OP("RC_RDMA_READ_RESPONSE_MIDDLE", 0, RESP_READ | F(MIDDLE)),
    [SR_OP_RC | SR_OP_READ_RESP_LAST] =
        OP("RC_RDMA_READ_RESPONSE_LAST", HB(AETH), RESP_READ | F(LAST)),
    [SR_OP_RC | SR_OP_READ_RESP_ONLY] =
        OP("RC_RDMA_READ_RESPONSE_ONLY", HB(AETH), RESP_READ | F(ONLY)),
    [SR_OP_RC | SR_OP_ACK] = OP("RC_ACKNOWLEDGE", HB(AETH), F(RESPONSE) | F(ONLY)),
    [SR_OP_RC | SR_OP_ATOMIC_ACK] =
        OP("RC_ATOMIC_ACKNOWLEDGE", HB(AETH) | HB(ATOMIC_ACK_ETH), F(RESPONSE) | F(ONLY)),
    [SR_OP_RC | SR_OP_CMP_SWAP] =
        OP("RC_CMP_SWAP", HB(ATOMIC_ETH), F(ATOMIC) | F(REQUEST) | F(ONLY)),
    [SR_OP_RC | SR_OP_FETCH_ADD] =
        OP("RC_FETCH_ADD", HB(ATOMIC_ETH), F(ATOMIC) | F(REQUEST) | F(ONLY)),
    [SR_OP_RC | SR_OP_SEND_LAST_INV] =
        OP("RC_SEND_LAST_WITH_INVALIDATE", HB(IETH), REQ_SEND | F(LAST) | F(SOLICIT) | F(INV)),
    [SR_OP_RC | SR_OP_SEND_ONLY_INV] =
        OP("RC_SEND_ONLY_WITH_INVALIDATE", HB(IETH), REQ_SEND | F(ONLY) | F(SOLICIT) | F(INV)),
    /* ATOMIC WRITE (IBA Vol 1 release 1.5): a RETH and an 8-byte payload,
     * acknowledged like an RDMA WRITE. Defined for RC only. */
    [SR_OP_RC | SR_OP_ATOMIC_WRITE] =
        OP("RC_ATOMIC_WRITE", HB(RETH), F(PAYLOAD) | F(ATOMIC_WRITE) | F(REQUEST) | F(ONLY)),

    SEND_WRITE_OPS("UC", SR_OP_UC),

    [SR_OP_UD | SR_OP_SEND_ONLY] = OP("UD_SEND_ONLY", HB(DETH), REQ_SEND | F(ONLY) | F(SOLICIT)),
    [SR_OP_UD | SR_OP_SEND_ONLY_IMM] = OP("UD_SEND_ONLY_WITH_IMMEDIATE", HB(DETH) | HB(IMMDT),
                                          REQ_SEND | F(ONLY) | F(SOLICIT) | F(IMM)),

    /* XRC (extended reliable connected): RC's opcodes, XRCETH on requests */
    SEND_WRITE_OPS_X("XRC", SR_OP_XRC, HB(XRCETH)),
    [SR_OP_XRC | SR_OP_READ_REQ] =
        OP("XRC_RDMA_READ_REQUEST", HB(XRCETH) | HB(RETH), F(READ_REQ) | F(REQUEST) | F(ONLY)),
    [SR_OP_XRC | SR_OP_READ_RESP_FIRST] =
        OP("XRC_RDMA_READ_RESPONSE_FIRST", HB(AETH), RESP_READ | F(FIRST)),
    [SR_OP_XRC | SR_OP_READ_RESP_MIDDLE] =
        OP("XRC_RDMA_READ_RESPONSE_MIDDLE", 0, RESP_READ | F(MIDDLE)),
    [SR_OP_XRC | SR_OP_READ_RESP_LAST] =
        OP("XRC_RDMA_READ_RESPONSE_LAST", HB(AETH), RESP_READ | F(LAST)),
    [SR_OP_XRC | SR_OP_READ_RESP_ONLY] =
        OP("XRC_RDMA_READ_RESPONSE_ONLY", HB(AETH), RESP_READ | F(ONLY)),
    [SR_OP_XRC | SR_OP_ACK] = OP("XRC_ACKNOWLEDGE", HB(AETH), F(RESPONSE) | F(ONLY)),
    [SR_OP_XRC | SR_OP_ATOMIC_ACK] =
        OP("XRC_ATOMIC_ACKNOWLEDGE", HB(AETH) | HB(ATOMIC_ACK_ETH), F(RESPONSE) | F(ONLY)),
    [SR_OP_XRC | SR_OP_CMP_SWAP] =
        OP("XRC_CMP_SWAP", HB(XRCETH) | HB(ATOMIC_ETH), F(ATOMIC) | F(REQUEST) | F(ONLY)),
    [SR_OP_XRC | SR_OP_FETCH_ADD] =
        OP("XRC_FETCH_ADD", HB(XRCETH) | HB(ATOMIC_ETH), F(ATOMIC) | F(REQUEST) | F(ONLY)),
    [SR_OP_XRC | SR_OP_SEND_LAST_INV] = OP("XRC_SEND_LAST_WITH_INVALIDATE", HB(XRCETH) | HB(IETH),
                                           REQ_SEND | F(LAST) | F(SOLICIT) | F(INV)),
    [SR_OP_XRC | SR_OP_SEND_ONLY_INV] = OP("XRC_SEND_ONLY_WITH_INVALIDATE", HB(XRCETH) | HB(IETH),
                                           REQ_SEND | F(ONLY) | F(SOLICIT) | F(INV)),

    [SR_OP_CNP] = OP("CNP", HB(CNP_PAD), F(CNP)),
    /* softrdma's selective ACK (docs/WIRE.md): BTH (PSN: the cumulative
     * acknowledgement), AETH (an ACK syndrome and the MSN), SACKETH, and
     * a bitmap of 64..1024 PSNs as the payload. */
    [SR_OP_SACK] =
        OP("SR_SACK", HB(AETH) | HB(SACKETH), F(PAYLOAD) | F(RESPONSE) | F(ONLY) | F(SACK)),
};

const struct sr_opcode_info *sr_opcode_info(uint8_t opcode)
{
    const struct sr_opcode_info *info = &opcode_table[opcode];
    return info->name ? info : NULL;
}

const char *sr_opcode_name(uint8_t opcode)
{
    const struct sr_opcode_info *info = sr_opcode_info(opcode);
    return info ? info->name : "UNKNOWN";
}
