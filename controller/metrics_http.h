/* metrics_http - the actor serving GET /metrics over HTTP.
 *
 * libmicrohttpd's thread owns the listening socket and every connection;
 * it never touches the loop's state. The loop hands it a finished text
 * (ctl_metrics_format) with ctl_metrics_http_publish, which swaps one
 * pointer under a mutex held for that swap only: the loop never waits
 * for a client. Each text is reference-counted, so a response being
 * written keeps the text it started with while a newer one is published.
 *
 * A client cannot stall it, nor the daemon, nor crowd out a scrape:
 * connections are served concurrently (one event-driven thread), at most
 * METRICS_HTTP_CONNECTIONS at once (fewer when RLIMIT_NOFILE is low: a
 * quarter of it). A connection still waiting for its request head is
 * closed after METRICS_HTTP_HEAD_IDLE_MS without a byte, and cut
 * METRICS_HTTP_HEAD_MS after it was accepted however it trickles; once
 * the head is complete the answer has METRICS_HTTP_DEADLINE_MS from
 * accept, and as long idle (the cuts are checked at each publication, so
 * up to one CTL_METRICS_PERIOD_MS late). When a new connection finds the
 * table 7/8 full, the oldest connection still waiting for its head is
 * cut to make room, so a scrape that sends its request at once is
 * answered however many slow connections are held. The request head is
 * held in METRICS_HTTP_MEMORY_LIMIT bytes (431 past that). GET or HEAD
 * of /metrics (any query string) gets the text as "text/plain;
 * version=0.0.4"; another path gets 404, another method 405, a request
 * that is not HTTP 400 (or, for a few that libmicrohttpd decides, a
 * close without an answer), a request without the bearer token (when
 * one is set) 401. Every response closes the connection.
 */
#ifndef CTL_METRICS_HTTP_H
#define CTL_METRICS_HTTP_H

#include <stddef.h>
#include <stdint.h>

#define METRICS_HTTP_DEADLINE_MS  5000 /* one connection, accept to close */
#define METRICS_HTTP_HEAD_MS      2000 /* accept to a complete request head */
#define METRICS_HTTP_HEAD_IDLE_MS 1000 /* head: most silence (whole s) */
#define METRICS_HTTP_CONNECTIONS  1024 /* connections open at once, at most */
#define METRICS_HTTP_MEMORY_LIMIT                                              \
	16384 /* bytes per connection: request                                 \
	       * head and response head */

typedef struct ctl_metrics_http ctl_metrics_http;

/* Binds `listen` (ctl_metrics_parse_listen's syntax) and starts the
 * thread. Until the first publication /metrics answers 503. Returns 0,
 * BELLOWS_EINVAL (bad address), BELLOWS_EIO (cannot bind or listen) with
 * the reason in errbuf, BELLOWS_ESYS (no thread) or BELLOWS_ENOMEM. */
int ctl_metrics_http_open(const char *listen, ctl_metrics_http **ret_http,
    char *errbuf, size_t errlen);

/* Makes `text` (len bytes, malloc'd; ownership passes here, also on
 * failure) what /metrics serves from now on, and cuts the connections
 * past their deadline. Never blocks on a client: the mutex guards a
 * pointer swap and the connection table. Loop thread only. */
void ctl_metrics_http_publish(ctl_metrics_http *http, char *text, size_t len);

/* Makes every request need "Authorization: Bearer <token>" (compared in
 * constant time; 401 without it), or none with token NULL. Copies token.
 * Any thread. Returns 0 or BELLOWS_ENOMEM (the old token stays). */
int ctl_metrics_http_set_token(ctl_metrics_http *http, const char *token);

/* Requests served since open (any status), read by the loop thread. */
uint64_t ctl_metrics_http_served(const ctl_metrics_http *http);

/* Stops the server (connections being served are cut), closes the
 * socket and frees everything. NULL-safe. */
void ctl_metrics_http_close(ctl_metrics_http **http);

#endif /* CTL_METRICS_HTTP_H */
