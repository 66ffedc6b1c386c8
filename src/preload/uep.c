/* epoll answered in user space for connected SDP sockets (docs/preload.md
 * "epoll").
 *
 * A mirror descriptor shows an SDP socket's readiness to the kernel, and
 * every change costs system calls on it: a request/response costs two
 * (raise POLLIN when the request arrives, lower it when it is read), on
 * each side. When an epoll set is the only thing that watches a socket,
 * the library keeps the registration itself and epoll_wait reads the
 * readiness the stack publishes (uw_sdp_ready), so the mirror is left
 * alone (uw_sdp_set_lazy).
 *
 * The kernel still holds every registration, with the readiness bits taken
 * out of its mask: it checks the arguments as it always does (EEXIST,
 * ENOENT, EBADF, EINVAL, ELOOP, EPERM come from it), drops the
 * registration when the socket's last descriptor closes, and reports
 * nothing for it. The events come from here, merged with the kernel's for
 * every other descriptor in the set; level-triggered, edge-triggered
 * (an edge whenever a bit rises, as on the mirror) and one-shot
 * registrations keep their meaning.
 *
 * Anything that would look at a lazy mirror directly makes the socket
 * exact again first and hands its registrations back to the kernel: poll
 * or select on it, a registration this code does not take, a blocking
 * call that waits on it. An epoll set that is polled, nested in another,
 * or duplicated is handed back whole. A thread asleep in the kernel on a
 * set with lazy sockets is woken through an eventfd in the set when one
 * of them becomes ready in another thread. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "preload/pl.h"
#include "preload/uep.h"

/* Readiness bits a registration asks for; the rest of the mask is flags. */
#define UEP_BITS                                                                            \
    (EPOLLIN | EPOLLOUT | EPOLLPRI | EPOLLRDHUP | EPOLLRDNORM | EPOLLRDBAND | EPOLLWRNORM | \
     EPOLLWRBAND | EPOLLMSG)
/* The wake eventfd's data in the kernel set, filtered out of results. */
#define UEP_MARK 0x7565702d77616b65ull

struct uep_ent {
    int fd;
    struct pl_sock *p;
    uint32_t events;
    epoll_data_t data;
    unsigned seen; /* the socket's edge count last reported (EPOLLET) */
    bool off;      /* EPOLLONESHOT fired: silent until EPOLL_CTL_MOD */
};

struct uep {
    pthread_mutex_t mu;
    int epfd, wfd;
    int refs; /* under tab_mu */
    bool dead;
    struct uep_ent *e;
    int n, cap;
    unsigned rot;   /* where the next collect starts: fairness */
    unsigned kskip; /* collects answered without asking the kernel */
    _Atomic int sleepers;
};

static pthread_mutex_t tab_mu = PTHREAD_MUTEX_INITIALIZER;
static struct uep *tab[UEP_MAX];   /* by epoll descriptor */
static struct uep *list[UEP_SETS]; /* the same, packed: for scans */
static int nlist;
_Atomic int uep_live;
static _Atomic int sleepers_all;

static void ent_exact(struct uep *u, struct uep_ent *e);

/* ---- The table of emulated epoll sets -------------------------------------- */

static void unref_locked_n(struct uep *u, int n)
{
    u->refs -= n;
    if (u->refs == 0) {
        pthread_mutex_destroy(&u->mu);
        free(u->e);
        free(u);
    }
}

struct uep *uep_get(int epfd)
{
    if (epfd < 0 || epfd >= UEP_MAX || !atomic_load_explicit(&uep_live, memory_order_relaxed))
        return NULL;
    pthread_mutex_lock(&tab_mu);
    struct uep *u = tab[epfd];
    if (u)
        u->refs++;
    pthread_mutex_unlock(&tab_mu);
    return u;
}

void uep_put(struct uep *u)
{
    if (!u)
        return;
    pthread_mutex_lock(&tab_mu);
    unref_locked_n(u, 1);
    pthread_mutex_unlock(&tab_mu);
}

/* The set for epfd, made on first use: its wake eventfd joins the kernel
 * set (which also proves epfd is one). NULL: not emulated. */
static struct uep *get_or_make(int epfd)
{
    if (epfd < 0 || epfd >= UEP_MAX)
        return NULL;
    pthread_mutex_lock(&tab_mu);
    struct uep *u = tab[epfd];
    if (u || nlist == UEP_SETS) {
        if (u)
            u->refs++;
        pthread_mutex_unlock(&tab_mu);
        return u;
    }
    u = calloc(1, sizeof(*u));
    int wfd = u ? eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC) : -1;
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = UEP_MARK};
    if (wfd < 0 || pl_real.epoll_ctl(epfd, EPOLL_CTL_ADD, wfd, &ev) < 0) {
        if (wfd >= 0)
            pl_real.close(wfd);
        free(u);
        pthread_mutex_unlock(&tab_mu);
        return NULL;
    }
    pthread_mutex_init(&u->mu, NULL);
    u->epfd = epfd;
    u->wfd = wfd;
    u->refs = 2; /* the table's and the caller's */
    tab[epfd] = u;
    list[nlist++] = u;
    atomic_fetch_add(&uep_live, 1);
    pthread_mutex_unlock(&tab_mu);
    return u;
}

/* Takes epfd's set out of the table (its descriptor is closing, or the
 * set goes back to the kernel). */
static struct uep *unlist(int epfd)
{
    pthread_mutex_lock(&tab_mu);
    struct uep *u = NULL;
    if (epfd >= 0 && epfd < UEP_MAX)
        u = tab[epfd];
    if (u) {
        tab[epfd] = NULL;
        for (int i = 0; i < nlist; i++)
            if (list[i] == u)
                list[i] = list[--nlist];
        u->refs++;
        atomic_fetch_sub(&uep_live, 1);
    }
    pthread_mutex_unlock(&tab_mu);
    return u;
}

/* The sets, each with a reference taken; returns how many. */
static int sets(struct uep **out)
{
    pthread_mutex_lock(&tab_mu);
    int n = nlist;
    for (int i = 0; i < n; i++) {
        out[i] = list[i];
        out[i]->refs++;
    }
    pthread_mutex_unlock(&tab_mu);
    return n;
}

/* The set whose wake eventfd is fd, taken out of the table like unlist(). */
static struct uep *unlist_wfd(int fd)
{
    pthread_mutex_lock(&tab_mu);
    int epfd = -1;
    for (int i = 0; i < nlist && epfd < 0; i++)
        if (list[i]->wfd == fd)
            epfd = list[i]->epfd;
    pthread_mutex_unlock(&tab_mu);
    return epfd >= 0 ? unlist(epfd) : NULL;
}

enum { EPFD_CLOSING, WFD_CLOSING, TO_KERNEL };

static void drop(struct uep *u, int why)
{
    pthread_mutex_lock(&u->mu);
    u->dead = true;
    for (int i = 0; i < u->n; i++)
        if (why != EPFD_CLOSING)
            ent_exact(u, &u->e[i]);
    u->n = 0;
    if (why == TO_KERNEL)
        pl_real.epoll_ctl(u->epfd, EPOLL_CTL_DEL, u->wfd, NULL);
    /* An application closing every descriptor it does not know closes
     * the eventfd itself: its number is not ours to close again. */
    if (why != WFD_CLOSING)
        pl_real.close(u->wfd);
    u->wfd = -1;
    pthread_mutex_unlock(&u->mu);
    pthread_mutex_lock(&tab_mu);
    unref_locked_n(u, 2); /* the table's and unlist's */
    pthread_mutex_unlock(&tab_mu);
}

void uep_closing(int epfd)
{
    if (!atomic_load_explicit(&uep_live, memory_order_relaxed))
        return;
    struct uep *u = unlist(epfd);
    if (u)
        drop(u, EPFD_CLOSING);
    if ((u = unlist_wfd(epfd)) != NULL) {
        PL_LOG(PL_LOG_DEBUG, epfd, "epoll set %d: its wake eventfd closed by the application",
               u->epfd);
        drop(u, WFD_CLOSING);
    }
}

void uep_closing_range(unsigned first, unsigned last)
{
    if (!atomic_load_explicit(&uep_live, memory_order_relaxed))
        return;
    for (unsigned fd = first; fd <= last && fd < UEP_MAX; fd++)
        uep_closing((int)fd);
    /* Wake eventfds numbered above the table. */
    struct uep *all[UEP_SETS];
    int ns = sets(all);
    for (int k = 0; k < ns; k++) {
        int w = all[k]->wfd;
        if (w >= UEP_MAX && (unsigned)w >= first && (unsigned)w <= last)
            uep_closing(w);
        uep_put(all[k]);
    }
}

void uep_to_kernel(int epfd)
{
    if (!atomic_load_explicit(&uep_live, memory_order_relaxed))
        return;
    struct uep *u = unlist(epfd);
    if (u) {
        PL_LOG(PL_LOG_DEBUG, epfd, "epoll set handed back to the kernel");
        drop(u, TO_KERNEL);
    }
}

/* ---- Registrations ---------------------------------------------------------- */

/* Hands one registration back to the kernel with its whole mask. The
 * descriptor number may be gone (closed, the socket living on in a dup):
 * then another of the socket's numbers cannot take its place (the kernel
 * keys on the number too), and the registration stays silent. */
static void ent_exact(struct uep *u, struct uep_ent *e)
{
    struct pl_sock *p = e->p;
    if (p->s) {
        PL_ENTER();
        uw_sdp_set_lazy(p->s, false);
        PL_LEAVE();
    }
    struct epoll_event ev = {.events = e->events, .data = e->data};
    if (e->off)
        ev.events &= ~(uint32_t)UEP_BITS; /* a fired one-shot stays disarmed */
    if (pl_real.epoll_ctl(u->epfd, EPOLL_CTL_MOD, e->fd, &ev) < 0)
        PL_LOG(PL_LOG_DEBUG, e->fd, "epoll registration could not go back to the kernel");
}

static bool grow(struct uep *u)
{
    int cap = u->cap ? u->cap * 2 : 16;
    struct uep_ent *ne = realloc(u->e, (size_t)cap * sizeof(*ne));
    if (!ne)
        return false;
    u->e = ne;
    u->cap = cap;
    return true;
}

static int find(struct uep *u, int fd, struct pl_sock *p)
{
    for (int i = 0; i < u->n; i++)
        if (u->e[i].fd == fd && u->e[i].p == p)
            return i;
    return -1;
}

/* Every set's registrations of p go back to the kernel (p becomes exact). */
void uep_sock_exact(struct pl_sock *p)
{
    if (!atomic_load_explicit(&uep_live, memory_order_relaxed))
        return;
    struct uep *all[UEP_SETS];
    int ns = sets(all);
    for (int k = 0; k < ns; k++) {
        struct uep *u = all[k];
        pthread_mutex_lock(&u->mu);
        for (int i = 0; i < u->n;) {
            if (u->e[i].p == p) {
                ent_exact(u, &u->e[i]);
                u->e[i] = u->e[--u->n];
            } else {
                i++;
            }
        }
        pthread_mutex_unlock(&u->mu);
        uep_put(u);
    }
}

/* A registration of p leaves every set (its socket is going). */
void uep_forget(struct pl_sock *p)
{
    if (!atomic_load_explicit(&uep_live, memory_order_relaxed))
        return;
    struct uep *all[UEP_SETS];
    int ns = sets(all);
    for (int k = 0; k < ns; k++) {
        struct uep *u = all[k];
        pthread_mutex_lock(&u->mu);
        for (int i = 0; i < u->n;)
            if (u->e[i].p == p)
                u->e[i] = u->e[--u->n];
            else
                i++;
        pthread_mutex_unlock(&u->mu);
        uep_put(u);
    }
}

static bool kernel_epoll_only(void)
{
    static int v = -1;
    if (v < 0) {
        const char *e = getenv("UWARP_PRELOAD_KERNEL_EPOLL");
        v = e && *e && strcmp(e, "0") != 0;
    }
    return v;
}

bool uep_ctl(int epfd, int op, int fd, struct epoll_event *ev, int *ret)
{
    if (pl_inside || fd < 0 || epfd == fd)
        return false;
    /* A set nested in another is watched by the kernel: hand it back. */
    uep_to_kernel(fd);
    struct pl_sock *p = pl_get(fd);
    if (!p)
        return false;
    if (atomic_load_explicit(&p->kind, memory_order_acquire) != PL_SDP || !p->s) {
        pl_put(p); /* pending sockets and listeners: sock.c's and the kernel's */
        return false;
    }
    const bool sdp = true;
    struct uep *u = uep_get(epfd);
    int i = -1;
    if (u) {
        pthread_mutex_lock(&u->mu);
        i = find(u, fd, p);
    }
    bool mine = i >= 0;
    /* Taken: registrations of connected SDP sockets that no whole kernel
     * registration (one the mirror must serve) also watches. */
    bool take = sdp && op != EPOLL_CTL_DEL && ev && !(ev->events & EPOLLEXCLUSIVE) &&
                !kernel_epoll_only() && (mine || atomic_load(&p->kregs) == 0);
    if (!take && !mine) {
        if (u) {
            pthread_mutex_unlock(&u->mu);
            uep_put(u);
        }
        int r = pl_real.epoll_ctl(epfd, op, fd, ev);
        int e = errno;
        if (sdp && r == 0 && op == EPOLL_CTL_ADD) {
            atomic_fetch_add(&p->kregs, 1);
            uep_sock_exact(p);
        } else if (sdp && r == 0 && op == EPOLL_CTL_DEL && atomic_load(&p->kregs) > 0) {
            atomic_fetch_sub(&p->kregs, 1);
        }
        pl_put(p);
        errno = e;
        *ret = r;
        return true;
    }
    if (!u) {
        u = get_or_make(epfd);
        if (!u) {
            pl_put(p);
            return false;
        }
        pthread_mutex_lock(&u->mu);
        i = find(u, fd, p);
        mine = i >= 0;
    }
    if (take && !mine) {
        PL_ENTER();
        int lz = uw_sdp_set_lazy(p->s, true);
        PL_LEAVE();
        if (lz < 0 || (u->n == u->cap && !grow(u)))
            take = false; /* not connected, or waited on, or no memory: the kernel's */
    }
    int r;
    if (!take) {
        r = pl_real.epoll_ctl(epfd, op, fd, ev);
        if (r == 0 && mine)
            u->e[i] = u->e[--u->n];
    } else {
        /* The kernel checks the call and keeps a silent registration. */
        struct epoll_event kev = {.events = ev->events & ~(uint32_t)UEP_BITS, .data = ev->data};
        r = pl_real.epoll_ctl(epfd, op, fd, &kev);
        if (r == 0) {
            if (!mine && pl_log_level >= PL_LOG_DEBUG && pl_once(PL_ONCE_UEP))
                PL_LOG(PL_LOG_DEBUG, fd, "epoll set %d: SDP readiness answered in user space",
                       epfd);
            if (!mine)
                i = u->n++;
            unsigned gen;
            uw_sdp_ready(p->s, &gen);
            /* ADD and MOD report a registration that is ready at once. */
            u->e[i] = (struct uep_ent){
                .fd = fd, .p = p, .events = ev->events, .data = ev->data, .seen = gen - 1};
        }
    }
    int e = errno;
    pthread_mutex_unlock(&u->mu);
    uep_put(u);
    /* Not taken, but the kernel's whole now: ADD, or MOD of one of ours. */
    if (!take && r == 0 && op != EPOLL_CTL_DEL) {
        atomic_fetch_add(&p->kregs, 1);
        uep_sock_exact(p);
    }
    pl_put(p);
    errno = e;
    *ret = r;
    return true;
}

/* ---- Waiting ------------------------------------------------------------------ */

int uep_collect(struct uep *u, struct epoll_event *ev, int max)
{
    int n = 0;
    pthread_mutex_lock(&u->mu);
    int total = u->n;
    for (int k = 0; k < total && n < max && k < u->n; k++) {
        int j = (int)((u->rot + (unsigned)k) % (unsigned)u->n);
        struct uep_ent *e = &u->e[j];
        if (e->off || !e->p->s)
            continue;
        unsigned gen;
        unsigned b = uw_sdp_ready(e->p->s, &gen);
        if (b & UW_SDP_READY_EXACT) {
            /* A blocking call waited on it: the kernel watches it now. */
            ent_exact(u, e);
            u->e[j] = u->e[--u->n];
            k--;
            continue;
        }
        uint32_t m = b & (e->events | EPOLLERR | EPOLLHUP);
        if (!m)
            continue;
        if (e->events & EPOLLET) {
            if (gen == e->seen)
                continue;
            e->seen = gen;
        }
        if (e->events & EPOLLONESHOT)
            e->off = true;
        ev[n++] = (struct epoll_event){.events = m, .data = e->data};
    }
    if (u->n)
        u->rot = (u->rot + 1) % (unsigned)u->n;
    pthread_mutex_unlock(&u->mu);
    return n;
}

bool uep_ask_kernel(struct uep *u)
{
    /* Ready sockets of ours are answered without a system call; the
     * kernel's descriptors are asked about on every fourth such answer,
     * so they wait at most three calls. */
    return ++u->kskip % 4 == 0;
}

int uep_filter(struct uep *u, struct epoll_event *ev, int n)
{
    int k = 0;
    bool woke = false;
    for (int i = 0; i < n; i++) {
        if (ev[i].data.u64 == UEP_MARK)
            woke = true;
        else
            ev[k++] = ev[i];
    }
    if (woke && u && u->wfd >= 0) {
        uint64_t v;
        if (pl_real.read(u->wfd, &v, sizeof(v)) < 0) {
        }
    }
    return k;
}

void uep_sleep(struct uep *u, int d)
{
    if (u) {
        atomic_fetch_add(&u->sleepers, d);
        atomic_fetch_add(&sleepers_all, d);
    }
}

/* The stack's ready_rose hook: wake the threads asleep in the kernel on a
 * set with lazy sockets (they cannot see what changed). */
void uep_wake(void *ud)
{
    (void)ud;
    if (atomic_load(&sleepers_all) <= 0)
        return;
    pthread_mutex_lock(&tab_mu);
    for (int i = 0; i < nlist; i++) {
        struct uep *u = list[i];
        if (atomic_load(&u->sleepers) > 0 && u->wfd >= 0) {
            uint64_t one = 1;
            if (pl_real.write(u->wfd, &one, sizeof(one)) < 0) {
            }
        }
    }
    pthread_mutex_unlock(&tab_mu);
}

/* fork: the child's SDP sockets are orphans; its sets forget them. */
void uep_atfork_child(void)
{
    pthread_mutex_init(&tab_mu, NULL);
    atomic_store(&sleepers_all, 0);
    for (int i = 0; i < nlist; i++) {
        struct uep *u = list[i];
        pthread_mutex_init(&u->mu, NULL);
        u->n = 0;
        atomic_store(&u->sleepers, 0);
    }
}

void uep_polled(int fd)
{
    if (!atomic_load_explicit(&uep_live, memory_order_relaxed) || fd < 0)
        return;
    uep_to_kernel(fd);
    struct pl_sock *p = pl_get(fd);
    if (!p)
        return;
    if (atomic_load_explicit(&p->kind, memory_order_acquire) == PL_SDP && p->s &&
        !(uw_sdp_ready(p->s, NULL) & UW_SDP_READY_EXACT))
        uep_sock_exact(p);
    pl_put(p);
}
