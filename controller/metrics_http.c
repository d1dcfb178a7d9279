/* metrics_http - the /metrics actor on libmicrohttpd, see metrics_http.h.
 *
 * libmicrohttpd's own thread (epoll) reads every connection as its bytes
 * come, so a slow client holds its socket and nothing else. What the
 * library does not bound is a client that keeps sending a byte now and
 * then (its idle timeout restarts at each), nor a crowd of them: at its
 * connection limit it stops accepting, and a scrape waits in the listen
 * backlog until some deadline frees a slot. The connections are
 * therefore kept in a table of our own (from libmicrohttpd's
 * notifications), and cut by shutdown(2), after which libmicrohttpd sees
 * the end of the stream and closes them itself: at each publication
 * those past their deadline, and when a connection arrives at a nearly
 * full table the oldest one still waiting for its request head, so that
 * a new connection (a scrape) is always accepted at once.
 */
#include "metrics_http.h"

#include "common/clock.h"
#include "ctl_metrics.h"
#include "policyhost/log.h"

#include <bellows/error.h>

#include <errno.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

/* A published text, shared by the slot and the responses writing it. */
typedef struct metrics_text {
	atomic_uint refs; /* holders: the slot and responses in flight */
	size_t len;       /* bytes in text */
	char *text;       /* the exposition (owned) */
} metrics_text;

/* One open connection, for its deadline and for eviction. */
typedef struct http_conn {
	int fd;         /* its socket, -1: the slot is free */
	bool answering; /* its request head is complete */
	bool cut;       /* shut down already, closing */
	uint64_t since; /* accepted at (com_clock_ms) */
} http_conn;

struct ctl_metrics_http {
	struct MHD_Daemon *mhd; /* the server, NULL: not started */
	pthread_mutex_t mu;     /* guards cur, token, conn, open */
	metrics_text *cur;      /* what /metrics serves, NULL: nothing yet */
	char *token;            /* bearer token required, NULL: none */
	uint32_t limit;         /* connections at once, <= the table's size */
	uint32_t open;          /* slots of conn in use */
	http_conn conn[METRICS_HTTP_CONNECTIONS]; /* open connections */
	atomic_uint_fast64_t served;              /* requests answered */
};

static void
metrics_text_unref(void *arg)
{
	metrics_text *t = arg;

	if (t != NULL && atomic_fetch_sub(&t->refs, 1) == 1) {
		free(t->text);
		free(t);
	}
}

/* libmicrohttpd's messages (a refused connection, a socket error) go to
 * our log at debug level: they are the clients' doing. */
static void
http_log(void *cls, const char *fmt, va_list ap)
{
	char line[256];

	(void)cls;
	vsnprintf(line, sizeof(line), fmt, ap);
	line[strcspn(line, "\n")] = '\0';
	ctl_log(CTL_LOG_DEBUG, "metrics", "%s", line);
}

/* Shuts a connection down; libmicrohttpd closes it at its next turn.
 * Called with h->mu held. */
static void
http_cut(http_conn *slot)
{
	if (!slot->cut) {
		slot->cut = true;
		shutdown(slot->fd, SHUT_RDWR);
	}
}

/* Makes room when the table is nearly full (7/8 of the limit: the
 * library may accept a few more before the cut ones are closed, and at
 * the limit it would refuse them): cuts the oldest connection still
 * waiting for its request head, or, when all are being answered, the
 * oldest one; never `keep` (the one just accepted). Called with h->mu
 * held, from libmicrohttpd's thread. */
static void
http_evict(ctl_metrics_http *h, const http_conn *keep)
{
	uint32_t cutting = 0;
	http_conn *oldest = NULL, *oldest_waiting = NULL;

	for (uint32_t i = 0; i < h->limit; i++) {
		http_conn *s = &h->conn[i];

		if (s->fd < 0 || s == keep)
			continue;
		if (s->cut) {
			cutting++;
			continue;
		}
		if (oldest == NULL || s->since < oldest->since)
			oldest = s;
		if (!s->answering &&
		    (oldest_waiting == NULL ||
			s->since < oldest_waiting->since))
			oldest_waiting = s;
	}
	if (h->open - cutting <= h->limit - h->limit / 8)
		return;
	if (oldest_waiting != NULL)
		oldest = oldest_waiting;
	if (oldest != NULL)
		http_cut(oldest);
}

/* Enters a connection in the table when libmicrohttpd takes it (making
 * room for the next one if need be), and takes it out when libmicrohttpd
 * is done with it (before its socket is closed, so the table never holds
 * a descriptor reused elsewhere). */
static void
http_notify(void *cls, struct MHD_Connection *c, void **socket_ctx,
    enum MHD_ConnectionNotificationCode code)
{
	ctl_metrics_http *h = cls;
	http_conn *slot = *socket_ctx;

	pthread_mutex_lock(&h->mu);
	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c,
		    MHD_CONNECTION_INFO_CONNECTION_FD);

		for (uint32_t i = 0; ci != NULL && i < h->limit; i++) {
			if (h->conn[i].fd < 0) {
				h->conn[i] = (http_conn){ .fd = ci->connect_fd,
					.since = com_clock_ms() };
				h->open++;
				*socket_ctx = &h->conn[i];
				break;
			}
		}
		http_evict(h, *socket_ctx);
	} else if (slot != NULL) {
		slot->fd = -1;
		h->open--;
		*socket_ctx = NULL;
	}
	pthread_mutex_unlock(&h->mu);
}

/* Cuts the connections past their deadline: METRICS_HTTP_HEAD_MS after
 * accept for one still waiting for its request head,
 * METRICS_HTTP_DEADLINE_MS for one being answered. */
static void
http_reap(ctl_metrics_http *h)
{
	uint64_t now = com_clock_ms();

	pthread_mutex_lock(&h->mu);
	for (uint32_t i = 0; i < h->limit; i++) {
		http_conn *s = &h->conn[i];

		if (s->fd >= 0 &&
		    now - s->since >= (s->answering ? METRICS_HTTP_DEADLINE_MS
						    : METRICS_HTTP_HEAD_MS))
			http_cut(s);
	}
	pthread_mutex_unlock(&h->mu);
}

/* Marks c's request head complete: from now on it is not evicted while
 * one still waiting for its head is open, and it has the answer's idle
 * timeout instead of the head's. */
static void
http_head_done(ctl_metrics_http *h, struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c,
	    MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	if (ci != NULL && ci->socket_context != NULL) {
		pthread_mutex_lock(&h->mu);
		((http_conn *)ci->socket_context)->answering = true;
		pthread_mutex_unlock(&h->mu);
	}
	MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT,
	    (unsigned int)(METRICS_HTTP_DEADLINE_MS / 1000));
}

/* Queues a short text answer (`status` with its reason phrase as the
 * body), closing the connection after it; `header`/`value` one more
 * header or NULL. */
static enum MHD_Result
http_answer(struct MHD_Connection *c, unsigned int status, const char *body,
    const char *header, const char *value)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body),
	    (void *)body, MHD_RESPMEM_PERSISTENT);
	enum MHD_Result ok;

	if (r == NULL)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", "text/plain; charset=utf-8");
	MHD_add_response_header(r, "Connection", "close");
	if (header != NULL)
		MHD_add_response_header(r, header, value);
	ok = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ok;
}

/* True when `given` (NUL-terminated) equals `want`, in a time that
 * depends on want's length alone. */
static bool
http_token_equal(const char *given, const char *want)
{
	size_t glen = strlen(given), wlen = strlen(want);
	unsigned char diff = glen != wlen;

	for (size_t i = 0; i < wlen; i++)
		diff |= (unsigned char)want[i] ^
		    (unsigned char)(i < glen ? given[i] : 0);
	return diff == 0;
}

/* The request's Authorization is "Bearer <the token>" (scheme in any
 * case); always true when no token is required. Called with h->mu held. */
static bool
http_authorized(const ctl_metrics_http *h, struct MHD_Connection *c)
{
	const char *auth;

	if (h->token == NULL)
		return true;
	auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
	    MHD_HTTP_HEADER_AUTHORIZATION);
	if (auth == NULL || strncasecmp(auth, "Bearer ", 7) != 0)
		return false;
	auth += 7;
	while (*auth == ' ')
		auth++;
	return http_token_equal(auth, h->token);
}

/* Takes a reference to the text served now, or NULL with *authorized
 * false when the request lacks the token. */
static metrics_text *
http_take(ctl_metrics_http *h, struct MHD_Connection *c, bool *authorized)
{
	metrics_text *t = NULL;

	pthread_mutex_lock(&h->mu);
	*authorized = http_authorized(h, c);
	if (*authorized && (t = h->cur) != NULL)
		atomic_fetch_add(&t->refs, 1);
	pthread_mutex_unlock(&h->mu);
	return t;
}

/* The text as a response; it holds its reference until written. */
static enum MHD_Result
http_send_text(struct MHD_Connection *c, metrics_text *t)
{
	struct MHD_Response
	    *r = MHD_create_response_from_buffer_with_free_callback_cls(t->len,
		t->text, metrics_text_unref, t);
	enum MHD_Result ok;

	if (r == NULL) {
		metrics_text_unref(t);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type",
	    "text/plain; version=0.0.4; charset=utf-8");
	MHD_add_response_header(r, "Connection", "close");
	ok = MHD_queue_response(c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ok;
}

/* Every request, answered at its first call (a body is not read). */
static enum MHD_Result
http_handle(void *cls, struct MHD_Connection *c, const char *url,
    const char *method, const char *version, const char *upload_data,
    size_t *upload_data_size, void **req_cls)
{
	ctl_metrics_http *h = cls;
	metrics_text *t;
	bool authorized;

	(void)version;
	(void)upload_data;
	(void)upload_data_size;
	(void)req_cls;
	atomic_fetch_add(&h->served, 1);
	http_head_done(h, c);
	if (strcmp(url, "/metrics") != 0)
		return http_answer(c, MHD_HTTP_NOT_FOUND, "404 Not Found\n",
		    NULL, NULL);
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
		return http_answer(c, MHD_HTTP_METHOD_NOT_ALLOWED,
		    "405 Method Not Allowed\n", "Allow", "GET, HEAD");
	t = http_take(h, c, &authorized);
	if (!authorized)
		return http_answer(c, MHD_HTTP_UNAUTHORIZED,
		    "401 Unauthorized\n", MHD_HTTP_HEADER_WWW_AUTHENTICATE,
		    "Bearer realm=\"bellowsd\"");
	if (t == NULL)
		return http_answer(c, MHD_HTTP_SERVICE_UNAVAILABLE,
		    "503 Service Unavailable\n", NULL, NULL);
	return http_send_text(c, t);
}

/* A listening socket on `listen_at`, or -1 with the reason in errbuf. */
static int
http_listen(const char *listen_at, const struct sockaddr_storage *ss,
    socklen_t len, int backlog, char *errbuf, size_t errlen)
{
	int one = 1;
	int fd = socket(ss->ss_family,
	    SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    bind(fd, (const struct sockaddr *)ss, len) != 0 ||
	    listen(fd, backlog) != 0) {
		snprintf(errbuf, errlen,
		    "cannot listen on '%s' for metrics: %s", listen_at,
		    strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* How many connections to serve at once: METRICS_HTTP_CONNECTIONS, but
 * no more than a quarter of the descriptors the process may open (the
 * rest are the agents' and the store's), and at least 16. */
static uint32_t
http_limit(void)
{
	struct rlimit rl;
	uint64_t limit = METRICS_HTTP_CONNECTIONS;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 &&
	    rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur / 4 < limit)
		limit = rl.rlim_cur / 4;
	return limit < 16 ? 16 : (uint32_t)limit;
}

int
ctl_metrics_http_open(const char *listen_at, ctl_metrics_http **ret_http,
    char *errbuf, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t len;
	ctl_metrics_http *h;
	int r, fd;

	if ((r = ctl_metrics_parse_listen(listen_at, &ss, &len, errbuf,
		 errlen)) != 0)
		return r;
	if ((h = calloc(1, sizeof(*h))) == NULL)
		return BELLOWS_ENOMEM;
	pthread_mutex_init(&h->mu, NULL);
	for (uint32_t i = 0; i < METRICS_HTTP_CONNECTIONS; i++)
		h->conn[i].fd = -1;
	h->limit = http_limit();
	ctl_log(CTL_LOG_DEBUG, "metrics", "serving up to %u connections",
	    (unsigned)h->limit);
	if ((fd = http_listen(listen_at, &ss, len, (int)h->limit, errbuf,
		 errlen)) < 0) {
		ctl_metrics_http_close(&h);
		return BELLOWS_EIO;
	}
	/* On success the daemon owns fd and closes it when stopped.
	 * MHD_OPTION_STRICT_FOR_CLIENT stays at 0: in 0.9.75 its 1 adds a
	 * 400 for HTTP/1.1 without Host and closes, unanswered, a path with
	 * a space, and neither it nor -1 answers a one-word request line or
	 * sees a NUL in the path (docs/metrics.md, How it is served). */
	h->mhd = MHD_start_daemon(MHD_USE_EPOLL_INTERNAL_THREAD |
		MHD_USE_ERROR_LOG,
	    0, NULL, NULL, http_handle, h, MHD_OPTION_EXTERNAL_LOGGER, http_log,
	    h, MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT,
	    (unsigned int)h->limit, MHD_OPTION_CONNECTION_TIMEOUT,
	    (unsigned int)(METRICS_HTTP_HEAD_IDLE_MS / 1000),
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT,
	    (size_t)METRICS_HTTP_MEMORY_LIMIT, MHD_OPTION_NOTIFY_CONNECTION,
	    http_notify, h, MHD_OPTION_END);
	if (h->mhd == NULL) {
		/* fd is left open: whether the library closed it on this
		 * failure is not said, and a second close could hit a
		 * descriptor another thread just opened. */
		snprintf(errbuf, errlen, "cannot start the metrics server");
		ctl_metrics_http_close(&h);
		return BELLOWS_ESYS;
	}
	*ret_http = h;
	return 0;
}

int
ctl_metrics_http_set_token(ctl_metrics_http *h, const char *token)
{
	char *copy = NULL, *old;

	if (h == NULL)
		return 0;
	if (token != NULL && (copy = strdup(token)) == NULL)
		return BELLOWS_ENOMEM;
	pthread_mutex_lock(&h->mu);
	old = h->token;
	h->token = copy;
	pthread_mutex_unlock(&h->mu);
	free(old);
	return 0;
}

void
ctl_metrics_http_publish(ctl_metrics_http *h, char *text, size_t len)
{
	metrics_text *t, *old;

	if (h == NULL) {
		free(text);
		return;
	}
	http_reap(h);
	t = malloc(sizeof(*t));
	if (t == NULL) {
		free(text); /* the previous text stays served */
		return;
	}
	atomic_init(&t->refs, 1);
	t->text = text;
	t->len = len;
	pthread_mutex_lock(&h->mu);
	old = h->cur;
	h->cur = t;
	pthread_mutex_unlock(&h->mu);
	metrics_text_unref(old);
}

uint64_t
ctl_metrics_http_served(const ctl_metrics_http *h)
{
	return h != NULL ? atomic_load(&h->served) : 0;
}

void
ctl_metrics_http_close(ctl_metrics_http **hp)
{
	ctl_metrics_http *h;

	if (hp == NULL || *hp == NULL)
		return;
	h = *hp;
	if (h->mhd != NULL)
		MHD_stop_daemon(h->mhd);
	metrics_text_unref(h->cur);
	free(h->token);
	pthread_mutex_destroy(&h->mu);
	free(h);
	*hp = NULL;
}
