/* A small in-process TCP relay for term_repeat.c: forwards both directions
 * of one connection at a time, flips one bit of the client-to-server stream
 * at a chosen offset and can cut that stream into small random writes. It
 * passes FIN on as FIN (shutdown) and a reset as a reset (SO_LINGER 0), as
 * uwarp-testproxy does, so a side that closes with a reset loses what the
 * relay still holds for the other side, as on a real path. */
#ifndef UW_TESTS_MIDDLEBOX_TERM_RELAY_H
#define UW_TESTS_MIDDLEBOX_TERM_RELAY_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct relay_case {
    uint64_t flip_off; /* client-to-server offset of the byte to damage; UINT64_MAX: none */
    unsigned flip_bit;
    bool split; /* forward client-to-server in random writes of 1..1460 octets */
    uint64_t seed;
    int dst_port; /* server port on 127.0.0.1 */
} relay_case;

typedef struct relay {
    pthread_t thread;
    pthread_mutex_t mu;
    int lfd;
    int port;        /* where clients connect */
    relay_case next; /* applies to the next connection accepted */
    bool stop;
    unsigned resets; /* connections that ended with a reset from either side */
    unsigned stuck;  /* connections given up after the per-connection limit */
} relay;

/* 0, or -1 with errno set. */
int relay_start(relay *r);
void relay_set_case(relay *r, const relay_case *c);
void relay_stop(relay *r);

#endif
