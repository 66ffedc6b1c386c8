/* Internal pieces shared by the port mapper sources: address helpers and the
 * client's PMAccept cache (7.3.1.4). Not installed. */
#ifndef UW_PM_INTERNAL_H
#define UW_PM_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "uwarp/pm.h"

/* Octets of an address that carry meaning for IP version ipv (7.3.1.3). */
static inline size_t uw__pm_ip_len(uint8_t ipv)
{
    return ipv == 4 ? 4u : 16u;
}

static inline bool uw__pm_ip_eq(uint8_t ipv, const uint8_t *a, const uint8_t *b)
{
    return memcmp(a, b, uw__pm_ip_len(ipv)) == 0;
}

/* Copies an address, zeroing what the IP version does not use, so the unused
 * 96 bits of IPv4 never carry stale octets into a message or a comparison. */
static inline void uw__pm_ip_copy(uint8_t ipv, uint8_t dst[16], const uint8_t *src)
{
    size_t n = uw__pm_ip_len(ipv);
    memcpy(dst, src, n);
    memset(dst + n, 0, 16 - n);
}

static inline uint64_t uw__pm_add_sat(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* ------------------------------------------------------------------------ */
/* PMAccept cache                                                            */

/* What a cached answer is for: the Connecting Peer's address and the
 * service's Conventional Address. CpPort is not part of it: the point of the
 * cache is to skip the exchange for the next connection, which comes from
 * another local port. CpIPAddr is, because the PMSP may answer differently
 * per client address (allow lists, load balancing by interface). */
typedef struct uw__pm_cache_key {
    uint8_t ipv;
    uint8_t cp_ip[16];
    uint8_t ap_ip[16];
    uint16_t ap_port;
} uw__pm_cache_key;

typedef struct uw__pm_cache_entry {
    bool used;
    uw__pm_cache_key key;
    uint8_t sdp_ip[16];
    uint16_t sdp_port;
    uint8_t pmtime;
    uint64_t until; /* valid while now < until; UW_PM_FOREVER for PmTime 255 */
} uw__pm_cache_entry;

typedef struct uw__pm_cache {
    uw__pm_cache_entry *e;
    size_t cap, n;
    uw_allocator alloc;
} uw__pm_cache;

int uw__pm_cache_init(uw__pm_cache *c, size_t cap, const uw_allocator *alloc);
void uw__pm_cache_free(uw__pm_cache *c);
/* The fresh entry for key, or NULL. An expired entry found on the way is
 * flushed (7.3.1.4: "the PM Client MUST flush the response data"). */
const uw__pm_cache_entry *uw__pm_cache_lookup(uw__pm_cache *c, const uw__pm_cache_key *key,
                                              uint64_t now);
/* Stores a PMAccept's answer received at now, replacing any entry for key.
 * PmTime 0 stores nothing and removes the old entry (single use). Returns the
 * expiry time (0 when not cached). When full, the entry expiring first goes. */
uint64_t uw__pm_cache_put(uw__pm_cache *c, const uw__pm_cache_key *key, const uint8_t *sdp_ip,
                          uint16_t sdp_port, uint8_t pmtime, uint64_t now);
/* Returns true if an entry was removed. */
bool uw__pm_cache_remove(uw__pm_cache *c, const uw__pm_cache_key *key);
void uw__pm_cache_expire(uw__pm_cache *c, uint64_t now);
uint64_t uw__pm_cache_next_deadline(const uw__pm_cache *c);
void uw__pm_cache_clear(uw__pm_cache *c);

#endif
