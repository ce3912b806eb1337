/* fault.c: parsing of the SOFTRDMA_FAULT specification. */
#include "sr_fault.h"
#include "sr_err.h"

#include <stdlib.h>
#include <string.h>

static bool parse_prob(const char *v, double *out)
{
    char *end;
    double d = strtod(v, &end);
    if (end == v || (*end && *end != ',') || !(d >= 0.0 && d <= 1.0))
        return false;
    *out = d;
    return true;
}

static bool parse_u64(const char *v, uint64_t *out)
{
    char *end;
    if (*v == '-')
        return false;
    unsigned long long x = strtoull(v, &end, 10);
    if (end == v || (*end && *end != ','))
        return false;
    *out = x;
    return true;
}

int sr_fault_parse(const char *spec, struct sr_fault_cfg *out, const char **bad)
{
    memset(out, 0, sizeof(*out));
    out->seed = 1;
    const char *p = spec;
    while (p && *p) {
        const char *eq = strchr(p, '=');
        const char *comma = strchr(p, ',');
        if (!eq || (comma && comma < eq))
            goto err;
        size_t klen = (size_t)(eq - p);
        const char *v = eq + 1;
        bool ok;
        uint64_t us = 0;
        if (klen == 4 && !strncmp(p, "loss", 4))
            ok = parse_prob(v, &out->loss);
        else if (klen == 7 && !strncmp(p, "reorder", 7))
            ok = parse_prob(v, &out->reorder);
        else if (klen == 3 && !strncmp(p, "dup", 3))
            ok = parse_prob(v, &out->dup);
        else if (klen == 7 && !strncmp(p, "corrupt", 7))
            ok = parse_prob(v, &out->corrupt);
        else if (klen == 8 && !strncmp(p, "delay_us", 8)) {
            ok = parse_u64(v, &us) && us <= 10000000;
            out->delay_ns = us * 1000;
        } else if (klen == 4 && !strncmp(p, "seed", 4))
            ok = parse_u64(v, &out->seed);
        else
            ok = false;
        if (!ok)
            goto err;
        p = comma ? comma + 1 : NULL;
        if (p && !*p)
            goto err; /* a trailing comma */
        continue;
    err:
        if (bad)
            *bad = p;
        return SR_ERR_INVAL;
    }
    /* A reordered datagram is held long enough for later ones to pass it. */
    out->reorder_ns = out->delay_ns + 200000;
    out->on =
        out->loss > 0 || out->reorder > 0 || out->dup > 0 || out->corrupt > 0 || out->delay_ns > 0;
    return 0;
}
