/* pl_calls sequences: read/write/readv/writev, send/recv and their flags,
 * sendto/recvfrom, sendmsg/recvmsg, sendmmsg/recvmmsg, sendfile, urgent
 * data, shutdown, close and the dup family. Expected values are Linux
 * TCP's. */
#include "pl_calls.h"

static struct iovec iov(void *p, size_t n)
{
    struct iovec v = {p, n};
    return v;
}

/* The contents of each iovec, "abc|def|". */
static const char *iovs_str(const struct iovec *v, int n, long got)
{
    char *s = sbuf();
    size_t o = 0;
    s[0] = 0;
    for (int i = 0; i < n && o < 150; i++) {
        long k = got < (long)v[i].iov_len ? got : (long)v[i].iov_len;
        if (k < 0)
            k = 0;
        o += (size_t)snprintf(s + o, 160 - o, "%s%.*s", i ? "|" : "", (int)k,
                              (const char *)v[i].iov_base);
        got -= k;
    }
    return s;
}

/* read/write, readv/writev (every iovec), several sends read at once. */
void seq_rw(void)
{
    int fd = pair_open(AF_INET);
    if (CLI) {
        T("write", write(fd, "hello", 5), "5");
        struct iovec v[3] = {iov("abc", 3), iov("defg", 4), iov("hijkl", 5)};
        sync_();
        T("writev 3 iovecs", writev(fd, v, 3), "12");
        sync_();
        T("write 5", write(fd, "12345", 5), "5");
        sync_();
        T("send a", send(fd, "a", 1, 0), "1");
        T("send bc", send(fd, "bc", 2, 0), "2");
        T("send def", send(fd, "def", 3, 0), "3");
        sync_();
        T("write 0 octets", write(fd, g_buf, 0), "0");
        T("writev no iovecs", writev(fd, v, 0), "0");
        struct iovec z[3] = {iov(g_buf, 0), iov("x", 1), iov(g_buf, 0)};
        T("writev empty iovecs around one", writev(fd, z, 3), "1");
        sync_();
        return;
    }
    char b[64], p[3][4];
    settle("poll", fd, "IN OUT");
    long n = T("read", read(fd, b, sizeof b), "5");
    V("data", str_n(b, n), "\"hello\"");
    sync_();
    wait_bytes(fd, 12);
    struct iovec v[3] = {iov(p[0], 4), iov(p[1], 4), iov(p[2], 4)};
    n = T("readv 3 x 4", readv(fd, v, 3), "12");
    V("iovecs", iovs_str(v, 3, n), "abcd|efgh|ijkl");
    T("FIONREAD", (ioctl(fd, FIONREAD, &n) == 0 ? n : -1), "0");
    sync_();
    wait_bytes(fd, 5);
    struct iovec w[3] = {iov(p[0], 3), iov(p[1], 3), iov(p[2], 3)};
    n = T("readv short data", readv(fd, w, 3), "5");
    V("iovecs", iovs_str(w, 3, n), "123|45|");
    sync_();
    wait_bytes(fd, 6);
    n = T("recv after 3 sends", recv(fd, b, sizeof b, 0), "6");
    V("data", str_n(b, n), "\"abcdef\"");
    sync_();
    wait_bytes(fd, 1);
    T("read 0 octets", read(fd, b, 0), "0");
    n = T("read", read(fd, b, sizeof b), "1");
    T("recv DONTWAIT, nothing there", recv(fd, b, 1, MSG_DONTWAIT), "-1 EAGAIN");
    sync_();
}

/* 400,000 octets through writev of 4 iovecs, read by recvmsg(MSG_WAITALL)
 * into 4 iovecs while they are written. */
void seq_rw_big(void)
{
    enum { N = 100000 };
    static _Thread_local unsigned char m[4][N];
    int fd = pair_open(AF_INET);
    struct iovec v[4];
    for (int i = 0; i < 4; i++)
        v[i] = iov(m[i], N);
    if (CLI) {
        for (int i = 0; i < 4; i++)
            pattern(m[i], N, (unsigned)i);
        sync_();
        T("writev 4 x 100000", writev(fd, v, 4), "400000");
        sync_();
        return;
    }
    set_rcvtimeo(fd, 10000);
    memset(m, 0, sizeof m);
    struct msghdr mh;
    memset(&mh, 0, sizeof mh);
    mh.msg_iov = v;
    mh.msg_iovlen = 4;
    sync_();
    T("recvmsg WAITALL 4 x 100000", recvmsg(fd, &mh, MSG_WAITALL), "400000");
    for (int i = 0; i < 4; i++)
        V("iovec contents", pattern_ok(m[i], N, (unsigned)i), "intact");
    sync_();
}

/* send/recv flags: MSG_PEEK, MSG_DONTWAIT, MSG_MORE; sendto/recvfrom. */
void seq_send_recv(void)
{
    int fd = pair_open(AF_INET);
    if (CLI) {
        sync_();
        T("send", send(fd, "hello world", 11, 0), "11");
        sync_();
        sync_();
        struct sockaddr_storage ss;
        socklen_t len = loop_addr(AF_INET, g_lport, &ss);
        T("sendto NULL address", sendto(fd, "abc", 3, 0, NULL, 0), "3");
        T("sendto the peer's address", sendto(fd, "def", 3, 0, (struct sockaddr *)&ss, len), "3");
        sync_();
        sync_();
        T("send MSG_MORE", send(fd, "ab", 2, MSG_MORE), "2");
        T("send", send(fd, "cd", 2, 0), "2");
        T("send 0 octets", send(fd, "", 0, 0), "0");
        sync_();
        return;
    }
    char b[64];
    T("recv DONTWAIT before any data", recv(fd, b, sizeof b, MSG_DONTWAIT), "-1 EAGAIN");
    sync_();
    sync_();
    wait_bytes(fd, 11);
    long n = T("recv PEEK 5", recv(fd, b, 5, MSG_PEEK), "5");
    V("data", str_n(b, n), "\"hello\"");
    n = T("recv PEEK 64", recv(fd, b, sizeof b, MSG_PEEK), "11");
    V("data", str_n(b, n), "\"hello world\"");
    int avail = -1;
    T("FIONREAD after peek", (ioctl(fd, FIONREAD, &avail) == 0 ? avail : -1), "11");
    n = T("recv 5", recv(fd, b, 5, 0), "5");
    V("data", str_n(b, n), "\"hello\"");
    n = T("recv PEEK|DONTWAIT", recv(fd, b, sizeof b, MSG_PEEK | MSG_DONTWAIT), "6");
    n = T("recv 64", recv(fd, b, sizeof b, 0), "6");
    V("data", str_n(b, n), "\" world\"");
    T("recv DONTWAIT empty", recv(fd, b, sizeof b, MSG_DONTWAIT), "-1 EAGAIN");
    T("recv PEEK|DONTWAIT empty", recv(fd, b, sizeof b, MSG_PEEK | MSG_DONTWAIT), "-1 EAGAIN");
    T("recv 0 octets DONTWAIT, nothing there", recv(fd, b, 0, MSG_DONTWAIT), "-1 EAGAIN");
    sync_();
    wait_bytes(fd, 6);
    struct sockaddr_storage from;
    socklen_t flen = sizeof from;
    memset(&from, 0xff, sizeof from);
    n = T("recvfrom with address", recvfrom(fd, b, sizeof b, 0, (struct sockaddr *)&from, &flen),
          "6");
    V("data", str_n(b, n), "\"abcdef\"");
    T("address length returned", (long)flen, "0");
    T("recvfrom NULL address DONTWAIT", recvfrom(fd, b, sizeof b, MSG_DONTWAIT, NULL, NULL),
      "-1 EAGAIN");
    sync_();
    sync_();
    wait_bytes(fd, 4);
    n = T("recv after MSG_MORE", recv(fd, b, sizeof b, 0), "4");
    V("data", str_n(b, n), "\"abcd\"");
    sync_();
}

/* MSG_WAITALL: the rest arrives while recv waits. */
void seq_waitall(void)
{
    int fd = pair_open(AF_INET);
    if (CLI) {
        T("send 3", send(fd, "abc", 3, 0), "3");
        sync_();
        sleep_ms(200);
        T("send 7", send(fd, "defghij", 7, 0), "7");
        sync_();
        T("send 2", send(fd, "kl", 2, 0), "2");
        T("shutdown WR", shutdown(fd, SHUT_WR), "0");
        sync_();
        return;
    }
    char b[64];
    set_rcvtimeo(fd, 5000);
    wait_bytes(fd, 3);
    sync_();
    long n = T("recv PEEK|WAITALL 10", recv(fd, b, 10, MSG_PEEK | MSG_WAITALL), "10");
    n = T("recv WAITALL 10", recv(fd, b, 10, MSG_WAITALL), "10");
    V("data", str_n(b, n), "\"abcdefghij\"");
    sync_();
    sync_();
    n = T("recv WAITALL 10, EOF after 2", recv(fd, b, 10, MSG_WAITALL), "2");
    V("data", str_n(b, n), "\"kl\"");
    T("recv at EOF", recv(fd, b, 10, MSG_WAITALL), "0");
}

/* sendmsg/recvmsg: several iovecs, msg_flags, msg_namelen, MSG_PEEK. */
void seq_msg(void)
{
    int fd = pair_open(AF_INET);
    if (CLI) {
        struct iovec v[3] = {iov("one", 3), iov("two", 3), iov("three", 5)};
        struct msghdr mh;
        memset(&mh, 0, sizeof mh);
        mh.msg_iov = v;
        mh.msg_iovlen = 3;
        T("sendmsg 3 iovecs", sendmsg(fd, &mh, 0), "11");
        sync_();
        mh.msg_iovlen = 0;
        T("sendmsg no iovecs", sendmsg(fd, &mh, 0), "0");
        sync_();
        return;
    }
    char p[2][8];
    struct sockaddr_storage from;
    struct iovec v[2] = {iov(p[0], 4), iov(p[1], 8)};
    struct msghdr mh;
    memset(&mh, 0, sizeof mh);
    mh.msg_name = &from;
    mh.msg_namelen = sizeof from;
    mh.msg_iov = v;
    mh.msg_iovlen = 2;
    mh.msg_flags = -1;
    wait_bytes(fd, 11);
    long n = T("recvmsg PEEK 2 iovecs", recvmsg(fd, &mh, MSG_PEEK), "11");
    V("iovecs", iovs_str(v, 2, n), "onet|wothree");
    T("msg_namelen", (long)mh.msg_namelen, "0");
    T("msg_flags", mh.msg_flags, "0");
    v[1].iov_len = 4;
    mh.msg_namelen = sizeof from;
    n = T("recvmsg 4+4", recvmsg(fd, &mh, 0), "8");
    V("iovecs", iovs_str(v, 2, n), "onet|woth");
    v[1].iov_len = 8;
    n = T("recvmsg rest", recvmsg(fd, &mh, 0), "3");
    V("iovecs", iovs_str(v, 2, n), "ree|");
    mh.msg_flags = -1;
    T("recvmsg DONTWAIT empty", recvmsg(fd, &mh, MSG_DONTWAIT), "-1 EAGAIN");
    sync_();
    sync_();
}

/* sendmmsg/recvmmsg. */
void seq_mmsg(void)
{
    int fd = pair_open(AF_INET);
    struct iovec v[3];
    struct mmsghdr mm[3];
    char p[3][64];
    memset(mm, 0, sizeof mm);
    for (int i = 0; i < 3; i++) {
        mm[i].msg_hdr.msg_iov = &v[i];
        mm[i].msg_hdr.msg_iovlen = 1;
    }
    if (CLI) {
        v[0] = iov("first", 5);
        v[1] = iov("second", 6);
        v[2] = iov("third", 5);
        T("sendmmsg 3", sendmmsg(fd, mm, 3, 0), "3");
        char *s = sbuf();
        snprintf(s, 160, "%u %u %u", mm[0].msg_len, mm[1].msg_len, mm[2].msg_len);
        V("msg_len", s, "5 6 5");
        sync_();
        sync_();
        v[0] = iov("x", 1);
        T("sendmmsg 1", sendmmsg(fd, mm, 1, MSG_DONTWAIT), "1");
        sync_();
        return;
    }
    for (int i = 0; i < 3; i++)
        v[i] = iov(p[i], sizeof p[i]);
    wait_bytes(fd, 16);
    sync_();
    long n = T("recvmmsg 3 DONTWAIT", recvmmsg(fd, mm, 3, MSG_DONTWAIT, NULL), "1");
    char *s = sbuf();
    snprintf(s, 160, "%u", mm[0].msg_len);
    V("msg_len", s, "16");
    V("data", str_n(p[0], n > 0 ? (long)mm[0].msg_len : 0), "\"firstsecondthird\"");
    T("recvmmsg nothing there", recvmmsg(fd, mm, 3, MSG_DONTWAIT, NULL), "-1 EAGAIN");
    sync_();
    wait_bytes(fd, 1);
    struct timespec ts = {1, 0};
    T("recvmmsg WAITFORONE", recvmmsg(fd, mm, 3, MSG_WAITFORONE, &ts), "1");
    sync_();
}

/* A length the compiler cannot see, so that _FORTIFY_SOURCE turns read,
 * recv and recvfrom into __read_chk, __recv_chk and __recvfrom_chk. */
static volatile size_t g_len3 = 3, g_len16 = 16;

void seq_fortify(void)
{
    int fd = pair_open(AF_INET);
    if (CLI) {
        T("send", send(fd, "abcdefghi", 9, 0), "9");
        sync_();
        return;
    }
    char b[16];
    wait_bytes(fd, 9);
    long n = T("recv, length known at run time", recv(fd, b, g_len3, 0), "3");
    V("data", str_n(b, n), "\"abc\"");
    n = T("read, length known at run time", read(fd, b, g_len3), "3");
    V("data", str_n(b, n), "\"def\"");
    n = T("recvfrom, length known at run time", recvfrom(fd, b, g_len3, 0, NULL, NULL), "3");
    V("data", str_n(b, n), "\"ghi\"");
    T("recv DONTWAIT, nothing there", recv(fd, b, g_len16, MSG_DONTWAIT), "-1 EAGAIN");
    sync_();
}

/* sendfile (and sendfile64) from a file to the socket. */
void seq_sendfile(void)
{
    enum { N = 100000 };
    static _Thread_local unsigned char m[N];
    int fd = pair_open(AF_INET);
    if (CLI) {
        char path[] = "/tmp/pl_calls.XXXXXX";
        int f = mkstemp(path);
        if (f < 0)
            seq_abort("mkstemp");
        track(f);
        unlink(path);
        pattern(m, N, 9);
        if (write(f, m, N) != N)
            seq_abort("write file");
        sync_();
        off_t off = 0;
        T("sendfile 100000 at offset 0", sendfile(fd, f, &off, N), "100000");
        T("offset after", (long)off, "100000");
        T("file position unchanged", (long)lseek(f, 0, SEEK_CUR), "100000");
        T("lseek 0", (long)lseek(f, 0, SEEK_SET), "0");
        T("sendfile NULL offset 1000", sendfile(fd, f, NULL, 1000), "1000");
        T("file position", (long)lseek(f, 0, SEEK_CUR), "1000");
        off64_t off64 = N - 500;
        T("sendfile64 past end", sendfile64(fd, f, &off64, 4000), "500");
        off = N;
        T("sendfile at EOF", sendfile(fd, f, &off, 10), "0");
        sync_();
        return;
    }
    set_rcvtimeo(fd, 10000);
    sync_();
    T("recv WAITALL 100000", recv(fd, m, N, MSG_WAITALL), "100000");
    V("contents", pattern_ok(m, N, 9), "intact");
    T("recv WAITALL 1000", recv(fd, m, 1000, MSG_WAITALL), "1000");
    V("contents", pattern_ok(m, 1000, 9), "intact");
    T("recv WAITALL 500", recv(fd, m, 500, MSG_WAITALL), "500");
    unsigned char ref[N];
    pattern(ref, N, 9);
    V("contents", memcmp(m, ref + N - 500, 500) == 0 ? "intact" : "corrupt", "intact");
    sync_();
}

/* Urgent data, SO_OOBINLINE off: SIOCATMARK, recv(MSG_OOB), FIONREAD. */
void seq_oob(void)
{
    int fd = pair_open(AF_INET);
    if (CLI) {
        sync_();
        T("send ab", send(fd, "ab", 2, 0), "2");
        T("send c OOB", send(fd, "c", 1, MSG_OOB), "1");
        sync_();
        sync_();
        T("send OOB again: d", send(fd, "d", 1, MSG_OOB), "1");
        T("send ef", send(fd, "ef", 2, 0), "2");
        sync_();
        sync_();
        T("send g OOB", send(fd, "g", 1, MSG_OOB), "1");
        T("send hi", send(fd, "hi", 2, 0), "2");
        sync_();
        sync_();
        return;
    }
    char b[16];
    int v = -1;
    T("recv OOB before any", recv(fd, b, 1, MSG_OOB | MSG_DONTWAIT), "-1 EINVAL");
    sync_();
    sync_();
    settle("poll", fd, "IN PRI OUT");
    T("SIOCATMARK", (ioctl(fd, SIOCATMARK, &v) == 0 ? v : -1), "0");
    T("FIONREAD (up to the mark)", (ioctl(fd, FIONREAD, &v) == 0 ? v : -1), "2");
    long n = T("recv 16 (stops at the mark)", recv(fd, b, sizeof b, 0), "2");
    V("data", str_n(b, n), "\"ab\"");
    T("SIOCATMARK", (ioctl(fd, SIOCATMARK, &v) == 0 ? v : -1), "1");
    V("poll (only the urgent octet left)", evs(poll1(fd, ALLEV, 0)), "PRI OUT");
    n = T("recv OOB", recv(fd, b, 1, MSG_OOB), "1");
    V("urgent octet", str_n(b, n), "\"c\"");
    T("recv OOB again", recv(fd, b, 1, MSG_OOB), "-1 EINVAL");
    T("recv DONTWAIT", recv(fd, b, sizeof b, MSG_DONTWAIT), "-1 EAGAIN");
    V("poll after", evs(poll1(fd, ALLEV, 0)), "OUT");
    sync_();
    sync_();
    wait_bytes(fd, 2);
    settle("poll", fd, "IN PRI OUT");
    n = T("recv OOB (second mark)", recv(fd, b, 1, MSG_OOB), "1");
    V("urgent octet", str_n(b, n), "\"d\"");
    n = T("recv 16", recv(fd, b, sizeof b, 0), "2");
    V("data", str_n(b, n), "\"ef\"");
    sync_();
    sync_();
    /* Reading past the mark without MSG_OOB skips the urgent octet. */
    wait_bytes(fd, 2);
    settle("poll", fd, "IN PRI OUT");
    T("SIOCATMARK", (ioctl(fd, SIOCATMARK, &v) == 0 ? v : -1), "1");
    n = T("recv 16 at the mark", recv(fd, b, sizeof b, 0), "2");
    V("data", str_n(b, n), "\"hi\"");
    T("recv OOB after passing the mark", recv(fd, b, 1, MSG_OOB), "-1 EINVAL");
    sync_();
}

/* Urgent data with SO_OOBINLINE. */
void seq_oobinline(void)
{
    int fd = pair_open(AF_INET);
    if (CLI) {
        sync_();
        T("send xy", send(fd, "xy", 2, 0), "2");
        T("send z OOB", send(fd, "z", 1, MSG_OOB), "1");
        sync_();
        sync_();
        return;
    }
    char b[16];
    int v = -1;
    T("SO_OOBINLINE 1", si(fd, SOL_SOCKET, SO_OOBINLINE, 1), "0");
    T("SO_OOBINLINE", gi(fd, SOL_SOCKET, SO_OOBINLINE), "1");
    sync_();
    sync_();
    wait_bytes(fd, 2);
    settle("poll", fd, "IN PRI OUT");
    long n = T("recv 16 (stops at the mark)", recv(fd, b, sizeof b, 0), "2");
    V("data", str_n(b, n), "\"xy\"");
    T("SIOCATMARK", (ioctl(fd, SIOCATMARK, &v) == 0 ? v : -1), "1");
    T("recv OOB inline", recv(fd, b, 1, MSG_OOB), "-1 EINVAL");
    n = T("recv 16", recv(fd, b, sizeof b, 0), "1");
    V("data", str_n(b, n), "\"z\"");
    T("SIOCATMARK", (ioctl(fd, SIOCATMARK, &v) == 0 ? v : -1), "0");
    sync_();
}

/* shutdown(SHUT_WR): the peer reads EOF, and can still send back. */
void seq_shutdown_wr(void)
{
    int fd = pair_open(AF_INET);
    char b[16];
    if (CLI) {
        T("send", send(fd, "data", 4, 0), "4");
        T("shutdown WR", shutdown(fd, SHUT_WR), "0");
        T("send after SHUT_WR", send(fd, "x", 1, MSG_NOSIGNAL), "-1 EPIPE");
        T("shutdown WR again", shutdown(fd, SHUT_WR), "0");
        T("shutdown bad how", shutdown(fd, 7), "-1 EINVAL");
        int st = tcp_state(fd);
        V("TCP_INFO state FIN_WAIT1 or 2", st == 4 || st == 5 ? "yes" : "no", "yes");
        sync_();
        wait_bytes(fd, 4);
        long n = T("recv reply", recv(fd, b, sizeof b, 0), "4");
        V("data", str_n(b, n), "\"back\"");
        sync_();
        settle("poll after peer's SHUT_WR", fd, "IN OUT HUP RDHUP");
        T("recv EOF", recv(fd, b, sizeof b, 0), "0");
        sync_();
        return;
    }
    wait_bytes(fd, 4);
    settle("poll", fd, "IN OUT RDHUP");
    long n = T("recv", recv(fd, b, sizeof b, 0), "4");
    V("data", str_n(b, n), "\"data\"");
    T("recv EOF", recv(fd, b, sizeof b, 0), "0");
    T("read EOF again", read(fd, b, sizeof b), "0");
    T("TCP_INFO state (CLOSE_WAIT)", tcp_state(fd), "8");
    sync_();
    T("send back", send(fd, "back", 4, 0), "4");
    sync_();
    T("shutdown WR", shutdown(fd, SHUT_WR), "0");
    sync_();
    settle("poll both shut", fd, "IN OUT HUP RDHUP");
}

/* shutdown(SHUT_RD), and SHUT_RDWR. */
void seq_shutdown_rd(void)
{
    int fd = pair_open(AF_INET);
    char b[16];
    if (CLI) {
        T("shutdown RD", shutdown(fd, SHUT_RD), "0");
        T("recv after SHUT_RD", recv(fd, b, sizeof b, 0), "0");
        V("poll", evs(poll1(fd, ALLEV, 0)), "IN OUT RDHUP");
        T("send after SHUT_RD", send(fd, "ping", 4, 0), "4");
        sync_();
        sync_();
        wait_bytes(fd, 4);
        long n = T("recv data sent after SHUT_RD", recv(fd, b, sizeof b, MSG_DONTWAIT), "4");
        V("data", str_n(b, n), "\"late\"");
        T("shutdown RDWR", shutdown(fd, SHUT_RDWR), "0");
        settle("poll", fd, "IN OUT HUP RDHUP");
        sync_();
        return;
    }
    wait_bytes(fd, 4);
    long n = T("recv", recv(fd, b, sizeof b, 0), "4");
    V("data", str_n(b, n), "\"ping\"");
    sync_();
    T("send after the peer's SHUT_RD", send(fd, "late", 4, 0), "4");
    sync_();
    settle("poll after peer's SHUT_RDWR", fd, "IN OUT RDHUP");
    T("recv EOF", recv(fd, b, sizeof b, 0), "0");
    sync_();
}

/* close() of one duplicate leaves the others working; dup, dup2, dup3,
 * F_DUPFD, F_DUPFD_CLOEXEC. */
void seq_close_dup(void)
{
    int fd = pair_open(AF_INET);
    char b[16];
    if (CLI) {
        int d = TF("dup", dup(fd));
        V("dup flags", fdflags(d), "nb=0 ce=0");
        TCLOSE("close original", fd, "0");
        T("send on dup", send(d, "1", 1, 0), "1");
        V("dup getpeername", peername(d), "inet 127.0.0.1 port=L len=16");
        int k = TF("fcntl F_DUPFD 100", fcntl(d, F_DUPFD, 100));
        V("F_DUPFD >= 100", k >= 100 ? "yes" : "no", "yes");
        int kc = TF("fcntl F_DUPFD_CLOEXEC 100", fcntl(d, F_DUPFD_CLOEXEC, 100));
        V("F_DUPFD_CLOEXEC flags", fdflags(kc), "nb=0 ce=1");
        int t2 = TF("socket (dup2 target)", socket(AF_INET, SOCK_STREAM, 0));
        T("dup2 onto a fresh socket", dup2(d, t2) == t2 ? 0 : -1, "0");
        V("dup2 target is the connection", peername(t2), "inet 127.0.0.1 port=L len=16");
        T("dup2 onto itself", dup2(d, d) == d ? 0 : -1, "0");
        int t3 = TF("socket (dup3 target)", socket(AF_INET, SOCK_STREAM, 0));
        T("dup3 CLOEXEC", dup3(d, t3, O_CLOEXEC) == t3 ? 0 : -1, "0");
        V("dup3 flags", fdflags(t3), "nb=0 ce=1");
        T("dup3 onto itself", dup3(d, d, 0), "-1 EINVAL");
        T("O_NONBLOCK on one dup", fcntl(t3, F_SETFL, O_NONBLOCK), "0");
        V("shared by the other", fdflags(d), "nb=1 ce=0");
        T("recv on the other: nonblocking", recv(d, b, 1, 0), "-1 EAGAIN");
        T("O_NONBLOCK off", fcntl(t3, F_SETFL, 0), "0");
        T("send on F_DUPFD copy", send(k, "2", 1, 0), "1");
        T("send on dup2 copy", send(t2, "3", 1, 0), "1");
        TCLOSE("close dup", d, "0");
        TCLOSE("close F_DUPFD copy", k, "0");
        TCLOSE("close F_DUPFD_CLOEXEC copy", kc, "0");
        TCLOSE("close dup2 copy", t2, "0");
        T("send on the last copy", send(t3, "4", 1, 0), "1");
        sync_();
        sync_();
        TCLOSE("close the last copy", t3, "0");
        sync_();
        return;
    }
    sync_();
    wait_bytes(fd, 4);
    long n = T("recv", recv(fd, b, sizeof b, 0), "4");
    V("data", str_n(b, n), "\"1234\"");
    V("no EOF while a copy is open", evs(poll1(fd, POLLIN | POLLRDHUP, QUIET_MS)), "none");
    sync_();
    sync_();
    settle("poll after the last close", fd, "IN OUT RDHUP");
    T("recv EOF", recv(fd, b, sizeof b, 0), "0");
}

/* dup2 onto a descriptor of another connection closes that connection. */
void seq_dup2_replace(void)
{
    int f1 = pair_open(AF_INET);
    int f2 = pair_open(AF_INET);
    char b[16];
    if (CLI) {
        T("dup2 first onto second", dup2(f1, f2) == f2 ? 0 : -1, "0");
        T("send on the second descriptor", send(f2, "via2", 4, 0), "4");
        sync_();
        sync_();
        return;
    }
    sync_();
    settle("poll second connection: EOF", f2, "IN OUT RDHUP");
    T("recv second connection", recv(f2, b, sizeof b, 0), "0");
    wait_bytes(f1, 4);
    long n = T("recv first connection", recv(f1, b, sizeof b, 0), "4");
    V("data", str_n(b, n), "\"via2\"");
    sync_();
}

/* One socket used by two threads at once: one blocked in recv while the
 * other sends; the peer echoes. */
enum { DUPLEX_N = 300000 };
static unsigned char dx_out[DUPLEX_N], dx_in[DUPLEX_N];

static void *duplex_reader(void *arg)
{
    int fd = (int)(intptr_t)arg;
    long got = 0;
    while (got < DUPLEX_N) {
        ssize_t n = recv(fd, dx_in + got, (size_t)(DUPLEX_N - got), 0);
        if (n <= 0)
            break;
        got += n;
    }
    return (void *)(intptr_t)got;
}

void seq_threads_duplex(void)
{
    int fd = pair_open(AF_INET);
    if (SRV) {
        set_rcvtimeo(fd, 10000);
        long moved = 0;
        while (moved < DUPLEX_N) {
            ssize_t n = recv(fd, g_buf, sizeof g_buf, 0);
            if (n <= 0)
                break;
            send_all(fd, g_buf, (size_t)n);
            moved += n;
        }
        T("echoed", moved, "300000");
        sync_();
        return;
    }
    set_rcvtimeo(fd, 10000);
    pattern(dx_out, DUPLEX_N, 5);
    memset(dx_in, 0, sizeof dx_in);
    pthread_t th;
    if (pthread_create(&th, NULL, duplex_reader, (void *)(intptr_t)fd) != 0)
        seq_abort("pthread_create");
    T("send from this thread while another reads", send(fd, dx_out, DUPLEX_N, 0), "300000");
    void *r = NULL;
    pthread_join(th, &r);
    T("the other thread read", (long)(intptr_t)r, "300000");
    V("contents", pattern_ok(dx_in, DUPLEX_N, 5), "intact");
    sync_();
}

/* Many iovecs: 600 of one octet each way, every one filled; more than
 * IOV_MAX (1024) is EINVAL. */
void seq_many_iovecs(void)
{
    enum { K = 600 };
    static _Thread_local char one[K];
    static _Thread_local struct iovec v[1025];
    int fd = pair_open(AF_INET);
    for (int i = 0; i < K; i++)
        v[i] = iov(&one[i], 1);
    if (CLI) {
        for (int i = 0; i < K; i++)
            one[i] = (char)('a' + i % 26);
        T("writev 600 iovecs", writev(fd, v, K), "600");
        for (int i = K; i < 1025; i++)
            v[i] = iov(one, 1);
        T("writev 1025 iovecs", writev(fd, v, 1025), "-1 EINVAL");
        struct msghdr mh;
        memset(&mh, 0, sizeof mh);
        mh.msg_iov = v;
        mh.msg_iovlen = 1025;
        T("sendmsg 1025 iovecs", sendmsg(fd, &mh, 0), "-1 EMSGSIZE");
        sync_();
        return;
    }
    memset(one, 0, sizeof one);
    wait_bytes(fd, K);
    T("readv 600 iovecs", readv(fd, v, K), "600");
    int ok = 1;
    for (int i = 0; i < K; i++)
        if (one[i] != (char)('a' + i % 26))
            ok = 0;
    V("every iovec filled", ok ? "yes" : "no", "yes");
    for (int i = K; i < 1025; i++)
        v[i] = iov(one, 1);
    T("readv 1025 iovecs", readv(fd, v, 1025), "-1 EINVAL");
    struct msghdr mh;
    memset(&mh, 0, sizeof mh);
    mh.msg_iov = v;
    mh.msg_iovlen = 1025;
    T("recvmsg 1025 iovecs", recvmsg(fd, &mh, MSG_DONTWAIT), "-1 EMSGSIZE");
    sync_();
}

/* close_range(): CLOSE_RANGE_CLOEXEC marks, a plain call closes; the
 * numbers it freed serve new sockets normally. */
void seq_close_range(void)
{
    int fd = pair_open(AF_INET);
    char b[16];
    if (CLI) {
        int d = TF("dup", dup(fd));
        T("close_range CLOEXEC on the dup",
          close_range((unsigned)d, (unsigned)d, CLOSE_RANGE_CLOEXEC), "0");
        V("dup flags", fdflags(d), "nb=0 ce=1");
        untrack(fd);
        T("close_range the original", close_range((unsigned)fd, (unsigned)fd, 0), "0");
        T("send on the dup", send(d, "k", 1, 0), "1");
        sync_();
        untrack(d);
        T("close_range the dup", close_range((unsigned)d, (unsigned)d, 0), "0");
        sync_();
        int again = connect_to(AF_INET, get_int());
        T("a new socket on a freed number: send", send(again, "n", 1, 0), "1");
        sync_();
        return;
    }
    wait_bytes(fd, 1);
    T("recv", recv(fd, b, sizeof b, 0), "1");
    sync_();
    sync_();
    settle("poll after close_range", fd, "IN OUT RDHUP");
    T("recv EOF", recv(fd, b, sizeof b, 0), "0");
    int l = mk_listener(AF_INET, 4);
    put_int(g_lport);
    int a = accept_to(l, 0);
    T("recv from the new socket", recv(a, b, 1, MSG_WAITALL), "1");
    sync_();
}
