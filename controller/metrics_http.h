/* metrics_http - the actor serving GET /metrics over HTTP.
 *
 * One thread of its own owns the listening socket and every connection;
 * it never touches the loop's state. The loop hands it a finished text
 * (ctl_metrics_format) with ctl_metrics_http_publish, which swaps one
 * pointer under a mutex held for that swap only: the loop never waits
 * for a client. Each text is reference-counted, so a response being
 * written keeps the text it started with while a newer one is published.
 *
 * A client cannot stall it for long, nor the daemon at all: one
 * connection is served at a time (others wait in the listen backlog),
 * each within METRICS_HTTP_DEADLINE_MS from accept to the last byte
 * written, the request head at most METRICS_HTTP_REQUEST_MAX bytes (431
 * past that). GET /metrics (any query string) gets the text as
 * "text/plain; version=0.0.4"; another path gets 404, another method 405,
 * a malformed request line 400. Every response closes the connection.
 */
#ifndef CTL_METRICS_HTTP_H
#define CTL_METRICS_HTTP_H

#include <stddef.h>
#include <stdint.h>

#define METRICS_HTTP_DEADLINE_MS 5000 /* one connection, accept to close */
#define METRICS_HTTP_REQUEST_MAX 8192 /* bytes of a request head */

typedef struct ctl_metrics_http ctl_metrics_http;

/* Binds `listen` (ctl_metrics_parse_listen's syntax) and starts the
 * thread. Until the first publication /metrics answers 503. Returns 0,
 * BELLOWS_EINVAL (bad address), BELLOWS_EIO (cannot bind or listen) with
 * the reason in errbuf, BELLOWS_ESYS (no thread) or BELLOWS_ENOMEM. */
int ctl_metrics_http_open(const char *listen, ctl_metrics_http **ret_http,
    char *errbuf, size_t errlen);

/* Makes `text` (len bytes, malloc'd; ownership passes here, also on
 * failure) what /metrics serves from now on. Never blocks on a client:
 * the mutex guards a pointer swap. Loop thread only. */
void ctl_metrics_http_publish(ctl_metrics_http *http, char *text, size_t len);

/* Requests served since open (any status), read by the loop thread. */
uint64_t ctl_metrics_http_served(const ctl_metrics_http *http);

/* Stops the thread (a connection being served is cut), closes the
 * socket and frees everything. NULL-safe. */
void ctl_metrics_http_close(ctl_metrics_http **http);

#endif /* CTL_METRICS_HTTP_H */
