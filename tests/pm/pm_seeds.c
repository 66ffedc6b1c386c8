/* Writes the seed inputs of the port mapper fuzz targets (pm_codec,
 * pm_client, pm_server, pm_ctl) into DIR/<target>/, one file per seed,
 * named by what it exercises. Run once and commit; the replay tests use
 * them.
 *   pm_seeds tests/fuzz/corpus */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "uwarp/pm.h"

static int write_seed(const char *dir, const char *target, const char *name, const void *p,
                      size_t n)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, target);
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        perror(path);
        return -1;
    }
    snprintf(path, sizeof(path), "%s/%s/seed_%s", dir, target, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
        perror(path);
        return -1;
    }
    return 0;
}

static size_t msg(uint8_t *out, int type, int ipv, uint8_t pmtime)
{
    uw_pm_msg m;
    memset(&m, 0, sizeof(m));
    m.type = (uint8_t)type;
    m.ipv = (uint8_t)ipv;
    m.pmtime = pmtime;
    m.ap_port = 80;
    m.cp_port = 40000;
    m.assoc = 0x0123456789abcdefull;
    m.cp_ip[0] = 10;
    m.cp_ip[3] = 1;
    m.ap_ip[0] = 10;
    m.ap_ip[3] = 2;
    if (ipv == 6) {
        m.cp_ip[15] = 0x11;
        m.ap_ip[15] = 0x22;
    }
    return (size_t)uw_pm_encode(&m, out, UW_PM_MSG_LEN);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
        return 2;
    }
    const char *d = argv[1];
    int rc = 0;
    uint8_t b[128];

    /* Codec: the four types in both IP versions, and the ways to be wrong. */
    static const char *const tn[] = {"req", "accept", "ack", "deny"};
    for (int t = 0; t < 4; t++) {
        for (int v = 4; v <= 6; v += 2) {
            char name[32];
            snprintf(name, sizeof(name), "%s_v%d", tn[t], v);
            size_t n = msg(b, t, v, t == 1 ? 20 : 0);
            rc |= write_seed(d, "pm_codec", name, b, n);
        }
    }
    size_t n = msg(b, UW_PM_REQ, 4, 0);
    rc |= write_seed(d, "pm_codec", "short", b, n - 1);
    b[n] = 0;
    rc |= write_seed(d, "pm_codec", "long", b, n + 1);
    b[0] = 0x44; /* Ver 1 */
    rc |= write_seed(d, "pm_codec", "ver1", b, n);
    b[0] = 0x05; /* IPV 5 */
    rc |= write_seed(d, "pm_codec", "ipv5", b, n);
    memset(b + 20, 0xEE, 12); /* junk in the unused IPv4 bits, Reserved */
    b[0] = 0x14;
    b[2] = 0xAB;
    rc |= write_seed(d, "pm_codec", "accept_v4_junk", b, n);

    /* Client op scripts: header (seed u32, retries, max_txns, cache), ops. */
    static const uint8_t accept_cache[] = {
        0, 0,    0, 7,    3,    7,    3, /* header */
        0, 0x00,                         /* start */
        4, 0,                            /* drain */
        1, 0,    4, 0,    0x1F, 0x90,    /* accept, PmTime 4, 8080 */
        5, 0,                            /* results */
        0, 0x02,                         /* start, other CpPort: cached */
        5, 0,    3, 0x07, 0xD0,          /* results, +2 s */
        0, 0x04, 4, 0,    5,    0};
    static const uint8_t timeout[] = {0, 0, 0,   9, 2, 3, 1, 0,   0x01, 4, 0, 3, 0,    100, 4, 0,
                                      3, 0, 200, 4, 0, 3, 0, 200, 4,    0, 3, 1, 0x90, 5,   0};
    static const uint8_t deny_dup[] = {0,    0,    0, 1, 3, 7,    3,    0, 0x08, 4, 0,
                                       1,    0x80, 0, 0, 0, 0,    1,    0, 9,    0, 0x1F,
                                       0x90, 1,    0, 9, 1, 0x1F, 0x90, 5, 0};
    static const uint8_t cancel_reset[] = {0,    0, 0, 2, 1, 7, 3, 0,   0x00, 0,
                                           0x02, 4, 0, 5, 1, 1, 1, 255, 0,    0x1F,
                                           0x90, 5, 0, 5, 2, 5, 3, 3,   0x80, 5};
    rc |= write_seed(d, "pm_client", "accept_cache", accept_cache, sizeof(accept_cache));
    rc |= write_seed(d, "pm_client", "timeout", timeout, sizeof(timeout));
    rc |= write_seed(d, "pm_client", "deny_dup", deny_dup, sizeof(deny_dup));
    rc |= write_seed(d, "pm_client", "cancel_reset", cancel_reset, sizeof(cancel_reset));
    uint8_t raw[9 + UW_PM_MSG_LEN] = {0, 0, 0, 3, 1, 7, 3, 2, UW_PM_MSG_LEN};
    msg(raw + 9, UW_PM_ACCEPT, 4, 8); /* op 2, length 48, then the octets */
    rc |= write_seed(d, "pm_client", "raw", raw, sizeof(raw));

    /* Server op scripts: header (cfg, seed u32), ops. */
    static const uint8_t accept_ack[] = {0x07, 0, 0, 0, 5, 0, 0x00, 1, 1, 0, 0, 3, 0x0B, 0xB8};
    static const uint8_t dup_flip[] = {0x0F, 0,    0, 0, 6, 0, 0x10, 2, 4, 1, 0, 0x10, 2,
                                       0,    0x10, 2, 4, 0, 0, 0x10, 2, 5, 0, 3, 0x27, 0x10};
    static const uint8_t full[] = {0x01, 0, 0, 0,    7, 0, 0x00, 0,    0, 0x04, 0, 0,
                                   0x08, 0, 0, 0x0C, 0, 3, 0x07, 0xD0, 0, 0x0C, 0};
    static const uint8_t replace_rate[] = {0x87, 0,    0,    0, 8, 0,    0x00, 1, 0,    0x01,
                                           1,    0,    0x02, 1, 0, 0x03, 1,    0, 0x00, 1,
                                           0,    0x00, 1,    1, 0, 1,    1,    2, 2};
    rc |= write_seed(d, "pm_server", "accept_ack", accept_ack, sizeof(accept_ack));
    rc |= write_seed(d, "pm_server", "dup_flip", dup_flip, sizeof(dup_flip));
    rc |= write_seed(d, "pm_server", "full", full, sizeof(full));
    rc |= write_seed(d, "pm_server", "replace_rate", replace_rate, sizeof(replace_rate));

    /* Control protocol: a chunking seed octet, then the stream (the
     * formatter check also reads octets 1 and 2 as code and buffer size). */
    static const struct {
        const char *name, *text;
    } ctl[] = {
        {"requests", "\x01MAP 5001 15001\nUNMAP 5001\nMAP 80 80\n"},
        {"replies", "\x02OK\nERR EPERM no listening TCP socket on port 5001 belongs to uid 1000\n"
                    "ERR EADDRINUSE\nERR EFUTURE soon\n"},
        {"crlf_and_errors", "\x03MAP 1 2\r\nMAP 0 1\nMAP 01 2\nmap 1 2\nMAP  1 2\n\nPING\n"},
        {"format", "\x04\x20\x80message with \x01 control octets and more text than fits"},
        {"short_buffer", "\x05\x01\x0cERR"},
    };
    for (size_t i = 0; i < sizeof(ctl) / sizeof(ctl[0]); i++)
        rc |= write_seed(d, "pm_ctl", ctl[i].name, ctl[i].text, strlen(ctl[i].text));
    uint8_t longline[1 + 2 * 130];
    longline[0] = 6;
    memset(longline + 1, 'M', sizeof(longline) - 1);
    longline[128] = '\n';                  /* 127 octets and the LF: fits */
    longline[sizeof(longline) - 1] = '\n'; /* 131 before it: overflow */
    rc |= write_seed(d, "pm_ctl", "long_lines", longline, sizeof(longline));
    return rc ? 1 : 0;
}
