/* sr_util.h: small helpers every layer may use: container_of, branch hints,
 * and big-endian loads/stores for wire formats (unaligned-safe). */
#ifndef SR_UTIL_H
#define SR_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define SR_ARRAY_SIZE(a)                   (sizeof(a) / sizeof((a)[0]))
#define sr_container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))
#define sr_likely(x)                       __builtin_expect(!!(x), 1)
#define sr_unlikely(x)                     __builtin_expect(!!(x), 0)
#define SR_MIN(a, b)                       ((a) < (b) ? (a) : (b))
#define SR_MAX(a, b)                       ((a) > (b) ? (a) : (b))

/* The soft NIC's "DMA": the engine and drivers read and write registered
 * memory from the NIC thread, unsynchronized with the application by
 * design (IBA memory semantics: the application learns of it through
 * completions). ThreadSanitizer would report every RDMA transfer as a race;
 * these brackets tell it that these accesses are the device's. */
#if defined(__SANITIZE_THREAD__)
#define SR_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SR_TSAN 1
#endif
#endif
#ifdef SR_TSAN
void AnnotateIgnoreReadsBegin(const char *file, int line);
void AnnotateIgnoreReadsEnd(const char *file, int line);
void AnnotateIgnoreWritesBegin(const char *file, int line);
void AnnotateIgnoreWritesEnd(const char *file, int line);
#define SR_DMA_BEGIN()                                                                             \
    (AnnotateIgnoreReadsBegin(__FILE__, __LINE__), AnnotateIgnoreWritesBegin(__FILE__, __LINE__))
#define SR_DMA_END()                                                                               \
    (AnnotateIgnoreWritesEnd(__FILE__, __LINE__), AnnotateIgnoreReadsEnd(__FILE__, __LINE__))
#else
#define SR_DMA_BEGIN() ((void)0)
#define SR_DMA_END()   ((void)0)
#endif

static inline uint16_t sr_get_be16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}
static inline uint32_t sr_get_be24(const uint8_t *p)
{
    return (uint32_t)p[0] << 16 | (uint32_t)p[1] << 8 | p[2];
}
static inline uint32_t sr_get_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static inline uint64_t sr_get_be64(const uint8_t *p)
{
    return (uint64_t)sr_get_be32(p) << 32 | sr_get_be32(p + 4);
}
static inline void sr_put_be16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}
static inline void sr_put_be24(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 16);
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)v;
}
static inline void sr_put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}
static inline void sr_put_be64(uint8_t *p, uint64_t v)
{
    sr_put_be32(p, (uint32_t)(v >> 32));
    sr_put_be32(p + 4, (uint32_t)v);
}
/* Little-endian: the ICRC goes on the wire least-significant byte first
 * (as Ethernet's FCS); pcap headers. */
static inline uint32_t sr_get_le32(const uint8_t *p)
{
    return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline void sr_put_le32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

#endif
