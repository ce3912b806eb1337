/* sr_sim_node.h: a soft RDMA device (one sr_engine) attached to the
 * simulator as a node. Outgoing packets get real RoCEv2 encapsulation
 * (IPv4 or IPv6, UDP 4791, ICRC); incoming ones are ICRC-checked and
 * stripped before the engine sees them, so corruption on a simulated link
 * is caught exactly where a NIC would catch it. */
#ifndef SR_SIM_NODE_H
#define SR_SIM_NODE_H

#include "sr_engine.h"
#include "sr_sim.h"

struct sr_sim_node;

struct sr_sim_node_stats {
    uint64_t tx_pkts, rx_pkts;
    uint64_t rx_icrc_drops; /* ICRC mismatch: dropped and counted */
    uint64_t rx_l3_drops;   /* not RoCEv2 to this node */
    uint64_t tx_errors;     /* the sim refused a packet (no route) */
};

/* Create an engine for addr (IPv6, or IPv4-mapped) and add it to sim as a
 * node. cfg supplies limits and the cq/async callbacks; its gid and tx are
 * set here. */
int sr_sim_node_create(struct sr_sim *sim, const uint8_t addr[16], const struct sr_engine_cfg *cfg,
                       struct sr_sim_node **out);
void sr_sim_node_destroy(struct sr_sim_node *n);
struct sr_engine *sr_sim_node_engine(const struct sr_sim_node *n);
int sr_sim_node_id(const struct sr_sim_node *n);
void sr_sim_node_stats(const struct sr_sim_node *n, struct sr_sim_node_stats *out);

#endif
