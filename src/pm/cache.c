/* The PM client's cache of PMAccept answers (draft-pinkerton-iwarp-sdp-01
 * 7.3.1.4). Small and flat: a client caches a few services, so a linear scan
 * beats the bookkeeping of an index. */
#include "pm_internal.h"

#include "util/alloc.h"

int uw__pm_cache_init(uw__pm_cache *c, size_t cap, const uw_allocator *alloc)
{
    c->alloc = uw__allocator(alloc);
    c->cap = cap;
    c->n = 0;
    c->e = c->alloc.alloc(c->alloc.ud, cap * sizeof(*c->e));
    if (!c->e)
        return UW_ENOMEM;
    memset(c->e, 0, cap * sizeof(*c->e));
    return 0;
}

void uw__pm_cache_free(uw__pm_cache *c)
{
    if (c->e)
        c->alloc.free(c->alloc.ud, c->e);
    c->e = NULL;
    c->n = c->cap = 0;
}

static bool key_eq(const uw__pm_cache_key *a, const uw__pm_cache_key *b)
{
    return a->ipv == b->ipv && a->ap_port == b->ap_port &&
           uw__pm_ip_eq(a->ipv, a->cp_ip, b->cp_ip) && uw__pm_ip_eq(a->ipv, a->ap_ip, b->ap_ip);
}

static void drop(uw__pm_cache *c, uw__pm_cache_entry *e)
{
    e->used = false;
    c->n--;
}

static uw__pm_cache_entry *find(uw__pm_cache *c, const uw__pm_cache_key *key)
{
    for (size_t i = 0; i < c->cap; i++)
        if (c->e[i].used && key_eq(&c->e[i].key, key))
            return &c->e[i];
    return NULL;
}

const uw__pm_cache_entry *uw__pm_cache_lookup(uw__pm_cache *c, const uw__pm_cache_key *key,
                                              uint64_t now)
{
    uw__pm_cache_entry *e = find(c, key);
    if (!e)
        return NULL;
    if (now >= e->until) {
        drop(c, e);
        return NULL;
    }
    return e;
}

uint64_t uw__pm_cache_put(uw__pm_cache *c, const uw__pm_cache_key *key, const uint8_t *sdp_ip,
                          uint16_t sdp_port, uint8_t pmtime, uint64_t now)
{
    uw__pm_cache_entry *e = find(c, key);
    uint64_t dur = uw_pm_pmtime_ns(pmtime);
    if (dur == 0 || c->cap == 0) {
        /* 7.3.1.4: PmTime 0 MUST NOT be cached; an older answer for the same
         * service is superseded by this one, so it goes too. */
        if (e)
            drop(c, e);
        return 0;
    }
    if (!e) {
        for (size_t i = 0; i < c->cap && !e; i++)
            if (!c->e[i].used)
                e = &c->e[i];
        if (!e) {
            /* Full: give up the answer that would be flushed first anyway. */
            e = &c->e[0];
            for (size_t i = 1; i < c->cap; i++)
                if (c->e[i].until < e->until)
                    e = &c->e[i];
            drop(c, e);
        }
        e->used = true;
        c->n++;
    }
    e->key = *key;
    uw__pm_ip_copy(key->ipv, e->key.cp_ip, key->cp_ip);
    uw__pm_ip_copy(key->ipv, e->key.ap_ip, key->ap_ip);
    uw__pm_ip_copy(key->ipv, e->sdp_ip, sdp_ip);
    e->sdp_port = sdp_port;
    e->pmtime = pmtime;
    /* 7.3.1.4: the time counts from the receipt of the PMAccept. */
    e->until = dur == UW_PM_FOREVER ? UW_PM_FOREVER : uw__pm_add_sat(now, dur);
    return e->until;
}

bool uw__pm_cache_remove(uw__pm_cache *c, const uw__pm_cache_key *key)
{
    uw__pm_cache_entry *e = find(c, key);
    if (!e)
        return false;
    drop(c, e);
    return true;
}

void uw__pm_cache_expire(uw__pm_cache *c, uint64_t now)
{
    for (size_t i = 0; i < c->cap; i++)
        if (c->e[i].used && now >= c->e[i].until)
            drop(c, &c->e[i]);
}

uint64_t uw__pm_cache_next_deadline(const uw__pm_cache *c)
{
    uint64_t d = UW_PM_FOREVER;
    for (size_t i = 0; i < c->cap; i++)
        if (c->e[i].used && c->e[i].until < d)
            d = c->e[i].until;
    return d;
}

void uw__pm_cache_clear(uw__pm_cache *c)
{
    for (size_t i = 0; i < c->cap; i++)
        c->e[i].used = false;
    c->n = 0;
}
