/* hello_flood - Hellos that would make bellowsd hold as much as it lets
 * them, for the integration tests.
 *
 * Sends, one after the other, a Hello for rank 0 of each of JOBS distinct
 * jobs ("PREFIX-0", "PREFIX-1", ...; PREFIX is "flood" unless given), each with
 * a world of WORLD ranks and a table of LAYERS layers whose names are NAME_LEN
 * bytes long, and waits for each answer. Prints one line per kind of answer,
 *   hello_flood: N welcomed
 *   hello_flood: N refused (CODE): FIRST MESSAGE
 * and exits 0 when every Hello was answered, 1 otherwise.
 *
 * usage: hello_flood CONTROL JOBS LAYERS WORLD NAME_LEN [PREFIX]
 */
#include "common/wire.h"
#include "common/msg.h"

#include <bellows/error.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#define FLOOD_REPLY_MS 10000 /* wait for one answer */

/* Sends the Hello of job `k`. Returns 0 or -1. */
static int
flood_hello(void *sock, const char *prefix, uint32_t k, uint32_t n_layers,
    uint32_t world, uint32_t name_len)
{
	char job[64], *name = malloc(name_len + 1);
	uint8_t *buf;
	size_t n;
	com_msg m;
	int r;

	if (name == NULL)
		return -1;
	snprintf(job, sizeof(job), "%.40s-%u", prefix, k);
	com_msg_init(&m, COM_MSG_HELLO);
	m.u.hello.job = com_strdup(job);
	m.u.hello.agent_version = com_strdup("0.1.0");
	m.u.hello.rank = 0;
	m.u.hello.world = world;
	m.u.hello.incarnation = 1000 + k;
	m.u.hello.n_layers = n_layers;
	m.u.hello.layers = calloc(n_layers, sizeof(com_layer_info));
	if (m.u.hello.layers == NULL) {
		free(name);
		com_msg_fini(&m);
		return -1;
	}
	memset(name, 'w', name_len);
	for (uint32_t l = 0; l < n_layers; l++) {
		/* Distinct names: the index at the front, padding after. */
		int head = snprintf(name, name_len + 1, "l%u.", l);

		if (head > 0 && (uint32_t)head < name_len)
			memset(name + head, 'w', name_len - (uint32_t)head);
		name[name_len] = '\0';
		m.u.hello.layers[l].name = com_strdup(name);
		m.u.hello.layers[l].numel = 64;
		m.u.hello.layers[l].ndim = 2;
		m.u.hello.layers[l].shape[0] = 8;
		m.u.hello.layers[l].shape[1] = 8;
	}
	free(name);
	r = com_wire_encode(&m, &buf, &n);
	com_msg_fini(&m);
	if (r != 0)
		return -1;
	r = zmq_send(sock, buf, n, 0) < 0 ? -1 : 0;
	free(buf);
	return r;
}

int
main(int argc, char **argv)
{
	uint32_t jobs, layers, world, name_len, welcomed = 0, refused = 0;
	int linger = 0, code = 0, rc = 0;
	char first[512] = "";
	com_limits lim;
	void *ctx, *sock;

	if (argc != 6 && argc != 7) {
		fprintf(stderr,
		    "usage: hello_flood CONTROL JOBS LAYERS WORLD "
		    "NAME_LEN [PREFIX]\n");
		return 2;
	}
	jobs = (uint32_t)strtoul(argv[2], NULL, 10);
	layers = (uint32_t)strtoul(argv[3], NULL, 10);
	world = (uint32_t)strtoul(argv[4], NULL, 10);
	name_len = (uint32_t)strtoul(argv[5], NULL, 10);
	com_limits_default(&lim);
	ctx = zmq_ctx_new();
	sock = zmq_socket(ctx, ZMQ_DEALER);
	zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof(linger));
	if (zmq_connect(sock, argv[1]) != 0) {
		fprintf(stderr, "hello_flood: cannot connect to %s\n", argv[1]);
		return 1;
	}
	for (uint32_t k = 0; k < jobs && rc == 0; k++) {
		zmq_pollitem_t it = { .socket = sock, .events = ZMQ_POLLIN };
		zmq_msg_t body;
		com_msg m;

		if (flood_hello(sock, argc == 7 ? argv[6] : "flood", k, layers,
			world, name_len) != 0 ||
		    zmq_poll(&it, 1, FLOOD_REPLY_MS) <= 0) {
			fprintf(stderr, "hello_flood: no answer to hello %u\n",
			    k);
			rc = 1;
			break;
		}
		zmq_msg_init(&body);
		if (zmq_msg_recv(&body, sock, 0) < 0 ||
		    com_wire_decode(zmq_msg_data(&body), zmq_msg_size(&body),
			&lim, &m) != 0) {
			zmq_msg_close(&body);
			rc = 1;
			break;
		}
		zmq_msg_close(&body);
		if (m.type == COM_MSG_WELCOME) {
			welcomed++;
		} else if (m.type == COM_MSG_ERROR) {
			if (refused++ == 0) {
				code = m.u.error.code;
				snprintf(first, sizeof(first), "%s",
				    m.u.error.message != NULL
					? m.u.error.message
					: "");
			}
		}
		com_msg_fini(&m);
	}
	printf("hello_flood: %u welcomed\n", welcomed);
	if (refused > 0)
		printf("hello_flood: %u refused (%s): %s\n", refused,
		    bellows_strerror(code), first);
	zmq_close(sock);
	zmq_ctx_term(ctx);
	return rc;
}
