/* units - numbers for people, in one vocabulary for every tool.
 *
 * Sizes are decimal (SI) bytes: B, kB, MB, GB, TB, PB, 1 kB = 1000 B,
 * three significant digits ("512 B", "8.46 MB", "1.17 GB"); counts the
 * same without a unit ("512", "8.47M"). The demo summary
 * (scripts/demo_summary.py) and bellows.torch print them alike; docs and
 * tests hold every tool to it (docs/history.md#units).
 */
#ifndef COM_UNITS_H
#define COM_UNITS_H

#include <stddef.h>

/* Writes b bytes as "512 B", "8.46 MB" into buf[len]; "-" when b is not
 * finite. Pure. */
void com_fmt_bytes(double b, char *buf, size_t len);

/* As com_fmt_bytes without the space and with at most 2 significant
 * digits above 10 ("512B", "8.5MB", "271kB"), for narrow columns. */
void com_fmt_bytes_short(double b, char *buf, size_t len);

/* Writes the count n as "512", "8.47M" into buf[len]; "-" when n is not
 * finite. Pure. */
void com_fmt_count(double n, char *buf, size_t len);

#endif /* COM_UNITS_H */
