/* scm_mad.h: the communication manager's MADs (IBA Vol 1 ch. 12) and the
 * RDMA IP CM service's private-data header (Annex A11). A pure codec:
 * decode checks every length before reading and yields host-order fields;
 * encode writes a caller-owned 256-byte buffer. No I/O, no state. */
#ifndef SCM_MAD_H
#define SCM_MAD_H

#include <stddef.h>
#include <stdint.h>

enum {
    SCM_MAD_LEN = 256,     /* every MAD is 256 bytes (IBA 13.4.2) */
    SCM_MAD_HDR_LEN = 24,  /* common MAD header (IBA 13.4.2, Table 145) */
    SCM_MGMT_CLASS = 0x07, /* communication management (IBA 13.4.4) */
    SCM_CLASS_VERSION = 2, /* CM class version (IBA 12.6) */
    SCM_METHOD_GET = 0x01, /* IBA 13.4.5, Table 146 */
    SCM_METHOD_SEND = 0x03,
    SCM_METHOD_GET_RESP = 0x81,
    SCM_GSI_QKEY = 0x80010000u, /* the well-known Q_Key of QP1 (IBA 13.5.1.1) */
    SCM_IPHDR_LEN = 36,         /* RDMA IP CM service header (Annex A11.2) */
};

/* Attribute IDs (IBA 12.6, Table 104) */
enum scm_attr {
    SCM_ATTR_CLASS_PORT_INFO = 0x0001, /* IBA 13.4.8.1; the only Get the CM answers */
    SCM_ATTR_REQ = 0x0010,
    SCM_ATTR_MRA = 0x0011,
    SCM_ATTR_REJ = 0x0012,
    SCM_ATTR_REP = 0x0013,
    SCM_ATTR_RTU = 0x0014,
    SCM_ATTR_DREQ = 0x0015,
    SCM_ATTR_DREP = 0x0016,
    SCM_ATTR_SIDR_REQ = 0x0017,
    SCM_ATTR_SIDR_REP = 0x0018,
    SCM_ATTR_LAP = 0x0019,
    SCM_ATTR_APR = 0x001a,
};

/* REJ reasons (IBA 12.6.7.2, Table 109) */
enum {
    SCM_REJ_TIMEOUT = 4,
    SCM_REJ_INVALID_COMM_ID = 6,
    SCM_REJ_INVALID_SERVICE_ID = 8,
    SCM_REJ_STALE_CONN = 10,
    SCM_REJ_INVALID_CLASS_VERSION = 26,
    SCM_REJ_CONSUMER = 28,
};

/* Transport service types of a REQ (IBA 12.6.5; 3: XRC, XRC annex) */
enum { SCM_TS_RC = 0, SCM_TS_UC = 1, SCM_TS_XRC = 3 };

/* SIDR REP status (IBA 12.6.10, Table 120) */
enum {
    SCM_SIDR_OK = 0,
    SCM_SIDR_UNSUPPORTED = 1, /* no service at that Service ID */
    SCM_SIDR_REJECT = 2,      /* the service provider refused */
    SCM_SIDR_NO_QP = 3,
};

/* One decoded CM message: the union of the fields softrdma uses; a field a
 * message does not carry stays zero. */
struct scm_mad {
    uint16_t attr_id;
    uint64_t tid;
    uint32_t local_comm_id, remote_comm_id; /* SIDR: request_id in local_comm_id */
    uint64_t service_id, ca_guid;
    uint32_t qkey, qpn, starting_psn;
    uint8_t resp_res, init_depth;
    uint8_t remote_cm_timeout, local_cm_timeout, max_cm_retries;
    uint8_t transport, flow_ctl, retry_cnt, rnr_retry, srq, mtu;
    uint16_t pkey, local_lid, remote_lid;
    uint8_t local_gid[16], remote_gid[16];
    uint32_t flow_label;
    uint8_t packet_rate, traffic_class, hop_limit, sl, subnet_local, ack_timeout;
    uint8_t target_ack_delay, failover;
    uint8_t msg_kind;        /* REJ: message rejected; MRA: message MRAed (0 REQ, 1 REP, 2 other) */
    uint8_t service_timeout; /* MRA */
    uint16_t reason;         /* REJ */
    uint8_t ari_len;         /* REJ: additional rejection information */
    uint8_t ari[72];
    uint8_t status;      /* SIDR REP */
    uint8_t method;      /* 0 encodes as Send; decode fills it in */
    uint16_t mad_status; /* common MAD header status (IBA 13.4.7) */
    uint8_t resp_time;   /* ClassPortInfo RespTimeValue (IBA 13.4.8.1) */
    uint8_t priv_len;
    uint8_t priv[224];
};

/* How many bytes of private data a message carries (IBA 12.6, Tables 106..120);
 * 0 for an attribute softrdma does not speak. */
size_t scm_mad_priv_len(uint16_t attr_id);
/* Decode a received MAD. 0, or a negative SR_ERR_*: SR_ERR_WIRE_SHORT
 * (under 256 bytes), SR_ERR_RANGE (over: a MAD is exactly 256 bytes),
 * SR_ERR_WIRE_FIELD (base version not 1, class not CM, class version not 2,
 * a method the attribute does not take, an additional-information length
 * over 72), SR_ERR_WIRE_OPCODE (an attribute softrdma does not speak). CM
 * messages come with Send, ClassPortInfo with Get or GetResp. */
int scm_mad_decode(const uint8_t *buf, size_t len, struct scm_mad *m);
/* Encode m into out (SCM_MAD_LEN bytes); private data beyond what the
 * attribute carries is an error. */
int scm_mad_encode(const struct scm_mad *m, uint8_t out[SCM_MAD_LEN]);

/* The RDMA IP CM header at the start of REQ and SIDR REQ private data
 * (Annex A11.2.1): version 0, the IP version, the source port and the
 * source and destination addresses (IPv4 in the last 4 bytes). */
struct scm_iphdr {
    uint8_t ip_ver; /* 4 or 6 */
    uint16_t src_port;
    uint8_t src[16], dst[16];
};
int scm_iphdr_decode(const uint8_t *priv, size_t len, struct scm_iphdr *h);
void scm_iphdr_encode(const struct scm_iphdr *h, uint8_t out[SCM_IPHDR_LEN]);

/* RDMA IP CM service IDs (Annex A11.2.2): 0x0000000001 | port space | port */
static inline uint64_t scm_service_id(uint16_t ps, uint16_t port)
{
    return ((uint64_t)ps << 16) | port;
}

const char *scm_attr_name(uint16_t attr_id);

#endif
