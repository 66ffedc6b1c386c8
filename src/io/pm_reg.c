/* Client side of uwarp-pmd's control protocol (pm/ctl.h): a Unix-domain
 * stream connection whose lifetime is the lifetime of the mappings it
 * registered. Everything blocks for at most the caller's timeout. */
#define _GNU_SOURCE
#include "io/pm_reg.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t deadline_of(int timeout_ms)
{
    return now_ms() + (timeout_ms > 0 ? timeout_ms : UW__PM_REG_TIMEOUT_MS);
}

/* Waits until fd is ready for ev or the deadline passes. */
static int wait_fd(int fd, short ev, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - now_ms();
        if (left <= 0)
            return UW_ETIMEDOUT;
        struct pollfd p = {.fd = fd, .events = ev};
        int n = poll(&p, 1, left > INT_MAX ? INT_MAX : (int)left);
        if (n > 0)
            return 0;
        if (n == 0)
            return UW_ETIMEDOUT;
        if (errno != EINTR)
            return UW_EPIPE;
    }
}

const char *uw__pm_control_path(const char *path)
{
    if (path)
        return path;
    const char *env = getenv(UW__PM_CTL_ENV);
    return env && *env ? env : UW__PM_CTL_DEFAULT_PATH;
}

/* Sends one request line and reads its one reply. */
static int exchange(int fd, const uw__pm_ctl_req *req, int64_t deadline)
{
    char line[UW__PM_CTL_LINE_MAX + 1];
    ssize_t len = uw__pm_ctl_fmt_req(req, line, sizeof(line));
    if (len < 0)
        return (int)len;
    size_t off = 0;
    bool send_failed = false;
    while (off < (size_t)len) {
        ssize_t n = send(fd, line + off, (size_t)len - off, MSG_NOSIGNAL);
        if (n > 0) {
            off += (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int rc = wait_fd(fd, POLLOUT, deadline);
            if (rc)
                return rc;
        } else {
            /* The daemon may have answered and closed at once (too many
             * connections): its reply is still there to read. */
            send_failed = true;
            break;
        }
    }
    uw__pm_ctl_rx rx;
    uw__pm_ctl_rx_init(&rx);
    for (;;) {
        char buf[UW__PM_CTL_LINE_MAX];
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        if (n > 0) {
            const char *reply;
            size_t reply_len;
            ssize_t used = uw__pm_ctl_rx_feed(&rx, buf, (size_t)n, &reply, &reply_len);
            if (used < 0)
                return UW_EPROTO;
            if (!reply)
                continue;
            int err;
            /* One request, one reply: anything after it is out of step. */
            if (used != n || uw__pm_ctl_parse_reply(reply, reply_len, &err, NULL, NULL) != 0)
                return UW_EPROTO;
            if (err == 0 && send_failed)
                return UW_EPIPE; /* cannot be an answer to a request never sent */
            return err;
        }
        if (n == 0)
            return UW_EPIPE;
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return UW_EPIPE;
        int rc = wait_fd(fd, POLLIN, deadline);
        if (rc)
            return rc;
    }
}

static int connect_ctl(const char *path, int64_t deadline, int *fd_out)
{
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    if (!*path || strlen(path) >= sizeof(sa.sun_path))
        return UW_EINVAL;
    memcpy(sa.sun_path, path, strlen(path));
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return errno == ENOMEM || errno == ENOBUFS ? UW_ENOMEM : UW_ENOBUFS;
    for (;;) {
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
            break;
        int e = errno;
        if (e == EINTR)
            continue;
        if (e == EAGAIN) {
            /* The daemon's backlog is full; a Unix socket does not queue the
             * attempt, so try again shortly. */
            int64_t left = deadline - now_ms();
            if (left <= 0) {
                close(fd);
                return UW_ETIMEDOUT;
            }
            poll(NULL, 0, left < 10 ? (int)left : 10);
            continue;
        }
        if (e == EINPROGRESS) {
            int rc = wait_fd(fd, POLLOUT, deadline);
            int soerr = 0;
            socklen_t sl = sizeof(soerr);
            if (rc == 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 && soerr == 0)
                break;
            close(fd);
            return rc ? rc : UW_ENOENT;
        }
        close(fd);
        if (e == EACCES || e == EPERM)
            return UW_EPERM;
        return UW_ENOENT; /* ENOENT, ECONNREFUSED (stale socket file), ENOTDIR... */
    }
    *fd_out = fd;
    return 0;
}

int uw__pm_register(const char *path, uint16_t svc_port, uint16_t sdp_port, int timeout_ms,
                    int *fd_out)
{
    if (!fd_out)
        return UW_EINVAL;
    *fd_out = -1;
    if (svc_port == 0 || sdp_port == 0)
        return UW_EINVAL;
    path = uw__pm_control_path(path);
    if (strcmp(path, "none") == 0)
        return UW_ENOENT;
    int64_t deadline = deadline_of(timeout_ms);
    int fd;
    int rc = connect_ctl(path, deadline, &fd);
    if (rc)
        return rc;
    uw__pm_ctl_req req = {UW__PM_CTL_MAP, svc_port, sdp_port};
    rc = exchange(fd, &req, deadline);
    if (rc) {
        close(fd); /* whatever happened, nothing outlives the connection */
        return rc;
    }
    *fd_out = fd;
    return 0;
}

int uw__pm_reg_map(int fd, uint16_t svc_port, uint16_t sdp_port, int timeout_ms)
{
    if (fd < 0 || svc_port == 0 || sdp_port == 0)
        return UW_EINVAL;
    uw__pm_ctl_req req = {UW__PM_CTL_MAP, svc_port, sdp_port};
    return exchange(fd, &req, deadline_of(timeout_ms));
}

int uw__pm_reg_unmap(int fd, uint16_t svc_port, int timeout_ms)
{
    if (fd < 0 || svc_port == 0)
        return UW_EINVAL;
    uw__pm_ctl_req req = {UW__PM_CTL_UNMAP, svc_port, 0};
    return exchange(fd, &req, deadline_of(timeout_ms));
}
