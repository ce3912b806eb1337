/* cc.c: the congestion-control dispatch, the "none" algorithm, the pacer and
 * the SOFTRDMA_CC spec parser. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sr_cc.h"
#include "sr_util.h"

/* ---- none: today's behaviour, no pacing and the engine's fixed window ---- */

static int none_init(struct sr_cc *cc, const struct sr_cc_cfg *cfg, uint64_t now_ns)
{
    (void)cc;
    (void)cfg;
    (void)now_ns;
    return 0;
}
static void none_fini(struct sr_cc *cc)
{
    (void)cc;
}
static void none_on_sent(struct sr_cc *cc, uint32_t bytes, uint64_t now_ns)
{
    (void)cc;
    (void)bytes;
    (void)now_ns;
}
static void none_on_ack(struct sr_cc *cc, uint64_t acked_bytes, uint64_t rtt_ns, bool ecn_echo,
                        uint64_t now_ns)
{
    (void)cc;
    (void)acked_bytes;
    (void)rtt_ns;
    (void)ecn_echo;
    (void)now_ns;
}
static void none_on_event(struct sr_cc *cc, uint64_t now_ns)
{
    (void)cc;
    (void)now_ns;
}
static uint64_t none_deadline(const struct sr_cc *cc)
{
    (void)cc;
    return SR_CC_NO_DEADLINE;
}
static uint64_t none_zero(const struct sr_cc *cc)
{
    (void)cc;
    return 0;
}

const struct sr_cc_ops sr_cc_none_ops = {
    .name = "none",
    .init = none_init,
    .fini = none_fini,
    .on_sent = none_on_sent,
    .on_ack = none_on_ack,
    .on_cnp = none_on_event,
    .on_timer = none_on_event,
    .next_deadline = none_deadline,
    .window_bytes = none_zero,
    .rate_bps = none_zero,
};

/* ---- dispatch ---- */

static const struct sr_cc_ops *const algo_ops[] = {
    [SR_CC_NONE] = &sr_cc_none_ops,
    [SR_CC_DCQCN] = &sr_cc_dcqcn_ops,
    [SR_CC_NSCC] = &sr_cc_nscc_ops,
};

const char *sr_cc_algo_name(enum sr_cc_algo algo)
{
    if ((unsigned)algo >= SR_ARRAY_SIZE(algo_ops))
        return "unknown";
    return algo_ops[algo]->name;
}

int sr_cc_init(struct sr_cc *cc, const struct sr_cc_cfg *cfg, uint64_t now_ns)
{
    if ((unsigned)cfg->algo >= SR_ARRAY_SIZE(algo_ops))
        return SR_ERR_INVAL;
    memset(cc, 0, sizeof(*cc));
    cc->ops = algo_ops[cfg->algo];
    cc->pacer.burst_bytes = cfg->pace_burst;
    int rc = cc->ops->init(cc, cfg, now_ns);
    if (rc < 0)
        cc->ops = &sr_cc_none_ops;
    return rc;
}

void sr_cc_fini(struct sr_cc *cc)
{
    cc->ops->fini(cc);
    cc->ops = &sr_cc_none_ops;
}

void sr_cc_on_sent(struct sr_cc *cc, uint32_t bytes, uint64_t now_ns)
{
    sr_cc_pacer_sent(&cc->pacer, bytes, now_ns);
    cc->ops->on_sent(cc, bytes, now_ns);
}

void sr_cc_on_ack(struct sr_cc *cc, uint64_t acked_bytes, uint64_t rtt_ns, bool ecn_echo,
                  uint64_t now_ns)
{
    cc->ops->on_ack(cc, acked_bytes, rtt_ns, ecn_echo, now_ns);
}

void sr_cc_on_ack_hold(struct sr_cc *cc, uint64_t acked_bytes, uint64_t rtt_ns, uint64_t hold_ns,
                       bool ecn_echo, uint64_t now_ns)
{
    cc->ack_hold_ns = hold_ns;
    cc->ops->on_ack(cc, acked_bytes, rtt_ns, ecn_echo, now_ns);
    cc->ack_hold_ns = 0;
}

void sr_cc_on_cnp(struct sr_cc *cc, uint64_t now_ns)
{
    cc->ops->on_cnp(cc, now_ns);
}

void sr_cc_on_timer(struct sr_cc *cc, uint64_t now_ns)
{
    cc->ops->on_timer(cc, now_ns);
}

uint64_t sr_cc_next_deadline(const struct sr_cc *cc)
{
    return cc->ops->next_deadline(cc);
}

uint64_t sr_cc_send_allowed(const struct sr_cc *cc, uint32_t bytes, uint64_t now_ns)
{
    /* The pacer spaces packets by the length of the one sent before, so the
     * next packet's own length does not change when it may leave. */
    (void)bytes;
    return sr_cc_pacer_allowed(&cc->pacer, now_ns);
}

uint64_t sr_cc_window_bytes(const struct sr_cc *cc)
{
    return cc->ops->window_bytes(cc);
}

uint64_t sr_cc_rate_bps(const struct sr_cc *cc)
{
    return cc->ops->rate_bps(cc);
}

/* ---- pacer ---- */

void sr_cc_pacer_set_rate(struct sr_cc_pacer *pc, uint64_t rate_bps)
{
    pc->rate_bps = rate_bps;
}

void sr_cc_pacer_sent(struct sr_cc_pacer *pc, uint32_t bytes, uint64_t now_ns)
{
    if (!pc->rate_bps)
        return;
    /* An idle sender earns no credit: the gap starts from now, not from a
     * departure time in the past (otherwise it would burst at line rate).
     * A packet sent within the nanosecond its slot was rounded up to keeps
     * the exact slot, so rounding does not slow a busy sender down. */
    bool on_slot = now_ns <= pc->next_ns || (now_ns == pc->next_ns + 1 && pc->next_frac_ps);
    if (!on_slot) {
        /* With a bucket the missed departures are kept, up to burst_bytes'
         * worth at this rate: the slot moves only to that far behind now. */
        uint64_t credit_ns = 0;
        if (pc->burst_bytes)
            credit_ns = (uint64_t)SR_MIN((unsigned __int128)pc->burst_bytes * 8u * 1000000000u /
                                             pc->rate_bps,
                                         (unsigned __int128)UINT64_MAX);
        if (now_ns - pc->next_ns > credit_ns) {
            pc->next_ns = now_ns - credit_ns;
            pc->next_frac_ps = 0;
        }
    }
    unsigned __int128 bits = (unsigned __int128)bytes * 8u * 1000000000000u;
    uint64_t ps = (uint64_t)(bits / pc->rate_bps) + pc->next_frac_ps;
    pc->next_ns += ps / 1000;
    pc->next_frac_ps = (uint32_t)(ps % 1000);
}

uint64_t sr_cc_pacer_allowed(const struct sr_cc_pacer *pc, uint64_t now_ns)
{
    if (!pc->rate_bps || now_ns > pc->next_ns || (now_ns == pc->next_ns && !pc->next_frac_ps))
        return 0;
    /* first whole nanosecond not before the slot */
    return pc->next_ns + (pc->next_frac_ps ? 1 : 0);
}

/* ---- configuration ---- */

void sr_cc_cfg_default(struct sr_cc_cfg *cfg, uint64_t line_rate_bps)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->algo = SR_CC_NONE;
    cfg->line_rate_bps = line_rate_bps;
    /* DCQCN paper (Zhu et al., SIGCOMM 2015), its parameter values: g = 1/256,
     * K = T = 55 us, B = 10 MB, F = 5. */
    cfg->dcqcn.g = 1.0 / 256;
    cfg->dcqcn.alpha_init = 1.0;
    cfg->dcqcn.alpha_timer_ns = 55000;
    cfg->dcqcn.rate_timer_ns = 55000;
    cfg->dcqcn.byte_counter = 10u * 1024 * 1024;
    cfg->dcqcn.fast_recovery_steps = 5;
    /* The NP sends at most one CNP per 50 us (paper N = 50 us); cutting at
     * most that often keeps a burst of CNPs from several NPs from compounding. */
    cfg->dcqcn.decrease_interval_ns = 50000;
    /* No window by default (bdp_mult 0, the paper's rate-only RP): on a
     * software host the smallest RTT sample is far below the typical round
     * trip, and a window from it halves ib_write_bw on loopback
     * (bench/cc_window_ab.sh). Through a shallow buffer set bdp_mult=2 and
     * a base_rtt_us (docs/CONGESTION.md). */
    cfg->nscc.target_qdelay_ns = 10000;
    cfg->nscc.mtu = 4096;
    cfg->nscc.md_beta = 0.8;
    cfg->nscc.md_max = 0.5;
    /* In tests/unit/cc_test's closed loop (10 Gb/s, 4 us), a gain of 1
     * overshoots to a mean queue of 1.85 x target at 93% utilisation; 1/4
     * holds the target at 99%. */
    cfg->nscc.pi_gain = 0.25;
    cfg->nscc.pace = true;
    cfg->nscc.slow_start = true;
    cfg->np.cnp_interval_ns = 50000;
}

struct sr_cc_dcqcn_params sr_cc_dcqcn_effective(const struct sr_cc_cfg *cfg)
{
    struct sr_cc_dcqcn_params p = cfg->dcqcn;
    /* The paper's R_AI is 40 Mb/s at 40 Gb/s: a thousandth of the line. */
    if (!p.rai_bps)
        p.rai_bps = cfg->line_rate_bps / 1000;
    /* ns-3's DCQCN model (HPCC simulator) has R_HAI = 10 x R_AI (5 and 50 Mb/s). */
    if (!p.rhai_bps)
        p.rhai_bps = 10 * p.rai_bps;
    if (!p.min_rate_bps)
        p.min_rate_bps = cfg->line_rate_bps / 1000;
    if (!p.min_rate_bps)
        p.min_rate_bps = 1;
    /* 32 KiB before the first RTT sample: eight QPs' first windows fit in a
     * 256 KiB buffer, and one QP's in any switch's. */
    if (!p.init_wnd)
        p.init_wnd = 32u * 1024;
    if (!p.min_wnd)
        p.min_wnd = 8u * 1024;
    return p;
}

struct sr_cc_nscc_params sr_cc_nscc_effective(const struct sr_cc_cfg *cfg)
{
    struct sr_cc_nscc_params p = cfg->nscc;
    if (!p.mtu)
        p.mtu = 4096;
    if (!p.init_wnd)
        p.init_wnd = 64ull * p.mtu;
    if (!p.min_wnd)
        p.min_wnd = p.mtu;
    if (!p.max_wnd)
        p.max_wnd = 2048ull * p.mtu;
    if (!p.fi_bytes)
        p.fi_bytes = p.mtu;
    return p;
}

/* ---- parser ---- */

enum ptype { P_U64, P_U32, P_DBL, P_BOOL };

struct param {
    const char *name;
    int algo; /* enum sr_cc_algo, or -1: any */
    enum ptype type;
    size_t off;      /* in struct sr_cc_cfg */
    uint64_t scale;  /* value x scale (us -> ns, Mb/s -> b/s) */
    const char *doc; /* unit, for messages */
};

#define CFG(f) offsetof(struct sr_cc_cfg, f)
static const struct param params[] = {
    {"line_rate_mbps", -1, P_U64, CFG(line_rate_bps), 1000000, "Mb/s"},
    {"pace_burst", -1, P_U64, CFG(pace_burst), 1, "bytes"},
    {"pace_line", -1, P_BOOL, CFG(pace_line), 1, "0 or 1"},
    {"cnp_interval_us", -1, P_U64, CFG(np.cnp_interval_ns), 1000, "us"},
    {"g", SR_CC_DCQCN, P_DBL, CFG(dcqcn.g), 1, "fraction, e.g. 1/256"},
    {"alpha_init", SR_CC_DCQCN, P_DBL, CFG(dcqcn.alpha_init), 1, "fraction"},
    {"alpha_timer_us", SR_CC_DCQCN, P_U64, CFG(dcqcn.alpha_timer_ns), 1000, "us"},
    {"rate_timer_us", SR_CC_DCQCN, P_U64, CFG(dcqcn.rate_timer_ns), 1000, "us"},
    {"byte_counter", SR_CC_DCQCN, P_U64, CFG(dcqcn.byte_counter), 1, "bytes"},
    {"fast_recovery", SR_CC_DCQCN, P_U32, CFG(dcqcn.fast_recovery_steps), 1, "steps"},
    {"decrease_interval_us", SR_CC_DCQCN, P_U64, CFG(dcqcn.decrease_interval_ns), 1000, "us"},
    {"rai_mbps", SR_CC_DCQCN, P_U64, CFG(dcqcn.rai_bps), 1000000, "Mb/s"},
    {"rhai_mbps", SR_CC_DCQCN, P_U64, CFG(dcqcn.rhai_bps), 1000000, "Mb/s"},
    {"min_rate_mbps", SR_CC_DCQCN, P_U64, CFG(dcqcn.min_rate_bps), 1000000, "Mb/s"},
    {"bdp_mult", SR_CC_DCQCN, P_DBL, CFG(dcqcn.bdp_mult), 1, "factor"},
    {"base_rtt_us", SR_CC_DCQCN, P_U64, CFG(dcqcn.base_rtt_ns), 1000, "us"},
    {"bdp_srtt", SR_CC_DCQCN, P_BOOL, CFG(dcqcn.bdp_srtt), 1, "0 or 1"},
    {"wnd_ss", SR_CC_DCQCN, P_BOOL, CFG(dcqcn.wnd_ss), 1, "0 or 1"},
    {"init_wnd", SR_CC_DCQCN, P_U64, CFG(dcqcn.init_wnd), 1, "bytes"},
    {"min_wnd", SR_CC_DCQCN, P_U64, CFG(dcqcn.min_wnd), 1, "bytes"},
    {"base_rtt_us", SR_CC_NSCC, P_U64, CFG(nscc.base_rtt_ns), 1000, "us"},
    {"target_us", SR_CC_NSCC, P_U64, CFG(nscc.target_qdelay_ns), 1000, "us"},
    {"mtu", SR_CC_NSCC, P_U32, CFG(nscc.mtu), 1, "bytes"},
    {"init_wnd", SR_CC_NSCC, P_U64, CFG(nscc.init_wnd), 1, "bytes"},
    {"min_wnd", SR_CC_NSCC, P_U64, CFG(nscc.min_wnd), 1, "bytes"},
    {"max_wnd", SR_CC_NSCC, P_U64, CFG(nscc.max_wnd), 1, "bytes"},
    {"md_beta", SR_CC_NSCC, P_DBL, CFG(nscc.md_beta), 1, "fraction"},
    {"md_max", SR_CC_NSCC, P_DBL, CFG(nscc.md_max), 1, "fraction"},
    {"fi_bytes", SR_CC_NSCC, P_U64, CFG(nscc.fi_bytes), 1, "bytes"},
    {"pi_gain", SR_CC_NSCC, P_DBL, CFG(nscc.pi_gain), 1, "factor"},
    {"pace", SR_CC_NSCC, P_BOOL, CFG(nscc.pace), 1, "0 or 1"},
    {"slow_start", SR_CC_NSCC, P_BOOL, CFG(nscc.slow_start), 1, "0 or 1"},
};
#undef CFG

static int fail(char *err, size_t err_len, const char *fmt, ...)
{
    if (err_len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, err_len, fmt, ap);
        va_end(ap);
    }
    return SR_ERR_INVAL;
}

/* Whole-string unsigned decimal with no sign, no blanks, no overflow. */
static bool parse_u64(const char *s, uint64_t *out)
{
    if (*s < '0' || *s > '9')
        return false;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return false;
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

/* "0.5" or "1/256". */
static bool parse_dbl(const char *s, double *out)
{
    const char *slash = strchr(s, '/');
    if (slash) {
        char num[32];
        uint64_t n, d;
        size_t len = (size_t)(slash - s);
        if (len == 0 || len >= sizeof(num))
            return false;
        memcpy(num, s, len);
        num[len] = '\0';
        if (!parse_u64(num, &n) || !parse_u64(slash + 1, &d) || d == 0)
            return false;
        *out = (double)n / (double)d;
        return true;
    }
    if ((*s < '0' || *s > '9') && *s != '.')
        return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end || errno)
        return false;
    *out = v;
    return true;
}

static int set_param(struct sr_cc_cfg *cfg, const struct param *pm, const char *val, char *err,
                     size_t err_len)
{
    char *field = (char *)cfg + pm->off;
    uint64_t u;
    double d;
    switch (pm->type) {
    case P_U64:
    case P_U32:
        if (!parse_u64(val, &u) || (pm->scale && u > UINT64_MAX / pm->scale))
            goto bad;
        u *= pm->scale;
        if (pm->type == P_U32) {
            if (u > UINT32_MAX)
                goto bad;
            uint32_t v32 = (uint32_t)u;
            memcpy(field, &v32, sizeof(v32));
        } else {
            memcpy(field, &u, sizeof(u));
        }
        return 0;
    case P_DBL:
        /* Every fraction parameter is a gain or a share: 0..1, except the
         * proportional-increase gain and the BDP multiple, which are
         * factors (at most 64). */
        if (!parse_dbl(val, &d) || d < 0 ||
            (d > 1 && strcmp(pm->name, "pi_gain") != 0 && strcmp(pm->name, "bdp_mult") != 0) ||
            d > 64)
            goto bad;
        memcpy(field, &d, sizeof(d));
        return 0;
    case P_BOOL:
        if (strcmp(val, "0") != 0 && strcmp(val, "1") != 0)
            goto bad;
        *(bool *)field = val[0] == '1';
        return 0;
    }
bad:
    return fail(err, err_len, "SOFTRDMA_CC: bad value '%s' for %s (%s)", val, pm->name, pm->doc);
}

static int parse_algo(const char *name, enum sr_cc_algo *algo)
{
    for (unsigned i = 0; i < SR_ARRAY_SIZE(algo_ops); i++)
        if (strcmp(name, algo_ops[i]->name) == 0) {
            *algo = (enum sr_cc_algo)i;
            return 0;
        }
    return SR_ERR_INVAL;
}

int sr_cc_parse(const char *spec, struct sr_cc_cfg *cfg, char *err, size_t err_len)
{
    char buf[512];
    if (err_len)
        err[0] = '\0';
    if (!spec)
        return fail(err, err_len, "SOFTRDMA_CC: no spec");
    size_t len = strlen(spec);
    if (len >= sizeof(buf))
        return fail(err, err_len, "SOFTRDMA_CC: spec longer than %zu bytes", sizeof(buf) - 1);
    memcpy(buf, spec, len + 1);

    struct sr_cc_cfg out;
    sr_cc_cfg_default(&out, cfg->line_rate_bps ? cfg->line_rate_bps : 10000000000ull);

    char *save = NULL;
    char *tok = strtok_r(buf, ",", &save);
    if (!tok || parse_algo(tok, &out.algo) < 0)
        return fail(err, err_len, "SOFTRDMA_CC: unknown algorithm '%s' (none, dcqcn, nscc)",
                    tok ? tok : "");
    while ((tok = strtok_r(NULL, ",", &save))) {
        char *eq = strchr(tok, '=');
        if (!eq || eq == tok || !eq[1])
            return fail(err, err_len, "SOFTRDMA_CC: '%s' is not param=value", tok);
        *eq = '\0';
        const struct param *pm = NULL;
        /* A name two algorithms share (base_rtt_us, init_wnd, min_wnd) takes the row of
         * the algorithm being parsed. */
        for (unsigned i = 0; i < SR_ARRAY_SIZE(params); i++)
            if (strcmp(tok, params[i].name) == 0 &&
                (!pm || params[i].algo < 0 || params[i].algo == (int)out.algo))
                pm = &params[i];
        if (!pm)
            return fail(err, err_len, "SOFTRDMA_CC: unknown parameter '%s'", tok);
        if (pm->algo >= 0 && pm->algo != (int)out.algo)
            return fail(err, err_len, "SOFTRDMA_CC: parameter '%s' is for %s, not %s", tok,
                        sr_cc_algo_name((enum sr_cc_algo)pm->algo), sr_cc_algo_name(out.algo));
        int rc = set_param(&out, pm, eq + 1, err, err_len);
        if (rc < 0)
            return rc;
    }
    if (!out.line_rate_bps)
        return fail(err, err_len, "SOFTRDMA_CC: line_rate_mbps must be positive");
    if (out.algo == SR_CC_DCQCN &&
        (!out.dcqcn.alpha_timer_ns || !out.dcqcn.rate_timer_ns || !out.dcqcn.byte_counter))
        return fail(err, err_len, "SOFTRDMA_CC: dcqcn timers and byte counter must be positive");
    if (out.algo == SR_CC_NSCC && !out.nscc.target_qdelay_ns)
        return fail(err, err_len, "SOFTRDMA_CC: nscc target_us must be positive");
    *cfg = out;
    return 0;
}
