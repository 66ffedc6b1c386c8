/* uwarp-pmd internals: the configuration (command line and file share one
 * option table), the service lookup the core calls back, and logging. */
#ifndef UW_TOOLS_PMD_H
#define UW_TOOLS_PMD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pm_net.h"

#define PMD_MAX_LISTEN 16

typedef struct pmd_map {
    uint16_t service; /* conventional port (ApPort of the PMReq) */
    uint16_t sdp;     /* SDP listen port; 0 means the same port */
} pmd_map;

typedef struct pmd_rule {
    bool allow;
    pmn_net net;
} pmd_rule;

typedef struct pmd_config {
    /* Need a restart to change. */
    uint16_t port;
    bool port_set;
    uw_pm_udp_addr listen[PMD_MAX_LISTEN];
    size_t nlisten;
    bool use_syslog;
    /* Server tunables: a change recreates the server (pending state is lost). */
    uint64_t accept_timeout_ms;
    size_t max_pending;
    uint32_t rate, burst;
    bool rate_off;
    /* Live. */
    pmd_map *maps;
    size_t nmaps, cap_maps;
    pmd_rule *rules;
    size_t nrules, cap_rules;
    uint8_t pmtime;
    bool verbose;
    const char *config_file;
} pmd_config;

enum { PMD_LOG_ERR, PMD_LOG_WARN, PMD_LOG_INFO, PMD_LOG_DEBUG };

void pmd_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void pmd_log_syslog(bool on);

void pmd_config_init(pmd_config *c);
void pmd_config_free(pmd_config *c);
/* Builds the configuration: defaults, then the file named by --config (if
 * any), then the command line, so the command line wins. Returns 0, or
 * CLI_EXIT_USAGE after a message naming the bad option or file line. */
int pmd_config_load(pmd_config *c, int argc, char **argv);
bool pmd_tunables_equal(const pmd_config *a, const pmd_config *b);

/* The core's lookup callback; ud is a pmd_config. Allow/deny rules see the
 * UDP source; maps turn the requested port into the SDP port. */
int pmd_lookup(void *ud, const uw_pm_msg *req, const uw_pm_udp_addr *from, uw_pm_mapping *out);

extern const char PMD_HELP[];

#endif
