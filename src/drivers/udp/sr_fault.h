/* sr_fault.h: fault injection for the UDP driver (SOFTRDMA_FAULT), applied
 * to received datagrams before the ICRC check: loss, reordering,
 * duplication, corruption (which the ICRC then catches) and a fixed delay.
 * Seeded, so a failing run can be repeated. */
#ifndef SR_FAULT_H
#define SR_FAULT_H

#include <stdbool.h>
#include <stdint.h>

struct sr_fault_cfg {
    bool on;
    double loss, reorder, dup, corrupt; /* per-datagram probabilities */
    uint64_t delay_ns;                  /* every datagram held this long */
    uint64_t reorder_ns;                /* extra hold of a reordered datagram */
    uint64_t seed;
};

/* Parse "loss=0.01,reorder=0.01,dup=0.001,corrupt=0.001,delay_us=50,seed=1"
 * (any subset, any order). 0, or SR_ERR_INVAL with *bad pointing at the
 * offending item. */
int sr_fault_parse(const char *spec, struct sr_fault_cfg *out, const char **bad);

#endif
