/* error.c: result strings and last-error messages. A communicator keeps its
 * own last error; failures with no communicator yet (initialization, a bad
 * comm argument) go to a per-thread buffer, as errno does. */
#include "sc_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static _Thread_local char thread_err[512];

SC_EXPORT const char *srcclGetErrorString(srcclResult_t r)
{
    switch (r) {
    case srcclSuccess:
        return "no error";
    case srcclSystemError:
        return "system error (a system or verbs call failed)";
    case srcclInternalError:
        return "internal error";
    case srcclInvalidArgument:
        return "invalid argument";
    case srcclInvalidUsage:
        return "invalid usage";
    case srcclRemoteError:
        return "remote error (a peer failed or went away)";
    case srcclTimeout:
        return "timeout (nothing happened for SRCCL_TIMEOUT seconds)";
    case srcclNotSupported:
        return "not supported (yet)";
    case srcclInProgress:
        return "in progress";
    default:
        return "unknown result";
    }
}

SC_EXPORT const char *srcclGetLastError(srcclComm_t comm)
{
    if (comm && comm->magic == SC_COMM_MAGIC)
        return comm->last_err;
    return thread_err;
}

void sc_set_thread_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(thread_err, sizeof(thread_err), fmt, ap);
    va_end(ap);
}

srcclResult_t sc_msg(char *buf, size_t len, srcclResult_t r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, len, fmt, ap);
    va_end(ap);
    return r;
}

srcclResult_t sc_fail(srcclComm_t comm, srcclResult_t r, const char *fmt, ...)
{
    char msg[448];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (comm) {
        snprintf(comm->last_err, sizeof(comm->last_err), "rank %d: %s", comm->rank, msg);
        /* Argument errors leave the communicator usable; the rest poison it. */
        if (r != srcclInvalidArgument && r != srcclInvalidUsage && r != srcclNotSupported &&
            comm->async_err == srcclSuccess)
            comm->async_err = r;
        snprintf(thread_err, sizeof(thread_err), "%s", comm->last_err);
        if (comm->cfg.debug)
            fprintf(stderr, "srccl: %s (%s)\n", comm->last_err, srcclGetErrorString(r));
    } else {
        snprintf(thread_err, sizeof(thread_err), "%s", msg);
    }
    return r;
}

void sc_debug(srcclComm_t comm, const char *fmt, ...)
{
    if (!comm->cfg.debug)
        return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "srccl[%d/%d pid %d]: %s\n", comm->rank, comm->nranks, (int)getpid(), msg);
}
