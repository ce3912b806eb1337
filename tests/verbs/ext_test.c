/* ext_test.c: the verbs beyond the basic set, as rdma-core's own test
 * suite exercises them: extended device attributes and the GID table of
 * a RoCE port, QP creation flags and send ops, device memory,
 * ibv_rereg_mr, and on-demand paging with an implicit MR (a remote access
 * to memory that is not mapped is a remote access error, never a crash of
 * the target). The peer is the vt agent. */
#include "vt.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* exported by libibverbs, declared only in rdma-core's private headers */
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size);

static void case_attrs(int fd, const void *arg)
{
    (void)fd, (void)arg;
    struct vt_dev d;
    vt_dev_open(&d);
    struct ibv_device_attr_ex x;
    VT_REQUIRE(ibv_query_device_ex(d.ctx, NULL, &x) == 0);
    VT_EQ(x.phys_port_cnt_ex, x.orig_attr.phys_port_cnt);
    VT_EQX(x.device_cap_flags_ex & 0xffffffffu, (uint32_t)x.orig_attr.device_cap_flags);
    VT_EQX(x.orig_attr.page_size_cap, 4096u | (2u << 20) | (1u << 30));
    VT_CHECK(x.odp_caps.general_caps & IBV_ODP_SUPPORT_IMPLICIT);
    VT_CHECK(x.odp_caps.per_transport_caps.rc_odp_caps & IBV_ODP_SUPPORT_WRITE);
    VT_CHECK(x.max_dm_size > 0);
    VT_CHECK(x.hca_core_clock > 0);
    struct ibv_query_device_ex_input in = {.comp_mask = 1};
    VT_EQ(ibv_query_device_ex(d.ctx, &in, &x), EINVAL);
    /* a real descriptor, closed on exec */
    int fl = fcntl(d.ctx->cmd_fd, F_GETFD);
    VT_CHECK(fl >= 0 && (fl & FD_CLOEXEC));
    VT_CHECK(d.port.port_cap_flags & IBV_PORT_IP_BASED_GIDS);

    /* the GID table of a RoCE port on an IPv4 address, with softrdma's
     * address kept at index 0 */
    struct ibv_gid_entry e[4];
    VT_EQ(ibv_query_gid_table(d.ctx, e, 4, 0), 4);
    VT_EQ(e[0].gid_type, IBV_GID_TYPE_ROCE_V2);
    VT_EQ(e[1].gid_type, IBV_GID_TYPE_IB);
    VT_EQ(e[2].gid_type, IBV_GID_TYPE_IB);
    VT_EQ(e[3].gid_type, IBV_GID_TYPE_ROCE_V2);
    VT_CHECK(e[1].gid.raw[0] == 0xfe && e[1].gid.raw[1] == 0x80);
    VT_CHECK(memcmp(e[3].gid.raw, d.gid.raw, 16) == 0);
    VT_CHECK(memcmp(e[2].gid.raw, d.gid.raw, 16) == 0);
    struct ibv_gid_entry one;
    VT_EQ(ibv_query_gid_ex(d.ctx, 1, 3, &one, 0), 0);
    VT_EQ(one.gid_type, IBV_GID_TYPE_ROCE_V2);
    VT_EQ(ibv_query_gid_ex(d.ctx, 1, 4, &one, 0), ENODATA);
    VT_EQ(ibv_query_gid_table(d.ctx, e, 1, 0), -EINVAL);
    char buf[64];
    VT_CHECK(ibv_read_sysfs_file(d.ctx->device->ibdev_path, "ports/1/gid_attrs/types/3", buf,
                                 sizeof(buf)) > 0 &&
             !strcmp(buf, "RoCE v2"));
    VT_CHECK(ibv_read_sysfs_file(d.ctx->device->ibdev_path, "ports/1/gid_attrs/types/2", buf,
                                 sizeof(buf)) > 0 &&
             !strcmp(buf, "IB/RoCE v1"));
    vt_dev_close(&d);
}

static void case_qp_create(int fd, const void *arg)
{
    (void)fd, (void)arg;
    struct vt_dev d;
    vt_dev_open(&d);
    struct ibv_cq *cq = ibv_create_cq(d.ctx, 16, NULL, NULL, 0);
    VT_REQUIRE(cq);
    struct ibv_qp_init_attr_ex a = {
        .send_cq = cq,
        .recv_cq = cq,
        .cap = {.max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1, .max_recv_sge = 1},
        .qp_type = IBV_QPT_RC,
        .comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS,
        .pd = d.pd,
        .create_flags = 0};
    struct ibv_qp *qp = ibv_create_qp_ex(d.ctx, &a);
    if (VT_CHECKF(qp, "create flags 0: errno %d", errno))
        VT_EQ(ibv_destroy_qp(qp), 0);
    a.create_flags = IBV_QP_CREATE_SCATTER_FCS;
    errno = 0;
    VT_CHECK(!ibv_create_qp_ex(d.ctx, &a) && errno == EOPNOTSUPP);
    /* a send op the QP could never post is refused at creation */
    a.create_flags = 0;
    a.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    a.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_TSO;
    errno = 0;
    VT_CHECK(!ibv_create_qp_ex(d.ctx, &a) && errno == EOPNOTSUPP);
    /* ATOMIC WRITE is an RC opcode (IBA 1.5): RC takes it, UC does not */
    a.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_ATOMIC_WRITE;
    qp = ibv_create_qp_ex(d.ctx, &a);
    if (VT_CHECKF(qp, "RC with ATOMIC WRITE: errno %d", errno))
        VT_EQ(ibv_destroy_qp(qp), 0);
    a.qp_type = IBV_QPT_UC;
    errno = 0;
    VT_CHECK(!ibv_create_qp_ex(d.ctx, &a) && errno == EOPNOTSUPP);
    a.qp_type = IBV_QPT_RC;
    a.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND;
    qp = ibv_create_qp_ex(d.ctx, &a);
    if (VT_CHECK(qp))
        VT_EQ(ibv_destroy_qp(qp), 0);
    VT_EQ(ibv_destroy_cq(cq), 0);
    vt_dev_close(&d);
}

static void case_dm(int fd, const void *arg)
{
    (void)fd, (void)arg;
    struct vt_dev d;
    vt_dev_open(&d);
    struct ibv_device_attr_ex x;
    VT_REQUIRE(ibv_query_device_ex(d.ctx, NULL, &x) == 0);
    struct ibv_alloc_dm_attr da = {.length = x.max_dm_size + 4};
    errno = 0;
    VT_CHECK(!ibv_alloc_dm(d.ctx, &da) && errno == EINVAL);
    da.length = 256;
    struct ibv_dm *dm = ibv_alloc_dm(d.ctx, &da);
    VT_REQUIRE(dm);
    uint8_t in[256], out[256];
    vt_pat_fill(in, sizeof(in), 3, 0);
    VT_EQ(ibv_memcpy_to_dm(dm, 0, in, sizeof(in)), 0);
    memset(out, 0, sizeof(out));
    VT_EQ(ibv_memcpy_from_dm(out, dm, 64, 64), 0);
    VT_CHECK(memcmp(out, in + 64, 64) == 0);
    VT_EQ(ibv_memcpy_to_dm(dm, 2, in, 4), EINVAL);      /* unaligned offset */
    VT_EQ(ibv_memcpy_to_dm(dm, 0, in, 6), EINVAL);      /* unaligned length */
    VT_EQ(ibv_memcpy_from_dm(out, dm, 252, 8), EINVAL); /* past the end */
    unsigned acc = IBV_ACCESS_ZERO_BASED | IBV_ACCESS_LOCAL_WRITE;
    errno = 0;
    VT_CHECK(!ibv_reg_dm_mr(d.pd, dm, 0, 260, acc) && errno == EINVAL);
    errno = 0;
    VT_CHECK(!ibv_reg_dm_mr(d.pd, dm, 0, 256, IBV_ACCESS_LOCAL_WRITE) && errno == EINVAL);
    struct ibv_mr *mr = ibv_reg_dm_mr(d.pd, dm, 0, 256, acc);
    VT_REQUIRE(mr);
    VT_EQ(ibv_free_dm(dm), EBUSY); /* still registered */
    VT_EQ(ibv_dereg_mr(mr), 0);
    VT_EQ(ibv_free_dm(dm), 0);
    vt_dev_close(&d);
}

/* ibv_rereg_mr: the input errors rdma-core answers, then an access change
 * that a remote WRITE sees, then a new translation under the same keys. */
static void case_rereg(int fd, const void *arg)
{
    (void)arg;
    struct vt_dev d;
    vt_dev_open(&d);
    struct vt_remote_mr r0;
    vt_agent_hello(fd, &r0);
    struct vt_qp q;
    struct vt_qp_caps caps;
    vt_caps_default(&caps);
    vt_qp_create(&d, &q, &caps, NULL, NULL, NULL);
    vt_agent_pair(fd, &d, &q, 0, NULL, NULL, NULL, NULL);
    uint8_t *a = aligned_alloc(4096, 8192), *b = aligned_alloc(4096, 8192);
    VT_REQUIRE(a && b);
    memset(a, 0, 8192);
    memset(b, 0, 8192);
    struct ibv_mr *mr = ibv_reg_mr(d.pd, a, 8192, IBV_ACCESS_LOCAL_WRITE);
    VT_REQUIRE(mr);
    uint32_t rkey = mr->rkey;
    errno = 0;
    VT_EQ(ibv_rereg_mr(mr, 1 << 7, NULL, NULL, 0, 0), IBV_REREG_MR_ERR_INPUT);
    VT_EQ(errno, EINVAL);
    VT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, NULL, 0, 0),
          IBV_REREG_MR_ERR_INPUT);
    /* remote write without local write (IBA 10.6.3.1) */
    VT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, IBV_ACCESS_REMOTE_WRITE),
          IBV_REREG_MR_ERR_INPUT);

    vt_agent_fill(fd, 0, 0, 4096, 9, 0);
    struct vt_send_req w = {.opcode = IBV_WR_RDMA_WRITE,
                            .remote_addr = (uintptr_t)a,
                            .rkey = rkey,
                            .nsge = 1,
                            .sge = {{.mr = 0, .len = 4096, .off = 0}}};
    struct ibv_wc wc;
    VT_EQ(vt_agent_post_send(fd, 0, &w, &wc), 0);
    VT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR); /* no remote write yet */
    /* the agent's QP is in error now: a fresh pair for the rest */
    vt_qp_destroy(&q);
    vt_agent_qp_destroy(fd, 0);
    vt_qp_create(&d, &q, &caps, NULL, NULL, NULL);
    vt_agent_pair(fd, &d, &q, 0, NULL, NULL, NULL, NULL);
    VT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
                       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE),
          0);
    VT_EQ(mr->rkey, rkey);
    VT_EQ(vt_agent_post_send(fd, 0, &w, &wc), 0);
    VT_EQ(wc.status, IBV_WC_SUCCESS);
    VT_CHECK(vt_pat_diff(a, 4096, 9, 0) < 0);
    /* new translation: the same rkey now reaches b */
    VT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, b, 8192, 0), 0);
    VT_EQ(mr->rkey, rkey);
    w.remote_addr = (uintptr_t)b + 4096;
    VT_EQ(vt_agent_post_send(fd, 0, &w, &wc), 0);
    VT_EQ(wc.status, IBV_WC_SUCCESS);
    VT_CHECK(vt_pat_diff(b + 4096, 4096, 9, 0) < 0);
    VT_EQ(ibv_dereg_mr(mr), 0);
    vt_qp_destroy(&q);
    free(a);
    free(b);
    vt_dev_close(&d);
}

/* An implicit ODP MR (address 0, SIZE_MAX bytes) takes a remote WRITE
 * anywhere mapped; a WRITE to a page that is not mapped completes with a
 * remote access error at the writer and this process goes on. */
static void case_odp_implicit(int fd, const void *arg)
{
    (void)arg;
    struct vt_dev d;
    vt_dev_open(&d);
    struct vt_remote_mr r0;
    vt_agent_hello(fd, &r0);
    struct vt_qp q;
    struct vt_qp_caps caps;
    vt_caps_default(&caps);
    vt_qp_create(&d, &q, &caps, NULL, NULL, NULL);
    struct vt_conn lc;
    vt_conn_default(&d, &lc);
    vt_agent_pair(fd, &d, &q, 0, NULL, &lc, NULL, NULL);
    int acc = IBV_ACCESS_ON_DEMAND | IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
    errno = 0;
    VT_CHECK(!ibv_reg_mr(d.pd, NULL, 4096, acc) && errno == EINVAL);
    struct ibv_mr *mr = ibv_reg_mr(d.pd, NULL, SIZE_MAX, acc);
    VT_REQUIRE(mr);
    uint8_t *m = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    VT_REQUIRE(m != MAP_FAILED);
    VT_REQUIRE(munmap(m + 4096, 4096) == 0); /* a hole */
    /* The peer's WRITE follows this mapping, and this thread's reads follow
     * the WRITE, through the out-of-band socket and the peer process,
     * which ThreadSanitizer cannot see; a verb that takes the NIC lock
     * orders each (as registering the memory would for an explicit MR). */
    struct ibv_qp_attr qa;
    struct ibv_qp_init_attr qia;
    VT_EQ(ibv_query_qp(q.qp, &qa, IBV_QP_STATE, &qia), 0);
    vt_agent_fill(fd, 0, 0, 4096, 11, 0);
    struct vt_send_req w = {.opcode = IBV_WR_RDMA_WRITE,
                            .remote_addr = (uintptr_t)m,
                            .rkey = mr->rkey,
                            .nsge = 1,
                            .sge = {{.mr = 0, .len = 4096, .off = 0}}};
    struct ibv_wc wc;
    VT_EQ(vt_agent_post_send(fd, 0, &w, &wc), 0);
    VT_EQ(wc.status, IBV_WC_SUCCESS);
    VT_EQ(ibv_query_qp(q.qp, &qa, IBV_QP_STATE, &qia), 0);
    VT_CHECK(vt_pat_diff(m, 4096, 11, 0) < 0);
    struct ibv_sge sg = {.addr = (uintptr_t)m, .length = 4096, .lkey = mr->lkey};
    VT_EQ(
        ibv_advise_mr(d.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, IBV_ADVISE_MR_FLAG_FLUSH, &sg, 1),
        0);
    VT_EQ(ibv_advise_mr(d.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 1 << 5, &sg, 1), EOPNOTSUPP);
    w.remote_addr = (uintptr_t)m + 4096;
    VT_EQ(vt_agent_post_send(fd, 0, &w, &wc), 0);
    VT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR);
    VT_EQ(ibv_dereg_mr(mr), 0);
    munmap(m, 4096);
    munmap(m + 2 * 4096, 4096);
    vt_qp_destroy(&q);
    vt_dev_close(&d);
}

/* Importing within one process (ibv_import_device(3) and family): a dup
 * of cmd_fd opens a context sharing the original's objects by handle;
 * imports are wrappers the original outlives and keeps owning. */
static void case_import(int fd, const void *arg)
{
    (void)fd, (void)arg;
    struct vt_dev d;
    vt_dev_open(&d);
    static uint8_t buf[8192];
    struct ibv_mr *mr = ibv_reg_mr(d.pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
    VT_REQUIRE(mr);
    struct ibv_alloc_dm_attr da = {.length = 4096};
    struct ibv_dm *dm = ibv_alloc_dm(d.ctx, &da);
    VT_REQUIRE(dm);
    VT_CHECK(d.pd->handle && mr->handle && dm->handle);
    VT_CHECK(d.pd->handle != mr->handle && mr->handle != dm->handle);

    struct ibv_context *ictx = ibv_import_device(dup(d.ctx->cmd_fd));
    VT_REQUIRE(ictx);
    struct ibv_pd *ipd = ibv_import_pd(ictx, d.pd->handle);
    VT_REQUIRE(ipd);
    VT_CHECK(ipd != d.pd && ipd->context == ictx && ipd->handle == d.pd->handle);
    struct ibv_mr *imr = ibv_import_mr(ipd, mr->handle);
    VT_REQUIRE(imr);
    VT_CHECK(imr->lkey == mr->lkey && imr->rkey == mr->rkey && imr->length == mr->length);
    VT_CHECK(imr->pd == ipd && imr->context == ictx);
    struct ibv_dm *idm = ibv_import_dm(ictx, dm->handle);
    VT_REQUIRE(idm);
    uint32_t in = 0xabcdef01, out = 0;
    VT_EQ(ibv_memcpy_to_dm(dm, 0, &in, 4), 0);
    VT_EQ(ibv_memcpy_from_dm(&out, idm, 0, 4), 0);
    VT_EQ(out, in);
    /* the imported PD makes objects in the imported context */
    struct ibv_cq *cq = ibv_create_cq(ictx, 4, NULL, NULL, 0);
    VT_REQUIRE(cq);
    struct ibv_qp_init_attr qa = {
        .send_cq = cq,
        .recv_cq = cq,
        .cap = {.max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1},
        .qp_type = IBV_QPT_RC};
    struct ibv_qp *qp = ibv_create_qp(ipd, &qa);
    if (VT_CHECKF(qp, "QP on an imported PD: errno %d", errno))
        VT_EQ(ibv_destroy_qp(qp), 0);
    VT_EQ(ibv_destroy_cq(cq), 0);
    /* unknown handles, and objects of a context that shares no cmd_fd */
    errno = 0;
    VT_CHECK(!ibv_import_pd(ictx, d.pd->handle + 1000) && errno == ENOENT);
    errno = 0;
    VT_CHECK(!ibv_import_mr(ipd, mr->handle + 1000) && errno == ENOENT);
    struct vt_dev other;
    vt_dev_open(&other);
    errno = 0;
    VT_CHECK(!ibv_import_pd(other.ctx, d.pd->handle) && errno == ENOENT);
    vt_dev_close(&other);

    ibv_unimport_dm(idm);
    ibv_unimport_mr(imr);
    ibv_unimport_pd(ipd);
    /* gone from the live table: destroying them now is EINVAL */
    VT_EQ(ibv_dereg_mr(imr), EINVAL);
    VT_EQ(ibv_dealloc_pd(ipd), EINVAL);
    VT_EQ(ibv_close_device(ictx), 0);
    /* the originals still own everything */
    VT_EQ(ibv_memcpy_from_dm(&out, dm, 0, 4), 0);
    VT_EQ(out, in);
    VT_EQ(ibv_free_dm(dm), 0);
    VT_EQ(ibv_dereg_mr(mr), 0);
    vt_dev_close(&d);
}

static const struct vt_case cases[] = {
    {"attrs", case_attrs, NULL, NULL},
    {"qp_create", case_qp_create, NULL, NULL},
    {"dm", case_dm, NULL, NULL},
    {"rereg", case_rereg, NULL, NULL},
    {"odp_implicit", case_odp_implicit, NULL, NULL},
    {"import", case_import, NULL, NULL},
};

int main(int argc, char **argv)
{
    return vt_main(argc, argv, cases, sizeof(cases) / sizeof(cases[0]));
}
