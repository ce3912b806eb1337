/* sr_err.c: names and descriptions of SR_ERR_* codes. */
#include "sr_err.h"

#include <stddef.h>

struct err_desc {
    int code;
    const char *name;
    const char *text;
};

static const struct err_desc err_table[] = {
    {SR_OK, "SR_OK", "success"},
    {SR_ERR_NOMEM, "SR_ERR_NOMEM", "out of memory"},
    {SR_ERR_INVAL, "SR_ERR_INVAL", "invalid argument"},
    {SR_ERR_NOSPACE, "SR_ERR_NOSPACE", "buffer too small"},
    {SR_ERR_RANGE, "SR_ERR_RANGE", "value out of range"},
    {SR_ERR_BUSY, "SR_ERR_BUSY", "object in use"},
    {SR_ERR_NOTSUP, "SR_ERR_NOTSUP", "operation not supported"},
    {SR_ERR_LIMIT, "SR_ERR_LIMIT", "resource limit reached"},
    {SR_ERR_WIRE_SHORT, "SR_ERR_WIRE_SHORT", "packet truncated"},
    {SR_ERR_WIRE_OPCODE, "SR_ERR_WIRE_OPCODE", "unknown BTH opcode"},
    {SR_ERR_WIRE_TVER, "SR_ERR_WIRE_TVER", "BTH transport version is not 0"},
    {SR_ERR_WIRE_PAD, "SR_ERR_WIRE_PAD", "pad count inconsistent with payload length"},
    {SR_ERR_WIRE_PAYLOAD, "SR_ERR_WIRE_PAYLOAD", "payload on an opcode that carries none"},
    {SR_ERR_WIRE_FIELD, "SR_ERR_WIRE_FIELD", "header field forbidden for this opcode"},
    {SR_ERR_WIRE_MTU, "SR_ERR_WIRE_MTU", "payload larger than the path MTU"},
    {SR_ERR_WIRE_SEGMENT, "SR_ERR_WIRE_SEGMENT", "first/middle packet payload is not one PMTU"},
    {SR_ERR_WIRE_ICRC, "SR_ERR_WIRE_ICRC", "invariant CRC mismatch"},
    {SR_ERR_WIRE_L3, "SR_ERR_WIRE_L3", "not a well-formed RoCEv2 IP/UDP packet"},
};

static const struct err_desc *err_find(int err)
{
    for (size_t i = 0; i < sizeof(err_table) / sizeof(err_table[0]); i++)
        if (err_table[i].code == err)
            return &err_table[i];
    return NULL;
}

const char *sr_err_name(int err)
{
    const struct err_desc *d = err_find(err);
    return d ? d->name : "SR_ERR_UNKNOWN";
}

const char *sr_strerror(int err)
{
    const struct err_desc *d = err_find(err);
    return d ? d->text : "unknown error";
}
