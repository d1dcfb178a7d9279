/* config_listen - the address syntax of daemon.metrics_listen and
 * --metrics-listen, see config_listen.h. */
#include "config_listen.h"

#include <bellows/error.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
ctl_metrics_parse_listen(const char *text, struct sockaddr_storage *ret_addr,
    socklen_t *ret_len, char *errbuf, size_t errlen)
{
	struct sockaddr_storage ss;
	char host[64];
	const char *colon, *port_text;
	socklen_t len;
	unsigned long port;
	char *end;

	memset(&ss, 0, sizeof(ss));
	if (text == NULL || text[0] == '\0')
		goto bad;
	if (text[0] == '[') {
		const char *close = strchr(text, ']');

		if (close == NULL || close[1] != ':' ||
		    (size_t)(close - text - 1) >= sizeof(host))
			goto bad;
		snprintf(host, sizeof(host), "%.*s", (int)(close - text - 1),
		    text + 1);
		port_text = close + 2;
	} else if ((colon = strrchr(text, ':')) != NULL) {
		if ((size_t)(colon - text) >= sizeof(host) ||
		    memchr(text, ':', (size_t)(colon - text)) != NULL)
			goto bad;
		snprintf(host, sizeof(host), "%.*s", (int)(colon - text), text);
		port_text = colon + 1;
	} else {
		host[0] = '\0';
		port_text = text;
	}
	if (port_text[0] < '0' || port_text[0] > '9')
		goto bad;
	port = strtoul(port_text, &end, 10);
	if (*end != '\0' || port < 1 || port > 65535) {
		snprintf(errbuf, errlen,
		    "metrics listen address '%s': the port must be 1 to 65535",
		    text);
		return BELLOWS_EINVAL;
	}
	if (host[0] == '\0' || strcmp(host, "localhost") == 0)
		snprintf(host, sizeof(host), "127.0.0.1");
	if (text[0] == '[') {
		struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;

		if (inet_pton(AF_INET6, host, &a6->sin6_addr) != 1)
			goto bad;
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)port);
		len = sizeof(*a6);
	} else {
		struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;

		if (inet_pton(AF_INET, host, &a4->sin_addr) != 1)
			goto bad;
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)port);
		len = sizeof(*a4);
	}
	*ret_addr = ss;
	*ret_len = len;
	return 0;
bad:
	snprintf(errbuf, errlen,
	    "metrics listen address '%s' is not ADDR:PORT (an IPv4 "
	    "address, localhost or [IPv6], then a port, e.g. "
	    "127.0.0.1:9464)",
	    text != NULL ? text : "");
	return BELLOWS_EINVAL;
}

bool
ctl_metrics_listen_local(const char *text)
{
	struct sockaddr_storage ss;
	socklen_t len;
	char err[16];

	if (ctl_metrics_parse_listen(text, &ss, &len, err, sizeof(err)) != 0)
		return false;
	if (ss.ss_family == AF_INET) {
		const struct sockaddr_in *a4 = (const struct sockaddr_in *)&ss;

		return (ntohl(a4->sin_addr.s_addr) >> 24) == 127;
	}
	return IN6_IS_ADDR_LOOPBACK(
	    &((const struct sockaddr_in6 *)&ss)->sin6_addr);
}
