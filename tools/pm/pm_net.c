#include "pm_net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

void pmn_from_sockaddr(const struct sockaddr *sa, uw_pm_udp_addr *out)
{
    memset(out, 0, sizeof(*out));
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
        out->ipv = 4;
        memcpy(out->ip, &s4->sin_addr, 4);
        out->port = ntohs(s4->sin_port);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
        static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
        out->port = ntohs(s6->sin6_port);
        if (memcmp(&s6->sin6_addr, mapped, 12) == 0) {
            out->ipv = 4;
            memcpy(out->ip, (const uint8_t *)&s6->sin6_addr + 12, 4);
        } else {
            out->ipv = 6;
            memcpy(out->ip, &s6->sin6_addr, 16);
            out->scope_id = s6->sin6_scope_id;
        }
    }
}

socklen_t pmn_to_sockaddr(const uw_pm_udp_addr *a, struct sockaddr_storage *ss)
{
    memset(ss, 0, sizeof(*ss));
    if (a->ipv == 4) {
        struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
        s4->sin_family = AF_INET;
        s4->sin_port = htons(a->port);
        memcpy(&s4->sin_addr, a->ip, 4);
        return sizeof(*s4);
    }
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons(a->port);
    memcpy(&s6->sin6_addr, a->ip, 16);
    s6->sin6_scope_id = a->scope_id;
    return sizeof(*s6);
}

bool pmn_parse_ip(const char *s, uint8_t *ipv, uint8_t ip[16])
{
    memset(ip, 0, 16);
    if (inet_pton(AF_INET, s, ip) == 1) {
        *ipv = 4;
        return true;
    }
    if (inet_pton(AF_INET6, s, ip) == 1) {
        *ipv = 6;
        return true;
    }
    return false;
}

static bool parse_port(const char *s, uint16_t *port)
{
    char *end;
    if (!*s || *s == '-' || *s == '+')
        return false;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || *end || v > 65535)
        return false;
    *port = (uint16_t)v;
    return true;
}

bool pmn_parse_addr_port(const char *s, uw_pm_udp_addr *out)
{
    char buf[PMN_ADDRSTRLEN];
    if (strlen(s) >= sizeof(buf))
        return false;
    strcpy(buf, s);
    uint16_t port = out->port;
    char *host = buf;
    if (buf[0] == '[') {
        char *close = strchr(buf, ']');
        if (!close)
            return false;
        *close = '\0';
        host = buf + 1;
        if (close[1] == ':') {
            if (!parse_port(close + 2, &port))
                return false;
        } else if (close[1]) {
            return false;
        }
    } else {
        char *colon = strchr(buf, ':');
        if (colon && !strchr(colon + 1, ':')) { /* exactly one colon: IPv4:port */
            *colon = '\0';
            if (!parse_port(colon + 1, &port))
                return false;
        }
    }
    uint8_t ipv, ip[16];
    if (!pmn_parse_ip(host, &ipv, ip))
        return false;
    memset(out, 0, sizeof(*out));
    out->ipv = ipv;
    memcpy(out->ip, ip, 16);
    out->port = port;
    return true;
}

const char *pmn_ip_str(uint8_t ipv, const uint8_t *ip, char buf[PMN_ADDRSTRLEN])
{
    if (!inet_ntop(ipv == 4 ? AF_INET : AF_INET6, ip, buf, PMN_ADDRSTRLEN))
        snprintf(buf, PMN_ADDRSTRLEN, "?");
    return buf;
}

const char *pmn_addr_str(const uw_pm_udp_addr *a, char buf[PMN_ADDRSTRLEN])
{
    char ip[PMN_ADDRSTRLEN];
    pmn_ip_str(a->ipv, a->ip, ip);
    snprintf(buf, PMN_ADDRSTRLEN, a->ipv == 6 ? "[%s]:%u" : "%s:%u", ip, (unsigned)a->port);
    return buf;
}

bool pmn_parse_net(const char *s, pmn_net *out)
{
    char buf[PMN_ADDRSTRLEN];
    if (strlen(s) >= sizeof(buf))
        return false;
    strcpy(buf, s);
    char *slash = strchr(buf, '/');
    long prefix = -1;
    if (slash) {
        *slash = '\0';
        char *end;
        if (!slash[1] || slash[1] == '-' || slash[1] == '+')
            return false;
        prefix = strtol(slash + 1, &end, 10);
        if (*end)
            return false;
    }
    if (!pmn_parse_ip(buf, &out->ipv, out->ip))
        return false;
    long max = out->ipv == 4 ? 32 : 128;
    if (prefix < 0)
        prefix = max;
    if (prefix > max)
        return false;
    out->prefix = (unsigned)prefix;
    return true;
}

bool pmn_net_match(const pmn_net *n, uint8_t ipv, const uint8_t *ip)
{
    if (n->ipv != ipv)
        return false;
    unsigned full = n->prefix / 8, rest = n->prefix % 8;
    if (memcmp(n->ip, ip, full) != 0)
        return false;
    if (rest) {
        uint8_t mask = (uint8_t)(0xFF << (8 - rest));
        if ((n->ip[full] & mask) != (ip[full] & mask))
            return false;
    }
    return true;
}

uint64_t pmn_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t pmn_random(void *ud)
{
    (void)ud;
    uint64_t v = 0;
    uint8_t *p = (uint8_t *)&v;
    size_t got = 0;
    while (got < sizeof(v)) {
        ssize_t n = getrandom(p + got, sizeof(v) - got, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            /* No getrandom (very old kernels): the clock is a weak but
             * different-every-run fallback. */
            return pmn_now() * 0x9E3779B97F4A7C15ull ^ (uint64_t)getpid();
        }
        got += (size_t)n;
    }
    return v;
}

void pmn_rss_kb(unsigned long *rss, unsigned long *peak)
{
    *rss = *peak = 0;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return;
    char line[256];
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, "VmRSS:", 6) == 0)
            *rss = strtoul(line + 6, NULL, 10);
        else if (strncmp(line, "VmHWM:", 6) == 0)
            *peak = strtoul(line + 6, NULL, 10);
    }
    fclose(f);
}
