/* metrics_http - the /metrics actor's thread, see metrics_http.h. */
#include "metrics_http.h"

#include "common/clock.h"
#include "log.h"
#include "ctl_metrics.h"

#include <bellows/error.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define METRICS_HTTP_DRAIN_MS    500   /* reading what a client still sends */
#define METRICS_HTTP_DRAIN_BYTES 65536 /* at most this much of it */

/* A published text, shared by the slot and the responses writing it. */
typedef struct metrics_text {
	atomic_uint refs; /* holders: the slot and responses in flight */
	size_t len;       /* bytes in text */
	char *text;       /* the exposition (owned) */
} metrics_text;

struct ctl_metrics_http {
	int lfd;            /* listening socket, non-blocking */
	int wake[2];        /* pipe: a byte on wake[0] stops the thread */
	pthread_t thread;   /* the actor */
	bool started;       /* thread running */
	pthread_mutex_t mu; /* guards cur, for a pointer swap only */
	metrics_text *cur;  /* what /metrics serves, NULL: nothing yet */
	atomic_uint_fast64_t served; /* requests answered */
};

static void
metrics_text_unref(metrics_text *t)
{
	if (t != NULL && atomic_fetch_sub(&t->refs, 1) == 1) {
		free(t->text);
		free(t);
	}
}

/* Milliseconds left before `deadline` (monotonic), 0 when past. */
static int
http_left(uint64_t deadline)
{
	uint64_t now = com_clock_ms();

	return now >= deadline ? 0 : (int)(deadline - now);
}

/* Waits for `events` on fd (or a stop on wake) until the deadline.
 * Returns 1 ready, 0 timed out or stopped, -1 error. */
static int
http_wait(ctl_metrics_http *h, int fd, short events, uint64_t deadline)
{
	for (;;) {
		struct pollfd p[2] = {
			{ .fd = fd, .events = events },
			{ .fd = h->wake[0], .events = POLLIN },
		};
		int left = http_left(deadline), n;

		if (left == 0)
			return 0;
		n = poll(p, 2, left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (p[1].revents != 0)
			return 0;
		if (p[0].revents != 0)
			return 1;
	}
}

/* Writes all of buf before the deadline; false if it could not. */
static bool
http_write(ctl_metrics_http *h, int fd, const char *buf, size_t len,
    uint64_t deadline)
{
	while (len > 0) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n > 0) {
			buf += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			if (http_wait(h, fd, POLLOUT, deadline) != 1)
				return false;
			continue;
		}
		return false;
	}
	return true;
}

static void
http_status(ctl_metrics_http *h, int fd, const char *status, const char *extra,
    uint64_t deadline)
{
	char head[512];
	int n = snprintf(head, sizeof(head),
	    "HTTP/1.1 %s\r\nContent-Type: text/plain; charset=utf-8\r\n"
	    "%sContent-Length: %zu\r\nConnection: close\r\n\r\n%s\n",
	    status, extra, strlen(status) + 1, status);

	if (n > 0 && (size_t)n < sizeof(head))
		http_write(h, fd, head, (size_t)n, deadline);
}

/* Reads the request head (up to the blank line) into buf. Returns its
 * length, 0 when the client went away or was too slow, -1 when it is
 * longer than the buffer. */
static ssize_t
http_read_head(ctl_metrics_http *h, int fd, char *buf, size_t cap,
    uint64_t deadline)
{
	size_t len = 0;

	while (len < cap - 1) {
		ssize_t n = recv(fd, buf + len, cap - 1 - len, MSG_DONTWAIT);

		if (n > 0) {
			len += (size_t)n;
			buf[len] = '\0';
			if (strstr(buf, "\r\n\r\n") != NULL ||
			    strstr(buf, "\n\n") != NULL)
				return (ssize_t)len;
			continue;
		}
		if (n == 0)
			return 0;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return 0;
		if (http_wait(h, fd, POLLIN, deadline) != 1)
			return 0;
	}
	return -1;
}

/* Serves one connection, start to end, within the deadline. */
static void
http_serve(ctl_metrics_http *h, int fd)
{
	uint64_t deadline = com_clock_ms() + METRICS_HTTP_DEADLINE_MS;
	char buf[METRICS_HTTP_REQUEST_MAX + 1];
	char *method, *target, *version, *save = NULL, *q;
	ssize_t len = http_read_head(h, fd, buf, sizeof(buf), deadline);
	metrics_text *t;

	if (len == 0)
		return;
	atomic_fetch_add(&h->served, 1);
	if (len < 0) {
		http_status(h, fd, "431 Request Header Fields Too Large", "",
		    deadline);
		return;
	}
	buf[strcspn(buf, "\r\n")] = '\0';
	method = strtok_r(buf, " ", &save);
	target = strtok_r(NULL, " ", &save);
	version = strtok_r(NULL, " ", &save);
	if (method == NULL || target == NULL || version == NULL ||
	    strtok_r(NULL, " ", &save) != NULL ||
	    strncmp(version, "HTTP/", 5) != 0) {
		http_status(h, fd, "400 Bad Request", "", deadline);
		return;
	}
	if ((q = strchr(target, '?')) != NULL)
		*q = '\0';
	if (strcmp(target, "/metrics") != 0) {
		http_status(h, fd, "404 Not Found", "", deadline);
		return;
	}
	if (strcmp(method, "GET") != 0) {
		http_status(h, fd, "405 Method Not Allowed", "Allow: GET\r\n",
		    deadline);
		return;
	}
	pthread_mutex_lock(&h->mu);
	t = h->cur;
	if (t != NULL)
		atomic_fetch_add(&t->refs, 1);
	pthread_mutex_unlock(&h->mu);
	if (t == NULL) {
		http_status(h, fd, "503 Service Unavailable", "", deadline);
		return;
	}
	{
		char head[256];
		int n = snprintf(head, sizeof(head),
		    "HTTP/1.1 200 OK\r\n"
		    "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
		    "Content-Length: %zu\r\nConnection: close\r\n\r\n",
		    t->len);

		if (n > 0 && (size_t)n < sizeof(head) &&
		    http_write(h, fd, head, (size_t)n, deadline))
			http_write(h, fd, t->text, t->len, deadline);
	}
	metrics_text_unref(t);
}

/* Ends the response (FIN) and reads what the client still sends, at
 * most METRICS_HTTP_DRAIN_BYTES for METRICS_HTTP_DRAIN_MS: closing with
 * unread input would reset the connection, and a reset can destroy the
 * response (a 431) before the client reads it. */
static void
http_drain(ctl_metrics_http *h, int fd)
{
	uint64_t deadline = com_clock_ms() + METRICS_HTTP_DRAIN_MS;
	size_t total = 0;
	char buf[4096];

	shutdown(fd, SHUT_WR);
	while (total < METRICS_HTTP_DRAIN_BYTES) {
		ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);

		if (n > 0) {
			total += (size_t)n;
			continue;
		}
		if (n == 0 ||
		    (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
			return;
		if (errno != EINTR && http_wait(h, fd, POLLIN, deadline) != 1)
			return;
	}
}

static void *
http_main(void *arg)
{
	ctl_metrics_http *h = arg;

	for (;;) {
		struct pollfd p[2] = {
			{ .fd = h->lfd, .events = POLLIN },
			{ .fd = h->wake[0], .events = POLLIN },
		};
		int fd;

		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			ctl_log(CTL_LOG_ERROR, "metrics", "poll: %s",
			    strerror(errno));
			return NULL;
		}
		if (p[1].revents != 0)
			return NULL;
		fd = accept4(h->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			continue; /* gone before accepted, or EMFILE: retry */
		http_serve(h, fd);
		http_drain(h, fd);
		close(fd);
	}
}

int
ctl_metrics_http_open(const char *listen_at, ctl_metrics_http **ret_http,
    char *errbuf, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t len;
	ctl_metrics_http *h;
	int one = 1, r;

	if ((r = ctl_metrics_parse_listen(listen_at, &ss, &len, errbuf,
		 errlen)) != 0)
		return r;
	h = calloc(1, sizeof(*h));
	if (h == NULL)
		return BELLOWS_ENOMEM;
	h->lfd = h->wake[0] = h->wake[1] = -1;
	pthread_mutex_init(&h->mu, NULL);
	h->lfd = socket(ss.ss_family,
	    SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (h->lfd < 0 ||
	    setsockopt(h->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) !=
		0 ||
	    bind(h->lfd, (struct sockaddr *)&ss, len) != 0 ||
	    listen(h->lfd, 16) != 0) {
		snprintf(errbuf, errlen,
		    "cannot listen on '%s' for metrics: %s", listen_at,
		    strerror(errno));
		r = BELLOWS_EIO;
		goto fail;
	}
	if (pipe2(h->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
		snprintf(errbuf, errlen, "pipe: %s", strerror(errno));
		r = BELLOWS_ESYS;
		goto fail;
	}
	if (pthread_create(&h->thread, NULL, http_main, h) != 0) {
		snprintf(errbuf, errlen, "cannot start the metrics thread");
		r = BELLOWS_ESYS;
		goto fail;
	}
	h->started = true;
	*ret_http = h;
	return 0;
fail:
	ctl_metrics_http_close(&h);
	return r;
}

void
ctl_metrics_http_publish(ctl_metrics_http *h, char *text, size_t len)
{
	metrics_text *t, *old;

	if (h == NULL) {
		free(text);
		return;
	}
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
	if (h->started) {
		while (write(h->wake[1], "s", 1) < 0 && errno == EINTR)
			;
		pthread_join(h->thread, NULL);
	}
	if (h->lfd >= 0)
		close(h->lfd);
	if (h->wake[0] >= 0)
		close(h->wake[0]);
	if (h->wake[1] >= 0)
		close(h->wake[1]);
	metrics_text_unref(h->cur);
	pthread_mutex_destroy(&h->mu);
	free(h);
	*hp = NULL;
}
