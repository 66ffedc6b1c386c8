/* Fuzz target: port mapper codec (draft-pinkerton-iwarp-sdp-01 7.3).
 *
 * Octet mode: the whole input is one datagram. uw_pm_decode accepts exactly
 * the 48-octet ones with Ver 0 and IPV 4 or 6, never writes its output on
 * error, and what it accepts encodes back to the same octets except where the
 * encoder must write zeros (Reserved, PmTime outside PMAccept, the unused
 * IPv4 bits).
 *
 * Struct mode: the input also fills a uw_pm_msg field by field; encode
 * accepts it exactly when type and IPV are valid, and decoding the result
 * gives the fields back, normalised the same way. */
#include <string.h>

#include "common.h"
#include "uwarp/pm.h"

static void octet_mode(const uint8_t *data, size_t size)
{
    uw_pm_msg m, before;
    memset(&m, 0x5A, sizeof(m));
    before = m;
    int rc = uw_pm_decode(data, size, &m);
    bool valid = size == UW_PM_MSG_LEN && (data[0] >> 6) == 0 &&
                 ((data[0] & 15) == 4 || (data[0] & 15) == 6);
    if (!valid) {
        FZ_CHECK(rc == (size == UW_PM_MSG_LEN ? UW_EPROTO : UW_EMSGSIZE));
        FZ_CHECK(memcmp(&m, &before, sizeof(m)) == 0);
        return;
    }
    FZ_CHECK(rc == 0);
    FZ_CHECK(m.type == ((data[0] >> 4) & 3) && m.ipv == (data[0] & 15));
    uint8_t out[UW_PM_MSG_LEN], want[UW_PM_MSG_LEN];
    FZ_CHECK(uw_pm_encode(&m, out, sizeof(out)) == UW_PM_MSG_LEN);
    memcpy(want, data, UW_PM_MSG_LEN);
    want[2] = want[3] = 0;
    if (m.type != UW_PM_ACCEPT)
        want[1] = 0;
    if (m.ipv == 4) {
        memset(want + 20, 0, 12);
        memset(want + 36, 0, 12);
    }
    FZ_CHECK(memcmp(out, want, UW_PM_MSG_LEN) == 0);
    /* The cache lifetime of this PmTime follows 7.3.1.4. */
    uint8_t t = data[1];
    uint64_t ns = uw_pm_pmtime_ns(t);
    if (t == 0)
        FZ_CHECK(ns == 0);
    else if (t <= 127)
        FZ_CHECK(ns == (uint64_t)t * 250 * UW_PM_NS_PER_MS);
    else if (t <= 254)
        FZ_CHECK(ns == (uint64_t)t * 1000 * UW_PM_NS_PER_MS);
    else
        FZ_CHECK(ns == UW_PM_FOREVER);
}

static void struct_mode(const uint8_t *data, size_t size)
{
    fz_in in;
    fz_in_init(&in, data, size);
    uw_pm_msg m;
    m.type = fz_u8(&in);
    m.ipv = fz_u8(&in);
    if (!(m.type & 0x80))
        m.type &= 3;
    if (!(m.ipv & 0x80))
        m.ipv = (m.ipv & 1) ? 6 : 4;
    m.pmtime = fz_u8(&in);
    m.ap_port = fz_u16(&in);
    m.cp_port = fz_u16(&in);
    m.assoc = (uint64_t)fz_u32(&in) << 32 | fz_u32(&in);
    for (int i = 0; i < 16; i++)
        m.cp_ip[i] = fz_u8(&in);
    for (int i = 0; i < 16; i++)
        m.ap_ip[i] = fz_u8(&in);
    size_t cap = fz_u8(&in) % 64;
    uint8_t out[64];
    ssize_t rc = uw_pm_encode(&m, out, cap);
    bool valid = m.type <= 3 && (m.ipv == 4 || m.ipv == 6);
    if (!valid) {
        FZ_CHECK(rc == UW_EINVAL);
        return;
    }
    if (cap < UW_PM_MSG_LEN) {
        FZ_CHECK(rc == UW_ENOBUFS);
        rc = uw_pm_encode(&m, out, sizeof(out));
    }
    FZ_CHECK(rc == UW_PM_MSG_LEN);
    uw_pm_msg d;
    FZ_CHECK(uw_pm_decode(out, UW_PM_MSG_LEN, &d) == 0);
    if (m.type != UW_PM_ACCEPT)
        m.pmtime = 0;
    if (m.ipv == 4) {
        memset(m.cp_ip + 4, 0, 12);
        memset(m.ap_ip + 4, 0, 12);
    }
    FZ_CHECK(d.type == m.type && d.ipv == m.ipv && d.pmtime == m.pmtime && d.ap_port == m.ap_port &&
             d.cp_port == m.cp_port && d.assoc == m.assoc && memcmp(d.cp_ip, m.cp_ip, 16) == 0 &&
             memcmp(d.ap_ip, m.ap_ip, 16) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    octet_mode(data, size);
    struct_mode(data, size);
    return 0;
}
