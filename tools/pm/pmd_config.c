/* uwarp-pmd configuration. The file holds one option per line, named as on
 * the command line without the dashes ("map 80=8080", "allow 10.0.0.0/8");
 * '#' starts a comment. Both go through apply(), so they cannot disagree. */
#include "pmd.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>

#include "../cliutil.h"
#include "pm/ctl.h"
#include "pmd_ctl.h"

static bool g_syslog;

void pmd_log_syslog(bool on)
{
    if (on && !g_syslog)
        openlog("uwarp-pmd", LOG_PID, LOG_DAEMON);
    g_syslog = on;
}

void pmd_log(int level, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (g_syslog) {
        static const int prio[] = {LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG};
        syslog(prio[level], "%s", line);
    } else {
        static const char *const name[] = {"error", "warning", "info", "debug"};
        cli_msg("%s: %s", name[level], line);
    }
}

void pmd_config_init(pmd_config *c)
{
    memset(c, 0, sizeof(*c));
    c->port = UW_PM_PORT; /* section 16 */
    c->accept_timeout_ms = 2000;
    c->max_pending = 4096;
    c->rate = 100;
    c->burst = 200;
    c->pmtime = 20; /* 5 s: enough to connect, short enough to follow changes */
    c->ctl_max_conns = 256;
    c->ctl_max_maps = 1024;
    c->ctl_max_per_uid = 64;
    c->owner_check = PMD_OWNER_AUTO;
}

void pmd_config_free(pmd_config *c)
{
    free(c->maps);
    free(c->rules);
    free(c->control);
    c->maps = NULL;
    c->rules = NULL;
    c->control = NULL;
    c->nmaps = c->nrules = c->cap_maps = c->cap_rules = 0;
}

bool pmd_tunables_equal(const pmd_config *a, const pmd_config *b)
{
    return a->accept_timeout_ms == b->accept_timeout_ms && a->max_pending == b->max_pending &&
           a->rate == b->rate && a->burst == b->burst && a->rate_off == b->rate_off;
}

bool pmd_control_equal(const pmd_config *a, const pmd_config *b)
{
    bool pa, pb;
    const char *x = pmd_control_path(a, &pa), *y = pmd_control_path(b, &pb);
    bool same_path = (!x && !y) || (x && y && strcmp(x, y) == 0);
    return same_path && a->ctl_max_conns == b->ctl_max_conns &&
           a->ctl_max_maps == b->ctl_max_maps && a->ctl_max_per_uid == b->ctl_max_per_uid &&
           a->owner_check == b->owner_check;
}

const char *pmd_control_path(const pmd_config *c, bool *explicit_out)
{
    const char *p = c->control;
    *explicit_out = true;
    if (!p) {
        p = getenv(UW__PM_CTL_ENV);
        if (!p || !*p) {
            p = UW__PM_CTL_DEFAULT_PATH;
            *explicit_out = false;
        }
    }
    return strcmp(p, "none") == 0 ? NULL : p;
}

static bool num(const char *s, uint32_t lo, uint32_t hi, uint32_t *out)
{
    uint32_t v;
    if (!cli_parse_u32(s, &v) || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

static int add_map(pmd_config *c, const char *v)
{
    const char *eq = strchr(v, '=');
    char svc[16];
    uint32_t s, d = 0;
    if (!eq || (size_t)(eq - v) >= sizeof(svc))
        return -1;
    memcpy(svc, v, (size_t)(eq - v));
    svc[eq - v] = '\0';
    if (!num(svc, 1, 65535, &s))
        return -1;
    if (strcmp(eq + 1, "same") != 0 && !num(eq + 1, 1, 65535, &d))
        return -1;
    for (size_t i = 0; i < c->nmaps; i++) {
        if (c->maps[i].service == s) { /* a later map for a port wins */
            c->maps[i].sdp = (uint16_t)d;
            return 0;
        }
    }
    if (c->nmaps == c->cap_maps) {
        size_t cap = c->cap_maps ? 2 * c->cap_maps : 16;
        pmd_map *m = realloc(c->maps, cap * sizeof(*m));
        if (!m)
            return -2;
        c->maps = m;
        c->cap_maps = cap;
    }
    c->maps[c->nmaps++] = (pmd_map){(uint16_t)s, (uint16_t)d};
    return 0;
}

static int add_rule(pmd_config *c, bool allow, const char *v)
{
    pmd_rule r = {allow, {0}};
    if (!pmn_parse_net(v, &r.net))
        return -1;
    if (c->nrules == c->cap_rules) {
        size_t cap = c->cap_rules ? 2 * c->cap_rules : 8;
        pmd_rule *n = realloc(c->rules, cap * sizeof(*n));
        if (!n)
            return -2;
        c->rules = n;
        c->cap_rules = cap;
    }
    c->rules[c->nrules++] = r;
    return 0;
}

/* Applies one option. Returns 0, -1 for a bad value, -2 for out of memory,
 * -3 for an unknown name. */
static int apply(pmd_config *c, const char *name, const char *v, bool from_file)
{
    uint32_t n;
    if (strcmp(name, "map") == 0)
        return add_map(c, v);
    if (strcmp(name, "allow") == 0 || strcmp(name, "deny") == 0)
        return add_rule(c, name[0] == 'a', v);
    if (strcmp(name, "port") == 0) {
        if (!num(v, 0, 65535, &n))
            return -1;
        c->port = (uint16_t)n;
        c->port_set = true;
        return 0;
    }
    if (strcmp(name, "listen") == 0) {
        uw_pm_udp_addr a;
        memset(&a, 0, sizeof(a));
        if (c->nlisten == PMD_MAX_LISTEN || !pmn_parse_addr_port(v, &a))
            return -1;
        c->listen[c->nlisten++] = a; /* port 0 here: --port applies */
        return 0;
    }
    if (strcmp(name, "pmtime") == 0) {
        if (!num(v, 0, 255, &n))
            return -1;
        c->pmtime = (uint8_t)n;
        return 0;
    }
    if (strcmp(name, "accept-timeout") == 0) {
        if (!num(v, 1, 3600000, &n))
            return -1;
        c->accept_timeout_ms = n;
        return 0;
    }
    if (strcmp(name, "max-pending") == 0) {
        if (!num(v, 1, 1u << 24, &n))
            return -1;
        c->max_pending = n;
        return 0;
    }
    if (strcmp(name, "rate") == 0) {
        if (strcmp(v, "off") == 0) {
            c->rate_off = true;
            return 0;
        }
        if (!num(v, 1, 1000000, &n))
            return -1;
        c->rate = n;
        c->rate_off = false;
        return 0;
    }
    if (strcmp(name, "burst") == 0) {
        if (!num(v, 1, 1000000, &n))
            return -1;
        c->burst = n;
        return 0;
    }
    if (strcmp(name, "control") == 0) {
        char *p = strdup(v);
        if (!p)
            return -2;
        free(c->control);
        c->control = p;
        return 0;
    }
    size_t *limit = strcmp(name, "control-max-conns") == 0     ? &c->ctl_max_conns
                    : strcmp(name, "control-max-maps") == 0    ? &c->ctl_max_maps
                    : strcmp(name, "control-max-per-uid") == 0 ? &c->ctl_max_per_uid
                                                               : NULL;
    if (limit) {
        if (!num(v, 1, 65536, &n))
            return -1;
        *limit = n;
        return 0;
    }
    if (strcmp(name, "owner-check") == 0) {
        static const char *const src[] = {"auto", "netlink", "proc"};
        for (int k = 0; k < 3; k++) {
            if (strcmp(v, src[k]) == 0) {
                c->owner_check = k;
                return 0;
            }
        }
        return -1;
    }
    if (strcmp(name, "log") == 0) {
        if (strcmp(v, "stderr") != 0 && strcmp(v, "syslog") != 0)
            return -1;
        c->use_syslog = strcmp(v, "syslog") == 0;
        return 0;
    }
    if (strcmp(name, "verbose") == 0 && from_file) {
        if (strcmp(v, "yes") != 0 && strcmp(v, "no") != 0)
            return -1;
        c->verbose = v[0] == 'y';
        return 0;
    }
    return -3;
}

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r'))
        s[--n] = '\0';
    return s;
}

static int load_file(pmd_config *c, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        cli_msg("%s: %s", path, strerror(errno));
        return CLI_EXIT_USAGE;
    }
    char line[512];
    unsigned lineno = 0;
    int rc = 0;
    while (!rc && fgets(line, sizeof(line), f)) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *s = trim(line);
        if (!*s)
            continue;
        char *v = s + strcspn(s, " \t");
        if (*v)
            *v++ = '\0';
        v = trim(v);
        int r = *v ? apply(c, s, v, true) : -1;
        if (r == -3)
            cli_msg("%s:%u: unknown setting '%s'", path, lineno, s);
        else if (r == -2)
            cli_msg("%s:%u: out of memory", path, lineno);
        else if (r < 0)
            cli_msg("%s:%u: bad value for '%s'", path, lineno, s);
        rc = r < 0 ? CLI_EXIT_USAGE : 0;
    }
    fclose(f);
    return rc;
}

int pmd_config_load(pmd_config *c, int argc, char **argv)
{
    /* The file first, so that the command line can override it. */
    for (int i = 1; i < argc; i++) {
        const char *v;
        int r = cli_opt(argc, argv, &i, "--config", &v);
        if (r < 0)
            return CLI_EXIT_USAGE;
        if (r > 0)
            c->config_file = v;
    }
    if (c->config_file) {
        int rc = load_file(c, c->config_file);
        if (rc)
            return rc;
    }
    static const char *const valued[] = {"map",
                                         "allow",
                                         "deny",
                                         "port",
                                         "listen",
                                         "pmtime",
                                         "accept-timeout",
                                         "max-pending",
                                         "rate",
                                         "burst",
                                         "control",
                                         "control-max-conns",
                                         "control-max-maps",
                                         "control-max-per-uid",
                                         "owner-check",
                                         "config"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--syslog") == 0) {
            c->use_syslog = true;
            continue;
        }
        if (strcmp(a, "--verbose") == 0 || strcmp(a, "-v") == 0) {
            c->verbose = true;
            continue;
        }
        bool matched = false;
        for (size_t k = 0; k < sizeof(valued) / sizeof(valued[0]) && !matched; k++) {
            char opt[32];
            snprintf(opt, sizeof(opt), "--%s", valued[k]);
            const char *v;
            int r = cli_opt(argc, argv, &i, opt, &v);
            if (r < 0)
                return CLI_EXIT_USAGE;
            if (r == 0)
                continue;
            matched = true;
            if (strcmp(valued[k], "config") == 0)
                continue;
            r = apply(c, valued[k], v, false);
            if (r == -2) {
                cli_msg("out of memory");
                return CLI_EXIT_USAGE;
            }
            if (r < 0)
                return cli_usage("bad value for %s: '%s'", opt, v);
        }
        if (!matched)
            return cli_usage("unknown option '%s'", a);
    }
    return 0;
}

bool pmd_client_allowed(const pmd_config *c, const uw_pm_udp_addr *from)
{
    /* First matching rule decides; with no match, a list that has allow
     * rules is a whitelist and denies, one with only deny rules allows. */
    bool any_allow = false;
    for (size_t i = 0; i < c->nrules; i++) {
        any_allow |= c->rules[i].allow;
        if (pmn_net_match(&c->rules[i].net, from->ipv, from->ip))
            return c->rules[i].allow;
    }
    return !any_allow;
}

uint16_t pmd_static_sdp(const pmd_config *c, uint16_t svc)
{
    for (size_t i = 0; i < c->nmaps; i++)
        if (c->maps[i].service == svc)
            return c->maps[i].sdp ? c->maps[i].sdp : svc;
    return 0;
}
