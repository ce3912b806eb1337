/* split.c: srcclCommSplit. Everything goes over the parent communicator,
 * as collectives every parent rank joins (NOCOLOR ranks too, with empty
 * records), so no TCP rendezvous is needed:
 *   1. all-gather of (color, key): each rank computes its group, its new
 *      rank (by key, then parent rank) and the largest group's size;
 *   2. each member opens its transport (device, CQ, slots, one QP per new
 *      peer) and all-gathers its record (the bootstrap's struct
 *      sc_wire_rank, sized for the largest group);
 *   3. it connects its QPs from its group's records;
 *   4. all-gather of each rank's status: no member sends before every
 *      member's QPs are ready, and a member that failed fails its group.
 * A failure of the parent's collectives fails the parent as usual. */
#include "sc_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct member {
    int64_t color, key;
    int rank; /* in the parent */
};

static int by_key(const void *a, const void *b)
{
    const struct member *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->rank - y->rank;
}

/* A parent collective for the split, named after it in messages. */
static srcclResult_t parent_allgather(srcclComm_t parent, const void *mine, void *all, size_t len)
{
    struct sc_op o = {.kind = SC_OP_ALLGATHER,
                      .fn = "srcclCommSplit",
                      .send = mine,
                      .recv = all,
                      .cnt = len,
                      .dt = srcclUint8,
                      .op = srcclSum};
    return sc_submit(parent, &o, NULL);
}

SC_EXPORT srcclResult_t srcclCommSplit(srcclComm_t comm, int color, int key, srcclComm_t *newcomm)
{
    if (!comm || comm->magic != SC_COMM_MAGIC) {
        sc_set_thread_error("srcclCommSplit: %s",
                            comm ? "not a communicator (destroyed?)" : "comm is NULL");
        return srcclInvalidArgument;
    }
    if (comm->async_err)
        return comm->async_err;
    if (!newcomm)
        return sc_fail(comm, srcclInvalidArgument, "srcclCommSplit: newcomm is NULL");
    *newcomm = NULL;
    if (color < 0 && color != SRCCL_SPLIT_NOCOLOR)
        return sc_fail(comm, srcclInvalidArgument,
                       "srcclCommSplit: color %d: need >= 0 or SRCCL_SPLIT_NOCOLOR", color);
    if (sc_in_group())
        return sc_group_note(
            sc_fail(comm, srcclInvalidUsage, "srcclCommSplit: not allowed inside a group"));

    int pn = comm->nranks;
    size_t rec_len = 0;
    struct member *m = calloc((size_t)pn, sizeof(*m));
    int64_t mine[2] = {color, key}, *ck = calloc((size_t)pn, sizeof(mine));
    int32_t *status = calloc((size_t)pn, sizeof(int32_t));
    uint8_t *recs = NULL, *all = NULL;
    struct sc_wire_rank *rec = NULL;
    srcclComm_t c = NULL;
    srcclResult_t r;
    if (!m || !ck || !status) {
        r = sc_fail(comm, srcclSystemError, "srcclCommSplit: out of memory");
        goto out;
    }
    if ((r = parent_allgather(comm, mine, ck, sizeof(mine))))
        goto out;

    /* Our group, ordered by key then parent rank; the largest group. */
    int n = 0, me = -1, maxn = 1;
    for (int i = 0; i < pn; i++) {
        int same = 0;
        for (int j = 0; j < pn; j++)
            same += ck[2 * j] == ck[2 * i];
        if (ck[2 * i] != SRCCL_SPLIT_NOCOLOR)
            maxn = SC_MAX(maxn, same);
        if (color != SRCCL_SPLIT_NOCOLOR && ck[2 * i] == color)
            m[n++] = (struct member){ck[2 * i], ck[2 * i + 1], i};
    }
    qsort(m, (size_t)n, sizeof(*m), by_key);
    for (int i = 0; i < n; i++)
        if (m[i].rank == comm->rank)
            me = i;

    rec_len = sizeof(struct sc_wire_rank) + (size_t)maxn * sizeof(struct sc_wire_peer);
    rec = calloc(1, rec_len);
    recs = calloc((size_t)pn, rec_len);
    all = calloc((size_t)maxn, rec_len);
    if (!rec || !recs || !all) {
        r = sc_fail(comm, srcclSystemError, "srcclCommSplit: out of memory");
        goto out;
    }
    /* Failures of our own stay off the parent (it remains usable): the
     * message goes into msg, the status to the group. */
    srcclResult_t mine_r = srcclSuccess;
    char msg[448] = "";
    if (me >= 0) {
        if (!(c = sc_comm_alloc(n, me, &comm->cfg)))
            mine_r = sc_msg(msg, sizeof(msg), srcclSystemError, "out of memory");
        else if (n > 1 && (mine_r = sc_tp_open(c, rec)))
            sc_msg(msg, sizeof(msg), mine_r, "%s", c->last_err);
    }
    if (me < 0 || n == 1 || mine_r)
        memset(rec, 0, rec_len); /* magic 0: nothing (NOCOLOR, alone, or failed) */
    if ((r = parent_allgather(comm, rec, recs, rec_len)))
        goto out;
    if (me >= 0 && n > 1 && !mine_r) {
        for (int i = 0; i < n && !mine_r; i++) {
            memcpy(all + (size_t)i * rec_len, recs + (size_t)m[i].rank * rec_len, rec_len);
            if (((const struct sc_wire_rank *)(const void *)(all + (size_t)i * rec_len))->magic ==
                0)
                mine_r = sc_msg(msg, sizeof(msg), srcclRemoteError,
                                "rank %d could not set up its device (see that rank's error)",
                                m[i].rank);
        }
        if (!mine_r && (mine_r = sc_tp_connect(c, all, rec_len)))
            sc_msg(msg, sizeof(msg), mine_r, "%s", c->last_err);
    }
    int32_t st = (int32_t)mine_r;
    if ((r = parent_allgather(comm, &st, status, sizeof(st))))
        goto out;
    for (int i = 0; i < n && !mine_r; i++)
        if (status[m[i].rank])
            mine_r =
                sc_msg(msg, sizeof(msg), (srcclResult_t)status[m[i].rank],
                       "rank %d failed to set up the new communicator (see its error)", m[i].rank);
    r = mine_r;
    if (r) {
        snprintf(comm->last_err, sizeof(comm->last_err), "rank %d: srcclCommSplit: %s", comm->rank,
                 msg);
    } else if (c) {
        sc_shm_ready(c); /* the status all-gather was the barrier: all mapped */
        sc_debug(c, "split from rank %d of %d (color %d key %d): rank %d of %d", comm->rank, pn,
                 color, key, me, n);
    }
out:
    if (r) {
        sc_set_thread_error("%s", comm->last_err);
        sc_comm_free(c);
        c = NULL;
    }
    *newcomm = c;
    free(m);
    free(ck);
    free(status);
    free(rec);
    free(recs);
    free(all);
    return r;
}
