/* The descriptor table: fd number -> struct pl_sock, for application sockets
 * only (docs/preload.md "Descriptors").
 *
 * Two levels of atomic pointers, chunks of 512 entries (one 4 KiB page)
 * allocated on first use, so a lookup is two loads and a program with few
 * sockets holds one page (a 32 KiB chunk cost the first socket() eight page
 * faults of calloc's memset). Objects come from a pool and are never returned to malloc
 * ("type-stable"): a lookup that races with the last close may increment
 * the count of an object already freed or reused, sees that (count 0, or
 * the slot no longer names it) and backs off, never touching freed
 * memory. Mapping changes take a mutex; lookups take none. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "preload/pl.h"
#include "preload/uep.h"

#define CHUNK_BITS 9
#define CHUNK (1u << CHUNK_BITS)
#define NCHUNKS 8192u /* descriptors below 4,194,304 (RLIMIT_NOFILE's usual hard cap is 1M) */

typedef _Atomic(struct pl_sock *) slot;
static _Atomic(slot *) chunks[NCHUNKS];
static pthread_mutex_t tab_mu = PTHREAD_MUTEX_INITIALIZER;
static struct pl_sock *free_list;
_Atomic int pl_live;

void pl_tab_lock(void)
{
    pthread_mutex_lock(&tab_mu);
}

void pl_tab_unlock(void)
{
    pthread_mutex_unlock(&tab_mu);
}

static slot *slot_of(int fd, bool create)
{
    if (fd < 0 || (unsigned)fd >= CHUNK * NCHUNKS)
        return NULL;
    unsigned c = (unsigned)fd >> CHUNK_BITS;
    slot *ch = atomic_load_explicit(&chunks[c], memory_order_acquire);
    if (!ch && create) {
        ch = calloc(CHUNK, sizeof(slot)); /* under tab_mu */
        if (!ch)
            return NULL;
        atomic_store_explicit(&chunks[c], ch, memory_order_release);
    }
    return ch ? &ch[(unsigned)fd & (CHUNK - 1)] : NULL;
}

struct pl_sock *pl_sock_new(int kind, int domain)
{
    pl_tab_lock();
    struct pl_sock *p = free_list;
    if (p)
        free_list = p->free_next;
    pl_tab_unlock();
    if (!p) {
        p = calloc(1, sizeof(*p));
        if (!p)
            return NULL;
    }
    p->s = NULL;
    p->domain = domain;
    p->rcvbuf = p->sndbuf = 0;
    p->sdp_only = false;
    p->nep = 0;
    p->free_next = NULL;
    atomic_store_explicit(&p->busy, 0, memory_order_relaxed);
    atomic_store_explicit(&p->kind, kind, memory_order_relaxed);
    atomic_store_explicit(&p->refs, 1, memory_order_release);
    return p;
}

struct pl_sock *pl_get(int fd)
{
    slot *sl = slot_of(fd, false);
    if (!sl)
        return NULL;
    for (;;) {
        struct pl_sock *p = atomic_load_explicit(sl, memory_order_acquire);
        if (!p)
            return NULL;
        int n = atomic_load_explicit(&p->refs, memory_order_relaxed);
        while (n > 0 && !atomic_compare_exchange_weak_explicit(
                            &p->refs, &n, n + 1, memory_order_acquire, memory_order_relaxed)) {
        }
        if (n <= 0)
            continue; /* freed under us: the slot has changed (or will) */
        if (atomic_load_explicit(sl, memory_order_acquire) == p)
            return p;
        pl_put(p); /* reused for another descriptor meanwhile */
    }
}

static void destroy(struct pl_sock *p)
{
    int k = atomic_load_explicit(&p->kind, memory_order_relaxed);
    if (p->s && k == PL_SDP)
        uep_forget(p); /* before the socket goes: a wait may be reading it */
    atomic_store(&p->kregs, 0);
    if (p->s && (k == PL_SDP || k == PL_LISTEN)) {
        PL_LOG(PL_LOG_DEBUG, -1, "%s closed (last reference)",
               k == PL_SDP ? "SDP socket" : "SDP listener");
        PL_ENTER();
        uw_sdp_close(p->s);
        PL_LEAVE();
        atomic_fetch_sub_explicit(&pl_live, 1, memory_order_release);
    }
    /* An orphan's socket belongs to the parent's stack: left alone. */
    p->s = NULL;
    pl_tab_lock();
    p->free_next = free_list;
    free_list = p;
    pl_tab_unlock();
}

void pl_put(struct pl_sock *p)
{
    if (atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) == 1)
        destroy(p);
}

void pl_map(int fd, struct pl_sock *p)
{
    atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
    pl_tab_lock();
    slot *sl = slot_of(fd, true);
    struct pl_sock *old = NULL;
    if (sl)
        old = atomic_exchange_explicit(sl, p, memory_order_acq_rel);
    pl_tab_unlock();
    if (!sl)
        pl_put(p); /* no memory for the chunk: the descriptor stays plain */
    if (old)
        pl_put(old);
}

void pl_unmap(int fd)
{
    slot *sl = slot_of(fd, false);
    if (!sl)
        return;
    pl_tab_lock();
    struct pl_sock *old = atomic_exchange_explicit(sl, NULL, memory_order_acq_rel);
    pl_tab_unlock();
    if (old)
        pl_put(old);
}

int pl_tab_fds_of(const struct pl_sock *p, int *out, int max)
{
    int n = 0;
    for (unsigned c = 0; c < NCHUNKS && n < max; c++) {
        slot *ch = atomic_load_explicit(&chunks[c], memory_order_acquire);
        for (unsigned i = 0; ch && i < CHUNK && n < max; i++)
            if (atomic_load_explicit(&ch[i], memory_order_relaxed) == p)
                out[n++] = (int)((c << CHUNK_BITS) | i);
    }
    return n;
}

void pl_unmap_range(unsigned first, unsigned last)
{
    for (unsigned c = first >> CHUNK_BITS; c < NCHUNKS && c <= (last >> CHUNK_BITS); c++) {
        if (!atomic_load_explicit(&chunks[c], memory_order_acquire))
            continue; /* nothing was ever mapped there */
        unsigned lo = c << CHUNK_BITS, hi = lo + CHUNK - 1;
        if (lo < first)
            lo = first;
        if (hi > last)
            hi = last;
        for (unsigned fd = lo; fd <= hi; fd++)
            if (pl_mapped((int)fd))
                pl_unmap((int)fd);
    }
}

bool pl_mapped(int fd)
{
    slot *sl = slot_of(fd, false);
    return sl && atomic_load_explicit(sl, memory_order_relaxed) != NULL;
}

void pl_tab_orphan_all(void)
{
    for (unsigned c = 0; c < NCHUNKS; c++) {
        slot *ch = atomic_load_explicit(&chunks[c], memory_order_relaxed);
        for (unsigned i = 0; ch && i < CHUNK; i++) {
            struct pl_sock *p = atomic_load_explicit(&ch[i], memory_order_relaxed);
            if (!p)
                continue;
            int k = atomic_load_explicit(&p->kind, memory_order_relaxed);
            if (k == PL_SDP || k == PL_LISTEN)
                atomic_store_explicit(&p->kind, PL_ORPHAN, memory_order_relaxed);
            atomic_store_explicit(&p->busy, 0, memory_order_relaxed);
        }
    }
}

void pl_tab_close_all(void)
{
    for (unsigned c = 0; c < NCHUNKS; c++) {
        slot *ch = atomic_load_explicit(&chunks[c], memory_order_relaxed);
        for (unsigned i = 0; ch && i < CHUNK; i++) {
            struct pl_sock *p = atomic_load_explicit(&ch[i], memory_order_relaxed);
            if (!p)
                continue;
            int k = atomic_load_explicit(&p->kind, memory_order_relaxed);
            if (k != PL_SDP && k != PL_LISTEN)
                continue;
            pl_tab_lock();
            p = atomic_exchange_explicit(&ch[i], NULL, memory_order_acq_rel);
            pl_tab_unlock();
            if (!p)
                continue;
            pl_put(p);
        }
    }
}
