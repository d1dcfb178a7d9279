/* io_keep - the reports sent and not yet acknowledged, see io.h.
 *
 * A report handed to the socket is not safe yet: a daemon that dies
 * before committing its window's close loses it. So while the daemon
 * acknowledges (protocol minor 2), the last IO_KEEP reports sent are kept
 * in a ring, in ascending windows, until the daemon says their windows
 * are durably closed; a new session sends them again, oldest first,
 * before anything queued (io.c). Everything here runs under io->mu.
 */
#include "io_int.h"

#include <stdlib.h>

/* Lets the oldest kept report go. The caller holds mu. */
static void
io_kept_pop(agent_io *io)
{
	io_report *k = &io->kept[io->k_head];

	free(k->buf);
	k->buf = NULL;
	io->k_head = (io->k_head + 1) % IO_KEEP;
	io->k_len--;
	/* The oldest is the first sent, when any was. */
	if (io->k_sent > 0)
		io->k_sent--;
}

void
agent_io_kept_ack(agent_io *io, uint64_t closed)
{
	if (closed > io->acked)
		io->acked = closed;
	while (io->k_len > 0 && io->kept[io->k_head].window < io->acked)
		io_kept_pop(io);
}

void
agent_io_kept_push(agent_io *io, io_report *r)
{
	if (!io->acks || r->window < io->acked) {
		free(r->buf);
		r->buf = NULL;
		return;
	}
	if (io->k_len == IO_KEEP)
		io_kept_pop(io);
	io->kept[(io->k_head + io->k_len) % IO_KEEP] = *r;
	io->k_len++;
	io->k_sent++;
	r->buf = NULL;
}

uint32_t
agent_io_kept_welcome(agent_io *io, uint32_t minor, uint64_t closed,
    bool rejoined)
{
	io->acks = minor >= IO_MIN_ACK_MINOR;
	if (!io->acks) {
		/* An older daemon says nothing of what it recorded. */
		while (io->k_len > 0)
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
	agent_io_kept_ack(io, closed);
	io->k_sent = 0;
	return io->k_len;
}
