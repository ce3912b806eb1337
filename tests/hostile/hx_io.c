/* hx_io.c: the clock and the bounded out-of-band read shared by the victim
 * and the attacker of hostile.forged_packets. */
#include "hostile.h"

#include <errno.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

uint64_t hx_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

bool hx_read_full(int fd, void *p, size_t len, uint64_t end_ms)
{
    uint8_t *c = p;
    while (len) {
        uint64_t now = hx_now_ms();
        if (now >= end_ms)
            return false;
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        int r = poll(&pf, 1, (int)(end_ms - now));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        ssize_t n = read(fd, c, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        c += n;
        len -= (size_t)n;
    }
    return true;
}
