/* Flood generator for the uwarp-pmd flood test (draft-pinkerton-iwarp-sdp-01
 * 15.2.1, Port Flooding): sends COUNT datagrams to TARGET as fast as it can,
 * from SOCKETS sockets bound to BIND (so from that many source ports).
 * Three in four are valid PMReqs with random AssocHandles, ports and
 * addresses (some for a mapped service), the rest random octets of random
 * length. Prints "sent N of COUNT in MS ms".
 *   pm_flood TARGET_IP PORT BIND_IP COUNT SOCKETS SEED [MAPPED_PORT] */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "uwarp/pm.h"

static uint64_t rng_state;

static uint64_t rnd(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double ms_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
    if (argc < 7) {
        fprintf(stderr, "usage: %s TARGET_IP PORT BIND_IP COUNT SOCKETS SEED [MAPPED_PORT]\n",
                argv[0]);
        return 2;
    }
    struct sockaddr_in to, from;
    memset(&to, 0, sizeof(to));
    memset(&from, 0, sizeof(from));
    to.sin_family = from.sin_family = AF_INET;
    to.sin_port = htons((uint16_t)atoi(argv[2]));
    if (inet_pton(AF_INET, argv[1], &to.sin_addr) != 1 ||
        inet_pton(AF_INET, argv[3], &from.sin_addr) != 1) {
        fprintf(stderr, "bad address\n");
        return 2;
    }
    long count = atol(argv[4]), nsock = atol(argv[5]);
    rng_state = strtoull(argv[6], NULL, 0);
    uint16_t mapped = argc > 7 ? (uint16_t)atoi(argv[7]) : 80;
    if (count < 1 || nsock < 1 || nsock > 1024)
        return 2;
    int *fd = calloc((size_t)nsock, sizeof(int));
    if (!fd)
        return 3;
    for (long i = 0; i < nsock; i++) {
        fd[i] = socket(AF_INET, SOCK_DGRAM, 0);
        if (fd[i] < 0 || bind(fd[i], (struct sockaddr *)&from, sizeof(from)) != 0) {
            perror("socket/bind");
            return 3;
        }
    }
    double t0 = ms_now();
    long sent = 0;
    for (long i = 0; i < count; i++) {
        uint8_t buf[128];
        size_t len;
        uint64_t r = rnd();
        if (r % 4 != 0) {
            uw_pm_msg m;
            memset(&m, 0, sizeof(m));
            m.type = UW_PM_REQ;
            m.ipv = (r >> 8) % 8 ? 4 : 6;
            m.assoc = rnd();
            m.cp_port = (uint16_t)rnd();
            m.ap_port = (r >> 16) % 2 ? mapped : (uint16_t)rnd();
            uint64_t a = rnd(), b = rnd();
            memcpy(m.cp_ip, &a, 8);
            memcpy(m.ap_ip, &b, 8);
            len = (size_t)uw_pm_encode(&m, buf, sizeof(buf));
        } else {
            len = (size_t)(rnd() % sizeof(buf));
            for (size_t k = 0; k < len; k += 8) {
                uint64_t v = rnd();
                memcpy(buf + k, &v, len - k < 8 ? len - k : 8);
            }
        }
        if (sendto(fd[i % nsock], buf, len, 0, (struct sockaddr *)&to, sizeof(to)) >= 0)
            sent++;
        else if (errno != ENOBUFS && errno != EAGAIN && errno != ECONNREFUSED)
            perror("sendto");
    }
    printf("sent %ld of %ld in %.0f ms\n", sent, count, ms_now() - t0);
    for (long i = 0; i < nsock; i++)
        close(fd[i]);
    free(fd);
    return sent > 0 ? 0 : 1;
}
