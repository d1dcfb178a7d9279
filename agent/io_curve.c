/* io_curve - the agent's CURVE handshake with bellowsd, see io.h.
 *
 * With CURVE keys both sockets are CURVE clients, and a monitor socket
 * (a PAIR on an inproc endpoint of the agent's own context) shows the
 * I/O thread the DEALER's connections and handshakes. A handshake
 * bellowsd refuses (its ZAP handler does not know the client's key), one
 * that fails (a wrong server key makes bellowsd drop the connection; a
 * daemon without CURVE fails it) and one that is not done handshake_ms
 * after the connection was made become last_error BELLOWS_ECONFIG with a
 * message saying which, and a log line; ZeroMQ goes on retrying by
 * itself, so a key added on the daemon later is taken without a restart.
 */
#include "io_int.h"

#include "common/zmonitor.h"

#include <bellows/error.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <zmq.h>

void
agent_io_handshake_failed(agent_io *io, const char *why)
{
	char text[sizeof(io->last_error_text)];

	io->hs_since_ms = 0;
	snprintf(text, sizeof(text), "%s (bellowsd at %s)", why, io->control);
	agent_io_lock(io);
	io->last_error = BELLOWS_ECONFIG;
	memcpy(io->last_error_text, text, sizeof(text));
	agent_io_unlock(io);
	agent_io_log_quiet(io, IO_QUIET_HANDSHAKE, BELLOWS_LOG_ERROR,
	    "%s; not joined, training goes on with the decision in force, "
	    "retrying",
	    text);
}

void
agent_io_recv_monitor(agent_io *io, uint64_t now)
{
	for (int i = 0; i < IO_RECV_BATCH; i++) {
		uint16_t event;
		uint32_t value;
		int r = com_monitor_recv(io->monitor, &event, &value);

		if (r == BELLOWS_EAGAIN)
			return;
		if (r != 0)
			continue;
		switch (event) {
		case ZMQ_EVENT_CONNECTED:
			io->hs_since_ms = now > 0 ? now : 1;
			break;
		case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
			if (io->hs_since_ms != 0)
				agent_io_log(io, BELLOWS_LOG_DEBUG,
				    "CURVE handshake with bellowsd at %s done",
				    io->control);
			io->hs_since_ms = 0;
			break;
		case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
			agent_io_handshake_failed(io,
			    "bellowsd refused this client's key");
			break;
		case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
			agent_io_handshake_failed(io,
			    value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH
				? "no answer: wrong server key? (bellowsd "
				  "does not use CURVE)"
				: "no answer: wrong server key?");
			break;
		case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
		case ZMQ_EVENT_DISCONNECTED:
			/* Dropped before the handshake was done: bellowsd
			 * could not read our Hello, sealed with the key we
			 * believe is its own. */
			if (io->hs_since_ms != 0)
				agent_io_handshake_failed(io,
				    "no answer: wrong server key?");
			break;
		default:
			break;
		}
	}
}

int
agent_io_curve(agent_io *io, void *s, const com_cert *client)
{
	if (zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, io->server_key, 40) != 0 ||
	    zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, client->public_key, 40) !=
		0 ||
	    zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, client->secret_key, 40) !=
		0) {
		agent_io_log(io, BELLOWS_LOG_ERROR,
		    "cannot make the sockets CURVE clients: %s (libzmq "
		    "without CURVE?)",
		    zmq_strerror(errno));
		return BELLOWS_ENOTSUP;
	}
	return 0;
}

int
agent_io_watch(agent_io *io)
{
	int events = ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED |
	    ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
	    ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
	    ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL;

	if (com_monitor_open(io->ctx, io->dealer, events, "agent",
		&io->monitor) != 0) {
		agent_io_log(io, BELLOWS_LOG_ERROR,
		    "cannot watch the control socket: %s", zmq_strerror(errno));
		return BELLOWS_ESYS;
	}
	return 0;
}
