#include "rdmacli.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cliutil.h"

int64_t rc_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int rc_remaining_ms(int64_t deadline)
{
    if (deadline < 0)
        return -1;
    int64_t left = deadline - rc_now_ms();
    if (left <= 0)
        return 0;
    return left > INT32_MAX ? INT32_MAX : (int)left;
}

bool rc_parse_seconds(const char *s, int *ms)
{
    if (!s || !*s)
        return false;
    /* Fixed-point by hand: strtod would accept "1e3", "inf", signs and
     * locale-dependent separators, none of which belong in a timeout. */
    uint64_t whole = 0, frac = 0, scale = 1000;
    const char *p = s;
    bool digits = false;
    for (; *p >= '0' && *p <= '9'; p++) {
        whole = whole * 10 + (uint64_t)(*p - '0');
        digits = true;
        if (whole > 86400)
            return false;
    }
    if (*p == '.') {
        p++;
        for (; *p >= '0' && *p <= '9'; p++) {
            digits = true;
            if (scale > 1) {
                scale /= 10;
                frac += (uint64_t)(*p - '0') * scale;
            }
        }
    }
    if (*p || !digits)
        return false;
    uint64_t v = whole * 1000 + frac;
    if (v > 86400000u)
        return false;
    if (v == 0 && (whole || frac))
        v = 1;
    *ms = (int)v;
    return true;
}

int rc_resolve(const char *host, const char *port, bool passive, struct sockaddr_storage *ss,
               socklen_t *len)
{
    uint32_t pnum;
    if (!cli_parse_u32(port, &pnum) || pnum > 65535) {
        cli_msg("invalid port '%s' (0..65535)", port);
        return -1;
    }
    if (!passive && pnum == 0) {
        cli_msg("port 0 cannot be connected to");
        return -1;
    }
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof(hints));
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = passive ? AI_PASSIVE : 0;
    hints.ai_family = AF_UNSPEC;
    if (!host && passive)
        hints.ai_family = AF_INET;
    int rc = getaddrinfo(host, port, &hints, &res);
    if (rc != 0) {
        cli_msg("cannot resolve '%s': %s", host ? host : "*", gai_strerror(rc));
        return -1;
    }
    const struct addrinfo *pick = NULL;
    for (const struct addrinfo *a = res; a; a = a->ai_next) {
        if (a->ai_family == AF_INET) {
            pick = a;
            break;
        }
        if (!pick && a->ai_family == AF_INET6)
            pick = a;
    }
    if (!pick || pick->ai_addrlen > sizeof(*ss)) {
        freeaddrinfo(res);
        cli_msg("no IPv4 or IPv6 address for '%s'", host ? host : "*");
        return -1;
    }
    memset(ss, 0, sizeof(*ss));
    memcpy(ss, pick->ai_addr, pick->ai_addrlen);
    *len = pick->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

int rc_split_listen(const char *spec, char *hostbuf, size_t cap, const char **host,
                    const char **port)
{
    *host = NULL;
    if (spec[0] == '[') {
        const char *close = strchr(spec, ']');
        if (!close || close[1] != ':' || (size_t)(close - spec - 1) >= cap) {
            cli_msg("invalid listen address '%s' (use [ADDR]:PORT for IPv6)", spec);
            return -1;
        }
        memcpy(hostbuf, spec + 1, (size_t)(close - spec - 1));
        hostbuf[close - spec - 1] = '\0';
        *host = hostbuf;
        *port = close + 2;
        return 0;
    }
    const char *colon = strrchr(spec, ':');
    if (!colon) {
        *port = spec;
        return 0;
    }
    if (strchr(spec, ':') != colon) {
        cli_msg("invalid listen address '%s' (use [ADDR]:PORT for IPv6)", spec);
        return -1;
    }
    if ((size_t)(colon - spec) >= cap || colon == spec) {
        cli_msg("invalid listen address '%s'", spec);
        return -1;
    }
    memcpy(hostbuf, spec, (size_t)(colon - spec));
    hostbuf[colon - spec] = '\0';
    *host = hostbuf;
    *port = colon + 1;
    return 0;
}

void rc_addr_str(const struct sockaddr *sa, char *buf, size_t cap)
{
    char ip[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
        inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip));
        port = ntohs(in->sin_port);
        snprintf(buf, cap, "%s:%u", ip, port);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip));
        port = ntohs(in6->sin6_port);
        snprintf(buf, cap, "[%s]:%u", ip, port);
    } else {
        snprintf(buf, cap, "(unknown address family %d)", sa->sa_family);
    }
}

void rc_err_text(int err, char *buf, size_t cap)
{
    int code = uw_mpa_error_code(err);
    if (code > 0)
        snprintf(buf, cap, "%s (%s; MPA error %d %s)", uw_err_name(err), uw_strerror(err), code,
                 uw_mpa_error_name(err));
    else
        snprintf(buf, cap, "%s (%s)", uw_err_name(err), uw_strerror(err));
}

int rc_exit_for_err(int err)
{
    if (err == UW_ETIMEDOUT)
        return RC_EXIT_TIMEOUT;
    return RC_EXIT_PROTO;
}

static const char *layer_name(unsigned layer)
{
    switch (layer) {
    case UW_TERM_RDMAP:
        return "RDMAP";
    case UW_TERM_DDP:
        return "DDP";
    case UW_TERM_LLP:
        return "LLP/MPA";
    default:
        return "unknown layer";
    }
}

int rc_report_event(const char *what, const uw_cm_event *ev)
{
    char et[256];
    rc_err_text(ev->err, et, sizeof(et));
    switch (ev->type) {
    case UW_CM_REJECTED: {
        /* The peer's reason, whatever it is, is only in its private data. */
        char hex[2 * UW_MPA_MAX_PD + 1];
        size_t n = ev->private_data_len <= UW_MPA_MAX_PD ? ev->private_data_len : UW_MPA_MAX_PD;
        cli_hex(hex, ev->private_data, n);
        cli_msg("%s: rejected by the peer (MPA Reply with R set); peer private data (%zu octets): "
                "%s",
                what, n, n ? hex : "(none)");
        return RC_EXIT_REJECTED;
    }
    case UW_CM_TERMINATED: {
        /* "the peer sent a Terminate" adds nothing to "Terminate received". */
        bool show_cause = ev->err && !(ev->term_received && ev->err == UW_ETERM_RECEIVED);
        cli_msg("%s: Terminate %s: %s (layer %u %s, type 0x%x, code 0x%02x)%s%s", what,
                ev->term_received ? "received from the peer" : "sent to the peer",
                uw_term_describe(ev->term), (unsigned)ev->term.layer, layer_name(ev->term.layer),
                (unsigned)ev->term.etype, (unsigned)ev->term.ecode, show_cause ? "; cause: " : "",
                show_cause ? et : "");
        return RC_EXIT_PROTO;
    }
    case UW_CM_CONNECT_ERROR:
        if (ev->err == UW_ETIMEDOUT) {
            cli_msg("%s: connection setup timed out", what);
        } else if (ev->err == UW_ECONNREFUSED) {
            /* A CONNECT_ERROR, not REJECTED: TCP itself was refused. */
            cli_msg("%s: TCP connection refused (is anything listening?)", what);
        } else if (ev->term.layer || ev->term.etype || ev->term.ecode) {
            /* Setup ended with a Terminate (RFC 6581 codes 6 and 7). */
            bool rx = ev->term_received || ev->err == UW_ETERM_RECEIVED;
            cli_msg("%s: connection setup failed: Terminate %s: %s (layer %u %s, type 0x%x, "
                    "code 0x%02x)%s%s",
                    what, rx ? "received from the peer" : "sent to the peer",
                    uw_term_describe(ev->term), (unsigned)ev->term.layer,
                    layer_name(ev->term.layer), (unsigned)ev->term.etype, (unsigned)ev->term.ecode,
                    rx ? "" : "; cause: ", rx ? "" : et);
        } else {
            cli_msg("%s: connection setup failed: %s", what, et);
        }
        return rc_exit_for_err(ev->err);
    case UW_CM_CONN_ERROR:
        cli_msg("%s: connection failed: %s", what, et);
        return rc_exit_for_err(ev->err);
    case UW_CM_DISCONNECTED:
        cli_msg("%s: the peer closed the connection", what);
        return RC_EXIT_PROTO;
    default:
        cli_msg("%s: unexpected event %s (%s)", what, uw_cm_event_name(ev->type), et);
        return RC_EXIT_PROTO;
    }
}

const char *rc_wc_status_name(int status)
{
    switch (status) {
    case UW_WC_SUCCESS:
        return "SUCCESS";
    case UW_WC_LOC_LEN_ERR:
        return "LOC_LEN_ERR";
    case UW_WC_LOC_PROT_ERR:
        return "LOC_PROT_ERR";
    case UW_WC_WR_FLUSH_ERR:
        return "WR_FLUSH_ERR";
    case UW_WC_REM_ACCESS_ERR:
        return "REM_ACCESS_ERR";
    case UW_WC_REM_OP_ERR:
        return "REM_OP_ERR";
    case UW_WC_FATAL_ERR:
        return "FATAL_ERR";
    case UW_WC_TIMEOUT_ERR:
        return "TIMEOUT_ERR";
    default:
        return "UNKNOWN";
    }
}

void rc_rtr_str(uint8_t rtr, char *buf, size_t cap)
{
    static const struct {
        uint8_t bit;
        const char *name;
    } names[] = {{UW_MPA_RTR_SEND, "send"}, {UW_MPA_RTR_WRITE, "write"}, {UW_MPA_RTR_READ, "read"}};
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (!(rtr & names[i].bit))
            continue;
        int n = snprintf(buf + used, cap - used, "%s%s", used ? "|" : "", names[i].name);
        if (n < 0 || (size_t)n >= cap - used)
            break;
        used += (size_t)n;
    }
    if (!used)
        snprintf(buf, cap, "none");
}

void rc_log(void *ud, int level, const char *msg)
{
    (void)ud;
    static const char *lv[] = {"error", "warn", "info", "debug"};
    cli_msg("uwarp %s: %s", level >= 0 && level <= 3 ? lv[level] : "log", msg);
}

int rc_parse_rev(const char *s, uint8_t *out)
{
    if (strcmp(s, "1") && strcmp(s, "2")) {
        cli_usage("--rev must be 1 or 2, not '%s'", s);
        return -1;
    }
    *out = (uint8_t)(s[0] - '0');
    return 0;
}

int rc_parse_rtr_list(const char *s, uint8_t *out)
{
    uint8_t m = 0;
    const char *p = s;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if (n == 4 && !strncmp(p, "send", 4))
            m |= UW_MPA_RTR_SEND;
        else if (n == 5 && !strncmp(p, "write", 5))
            m |= UW_MPA_RTR_WRITE;
        else if (n == 4 && !strncmp(p, "read", 4))
            m |= UW_MPA_RTR_READ;
        else
            return -1;
        p += n;
        if (*p == ',') {
            p++;
            if (!*p)
                return -1;
        }
    }
    if (!m)
        return -1;
    *out = m;
    return 0;
}
