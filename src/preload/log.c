/* Logging: one line per event, "uwarp-preload[PID] fd N: what", to stderr or
 * to $UWARP_PRELOAD_LOG_FILE, at the level $UWARP_PRELOAD_LOG sets (error,
 * warn, info, debug; default warn). Each line is one write(2), so lines of
 * concurrent threads and processes do not interleave. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "preload/pl.h"

int pl_log_level = PL_LOG_WARN;
static int log_fd = 2;

void pl_log_open(void)
{
    const char *lv = getenv("UWARP_PRELOAD_LOG");
    if (lv && *lv) {
        if (!strcasecmp(lv, "error"))
            pl_log_level = PL_LOG_ERROR;
        else if (!strcasecmp(lv, "warn") || !strcasecmp(lv, "warning"))
            pl_log_level = PL_LOG_WARN;
        else if (!strcasecmp(lv, "info"))
            pl_log_level = PL_LOG_INFO;
        else if (!strcasecmp(lv, "debug"))
            pl_log_level = PL_LOG_DEBUG;
        else
            pl_log(PL_LOG_WARN, -1, "UWARP_PRELOAD_LOG=%s: not error|warn|info|debug; using warn",
                   lv);
    }
    const char *file = getenv("UWARP_PRELOAD_LOG_FILE");
    if (file && *file) {
        int fd = open(file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (fd < 0) {
            pl_log(PL_LOG_WARN, -1, "UWARP_PRELOAD_LOG_FILE=%s: cannot open: %s", file,
                   strerror(errno));
            return;
        }
        /* Out of the way of the numbers the application expects. */
        int hi = pl_real.fcntl(fd, F_DUPFD_CLOEXEC, 512);
        if (hi >= 0) {
            pl_real.close(fd);
            fd = hi;
        }
        log_fd = fd;
    }
}

void pl_log(int level, int fd, const char *fmt, ...)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    if (level > pl_log_level)
        return;
    int e = errno;
    char buf[768];
    int n;
    if (fd >= 0)
        n = snprintf(buf, sizeof(buf), "uwarp-preload[%d] fd %d: ", (int)getpid(), fd);
    else
        n = snprintf(buf, sizeof(buf), "uwarp-preload[%d]: ", (int)getpid());
    if (level <= PL_LOG_WARN && n > 0 && (size_t)n < sizeof(buf))
        n += snprintf(buf + n, sizeof(buf) - (size_t)n, "%s: ", names[level]);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof(buf))
        n += vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    if ((size_t)n >= sizeof(buf) - 1)
        n = (int)sizeof(buf) - 2;
    buf[n++] = '\n';
    pl_inside++;
    ssize_t w = pl_real.write(log_fd, buf, (size_t)n);
    pl_inside--;
    (void)w;
    errno = e;
}

const char *pl_addr_str(const struct sockaddr *sa, socklen_t len, char *buf, size_t n)
{
    char ip[INET6_ADDRSTRLEN];
    if (sa && sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof(ip));
        snprintf(buf, n, "%s:%u", ip, ntohs(s4->sin_port));
    } else if (sa && sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof(ip));
        snprintf(buf, n, "[%s]:%u", ip, ntohs(s6->sin6_port));
    } else {
        snprintf(buf, n, "?");
    }
    return buf;
}
