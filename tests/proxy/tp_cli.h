/* Command line of uwarp-testproxy: the options, their checks and --help. */
#ifndef UW_TESTS_PROXY_TP_CLI_H
#define UW_TESTS_PROXY_TP_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tp_core.h"

/* Exit codes, documented in --help. */
#define EXIT_USAGE 1
#define EXIT_RUNTIME 2
#define EXIT_TIMEOUT 4

#define MAX_COUNT 100000u

typedef struct config {
    const char *listen_addr;
    const char *listen_port;
    const char *target_host;
    const char *target_port;
    unsigned count;
    unsigned timeout_s;
    bool fault_dir[2]; /* [0] c2s, [1] s2c */
    tp_faults faults;
    size_t buffer;
    uint64_t seed;
    bool seed_given;
    const char *log_path;
    bool stats;
} config;

/* Prints "uwarp-testproxy: <fmt...>\n" on stderr. */
void tp_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Fills c from argv. Returns 0, or EXIT_USAGE after a message on stderr.
 * --help prints the help and exits. The strings in c point into argv. */
int tp_parse_args(int argc, char **argv, config *c);

#endif
