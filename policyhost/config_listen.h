/* config_listen - the address /metrics is served on, as
 * daemon.metrics_listen and --metrics-listen write it.
 *
 * Part of the policy host: the configuration checks the address when it
 * reads the file, before anything is bound; bellowsd's metrics actor
 * (metrics_http.h) binds what it parsed.
 */
#ifndef CTL_CONFIG_LISTEN_H
#define CTL_CONFIG_LISTEN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

/* Parses a listen address: "HOST:PORT" with HOST an IPv4 address,
 * "localhost" or "[IPv6]", or ":PORT" / "PORT" alone for 127.0.0.1; PORT
 * 1 to 65535. Fills *ret_addr and *ret_len. Returns 0, or
 * BELLOWS_EINVAL with the reason in errbuf. */
int ctl_metrics_parse_listen(const char *text,
    struct sockaddr_storage *ret_addr, socklen_t *ret_len, char *errbuf,
    size_t errlen);

/* True when the address parsed from `text` is a loopback one (127/8 or
 * ::1); false for any other, or an invalid text. */
bool ctl_metrics_listen_local(const char *text);

#endif /* CTL_CONFIG_LISTEN_H */
