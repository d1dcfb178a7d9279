/* wire_int - what the encoder (wire.c) and the decoder (wire_in.c)
 * share: the wire module's allocator, through which every allocation of
 * either goes so that tests can fail any one of them (wire_fault.h).
 * Private to common/; nothing outside the wire module includes it.
 */
#ifndef COM_WIRE_INT_H
#define COM_WIRE_INT_H

#include <stddef.h>

/* size bytes (at least 1) from malloc, or NULL when malloc fails or when
 * the calling thread's armed fault (com_wire_fault_arm) falls on this
 * allocation. The caller owns the block and frees it with free(). Thread
 * safe: the fault countdown is per thread. */
void *com_wire_malloc(size_t size);

/* n * size zeroed bytes from com_wire_malloc, or NULL when it fails or
 * when the product overflows size_t. Ownership and threading as
 * com_wire_malloc. */
void *com_wire_calloc(size_t n, size_t size);

#endif /* COM_WIRE_INT_H */
