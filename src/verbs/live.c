/* live.c: the set of live verbs objects, by address. The ABI hands us raw
 * pointers, so a destroyed object cannot be recognised by reading it (that
 * memory is freed); instead every object is entered here when created and
 * removed when destroyed, and the control-path entry points look the
 * pointer up before touching it. NULL is never live. A pointer that malloc
 * hands out again for a new object is live again: a stale pointer to a
 * reused address cannot be told from the new object. The data path
 * (post_send, post_recv, poll_cq) does not look up. */
#include "sv.h"

#include <stdlib.h>

static size_t slot_of(uintptr_t p, uint32_t cap)
{
    return (size_t)((p >> 4) * 0x9e3779b97f4a7c15ull >> 20) & (cap - 1);
}

/* Linear probing; cap a power of two, at most half full. */
static bool grow(struct sv_live *t)
{
    uint32_t cap = t->cap ? t->cap * 2 : 256;
    struct sv_live_slot *s = calloc(cap, sizeof(*s));
    if (!s)
        return false;
    for (uint32_t i = 0; i < t->cap; i++) {
        if (!t->slot[i].obj)
            continue;
        size_t j = slot_of(t->slot[i].obj, cap);
        while (s[j].obj)
            j = (j + 1) & (cap - 1);
        s[j] = t->slot[i];
    }
    free(t->slot);
    t->slot = s;
    t->cap = cap;
    return true;
}

void sv_live_add(const void *obj, enum sv_kind kind)
{
    struct sv_live *t = &sv_device_get()->live;
    pthread_mutex_lock(&t->lock);
    /* Out of memory for the table: stop checking rather than refuse a
     * live object later. */
    if (!t->off && (t->cnt + 1) * 2 > t->cap && !grow(t))
        t->off = true;
    if (!t->off) {
        size_t j = slot_of((uintptr_t)obj, t->cap);
        while (t->slot[j].obj)
            j = (j + 1) & (t->cap - 1);
        t->slot[j] = (struct sv_live_slot){(uintptr_t)obj, kind};
        t->cnt++;
    }
    pthread_mutex_unlock(&t->lock);
}

void sv_live_del(const void *obj)
{
    struct sv_live *t = &sv_device_get()->live;
    pthread_mutex_lock(&t->lock);
    if (t->cap) {
        size_t j = slot_of((uintptr_t)obj, t->cap);
        while (t->slot[j].obj && t->slot[j].obj != (uintptr_t)obj)
            j = (j + 1) & (t->cap - 1);
        if (t->slot[j].obj) {
            /* backward-shift deletion: no tombstones */
            t->slot[j].obj = 0;
            t->cnt--;
            for (size_t k = (j + 1) & (t->cap - 1); t->slot[k].obj; k = (k + 1) & (t->cap - 1)) {
                size_t h = slot_of(t->slot[k].obj, t->cap);
                /* move k back to j unless its home lies cyclically in (j, k] */
                bool stays = j < k ? (h > j && h <= k) : (h > j || h <= k);
                if (!stays) {
                    t->slot[j] = t->slot[k];
                    t->slot[k].obj = 0;
                    j = k;
                }
            }
        }
    }
    pthread_mutex_unlock(&t->lock);
}

bool sv_live_is(const void *obj, enum sv_kind kind)
{
    if (!obj)
        return false;
    struct sv_live *t = &sv_device_get()->live;
    pthread_mutex_lock(&t->lock);
    bool live = t->off;
    if (!live && t->cap) {
        size_t j = slot_of((uintptr_t)obj, t->cap);
        while (t->slot[j].obj && t->slot[j].obj != (uintptr_t)obj)
            j = (j + 1) & (t->cap - 1);
        live = t->slot[j].obj && t->slot[j].kind == kind;
    }
    pthread_mutex_unlock(&t->lock);
    return live;
}

void *sv_live_find(enum sv_kind kind, bool (*match)(const void *obj, const void *arg),
                   const void *arg)
{
    struct sv_live *t = &sv_device_get()->live;
    void *found = NULL;
    pthread_mutex_lock(&t->lock);
    for (uint32_t i = 0; i < t->cap && !found; i++) {
        const struct sv_live_slot *s = &t->slot[i];
        if (s->obj && s->kind == kind && match((const void *)s->obj, arg))
            found = (void *)s->obj;
    }
    pthread_mutex_unlock(&t->lock);
    return found;
}
