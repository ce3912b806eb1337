/* sr_cc.h: congestion control as a vtable with explicit time, sans-IO.
 *
 * One struct sr_cc per QP (reaction point / sender side). The engine tells it
 * what happened (packet sent, ACK with an RTT sample and an ECN echo, CNP,
 * timer) and asks two questions: may a packet of this many bytes leave now,
 * and if not when (pacing); and how many bytes may be unacknowledged (window).
 * Time is always an argument; nothing here reads a clock, allocates or keeps a
 * global. The receiver side of DCQCN (the notification point, which turns
 * ECN-CE arrivals into CNPs) is struct sr_cc_np below, one per QP.
 *
 * Algorithms: none (no pacing, the engine's fixed window), dcqcn (DCQCN
 * reaction point, Zhu et al., SIGCOMM 2015) and nscc (a delay- and ECN-driven
 * window in the manner of the Ultra Ethernet Transport's NSCC). Parameters and
 * their sources: docs/CONGESTION.md.
 */
#ifndef SR_CC_H
#define SR_CC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sr_err.h"

#define SR_CC_NO_DEADLINE UINT64_MAX

enum sr_cc_algo {
    SR_CC_NONE,
    SR_CC_DCQCN,
    SR_CC_NSCC,
};

/* DCQCN reaction point. A rate of 0 means "derived from the line rate" (see
 * sr_cc_dcqcn_effective); every other field is used as given. */
struct sr_cc_dcqcn_params {
    double g;                      /* alpha gain: paper 1/256 */
    double alpha_init;             /* alpha before the first CNP: 1 (paper, ns-3 model) */
    uint64_t alpha_timer_ns;       /* K, alpha decay period: paper 55 us */
    uint64_t rate_timer_ns;        /* T, rate-increase timer: paper 55 us */
    uint64_t byte_counter;         /* B, bytes per increase event: paper 10 MB */
    uint32_t fast_recovery_steps;  /* F: paper 5 */
    uint64_t decrease_interval_ns; /* at most one cut per interval: 50 us (= NP's CNP spacing) */
    uint64_t rai_bps;              /* additive step R_AI: 0 = line / 1000 (40 Mb/s at 40G, paper) */
    uint64_t rhai_bps;             /* hyper step R_HAI: 0 = 10 x R_AI (ns-3 model's 5/50 Mb/s) */
    uint64_t min_rate_bps;         /* floor: 0 = line / 1000 */
    /* The window (IRN's BDP cap, Mittal et al., SIGCOMM 2018, sec. 3.2;
     * scaled by the current rate as HPCC's W = B x T, Li et al., SIGCOMM
     * 2019, sec. 3.2): bdp_mult x Rc x the smallest RTT sample. 0 = no
     * window of its own (the engine's fixed window). */
    double bdp_mult;      /* 0 (no window); 2 through a shallow buffer */
    uint64_t base_rtt_ns; /* the BDP's RTT: 0 = the smallest RTT sample */
    /* The BDP's RTT is the smoothed RTT (RFC 6298 2.3's EWMA, gain 1/8),
     * at least base_rtt_ns: a software host's round trip is scheduling
     * more than path, and a window from a smaller one limits the QP to
     * W / RTT below its rate. false: base_rtt_ns or the smallest sample. */
    bool bdp_srtt;
    /* The window opens by at most the bytes acknowledged (RFC 5681 3.1's
     * slow start), from init_wnd up to the cap above; false: it is the
     * cap at once. */
    bool wnd_ss;
    uint64_t init_wnd; /* bytes before the first RTT sample: 0 = 32 KiB */
    uint64_t min_wnd;  /* floor in bytes: 0 = 8 KiB */
};

/* NSCC-style window controller. 0 in a byte field means "derived from the
 * MTU or the line rate" (see sr_cc_nscc_effective). */
struct sr_cc_nscc_params {
    uint64_t base_rtt_ns;      /* unloaded RTT; 0 = the smallest RTT sample seen */
    uint64_t target_qdelay_ns; /* target queueing delay above base RTT: 10 us */
    uint32_t mtu;              /* bytes per packet: 4096 */
    uint64_t init_wnd;         /* 0 = 64 MTU */
    uint64_t min_wnd;          /* 0 = one MTU */
    uint64_t max_wnd;          /* 0 = 2048 MTU, the engine's fixed window today */
    double md_beta;            /* decrease gain, Swift Alg. 1 form: 0.8 */
    double md_max;             /* largest cut per RTT: 0.5 */
    uint64_t fi_bytes;         /* fair increase per window acked: 0 = one MTU */
    double pi_gain;            /* proportional increase gain: 1/4 */
    bool pace;                 /* pace at window / srtt */
    bool slow_start;           /* cwnd += acked until the first mark: 1 */
};

/* DCQCN notification point: CNPs for ECN-CE arrivals on one QP. */
struct sr_cc_np_params {
    uint64_t cnp_interval_ns; /* at most one CNP per QP per interval: 50 us (paper N) */
};

struct sr_cc_cfg {
    enum sr_cc_algo algo;
    uint64_t line_rate_bps;
    uint64_t pace_burst; /* the pacer's bucket in bytes (sr_cc_pacer); 0 = none */
    /* Pace at the line rate too, as a NIC port of line_rate_bps would
     * serialise: where the host's link is faster than the bottleneck
     * (veths into srdma-switch) an unpaced QP at line rate sends at CPU
     * speed. false: a QP at line rate is not paced (the link is the limit). */
    bool pace_line;
    struct sr_cc_dcqcn_params dcqcn;
    struct sr_cc_nscc_params nscc;
    struct sr_cc_np_params np;
};

/* Paced departures: the next packet may leave at next_ns + next_frac_ps
 * picoseconds (the fraction kept so that per-packet rounding does not
 * accumulate; whole nanoseconds apart, so that a CLOCK_MONOTONIC time of
 * any uptime fits, which picoseconds would not past 213 days). */
struct sr_cc_pacer {
    uint64_t next_ns;
    uint32_t next_frac_ps; /* 0..999 */
    uint64_t rate_bps;     /* 0: not paced */
    /* A token bucket this deep: a sender that comes late to its slot keeps
     * up to burst_bytes of the departures it missed and sends them back to
     * back (a NIC rate limiter's burst size), so a host whose wake-ups are
     * tens of microseconds late still holds its rate; 0: an idle or late
     * sender earns no credit. */
    uint64_t burst_bytes;
};

struct sr_cc_dcqcn {
    struct sr_cc_dcqcn_params p; /* effective values */
    uint64_t line_rate_bps;
    uint64_t rc_bps, rt_bps; /* current and target rate */
    double alpha;
    bool cnp_since_alpha; /* a CNP arrived in the current alpha period */
    bool cut_once;        /* a cut happened: last_cut_ns is meaningful */
    bool limited;         /* below line rate: timers and byte counter run */
    uint64_t last_cut_ns;
    uint64_t alpha_resume_ns; /* released: the alpha period that would have come next */
    uint64_t alpha_deadline_ns, rate_deadline_ns;
    uint64_t bytes_since_event;
    uint32_t t_cnt, bc_cnt; /* timer and byte-counter events since the cut */
    uint64_t min_rtt_ns;    /* smallest RTT sample: the window's base RTT */
    uint64_t srtt_ns;       /* smoothed RTT (bdp_srtt); 0 before a sample */
    uint64_t cwnd;          /* wnd_ss: the window opened so far, bytes */
};

struct sr_cc_nscc {
    struct sr_cc_nscc_params p; /* effective values */
    uint64_t line_rate_bps;
    uint64_t cwnd;
    uint64_t srtt_ns;        /* smoothed RTT, the responder's hold included */
    uint64_t min_rtt_ns;     /* smallest RTT less the hold: the learnt base RTT */
    uint64_t min_raw_rtt_ns; /* smallest RTT as measured, the hold included */
    uint64_t qdelay_ns;      /* the latest sample's queueing delay */
    uint64_t last_decrease_ns;
    uint64_t hold_sub_ns; /* hold taken off the samples, in all (introspection) */
    uint64_t md_cnt;      /* multiplicative decreases (introspection) */
    bool decreased;
    bool sampled;    /* qdelay_ns is meaningful */
    bool slow_start; /* no mark yet (p.slow_start) */
};

struct sr_cc;

/* The vtable. Every hook takes the time; none may be NULL in an ops table. */
struct sr_cc_ops {
    const char *name;
    int (*init)(struct sr_cc *cc, const struct sr_cc_cfg *cfg, uint64_t now_ns);
    void (*fini)(struct sr_cc *cc);
    void (*on_sent)(struct sr_cc *cc, uint32_t bytes, uint64_t now_ns);
    void (*on_ack)(struct sr_cc *cc, uint64_t acked_bytes, uint64_t rtt_ns, bool ecn_echo,
                   uint64_t now_ns);
    void (*on_cnp)(struct sr_cc *cc, uint64_t now_ns);
    void (*on_timer)(struct sr_cc *cc, uint64_t now_ns);
    uint64_t (*next_deadline)(const struct sr_cc *cc);
    uint64_t (*window_bytes)(const struct sr_cc *cc);
    uint64_t (*rate_bps)(const struct sr_cc *cc);
};

struct sr_cc {
    const struct sr_cc_ops *ops;
    struct sr_cc_pacer pacer;
    /* While on_ack runs from sr_cc_on_ack_hold: how long the responder
     * held the ACK (docs/WIRE.md, the hold report); 0 otherwise. */
    uint64_t ack_hold_ns;
    union {
        struct sr_cc_dcqcn dcqcn;
        struct sr_cc_nscc nscc;
    } u;
};

extern const struct sr_cc_ops sr_cc_none_ops, sr_cc_dcqcn_ops, sr_cc_nscc_ops;

/* ---- configuration ---- */

/* Defaults for every algorithm at a line rate (bits/s), algo = none. */
void sr_cc_cfg_default(struct sr_cc_cfg *cfg, uint64_t line_rate_bps);

/* What a device runs when SOFTRDMA_CC is unset or empty (src/verbs). */
#define SR_CC_DEVICE_DEFAULT "dcqcn"

/* Parses "none|dcqcn|nscc[,param=value...]" (SOFTRDMA_CC; the caller reads
 * the environment) into cfg, starting from sr_cc_cfg_default at cfg's
 * line_rate_bps (or 10 Gb/s when 0). Returns 0, or SR_ERR_INVAL with a
 * one-line reason in err (when err_len > 0) and cfg unchanged. */
int sr_cc_parse(const char *spec, struct sr_cc_cfg *cfg, char *err, size_t err_len);

const char *sr_cc_algo_name(enum sr_cc_algo algo);

/* The parameters an algorithm runs with: zeros replaced by derived values. */
struct sr_cc_dcqcn_params sr_cc_dcqcn_effective(const struct sr_cc_cfg *cfg);
struct sr_cc_nscc_params sr_cc_nscc_effective(const struct sr_cc_cfg *cfg);

/* ---- the calls the engine makes (dispatch through cc->ops) ---- */

int sr_cc_init(struct sr_cc *cc, const struct sr_cc_cfg *cfg, uint64_t now_ns);
void sr_cc_fini(struct sr_cc *cc);
/* A packet of bytes left (first transmission or retransmission). */
void sr_cc_on_sent(struct sr_cc *cc, uint32_t bytes, uint64_t now_ns);
/* New bytes acknowledged; rtt_ns is 0 without a sample; ecn_echo says the
 * acknowledged data arrived CE-marked. */
void sr_cc_on_ack(struct sr_cc *cc, uint64_t acked_bytes, uint64_t rtt_ns, bool ecn_echo,
                  uint64_t now_ns);
/* The same, with the responder's report of how long it held the ACK
 * (0: none); nscc takes it off the RTT sample, the others ignore it. */
void sr_cc_on_ack_hold(struct sr_cc *cc, uint64_t acked_bytes, uint64_t rtt_ns, uint64_t hold_ns,
                       bool ecn_echo, uint64_t now_ns);
/* A RoCEv2 CNP for this QP arrived (IBA Annex A17.9). */
void sr_cc_on_cnp(struct sr_cc *cc, uint64_t now_ns);
/* Time passed; call when now_ns >= sr_cc_next_deadline (early calls are harmless). */
void sr_cc_on_timer(struct sr_cc *cc, uint64_t now_ns);
/* Earliest time on_timer has work, or SR_CC_NO_DEADLINE. */
uint64_t sr_cc_next_deadline(const struct sr_cc *cc);
/* 0 when a packet of bytes may leave at now_ns, else the earliest time it may. */
uint64_t sr_cc_send_allowed(const struct sr_cc *cc, uint32_t bytes, uint64_t now_ns);
/* Bytes that may be unacknowledged; 0 means "no limit from cc" (the engine's
 * own fixed window applies). */
uint64_t sr_cc_window_bytes(const struct sr_cc *cc);
/* Current pacing rate in bits/s; 0 when not paced. */
uint64_t sr_cc_rate_bps(const struct sr_cc *cc);

/* Introspection for tests and traces: DCQCN's alpha, target rate Rt and
 * base RTT (the smallest sample; 0 before one) (0 for another algorithm). */
double sr_cc_dcqcn_alpha(const struct sr_cc *cc);
uint64_t sr_cc_dcqcn_target_bps(const struct sr_cc *cc);
uint64_t sr_cc_dcqcn_base_rtt_ns(const struct sr_cc *cc);
/* DCQCN's smoothed RTT (0 before a sample, or for another algorithm). */
uint64_t sr_cc_dcqcn_srtt_ns(const struct sr_cc *cc);

/* nscc's latest queueing delay (the sample less the reported hold and the
 * base RTT), the hold it has taken off its samples in all, and its
 * multiplicative decreases (0 for another algorithm). */
uint64_t sr_cc_nscc_qdelay_ns(const struct sr_cc *cc);
uint64_t sr_cc_nscc_hold_sub_ns(const struct sr_cc *cc);
uint64_t sr_cc_nscc_md_cnt(const struct sr_cc *cc);

/* ---- pacing, shared by the algorithms ---- */

void sr_cc_pacer_set_rate(struct sr_cc_pacer *pc, uint64_t rate_bps);
void sr_cc_pacer_sent(struct sr_cc_pacer *pc, uint32_t bytes, uint64_t now_ns);
uint64_t sr_cc_pacer_allowed(const struct sr_cc_pacer *pc, uint64_t now_ns);

/* ---- DCQCN notification point (receiver side), one per QP ---- */

struct sr_cc_np {
    uint64_t last_cnp_ns;
    bool sent; /* a CNP was sent: last_cnp_ns is meaningful */
};

/* A CE-marked packet arrived on the QP at now_ns: true when the engine must
 * send a CNP (BTH opcode 0x81 to the sender's QP, built by sr_wire), which
 * happens at most once per p->cnp_interval_ns. */
bool sr_cc_np_on_ce(struct sr_cc_np *np, const struct sr_cc_np_params *p, uint64_t now_ns);

#endif
