/* io_keep - the reports held until bellowsd has recorded them, see io.h.
 *
 * A report waits in the queue until the socket takes it, and a report
 * handed to the socket is not safe yet either: a daemon that dies before
 * committing its window's close loses it. So while the daemon
 * acknowledges (protocol minor 2), the reports sent are kept, in
 * ascending windows, until the daemon says their windows are durably
 * closed; a new session sends them again, oldest first, before anything
 * queued (io.c). Both rings grow on demand: what bounds them is bytes,
 * keep_reports_mb for the two together (and queue_capacity reports for
 * the queue), so that an outage of bellowsd of many windows loses none of
 * them while they fit. Everything here runs under io->mu.
 */
#include "io_int.h"

#include <bellows/error.h>

#include <stdlib.h>

io_report *
agent_io_ring_at(io_ring *ring, uint32_t i)
{
	return &ring->e[(ring->head + i) % ring->cap];
}

int
agent_io_ring_push(io_ring *ring, io_report *r)
{
	if (ring->len == ring->cap) {
		uint32_t cap = ring->cap ? ring->cap * 2 : 16;
		io_report *e;

		if (cap < ring->cap || (e = calloc(cap, sizeof(*e))) == NULL)
			return BELLOWS_ENOMEM;
		/* Unrolled from the head, so the ring starts at 0 again. */
		for (uint32_t i = 0; i < ring->len; i++)
			e[i] = *agent_io_ring_at(ring, i);
		free(ring->e);
		ring->e = e;
		ring->cap = cap;
		ring->head = 0;
	}
	*agent_io_ring_at(ring, ring->len) = *r;
	ring->len++;
	r->buf = NULL;
	return 0;
}

void
agent_io_ring_pop(io_ring *ring, io_report *ret)
{
	io_report *r = agent_io_ring_at(ring, 0);

	*ret = *r;
	r->buf = NULL;
	ring->head = (ring->head + 1) % ring->cap;
	ring->len--;
}

void
agent_io_ring_free(io_ring *ring)
{
	while (ring->len > 0) {
		io_report r;

		agent_io_ring_pop(ring, &r);
		free(r.buf);
	}
	free(ring->e);
	ring->e = NULL;
	ring->cap = 0;
}

/* Frees a report taken out of a ring: its bytes are no longer held. */
static void
io_report_release(agent_io *io, io_report *r)
{
	io->held_bytes -= r->len;
	free(r->buf);
	r->buf = NULL;
}

/* Lets the oldest kept report go. The caller holds mu. */
static void
io_kept_pop(agent_io *io)
{
	io_report r;

	agent_io_ring_pop(&io->kept, &r);
	io_report_release(io, &r);
	/* The oldest is the first sent, when any was. */
	if (io->k_sent > 0)
		io->k_sent--;
}

void
agent_io_kept_ack(agent_io *io, uint64_t closed)
{
	if (closed > io->acked)
		io->acked = closed;
	if (io->acked >= io->ack_hold)
		io->ack_hold = 0;
	while (io->kept.len > 0 &&
	    agent_io_ring_at(&io->kept, 0)->window < io->acked)
		io_kept_pop(io);
}

void
agent_io_kept_decided(agent_io *io, uint64_t window)
{
	if (io->ack_hold == 0)
		agent_io_kept_ack(io, window);
}

void
agent_io_kept_push(agent_io *io, io_report *r)
{
	if (!io->acks || r->window < io->acked ||
	    agent_io_ring_push(&io->kept, r) != 0) {
		/* Not to be kept, or no memory to keep it: it was sent. */
		io_report_release(io, r);
		return;
	}
	io->k_sent++;
}

void
agent_io_hold(agent_io *io, size_t len)
{
	/* The kept ones reached bellowsd once: they go first. */
	while (io->held_bytes + len > io->keep_bytes && io->kept.len > 0)
		io_kept_pop(io);
	while (io->queue.len > 0 &&
	    (io->held_bytes + len > io->keep_bytes ||
		io->queue.len >= io->q_max)) {
		io_report r;

		agent_io_ring_pop(&io->queue, &r);
		io_report_release(io, &r);
		io->reports_dropped++;
	}
	io->held_bytes += len;
}

uint32_t
agent_io_kept_welcome(agent_io *io, uint32_t minor, uint64_t closed,
    bool rejoined)
{
	const io_report *r = NULL;

	io->acks = minor >= IO_MIN_ACK_MINOR;
	if (!io->acks) {
		/* An older daemon says nothing of what it recorded. */
		while (io->kept.len > 0)
			io_kept_pop(io);
		io->acked = 0;
		return 0;
	}
	if (!rejoined) {
		agent_io_kept_ack(io, closed);
		return 0;
	}
	/* A new instance may know less than the old one told us: its word
	 * is the one that counts now. */
	io->acked = closed;
	io->ack_hold = 0;
	agent_io_kept_ack(io, closed);
	/* Those it sends again, and those queued while it was away, may be
	 * late windows there: only its windows_closed says when they are
	 * in. */
	if (io->queue.len > 0)
		r = agent_io_ring_at(&io->queue, io->queue.len - 1);
	else if (io->kept.len > 0)
		r = agent_io_ring_at(&io->kept, io->kept.len - 1);
	if (r != NULL)
		io->ack_hold = r->window + 1;
	io->k_sent = 0;
	return io->kept.len;
}
