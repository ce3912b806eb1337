/* evq.c: event queues behind a file descriptor (completion channels and
 * the async event fd). Events wait in memory; the fd (one end of a
 * socketpair) carries one byte per event so that poll/epoll and blocking
 * reads work as applications expect. Destroying an object purges its
 * pending events (and their bytes), so no event ever names a destroyed
 * object (ibv_get_cq_event(3), ibv_get_async_event(3)). */
#include "sv.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

int sv_evq_init(struct sv_evq *q)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
        return errno;
    /* the writer runs with the NIC lock held: it must never block */
    fcntl(sv[1], F_SETFL, O_NONBLOCK);
    q->rfd = sv[0];
    q->wfd = sv[1];
    q->ev = NULL;
    q->cap = q->head = q->cnt = 0;
    pthread_mutex_init(&q->lock, NULL);
    return 0;
}

void sv_evq_fini(struct sv_evq *q)
{
    close(q->rfd);
    close(q->wfd);
    free(q->ev);
    pthread_mutex_destroy(&q->lock);
}

void sv_evq_post(struct sv_evq *q, int type, void *obj)
{
    pthread_mutex_lock(&q->lock);
    if (q->cnt == q->cap) {
        uint32_t cap = q->cap ? q->cap * 2 : 16;
        struct sv_ev *ev = malloc(cap * sizeof(*ev));
        if (!ev) {
            pthread_mutex_unlock(&q->lock);
            return; /* dropped, as a full kernel event queue would */
        }
        for (uint32_t i = 0; i < q->cnt; i++)
            ev[i] = q->ev[(q->head + i) % q->cap];
        free(q->ev);
        q->ev = ev;
        q->cap = cap;
        q->head = 0;
    }
    q->ev[(q->head + q->cnt) % q->cap] = (struct sv_ev){.type = type, .obj = obj};
    q->cnt++;
    pthread_mutex_unlock(&q->lock);
    char b = 1;
    ssize_t n = write(q->wfd, &b, 1);
    (void)n;
}

int sv_evq_get(struct sv_evq *q, struct sv_ev *out)
{
    for (;;) {
        char b;
        ssize_t n = read(q->rfd, &b, 1); /* blocks unless the application made it non-blocking */
        if (n != 1)
            return -1;
        pthread_mutex_lock(&q->lock);
        if (q->cnt) {
            *out = q->ev[q->head];
            q->head = (q->head + 1) % q->cap;
            q->cnt--;
            pthread_mutex_unlock(&q->lock);
            return 0;
        }
        /* its event was purged by a destroy: wait for the next one */
        pthread_mutex_unlock(&q->lock);
    }
}

void sv_evq_purge(struct sv_evq *q, const void *obj)
{
    pthread_mutex_lock(&q->lock);
    uint32_t kept = 0, gone = 0;
    for (uint32_t i = 0; i < q->cnt; i++) {
        struct sv_ev e = q->ev[(q->head + i) % q->cap];
        if (e.obj == obj)
            gone++;
        else
            q->ev[(q->head + kept++) % q->cap] = e;
    }
    q->cnt = kept;
    pthread_mutex_unlock(&q->lock);
    /* take back their bytes; a concurrent reader may have taken some, and
     * then finds the queue short and reads on (sv_evq_get) */
    char buf[64];
    while (gone) {
        ssize_t n = recv(q->rfd, buf, gone < sizeof(buf) ? gone : sizeof(buf), MSG_DONTWAIT);
        if (n <= 0)
            break;
        gone -= (uint32_t)n;
    }
}
