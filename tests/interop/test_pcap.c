/* The pcap reader used by the interop tests, tested on synthetic captures:
 * both byte orders, every supported link type, IPv4 and IPv6, reordering,
 * retransmissions, gaps, limits, and malformed files (every truncation and
 * random corruption, which must give an error or a result, never a crash:
 * run under ASan in the sanitizer build). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pcap.h"
#include "testutil.h"

/* ------------------------------------------------------------------------ */
/* Capture builder                                                           */

typedef struct pbuf {
    uint8_t b[1 << 16];
    size_t n;
    bool be;       /* write header fields big-endian */
    uint32_t link; /* link type */
} pbuf;

static void put(pbuf *p, const void *d, size_t n)
{
    assert_true(p->n + n <= sizeof(p->b));
    memcpy(p->b + p->n, d, n);
    p->n += n;
}

static void put32(pbuf *p, uint32_t v)
{
    uint8_t o[4];
    for (int i = 0; i < 4; i++)
        o[i] = (uint8_t)(p->be ? v >> (24 - 8 * i) : v >> (8 * i));
    put(p, o, 4);
}

static void put16(pbuf *p, uint16_t v)
{
    uint8_t o[2] = {(uint8_t)(p->be ? v >> 8 : v), (uint8_t)(p->be ? v : v >> 8)};
    put(p, o, 2);
}

static void start(pbuf *p, bool be, bool ns, uint32_t link)
{
    p->n = 0;
    p->be = be;
    p->link = link;
    put32(p, ns ? 0xa1b23c4du : 0xa1b2c3d4u);
    put16(p, 2);
    put16(p, 4);
    put32(p, 0);
    put32(p, 0);
    put32(p, 262144);
    put32(p, link);
}

static void wbe16(uint8_t *o, unsigned v)
{
    o[0] = (uint8_t)(v >> 8);
    o[1] = (uint8_t)v;
}

static void wbe32(uint8_t *o, uint32_t v)
{
    o[0] = (uint8_t)(v >> 24);
    o[1] = (uint8_t)(v >> 16);
    o[2] = (uint8_t)(v >> 8);
    o[3] = (uint8_t)v;
}

typedef struct pkt_opts {
    int family; /* 4 or 6 */
    bool vlan;  /* Ethernet only: one 802.1Q tag */
    size_t pad; /* Ethernet trailer padding after the IP packet */
} pkt_opts;

/* Client 10.0.0.1:1000 (or fd00::1), server 10.0.0.2:2000 (or fd00::2).
 * from_client picks the direction. */
static void add_tcp(pbuf *p, const pkt_opts *o, bool from_client, uint32_t seq, unsigned flags,
                    const void *payload, size_t plen)
{
    uint8_t pkt[4096];
    size_t n = 0;
    int fam = o && o->family == 6 ? 6 : 4;
    unsigned etype = fam == 6 ? 0x86dd : 0x0800;
    switch (p->link) {
    case 1:
        memset(pkt, 0xaa, 12);
        n = 12;
        if (o && o->vlan) {
            wbe16(pkt + n, 0x8100);
            wbe16(pkt + n + 2, 42);
            n += 4;
        }
        wbe16(pkt + n, etype);
        n += 2;
        break;
    case 113:
        memset(pkt, 0, 14);
        wbe16(pkt + 14, etype);
        n = 16;
        break;
    case 276:
        memset(pkt, 0, 20);
        wbe16(pkt, etype);
        n = 20;
        break;
    default: /* raw IP */
        break;
    }
    uint8_t tcp[20 + 1500];
    memset(tcp, 0, 20);
    wbe16(tcp, from_client ? 1000 : 2000);
    wbe16(tcp + 2, from_client ? 2000 : 1000);
    wbe32(tcp + 4, seq);
    tcp[12] = 5 << 4;
    tcp[13] = (uint8_t)flags;
    assert_true(plen <= 1500);
    if (plen)
        memcpy(tcp + 20, payload, plen);
    size_t tl = 20 + plen;
    if (fam == 4) {
        uint8_t *ip = pkt + n;
        memset(ip, 0, 20);
        ip[0] = 0x45;
        wbe16(ip + 2, (unsigned)(20 + tl));
        ip[6] = 0x40; /* DF */
        ip[8] = 64;
        ip[9] = 6;
        uint8_t a[4] = {10, 0, 0, 1}, b[4] = {10, 0, 0, 2};
        memcpy(ip + 12, from_client ? a : b, 4);
        memcpy(ip + 16, from_client ? b : a, 4);
        n += 20;
    } else {
        uint8_t *ip = pkt + n;
        memset(ip, 0, 40);
        ip[0] = 0x60;
        wbe16(ip + 4, (unsigned)tl);
        ip[6] = 6;
        ip[7] = 64;
        ip[8] = 0xfd;
        ip[23] = from_client ? 1 : 2;
        ip[24] = 0xfd;
        ip[39] = from_client ? 2 : 1;
        n += 40;
    }
    memcpy(pkt + n, tcp, tl);
    n += tl;
    if (o && o->pad) {
        memset(pkt + n, 0xee, o->pad);
        n += o->pad;
    }
    put32(p, 0);
    put32(p, 0);
    put32(p, (uint32_t)n);
    put32(p, (uint32_t)n);
    put(p, pkt, n);
}

#define SYN 0x02u
#define ACK 0x10u
#define FIN 0x01u
#define RST 0x04u
#define PSH 0x08u

#define CISN 0x1000u
#define SISN 0xfffffff0u /* the server's sequence numbers wrap */

/* A small clean exchange: handshake, "hello " + "world" from the client,
 * "0123456789abcdefghijklmnopqrstuvwxyz" from the server, FIN both ways. */
static void build_clean(pbuf *p, const pkt_opts *o)
{
    add_tcp(p, o, true, CISN, SYN, NULL, 0);
    add_tcp(p, o, false, SISN, SYN | ACK, NULL, 0);
    add_tcp(p, o, true, CISN + 1, ACK, NULL, 0);
    add_tcp(p, o, true, CISN + 1, ACK | PSH, "hello ", 6);
    add_tcp(p, o, false, SISN + 1, ACK | PSH, "0123456789abcdefghij", 20);
    add_tcp(p, o, true, CISN + 7, ACK | PSH, "world", 5);
    add_tcp(p, o, false, SISN + 21, ACK | PSH, "klmnopqrstuvwxyz", 16);
    add_tcp(p, o, true, CISN + 12, ACK | FIN, NULL, 0);
    add_tcp(p, o, false, SISN + 37, ACK | FIN, NULL, 0);
}

static void assert_clean(const tp_capture *c)
{
    assert_int_equal(c->nconns, 1);
    const tp_conn *cn = &c->conns[0];
    assert_true(cn->handshake);
    assert_int_equal(cn->dir[0].src.port, 1000);
    assert_int_equal(cn->dir[0].len, 11);
    assert_memory_equal(cn->dir[0].data, "hello world", 11);
    assert_int_equal(cn->dir[1].len, 36);
    assert_memory_equal(cn->dir[1].data, "0123456789abcdefghijklmnopqrstuvwxyz", 36);
    assert_true(cn->dir[0].syn && cn->dir[1].syn && cn->dir[0].fin && cn->dir[1].fin);
}

static int parse(const pbuf *p, tp_capture *c, char *err, size_t errlen)
{
    return tp_pcap_parse(p->b, p->n, NULL, c, err, errlen);
}

static pbuf g_p; /* 64 KiB: too big for the stack of every test */

/* ------------------------------------------------------------------------ */

static void test_byte_orders_and_magics(void **state)
{
    (void)state;
    for (int be = 0; be <= 1; be++) {
        for (int ns = 0; ns <= 1; ns++) {
            start(&g_p, be, ns, 1);
            build_clean(&g_p, NULL);
            tp_capture c;
            char err[256];
            if (parse(&g_p, &c, err, sizeof(err)) != TP_OK)
                fail_msg("be=%d ns=%d: %s", be, ns, err);
            assert_int_equal(c.swapped, be);
            assert_int_equal(c.nanosec, ns);
            assert_int_equal(c.packets, 9);
            assert_int_equal(c.tcp_packets, 9);
            assert_clean(&c);
            char name[160];
            assert_string_equal(tp_stream_name(&c.conns[0].dir[0], name, sizeof(name)),
                                "10.0.0.1:1000 > 10.0.0.2:2000");
            tp_capture_free(&c);
        }
    }
}

static void test_link_types_and_ipv6(void **state)
{
    (void)state;
    const uint32_t links[] = {1, 113, 276, 101};
    for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
        for (int fam = 4; fam <= 6; fam += 2) {
            pkt_opts o = {.family = fam, .vlan = links[i] == 1 && fam == 6};
            start(&g_p, false, false, links[i]);
            build_clean(&g_p, &o);
            tp_capture c;
            char err[256];
            if (parse(&g_p, &c, err, sizeof(err)) != TP_OK)
                fail_msg("link %u IPv%d: %s", links[i], fam, err);
            assert_clean(&c);
            assert_int_equal(c.conns[0].dir[0].src.family, fam);
            if (fam == 6) {
                char name[160];
                tp_stream_name(&c.conns[0].dir[1], name, sizeof(name));
                assert_string_equal(name, "[fd00:0:0:0:0:0:0:2]:2000 > [fd00:0:0:0:0:0:0:1]:1000");
            }
            tp_capture_free(&c);
        }
    }
    /* Link types 228/229 are IPv4/IPv6 without a version switch. */
    start(&g_p, false, false, 228);
    build_clean(&g_p, NULL);
    tp_capture c;
    assert_int_equal(parse(&g_p, &c, NULL, 0), TP_OK);
    assert_clean(&c);
    tp_capture_free(&c);
}

/* Ethernet pads short frames to 60 octets: the IP length, not the frame,
 * bounds the payload. */
static void test_ethernet_padding(void **state)
{
    (void)state;
    pkt_opts o = {.family = 4, .pad = 6};
    start(&g_p, false, false, 1);
    build_clean(&g_p, &o);
    tp_capture c;
    assert_int_equal(parse(&g_p, &c, NULL, 0), TP_OK);
    assert_clean(&c);
    tp_capture_free(&c);
}

/* Out-of-order delivery, exact duplicates and a retransmission that overlaps
 * two earlier segments all give the same stream. */
static void test_reorder_and_retransmit(void **state)
{
    (void)state;
    start(&g_p, false, false, 1);
    add_tcp(&g_p, NULL, true, CISN, SYN, NULL, 0);
    add_tcp(&g_p, NULL, false, SISN, SYN | ACK, NULL, 0);
    add_tcp(&g_p, NULL, true, CISN + 7, ACK, "world", 5); /* early */
    add_tcp(&g_p, NULL, true, CISN + 1, ACK, "hello ", 6);
    add_tcp(&g_p, NULL, true, CISN + 1, ACK, "hello ", 6); /* duplicate */
    add_tcp(&g_p, NULL, true, CISN + 4, ACK, "lo wor", 6); /* overlap */
    add_tcp(&g_p, NULL, false, SISN + 21, ACK, "klmnopqrstuvwxyz", 16);
    add_tcp(&g_p, NULL, false, SISN + 1, ACK, "0123456789abcdefghij", 20);
    add_tcp(&g_p, NULL, false, SISN + 11, ACK, "abcdefghijklmnop", 16); /* spans both */
    add_tcp(&g_p, NULL, true, CISN + 12, ACK | FIN, NULL, 0);
    add_tcp(&g_p, NULL, false, SISN + 37, ACK | FIN, NULL, 0);
    add_tcp(&g_p, NULL, false, SISN + 37, ACK | FIN, NULL, 0); /* FIN retransmitted */
    tp_capture c;
    char err[256];
    if (parse(&g_p, &c, err, sizeof(err)) != TP_OK)
        fail_msg("%s", err);
    assert_clean(&c);
    tp_capture_free(&c);
}

static void expect_error(const pbuf *p, const char *needle)
{
    tp_capture c;
    char err[256] = "untouched";
    assert_int_equal(tp_pcap_parse(p->b, p->n, NULL, &c, err, sizeof(err)), TP_ERR);
    if (!strstr(err, needle))
        fail_msg("error \"%s\" does not mention \"%s\"", err, needle);
    assert_int_equal(c.nconns, 0);
    assert_null(c.conns);
}

static void test_stream_errors(void **state)
{
    (void)state;
    /* A retransmission with other octets: no stream is right. */
    start(&g_p, false, false, 1);
    add_tcp(&g_p, NULL, true, CISN, SYN, NULL, 0);
    add_tcp(&g_p, NULL, true, CISN + 1, ACK, "hello ", 6);
    add_tcp(&g_p, NULL, true, CISN + 1, ACK, "jello ", 6);
    expect_error(&g_p, "differs");

    /* A hole in the middle. */
    start(&g_p, false, false, 1);
    add_tcp(&g_p, NULL, true, CISN, SYN, NULL, 0);
    add_tcp(&g_p, NULL, true, CISN + 1, ACK, "hello ", 6);
    add_tcp(&g_p, NULL, true, CISN + 9, ACK, "ld", 2);
    expect_error(&g_p, "missing at stream offset 6");

    /* A lost tail: only the FIN tells. */
    start(&g_p, false, false, 1);
    add_tcp(&g_p, NULL, true, CISN, SYN, NULL, 0);
    add_tcp(&g_p, NULL, true, CISN + 1, ACK, "hello ", 6);
    add_tcp(&g_p, NULL, true, CISN + 12, ACK | FIN, NULL, 0);
    expect_error(&g_p, "before the FIN");

    /* Data before the SYN's sequence number. */
    start(&g_p, false, false, 1);
    add_tcp(&g_p, NULL, true, CISN, SYN, NULL, 0);
    add_tcp(&g_p, NULL, true, CISN - 10, ACK, "hello ", 6);
    expect_error(&g_p, "precedes");

    /* Two SYNs with different ISNs from the same side of one connection is a
     * new connection (port reuse), not an error. */
    start(&g_p, false, false, 1);
    add_tcp(&g_p, NULL, true, CISN, SYN, NULL, 0);
    add_tcp(&g_p, NULL, true, CISN + 1, ACK, "one", 3);
    add_tcp(&g_p, NULL, true, CISN + 4, ACK | FIN, NULL, 0);
    add_tcp(&g_p, NULL, true, 0x77777777u, SYN, NULL, 0);
    add_tcp(&g_p, NULL, false, 0x12345678u, SYN | ACK, NULL, 0);
    add_tcp(&g_p, NULL, true, 0x77777778u, ACK, "two", 3);
    tp_capture c;
    assert_int_equal(parse(&g_p, &c, NULL, 0), TP_OK);
    assert_int_equal(c.nconns, 2);
    assert_memory_equal(c.conns[0].dir[0].data, "one", 3);
    assert_memory_equal(c.conns[1].dir[0].data, "two", 3);
    assert_true(c.conns[1].dir[1].syn);
    tp_capture_free(&c);
}

/* Without the handshake the stream starts at the lowest sequence number,
 * across a wrap of the sequence space; a RST's payload is not stream data. */
static void test_no_handshake(void **state)
{
    (void)state;
    start(&g_p, true, false, 1);
    add_tcp(&g_p, NULL, true, 0xfffffffdu, ACK, "llo", 3);
    add_tcp(&g_p, NULL, true, 0xfffffffbu, ACK, "he", 2);
    add_tcp(&g_p, NULL, true, 0x00000000u, ACK, " there", 6);
    add_tcp(&g_p, NULL, false, 0x50u, RST | ACK, "diagnostic", 10);
    tp_capture c;
    char err[256];
    if (parse(&g_p, &c, err, sizeof(err)) != TP_OK)
        fail_msg("%s", err);
    assert_int_equal(c.nconns, 1);
    assert_false(c.conns[0].handshake);
    assert_int_equal(c.conns[0].dir[0].len, 11);
    assert_memory_equal(c.conns[0].dir[0].data, "hello there", 11);
    assert_int_equal(c.conns[0].dir[1].len, 0);
    assert_true(c.conns[0].dir[1].rst);
    tp_capture_free(&c);
}

static void test_file_errors(void **state)
{
    (void)state;
    pbuf *p = &g_p;
    tp_capture c;
    char err[256];

    assert_int_equal(tp_pcap_parse((const uint8_t *)"", 0, NULL, &c, err, sizeof(err)), TP_ERR);
    assert_non_null(strstr(err, "shorter"));

    start(p, false, false, 1);
    wbe32(p->b, 0x0a0d0d0au);
    expect_error(p, "pcapng");
    wbe32(p->b, 0x12345678u);
    expect_error(p, "not a pcap");

    start(p, false, false, 1);
    p->b[4] = 3; /* version 3.4 */
    expect_error(p, "version");

    start(p, false, false, 147); /* a link type we do not know */
    build_clean(p, NULL);
    expect_error(p, "link type 147");

    /* An empty capture is fine: no connections. */
    start(p, false, false, 1);
    assert_int_equal(parse(p, &c, NULL, 0), TP_OK);
    assert_int_equal(c.nconns, 0);
    tp_capture_free(&c);

    /* Non-TCP traffic is skipped: an ARP frame and a UDP packet. */
    start(p, false, false, 1);
    uint8_t arp[42] = {0};
    wbe16(arp + 12, 0x0806);
    put32(p, 0);
    put32(p, 0);
    put32(p, sizeof(arp));
    put32(p, sizeof(arp));
    put(p, arp, sizeof(arp));
    uint8_t udp[14 + 28] = {0};
    wbe16(udp + 12, 0x0800);
    udp[14] = 0x45;
    wbe16(udp + 16, 28);
    udp[14 + 9] = 17;
    put32(p, 0);
    put32(p, 0);
    put32(p, sizeof(udp));
    put32(p, sizeof(udp));
    put(p, udp, sizeof(udp));
    assert_int_equal(parse(p, &c, NULL, 0), TP_OK);
    assert_int_equal(c.packets, 2);
    assert_int_equal(c.tcp_packets, 0);
    tp_capture_free(&c);

    /* An IPv4 fragment would lose data: refused. */
    start(p, false, false, 1);
    build_clean(p, NULL);
    p->b[24 + 16 + 14 + 6] |= 0x20; /* MF on the first packet */
    expect_error(p, "fragment");

    /* A TCP packet cut short by the snap length. */
    start(p, false, false, 1);
    add_tcp(p, NULL, true, CISN + 1, ACK, "hello ", 6);
    size_t incl = p->n - 24 - 16, end = p->n - 3;
    p->n = 24 + 8; /* rewrite the record's captured length, keep the original */
    put32(p, (uint32_t)(incl - 3));
    p->n = end;
    expect_error(p, "truncated");
}

/* Every prefix of a valid capture either parses (cut at a record boundary)
 * or fails cleanly; random corruption never crashes. */
static void test_truncation_and_corruption(void **state)
{
    (void)state;
    static pbuf base;
    start(&base, false, false, 1);
    build_clean(&base, NULL);
    size_t bounds = 0;
    for (size_t n = 0; n <= base.n; n++) {
        tp_capture c;
        char err[256];
        int rc = tp_pcap_parse(base.b, n, NULL, &c, err, sizeof(err));
        if (rc == TP_OK)
            bounds++;
        tp_capture_free(&c);
    }
    /* The header alone and each of the 9 record ends; the FINs come last,
     * so no prefix ends a stream short of its FIN. */
    assert_int_equal(bounds, 10);

    tu_rng r;
    tu_rng_init(&r, tu_seed(0x9cab));
    static uint8_t mut[sizeof(base.b)];
    for (int iter = 0; iter < 20000; iter++) {
        memcpy(mut, base.b, base.n);
        int flips = 1 + (int)tu_rng_below(&r, 8);
        for (int k = 0; k < flips; k++) {
            size_t at = (size_t)tu_rng_below(&r, base.n);
            if (tu_rng_below(&r, 2))
                mut[at] ^= (uint8_t)(1u << tu_rng_below(&r, 8));
            else
                mut[at] = (uint8_t)tu_rng_next(&r);
        }
        size_t len = tu_rng_below(&r, 4) ? base.n : (size_t)tu_rng_below(&r, base.n + 1);
        tp_capture c;
        char err[64]; /* short on purpose: messages must truncate safely */
        int rc = tp_pcap_parse(mut, len, NULL, &c, err, sizeof(err));
        assert_true(rc == TP_OK || rc == TP_ERR);
        if (rc == TP_ERR)
            assert_true(strlen(err) < sizeof(err));
        for (size_t i = 0; rc == TP_OK && i < c.nconns; i++)
            for (int d = 0; d < 2; d++)
                assert_true(c.conns[i].dir[d].len <= len);
        tp_capture_free(&c);
    }
}

static void test_limits(void **state)
{
    (void)state;
    start(&g_p, false, false, 1);
    build_clean(&g_p, NULL);
    tp_capture c;
    char err[256];

    tp_limits l = {.max_stream = 20};
    assert_int_equal(tp_pcap_parse(g_p.b, g_p.n, &l, &c, err, sizeof(err)), TP_ERR);
    assert_non_null(strstr(err, "limit"));

    l = (tp_limits){.max_packet = 60};
    assert_int_equal(tp_pcap_parse(g_p.b, g_p.n, &l, &c, err, sizeof(err)), TP_ERR);
    assert_non_null(strstr(err, "limit"));

    l = (tp_limits){.max_segments = 3};
    assert_int_equal(tp_pcap_parse(g_p.b, g_p.n, &l, &c, err, sizeof(err)), TP_ERR);

    l = (tp_limits){.max_file = 100};
    assert_int_equal(tp_pcap_parse(g_p.b, g_p.n, &l, &c, err, sizeof(err)), TP_ERR);

    start(&g_p, false, false, 1);
    for (uint32_t i = 0; i < 5; i++) {
        add_tcp(&g_p, NULL, true, CISN, SYN, NULL, 0);
        /* vary the client port so each SYN is its own connection */
        g_p.b[g_p.n - 20] = (uint8_t)(i + 1);
    }
    l = (tp_limits){.max_conns = 4};
    assert_int_equal(tp_pcap_parse(g_p.b, g_p.n, &l, &c, err, sizeof(err)), TP_ERR);
    assert_non_null(strstr(err, "connections"));
    l.max_conns = 5;
    assert_int_equal(tp_pcap_parse(g_p.b, g_p.n, &l, &c, err, sizeof(err)), TP_OK);
    assert_int_equal(c.nconns, 5);
    tp_capture_free(&c);

    assert_int_equal(tp_pcap_load("/nonexistent/x.pcap", NULL, &c, err, sizeof(err)), TP_ERR);
    assert_non_null(strstr(err, "/nonexistent/x.pcap"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_byte_orders_and_magics),
        cmocka_unit_test(test_link_types_and_ipv6),
        cmocka_unit_test(test_ethernet_padding),
        cmocka_unit_test(test_reorder_and_retransmit),
        cmocka_unit_test(test_stream_errors),
        cmocka_unit_test(test_no_handshake),
        cmocka_unit_test(test_file_errors),
        cmocka_unit_test(test_truncation_and_corruption),
        cmocka_unit_test(test_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
