/* hostile.h: what the two programs of hostile.forged_packets agree on: the
 * victim (victim.c, public verbs API only) and the attacker (attacker.c,
 * raw RoCEv2 through tools/hostile/sr_forge). The layout of the victim's
 * memory and QPs, the out-of-band messages (fixed-size structs over a
 * stream socketpair between the attacker and the victim it spawns), and
 * the byte patterns both sides compute. Plain C: no verbs or wire types.
 *
 * Victim memory ("region", mmap'ed with a PROT_NONE guard page on each
 * side, so a stray access kills the victim):
 *     page 0-1  MR A: remote write + read + atomic
 *     page 2    MR B: remote read only
 *     page 3    not registered at all (canaries all the same)
 * Every byte starts as a canary; only writes the attacker was granted (and
 * says it made) may change it. */
#ifndef HOSTILE_H
#define HOSTILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
    HX_MAGIC = 0x48585354, /* "HXST" */
    HX_PAGE = 4096,
    HX_REGION_LEN = 4 * HX_PAGE,
    HX_A_OFF = 0,
    HX_A_LEN = 2 * HX_PAGE,
    HX_B_OFF = 2 * HX_PAGE,
    HX_B_LEN = HX_PAGE,
    HX_P3_OFF = 3 * HX_PAGE,

    HX_TARGETS = 24,           /* RC QPs connected to the attacker */
    HX_PATH_MTU = 1024,        /* their path MTU: an oversized payload still fits a UDP buffer */
    HX_RD_ATOMIC = 16,         /* max_dest_rd_atomic */
    HX_RNR_TIMER = 14,         /* min_rnr_timer: RNR NAK syndrome 0x20 | 14 */
    HX_RECV_SLOT = 128,        /* rbuf: target i's receive is at i * HX_RECV_SLOT ... */
    HX_RECV_LEN = 64,          /* ... and HX_RECV_LEN bytes long; the rest stays canary */
    HX_UD_RECVS = 2,           /* receives posted on the UD QP */
    HX_UD_SLOT = 512,          /* udbuf: receive k at k * HX_UD_SLOT ... */
    HX_UD_RECV_LEN = 40 + 256, /* ... GRH + 256 bytes */
    HX_UD_QKEY = 0x11223344,
    HX_MAX_DECL = 160,
    HX_MAX_ATOMIC = 8,

    /* Classes mode: the victim itself posts an RDMA READ and a FETCH_ADD on
     * HX_T_SPARE, whose peer (the attacker) then answers them, first with
     * responses that must be refused, into lbuf (a guarded page of canaries). */
    HX_REQ_VA = 0x10000,
    HX_REQ_RKEY = 0x1234,
    HX_REQ_READ_LEN = 256,   /* lbuf[0, 256) */
    HX_REQ_ATOMIC_OFF = 512, /* lbuf[512, 520) */
    HX_REQ_ADD = 1,
    HX_REQ_TIMEOUT = 18, /* 1 s: no retransmission while the attacker answers */

    /* the legitimate pair (victim <-> peer) */
    HX_LEGIT_SLOTS = 4,
    HX_LEGIT_SLOT = 16 << 10, /* RDMA WRITE + READ back per iteration */
    HX_LEGIT_MSG = 1024,      /* SEND and its echo */
    HX_LEGIT_RECVS = 8,
};

/* Roles of the target QPs; the others (HX_T_FIRST_FATAL..) are spent one
 * per NAK class, since an error NAK moves the responder QP to Error. */
enum hx_target {
    HX_T_SEQ = 0,     /* sequence NAKs, duplicates, RNR, forged responses; no receive posted */
    HX_T_GOOD = 1,    /* positive controls; stays RTS */
    HX_T_NOWRITE = 2, /* QP access: remote read only */
    HX_T_PING = 3,    /* zero-length WRITE barriers; malformed packets */
    HX_T_SPARE = 4,   /* fuzz target */
    HX_T_FIRST_FATAL = 5,
};

enum hx_mode {
    HX_MODE_CLASSES = 1, /* one packet class after another, exact counts */
    HX_MODE_FUZZ = 2,    /* mutated valid packets with valid ICRCs */
};

/* attacker -> victim, first */
struct hx_hello {
    uint32_t magic, mode;
    uint8_t gid_a[16];      /* the attacker's address: every target QP's peer */
    uint32_t fake_qpn_base; /* target i's dest QPN is fake_qpn_base + i (UC: + HX_TARGETS) */
};

/* victim -> attacker, once its QPs are up and the legitimate pair runs */
struct hx_info {
    uint32_t magic;
    uint8_t gid[16];
    uint64_t region; /* VA (= iova) of page 0 */
    uint32_t rkey_a, rkey_b;
    uint32_t qpn[HX_TARGETS], rq_psn[HX_TARGETS], sq_psn[HX_TARGETS];
    uint32_t ud_qpn;
    uint32_t uc_qpn, uc_rq_psn; /* a UC QP, also connected to the attacker */
    uint32_t legit_qpn, legit_rkey;
    uint64_t legit_va;
    uint32_t dead_qpn; /* created and destroyed */
    uint32_t init_qpn; /* left in INIT */
};

/* A range the attacker wrote with permission: victim memory there must
 * hold hx_pat(seed, off .. off+len-1) (positions are offsets in the area,
 * as for the canaries, so a stray write differs from them in every byte),
 * or anything when seed is HX_SEED_ANY. */
enum hx_area { HX_AREA_REGION, HX_AREA_RBUF, HX_AREA_UDBUF, HX_AREA_LBUF };
#define HX_SEED_ANY 0xffffffffu
struct hx_decl {
    uint32_t area, off, len, seed;
};
struct hx_atomic {
    uint32_t off, pad;
    uint64_t value; /* the 8 bytes at region offset off, host order */
};

/* attacker -> victim, after the attack */
struct hx_done {
    uint32_t magic;
    uint32_t n_decl, n_atomic;
    struct hx_decl decl[HX_MAX_DECL];
    struct hx_atomic atomic[HX_MAX_ATOMIC];
    int32_t state[HX_TARGETS];       /* expected ibv_qp_state, -1: any */
    int32_t recv_status[HX_TARGETS]; /* expected ibv_wc_status of its receive, -1: none, -2: any */
    uint32_t recv_len[HX_TARGETS];   /* byte_len of a successful one */
    int32_t event[HX_TARGETS];       /* expected async event (IBA 11.6.3.1), -1: none, -2: any */
    int32_t ud_recvs;                /* successful UD receives expected, -1: any */
    int32_t uc_state;                /* expected ibv_qp_state of the UC QP, -1: any */
    int32_t req_status[2];           /* the victim's own READ and atomic: wc status, -1: any */
    uint32_t ud_src_qpn;
};

/* victim -> attacker, last */
struct hx_report {
    uint32_t magic;
    uint32_t failures, known_bugs;
    uint32_t legit_iters, legit_during, legit_errors; /* during: while the attack ran */
};

/* victim <-> peer: one side's end of the legitimate RC pair */
struct hx_legit {
    uint32_t qpn, psn, rkey, pad;
    uint64_t va;
    uint8_t gid[16];
};
struct hx_peer_report {
    uint32_t iters, errors;
};

/* Byte pos of stream seed. The seed is added last, so streams whose seeds
 * differ modulo 256 differ in every byte: one byte tells them apart. */
static inline uint8_t hx_pat(uint32_t seed, uint64_t pos)
{
    uint64_t x = (pos + 1) * 0x9e3779b97f4a7c15ull;
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    return (uint8_t)((x >> 32) + seed);
}

/* Canary seeds; the attacker's write seeds avoid them modulo 256. */
enum {
    HX_SEED_REGION = 0xc3,
    HX_SEED_RBUF = 0xa5,
    HX_SEED_UDBUF = 0x96,
    HX_SEED_LBUF = 0x69,
};

/* hx_io.c */
uint64_t hx_now_ms(void); /* CLOCK_MONOTONIC */
/* Read exactly len bytes from fd before hx_now_ms() reaches end_ms; false on
 * timeout, EOF or error. */
bool hx_read_full(int fd, void *p, size_t len, uint64_t end_ms);

#endif
