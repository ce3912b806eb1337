/* attack.h: the attack of hostile.forged_packets, as the attacker's
 * driver (attacker.c) runs it: what a row of the packet-class table is,
 * what it expects of the victim, and the attacker's state (its two
 * sockets, its model of the victim's memory and PSNs, the counts it
 * expects the victim to report). attack.c owns the tables and sends. */
#ifndef ATTACK_H
#define ATTACK_H

#include "hostile.h"
#include "sr_forge.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

enum {
    SCENARIO_MS = 90000, /* a whole scenario, victim start to exit */
    RESP_MS = 5000,      /* one awaited answer */
    BULK_BARRIER = 16,   /* datagrams between barriers: the victim's queue never overflows */
    FAKE_QPN_BASE = 0x5000,
    UD_FAKE_QPN = 0xabcde,
    UD_IMM = 0xdeadbeef,
    FUZZ_PKTS = 20000,
    MAX_DGRAM = 65000,
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
    X_UNCOUNTED, /* dropped per IBA, and (today) no counter moves */
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

/* ---- state ---- */
struct tgt {
    uint32_t epsn;
    bool dead;
};

struct saved {
    uint32_t psn;
    uint64_t orig;
};

struct expect {
    uint64_t drop[X_NUM];
    uint64_t delivered; /* datagrams that pass the UDP checks and reach the engine */
    uint64_t seq_naks_sent, err_naks_sent, rnr_naks_sent, duplicates, err_naks_rcvd, rnr_naks_rcvd;
};

struct att {
    int mode;
    struct sr_forge a, b;
    struct hx_info info;
    struct tgt t[HX_TARGETS];
    uint8_t model[HX_REGION_LEN];
    struct hx_done done;
    struct saved saved[4];
    uint32_t uc_epsn;    /* the UC QP's next PSN: each packet moves it (IBA 9.8.?) */
    unsigned stale_icrc; /* READ responses whose ICRC does not match their payload */
    struct expect x;
    uint32_t ud_delivered;
    uint64_t rng;
    uint64_t deadline_ms;
    pid_t victim;
    bool reaped; /* the victim exited (its status below) */
    int status;
    unsigned failures;
    const char *row;                                           /* for messages */
    uint8_t rx[MAX_DGRAM], payload[MAX_DGRAM], raw[MAX_DGRAM]; /* scratch */
};

__attribute__((format(printf, 2, 3))) void hx_fail(struct att *a, const char *fmt, ...);
/* false once the victim has exited (its status is then in a->status) */
bool hx_victim_alive(struct att *a);

/* The model, PSNs and expectations from a->info, for a->mode. */
void hx_attack_init(struct att *a);
/* One scenario's packets (a->mode): classes or fuzz, then a barrier. */
void hx_attack_run(struct att *a);

#endif
