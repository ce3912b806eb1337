/* scm_int.h: what svc.c (the service) and cm.c (the API and the state
 * machine) share. Every function here runs with scm_svc.lock held. */
#ifndef SCM_INT_H
#define SCM_INT_H

#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>

#include "scm.h"

#define sr_container_of(p, type, member) ((type *)(void *)((char *)(p)-offsetof(type, member)))
enum { SR_GRH = 40 }; /* a UD receive starts with the GRH (IBA 11.4.1.2) */

uint64_t scm_now_ns(void);
void scm_chan_post(struct scm_channel *c, struct scm_event *e);
struct scm_event *scm_chan_pop(struct scm_channel *c);
void scm_chan_purge(struct scm_channel *c, struct scm_id *id);
struct scm_event *scm_event_new(struct scm_id *id, enum rdma_cm_event_type type, int status);
void scm_event_send(struct scm_id *id, struct scm_event *e);
void scm_post(struct scm_id *id, enum rdma_cm_event_type type, int status);

int scm_dir_publish(struct scm_id *id, uint16_t port, const uint8_t ip[16]);
void scm_dir_unpublish(struct scm_id *id);
bool scm_dir_lookup(uint16_t ps, uint16_t port, const uint8_t ip[16], uint8_t gid[16]);
bool scm_port_in_use(uint16_t ps, uint16_t port);

int scm_svc_up(void);
void scm_svc_kick(void);
void scm_send_mad(const uint8_t dgid[16], const uint8_t mad[SCM_MAD_LEN]);
void scm_svc_tx_reap(void);

/* cm.c: a MAD from sgid's QP1; the timers, returning the next deadline (0: none) */
void scm_cm_rx(const uint8_t sgid[16], const uint8_t *mad, size_t len, uint64_t now_ns);
uint64_t scm_cm_timers(uint64_t now_ns);

static inline bool scm_ip_is_v4(const uint8_t ip[16])
{
    static const uint8_t pfx[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    for (int i = 0; i < 12; i++)
        if (ip[i] != pfx[i])
            return false;
    return true;
}
uint16_t scm_id_port(const struct scm_id *id, bool src);
void scm_ip_sa(const uint8_t ip[16], uint16_t port, struct sockaddr_storage *ss);
struct scm_id *scm_id_new(struct rdma_event_channel *ch, void *ctx, enum rdma_port_space ps,
                          enum ibv_qp_type qpt);

/* cm.c: the configuration (scm_svc_up calls it); arm id's resend timer
 * for a MAD just sent that awaits a reply (IBA 12.7.31, 12.7.32) */
void scm_cm_config(void);
void scm_cm_arm(struct scm_id *id, uint64_t now_ns);
bool scm_ip_is_loopback(const uint8_t ip[16]);
/* cm.c: the MAD an open connection's id sends as it goes away (a DREQ,
 * or a REJ for an unanswered request) */
void scm_cm_leave(struct scm_id *id);
/* cm.c: a listener has appeared; the REQs held for it reach it */
void scm_cm_listened(uint64_t now_ns);

/* cm.c: the listener a REQ or SIDR REQ for service_id and address dst reaches */
struct scm_id *scm_find_listener(uint64_t service_id, const uint8_t dst[16]);

/* sidr.c: UD ids, Service ID Resolution (IBA 12.11). The scm_sidr_*
 * entry points take the lock themselves; the rx side runs with it held. */
int scm_sidr_connect(struct scm_id *id, const struct rdma_conn_param *p);
int scm_sidr_accept(struct scm_id *id, const struct rdma_conn_param *p);
int scm_sidr_reject(struct scm_id *id, const void *priv, uint8_t priv_len);
void scm_sidr_rx_req(const uint8_t sgid[16], const struct scm_mad *m);
void scm_sidr_rx_rep(const struct scm_mad *m);

/* conn.c: the CQs librdmacm makes for an id (without the lock) */
int scm_make_cqs(struct rdma_cm_id *id, uint32_t send_n, uint32_t recv_n);
void scm_destroy_cqs(struct rdma_cm_id *id);

/* api.c: the connect's destination looked up again; false: no listener */
bool scm_peer_refresh(struct scm_id *i);
/* api.c: send a connect's first MAD (i->last), or hold it while no
 * listener is known; the timers call scm_await_listener for a held one. */
void scm_connect_send(struct scm_id *i, uint64_t now_ns);
void scm_await_listener(struct scm_id *i, uint64_t now_ns);
/* api.c: a synchronous id's call waits for its event */
int scm_sync_wait(struct scm_id *id, enum rdma_cm_event_type want);

/* What every file of the library shares: the service lock, the verbs
 * convention for errors (-1 and errno), the id behind a public one. */
#define LOCK()   pthread_mutex_lock(&scm_svc.lock)
#define UNLOCK() pthread_mutex_unlock(&scm_svc.lock)

static inline int fail(int err)
{
    errno = err;
    return -1;
}

static inline struct scm_id *sid(struct rdma_cm_id *id)
{
    return sr_container_of(id, struct scm_id, id);
}

/* conn.c: a REQ's or SIDR REQ's private data (the A11 header, then p's) */
void scm_req_priv(struct scm_id *i, const struct rdma_conn_param *p, struct scm_mad *m);

/* cm.c: a socket address as an IPv4-mapped or IPv6 address and a port;
 * 0, EAFNOSUPPORT (AF_IB) or EINVAL */
int scm_sa_ip(const struct sockaddr *sa, uint8_t ip[16], uint16_t *port);

#endif
