/* uwarp-pmd internals: the configuration (command line and file share one
 * option table), the rules and static maps the service lookup consults (the
 * lookup itself, which adds the control socket's registrations, is in
 * uwarp-pmd.c), and logging. */
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
    /* The control socket (dynamic registration; pmd_ctl.h). */
    char *control;          /* --control PATH|none; NULL: $UWARP_PMD_CONTROL or the default */
    size_t ctl_max_conns;   /* control connections at once */
    size_t ctl_max_maps;    /* registered mappings at once */
    size_t ctl_max_per_uid; /* connections, and mappings, of one non-root uid */
    int owner_check;        /* enum pmd_owner_source */
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
/* Whether the control settings are the same (changing them needs a restart). */
bool pmd_control_equal(const pmd_config *a, const pmd_config *b);

/* The control socket path to use: --control / "control", else the
 * environment's UWARP_PMD_CONTROL, else /run/uwarp/pmd.sock; NULL for
 * "none". *explicit_out says whether it was asked for (then failing to open
 * it is fatal) or is the default (then it is a warning). */
const char *pmd_control_path(const pmd_config *c, bool *explicit_out);

/* Allow/deny rules: may the client at this UDP source be answered? */
bool pmd_client_allowed(const pmd_config *c, const uw_pm_udp_addr *from);
/* The SDP port the configuration maps service port svc to, or 0 if none. */
uint16_t pmd_static_sdp(const pmd_config *c, uint16_t svc);

extern const char PMD_HELP[];

#endif
