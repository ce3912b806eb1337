/* attack.h: the attack of hostile.forged_packets, as the attacker's
 * driver (attacker.c) runs it: what a row of the packet-class table is,
 * what it expects of the victim, and the attacker's state (its two
 * sockets, its model of the victim's memory and PSNs, the counts it
 * expects the victim to report). The rows themselves are in attack_rows.h;
 * attack.c turns them into packets, sends them and checks the answers. */
#ifndef ATTACK_H
#define ATTACK_H

#include "attack_rows.h"
#include "hostile.h"
#include "sr_forge.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

enum {
    SCENARIO_MS = 90000, /* a whole scenario, victim start to exit */
    RESP_MS = 5000,      /* one awaited answer */
    BULK_BARRIER = 16,   /* datagrams between barriers: the victim's queue never overflows */
    FUZZ_PKTS = 20000,
    MAX_DGRAM = 65000,
};

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
