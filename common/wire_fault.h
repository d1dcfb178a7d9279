/* wire_fault - allocation failures injected into the wire module, for tests.
 *
 * Only tests include this header. Every allocation the wire module makes while
 * encoding or decoding, its own and protobuf-c's, goes through one function
 * that consults the state set here, so a test can fail each allocation in
 * turn and check that the failure comes back as BELLOWS_ENOMEM and leaks
 * nothing. The state is per thread; nothing else in bellows calls this.
 */
#ifndef COM_WIRE_FAULT_H
#define COM_WIRE_FAULT_H

#include <stdbool.h>

/* Makes the calling thread's n-th wire allocation from now fail, once
 * (n = 0: the next one); n < 0 disarms. Never fails. */
void com_wire_fault_arm(long n);

/* True when the failure armed last has happened. */
bool com_wire_fault_fired(void);

#endif /* COM_WIRE_FAULT_H */
