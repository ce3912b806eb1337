/* vendor_stubs.c: stand-ins for the vendor libraries (libmlx5.so.1,
 * libefa.so.1) that Debian's perftest binaries are linked against. The
 * real ones register hardware providers with libibverbs' private
 * interface; perftest only calls into them for vendor-only options (-c DC,
 * -c SRD, --aes_xts), so these answer "not supported". Built twice, once
 * per library, each with its own version script. Signatures are reduced to
 * what the ABI needs: every argument is a pointer or an integer. */
#include <errno.h>
#include <stddef.h>

#define STUB_PTR(name, ...)                                                                        \
    void *name(__VA_ARGS__);                                                                       \
    void *name(__VA_ARGS__)                                                                        \
    {                                                                                              \
        errno = EOPNOTSUPP;                                                                        \
        return NULL;                                                                               \
    }
#define STUB_INT(name, ...)                                                                        \
    int name(__VA_ARGS__);                                                                         \
    int name(__VA_ARGS__)                                                                          \
    {                                                                                              \
        return EOPNOTSUPP;                                                                         \
    }

#ifdef SR_STUB_MLX5
STUB_PTR(mlx5dv_create_qp, void *ctx, void *attr, void *mlx5_attr)
STUB_PTR(mlx5dv_open_device, void *device, void *attr)
STUB_INT(mlx5dv_devx_general_cmd, void *ctx, const void *in, size_t inlen, void *out, size_t outlen)
STUB_PTR(mlx5dv_create_mkey, void *attr)
STUB_INT(mlx5dv_destroy_mkey, void *mkey)
STUB_PTR(mlx5dv_qp_ex_from_ibv_qp_ex, void *qp)
STUB_INT(mlx5dv_crypto_login, void *ctx, void *attr)
STUB_PTR(mlx5dv_dek_create, void *ctx, void *attr)
STUB_INT(mlx5dv_dek_destroy, void *dek)
#endif

#ifdef SR_STUB_EFA
STUB_PTR(efadv_create_qp_ex, void *ctx, void *attr, void *efa_attr, unsigned int inlen)
STUB_INT(efadv_query_device, void *ctx, void *attr, unsigned int inlen)
#endif
