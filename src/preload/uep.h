/* epoll answered in user space for connected SDP sockets (uep.c). Every
 * function is thread-safe. */
#ifndef UW_PRELOAD_UEP_H
#define UW_PRELOAD_UEP_H

#include <stdbool.h>
#include <sys/epoll.h>

struct pl_sock;
struct uep;

/* Epoll descriptors below UEP_MAX can be emulated, at most UEP_SETS at a
 * time; others stay the kernel's alone. */
#define UEP_MAX 1024
#define UEP_SETS 64

/* Emulated sets (0: every call below returns at once). */
extern _Atomic int uep_live;

/* epoll_ctl: true when handled here (*ret and errno are the call's). */
bool uep_ctl(int epfd, int op, int fd, struct epoll_event *ev, int *ret);
/* The set of epfd with a reference, or NULL; uep_put() drops it. */
struct uep *uep_get(int epfd);
void uep_put(struct uep *u);
/* Up to max ready registrations into ev (a one-shot one is disarmed, an
 * edge-triggered one is reported once per edge). */
int uep_collect(struct uep *u, struct epoll_event *ev, int max);
/* Whether to ask the kernel too after uep_collect() found some. */
bool uep_ask_kernel(struct uep *u);
/* Removes the wake eventfd's events from what the kernel returned. */
int uep_filter(struct uep *u, struct epoll_event *ev, int n);
/* d = +1 before reading readiness and sleeping in the kernel, -1 after. */
void uep_sleep(struct uep *u, int d);
/* The stack's ready_rose callback. */
void uep_wake(void *ud);

/* fd is closing (close, close_range, dup2 onto it). */
void uep_closing(int epfd);
void uep_closing_range(unsigned first, unsigned last);
/* The set goes back to the kernel whole (it is duplicated, nested, polled). */
void uep_to_kernel(int epfd);
/* poll or select looks at fd: its mirror must be exact. */
void uep_polled(int fd);
/* p's registrations go back to the kernel / are forgotten (p is going). */
void uep_sock_exact(struct pl_sock *p);
void uep_forget(struct pl_sock *p);
void uep_atfork_child(void);

#endif
