/* sr_test.h: a minimal table-friendly test harness. A failed check prints
 * its location and values and marks the run failed; SR_TEST_MAIN returns the
 * process exit code for ctest. */
#ifndef SR_TEST_H
#define SR_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int sr_test_failures;
static int sr_test_checks;
static const char *sr_test_ctx = ""; /* set per table row for messages */

#define SR_CHECK(cond)                                                                             \
    do {                                                                                           \
        sr_test_checks++;                                                                          \
        if (!(cond)) {                                                                             \
            sr_test_failures++;                                                                    \
            fprintf(stderr, "%s:%d: [%s] check failed: %s\n", __FILE__, __LINE__, sr_test_ctx,     \
                    #cond);                                                                        \
        }                                                                                          \
    } while (0)

#define SR_CHECK_EQ(a, b)                                                                          \
    do {                                                                                           \
        unsigned long long sr_a_ = (unsigned long long)(a), sr_b_ = (unsigned long long)(b);       \
        sr_test_checks++;                                                                          \
        if (sr_a_ != sr_b_) {                                                                      \
            sr_test_failures++;                                                                    \
            fprintf(stderr, "%s:%d: [%s] %s == %s: 0x%llx != 0x%llx\n", __FILE__, __LINE__,        \
                    sr_test_ctx, #a, #b, sr_a_, sr_b_);                                            \
        }                                                                                          \
    } while (0)

/* Equal byte ranges; a failure names the first byte that differs. */
#define SR_CHECK_MEM(a, b, n) sr_check_mem((a), (b), (n), __FILE__, __LINE__, #a, #b)

static inline void sr_check_mem(const void *a, const void *b, size_t n, const char *file, int line,
                                const char *an, const char *bn)
{
    const unsigned char *x = a, *y = b;
    sr_test_checks++;
    for (size_t i = 0; i < n; i++)
        if (x[i] != y[i]) {
            sr_test_failures++;
            fprintf(stderr, "%s:%d: [%s] %s == %s (%zu bytes): byte %zu is 0x%02x, not 0x%02x\n",
                    file, line, sr_test_ctx, an, bn, n, i, x[i], y[i]);
            return;
        }
}

#define SR_RUN(fn)                                                                                 \
    do {                                                                                           \
        int sr_before_ = sr_test_failures;                                                         \
        sr_test_ctx = #fn;                                                                         \
        fn();                                                                                      \
        printf("%-40s %s\n", #fn, sr_test_failures == sr_before_ ? "ok" : "FAILED");               \
    } while (0)

#define SR_TEST_RESULT()                                                                           \
    (printf("%d checks, %d failed\n", sr_test_checks, sr_test_failures), sr_test_failures ? 1 : 0)

#endif
