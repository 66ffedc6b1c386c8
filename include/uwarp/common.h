/* Shared definitions: the injectable allocator.
 *
 * Every uwarp object that allocates takes an optional uw_allocator. NULL means
 * malloc/free. The allocator must stay valid until the object is destroyed.
 * Tests use it to fail the Nth allocation.
 */
#ifndef UWARP_COMMON_H
#define UWARP_COMMON_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct uw_allocator {
    void *(*alloc)(void *ud, size_t size); /* NULL on failure */
    void (*free)(void *ud, void *ptr);     /* ptr may be NULL */
    void *ud;
} uw_allocator;

#ifdef __cplusplus
}
#endif
#endif
