/* store_fault - SQLite failures injected into the store's writer, for tests.
 *
 * Only tests include this header. Where a real failure cannot be made (a
 * full disk needs root to mount a small file system), a test arms the
 * writer to fail its next transactions with a given SQLite result code, as
 * if COMMIT had returned it: the transaction is rolled back and the store
 * degrades and retries exactly as it does for the real failure. Nothing
 * else in bellows calls this.
 */
#ifndef CTL_STORE_FAULT_H
#define CTL_STORE_FAULT_H

#include <stdint.h>

/* Makes the writer's next `times` transactions fail with SQLite result
 * code `code` (SQLITE_FULL is 13, SQLITE_IOERR 10); times 0 disarms.
 * Thread-safe; never fails. */
void ctl_store_fault_arm(int code, uint32_t times);

/* The same after letting the writer's next `pass` transactions commit:
 * a test can thus fail the transaction after a given one (the metric
 * rows after a window's, say) and see what the first one made
 * durable. times 0 disarms. Thread-safe; never fails. */
void ctl_store_fault_arm_after(int code, uint32_t pass, uint32_t times);

#endif /* CTL_STORE_FAULT_H */
