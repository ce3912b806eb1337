/* fabric_int.h: what fabric.c shares with the other fabric files
 * (fabric_workload.c): the seeded stream and the hash they draw from. Not
 * installed; sr_fabric.h is the interface. */
#ifndef SR_FABRIC_INT_H
#define SR_FABRIC_INT_H

#include "sr_fabric.h"

/* splitmix64's finaliser (Steele, Lea and Flood, "Fast splittable
 * pseudorandom number generators", OOPSLA 2014). */
static inline uint64_t fab_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [0, n) from a 64-bit draw (Lemire's multiply-shift). */
static inline uint32_t fab_below(uint64_t r, uint32_t n)
{
    return (uint32_t)(((r >> 32) * n) >> 32);
}

/* The next draw from the fabric's workload stream (seeded from cfg.seed). */
uint64_t fab_rand(struct sr_fabric *f);

#endif
