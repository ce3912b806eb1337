/* sv_stub.h: the shapes of a stand-in vendor function. The stand-in
 * libraries (libmlx5.so.1, libefa.so.1) exist so that programs linked
 * against rdma-core's vendor libraries load on softrdma; no softrdma device
 * is a vendor device, so every entry point answers the way the real library
 * answers for a device that is not its own. Each stub is defined in a file
 * that includes the vendor's system header (<infiniband/mlx5dv.h>, ...), so
 * the compiler holds its signature to the real one. Parameters (the
 * macro's last arguments) are named as in that header and unused. */
#ifndef SV_STUB_H
#define SV_STUB_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

/* An int (or other integer) carrying a positive errno: the vendor's
 * "not my device" answer, rdma-core's usual convention. errno is set too,
 * for the few families (mlx5dv_dr_*) that return errno after setting it. */
#define SV_STUB_ERR(type, name, ...)                                                               \
    type name(__VA_ARGS__)                                                                         \
    {                                                                                              \
        errno = EOPNOTSUPP;                                                                        \
        return EOPNOTSUPP;                                                                         \
    }

/* A function documented to return a negative errno. */
#define SV_STUB_NEG(type, name, ...)                                                               \
    type name(__VA_ARGS__)                                                                         \
    {                                                                                              \
        errno = EOPNOTSUPP;                                                                        \
        return -EOPNOTSUPP;                                                                        \
    }

/* A file descriptor or byte count: -1 with errno. */
#define SV_STUB_M1(type, name, ...)                                                                \
    type name(__VA_ARGS__)                                                                         \
    {                                                                                              \
        errno = EOPNOTSUPP;                                                                        \
        return -1;                                                                                 \
    }

/* An object the caller would own: NULL with errno. */
#define SV_STUB_NULL(type, name, ...)                                                              \
    type name(__VA_ARGS__)                                                                         \
    {                                                                                              \
        errno = EOPNOTSUPP;                                                                        \
        return NULL;                                                                               \
    }

/* A capability question: "no". */
#define SV_STUB_FALSE(name, ...)                                                                   \
    bool name(__VA_ARGS__)                                                                         \
    {                                                                                              \
        return false;                                                                              \
    }

/* Releases an object no stand-in ever hands out: nothing to do. */
#define SV_STUB_VOID(name, ...)                                                                    \
    void name(__VA_ARGS__) {}

#endif
