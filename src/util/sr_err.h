/* sr_err.h: softrdma's internal error codes (negative ints) and their names.
 *
 * Inside the project a function that can fail returns 0 (or a non-negative
 * count) on success and a negative SR_ERR_* on failure. Protocol faults are
 * not C errors: they become NAK syndromes and work-completion statuses. Only
 * the verbs boundary translates to errno.
 */
#ifndef SR_ERR_H
#define SR_ERR_H

enum sr_err {
    SR_OK = 0,
    SR_ERR_NOMEM = -1,   /* allocation failed */
    SR_ERR_INVAL = -2,   /* invalid argument */
    SR_ERR_NOSPACE = -3, /* caller's buffer too small */
    SR_ERR_RANGE = -4,   /* value out of the allowed range */
    SR_ERR_BUSY = -5,    /* object still in use */
    SR_ERR_NOTSUP = -6,  /* operation not supported */
    SR_ERR_LIMIT = -7,   /* a configured resource limit is reached */

    /* Wire codec: every malformed-input class has its own code. */
    SR_ERR_WIRE_SHORT = -100,   /* buffer shorter than the headers it must hold */
    SR_ERR_WIRE_OPCODE = -101,  /* opcode not in the table */
    SR_ERR_WIRE_TVER = -102,    /* BTH transport header version is not 0 */
    SR_ERR_WIRE_PAD = -103,     /* pad count inconsistent with the payload length */
    SR_ERR_WIRE_PAYLOAD = -104, /* payload on an opcode that carries none */
    SR_ERR_WIRE_FIELD = -105,   /* header field value the opcode forbids */
    SR_ERR_WIRE_MTU = -106,     /* payload larger than the path MTU */
    SR_ERR_WIRE_SEGMENT = -107, /* FIRST/MIDDLE packet payload is not exactly one PMTU */
    SR_ERR_WIRE_ICRC = -108,    /* invariant CRC mismatch */
    SR_ERR_WIRE_L3 = -109,      /* IP/UDP encapsulation not RoCEv2 or malformed */
};

/* Stable name of an error code ("SR_ERR_WIRE_PAD"); never NULL. */
const char *sr_err_name(int err);
/* One-line human description; never NULL. */
const char *sr_strerror(int err);

#endif
