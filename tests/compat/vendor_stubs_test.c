/* vendor_stubs_test.c: the stand-in libmlx5.so.1 and libefa.so.1, called
 * the way UCX, perftest and pyverbs call them, with objects of a softrdma
 * device: each answers as rdma-core's libraries answer for a device that
 * is not theirs, and none reads or writes what it was handed. */
#include <dlfcn.h>
#include <errno.h>
#include <infiniband/efadv.h>
#include <infiniband/mlx5dv.h>
#include <stdio.h>
#include <string.h>

static int failures;

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "%s:%d: FAIL: %s (errno %d)\n", __FILE__, __LINE__, #c, errno);        \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

static bool all_bytes(const void *p, size_t len, unsigned char v)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < len; i++)
        if (b[i] != v)
            return false;
    return true;
}

int main(void)
{
    struct ibv_device **list = ibv_get_device_list(NULL);
    if (!list || !list[0]) {
        fprintf(stderr, "no device\n");
        return 1;
    }
    struct ibv_context *ctx = ibv_open_device(list[0]);
    struct ibv_pd *pd = ctx ? ibv_alloc_pd(ctx) : NULL;
    struct ibv_cq *cq = pd ? ibv_create_cq(ctx, 16, NULL, NULL, 0) : NULL;
    struct ibv_qp_init_attr qia = {
        .send_cq = cq,
        .recv_cq = cq,
        .qp_type = IBV_QPT_RC,
        .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1}};
    struct ibv_qp *qp = cq ? ibv_create_qp(pd, &qia) : NULL;
    if (!qp) {
        fprintf(stderr, "could not set up a QP: errno %d\n", errno);
        return 1;
    }

    /* UCX and pyverbs ask first and stop at "no". */
    CHECK(!mlx5dv_is_supported(list[0]));
    struct mlx5dv_context_attr dattr = {0};
    errno = 0;
    CHECK(mlx5dv_open_device(list[0], &dattr) == NULL && errno == EOPNOTSUPP);

    /* mlx5dv_init_obj on our QP and CQ: EOPNOTSUPP, outputs untouched. */
    struct mlx5dv_qp dvqp;
    struct mlx5dv_cq dvcq;
    memset(&dvqp, 0xa5, sizeof(dvqp));
    memset(&dvcq, 0xa5, sizeof(dvcq));
    struct mlx5dv_obj obj = {.qp = {.in = qp, .out = &dvqp}, .cq = {.in = cq, .out = &dvcq}};
    CHECK(mlx5dv_init_obj(&obj, MLX5DV_OBJ_QP | MLX5DV_OBJ_CQ) == EOPNOTSUPP);
    CHECK(all_bytes(&dvqp, sizeof(dvqp), 0xa5) && all_bytes(&dvcq, sizeof(dvcq), 0xa5));
    CHECK(mlx5dv_init_obj(&obj, 0) == EINVAL);
    /* The MLX5_1.0 version, which binaries of that ABI bind to. */
    int (*init_obj_1_0)(struct mlx5dv_obj *, uint64_t) =
        (int (*)(struct mlx5dv_obj *, uint64_t))dlvsym(RTLD_DEFAULT, "mlx5dv_init_obj", "MLX5_1.0");
    CHECK(init_obj_1_0 != NULL);
    if (init_obj_1_0)
        CHECK(init_obj_1_0(&obj, MLX5DV_OBJ_CQ) == EOPNOTSUPP);

    struct mlx5dv_context mattr = {0};
    CHECK(mlx5dv_query_device(ctx, &mattr) == EOPNOTSUPP);
    struct mlx5dv_port port;
    CHECK(mlx5dv_query_port(ctx, 1, &port) == EOPNOTSUPP); /* inline, via _mlx5dv_query_port */
    struct ibv_qp_init_attr_ex qiax = {
        .qp_type = IBV_QPT_DRIVER, .pd = pd, .comp_mask = IBV_QP_INIT_ATTR_PD};
    struct mlx5dv_qp_init_attr mqia = {0};
    errno = 0;
    CHECK(mlx5dv_create_qp(ctx, &qiax, &mqia) == NULL && errno == EOPNOTSUPP);
    uint32_t in[4] = {0}, out[4] = {0};
    CHECK(mlx5dv_devx_qp_query(qp, in, sizeof(in), out, sizeof(out)) == EOPNOTSUPP);
    errno = 0;
    CHECK(mlx5dv_dr_domain_create(ctx, MLX5DV_DR_DOMAIN_TYPE_NIC_RX) == NULL &&
          errno == EOPNOTSUPP);
    errno = 0;
    CHECK(mlx5dv_devx_get_event(NULL, NULL, 0) == -1 && errno == EOPNOTSUPP);

    /* libfabric's efa provider and perftest -c SRD. */
    struct efadv_device_attr eattr;
    memset(&eattr, 0xa5, sizeof(eattr));
    CHECK(efadv_query_device(ctx, &eattr, sizeof(eattr)) == EOPNOTSUPP);
    CHECK(all_bytes(&eattr, sizeof(eattr), 0xa5));
    struct efadv_qp_init_attr eqia = {.driver_qp_type = EFADV_QP_DRIVER_TYPE_SRD};
    errno = 0;
    CHECK(efadv_create_qp_ex(ctx, &qiax, &eqia, sizeof(eqia)) == NULL && errno == EOPNOTSUPP);
    errno = 0;
    CHECK(efadv_create_driver_qp(pd, &qia, EFADV_QP_DRIVER_TYPE_SRD) == NULL &&
          errno == EOPNOTSUPP);

    /* Nothing above touched the QP: it still works as a verbs QP. */
    struct ibv_qp_attr qa = {
        .qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = IBV_ACCESS_REMOTE_WRITE};
    CHECK(ibv_modify_qp(qp, &qa,
                        IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0);

    CHECK(ibv_destroy_qp(qp) == 0);
    CHECK(ibv_destroy_cq(cq) == 0);
    CHECK(ibv_dealloc_pd(pd) == 0);
    CHECK(ibv_close_device(ctx) == 0);
    ibv_free_device_list(list);
    printf("%s: %d failures\n", failures ? "FAIL" : "OK", failures);
    return failures ? 1 : 0;
}
