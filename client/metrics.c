/* metrics - recorded metrics files, see metrics.h.
 *
 * The whole file is read into one table before anyone sees it, so a
 * malformed line near the end is reported before a replay has printed
 * anything. Layer names are found through a small open-addressing hash,
 * with the table's order tried first: files list layers in the same order
 * in every window, so a row costs one comparison.
 */
#include "metrics.h"

#include "common/errbuf.h"

#include <bellows/error.h>

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define METRICS_NAME_MAX 255 /* bytes of a layer name, as agents */
#define METRICS_SHOWN    40  /* bytes of a bad value quoted in a message */

enum metrics_col {
	COL_WINDOW,
	COL_LAYER,
	COL_GRAD_NORM,
	COL_LR,
	COL_REQUIRED, /* columns before this one are required */
	COL_NUMEL = COL_REQUIRED,
	COL_SHAPE,
	COL_N,
};

static const char *const metrics_col_names[COL_N] = {
	"window",
	"layer",
	"grad_norm",
	"lr",
	"numel",
	"shape",
};

/* What a row says about its layer's size. */
typedef struct metrics_size {
	bool has_numel;               /* numel given */
	bool has_shape;               /* shape given */
	uint64_t numel;               /* elements, 0 if unknown */
	uint32_t ndim;                /* dimensions given */
	uint32_t shape[COM_MAX_NDIM]; /* given dimensions */
} metrics_size;

typedef struct metrics_parse {
	const char *name;     /* file name in messages */
	char *errbuf;         /* message destination */
	size_t errlen;        /* its size */
	uint64_t line;        /* current line number, from 1 */
	uint64_t header_line; /* the header's line, 0 before it */
	int col[COL_N];       /* field index of each column, -1 = absent */
	uint32_t n_cols;      /* fields in the header */
	char **field;         /* the current line's fields, in its buffer */
	uint32_t cap_field;   /* entries allocated in field */
	tool_metrics *m;      /* the table being built */
	metrics_size *size;   /* per layer: what the first window said */
	uint32_t cap_layers;  /* entries allocated in layers and size */
	uint64_t cap_windows; /* entries allocated in window and lr */
	size_t cap_norm;      /* doubles allocated in grad_norm */
	uint32_t *hash;       /* layer index + 1 per slot, 0 = empty */
	uint32_t hash_cap;    /* slots, a power of two */
	uint8_t *seen;        /* per layer: listed in the current window */
	uint32_t n_seen;      /* layers listed in the current window */
	uint64_t window_line; /* line of the current window's first row */
	uint64_t bytes;       /* bytes read so far */
	bool table_fixed;     /* the first window is complete */
} metrics_parse;

__attribute__((format(printf, 4, 5))) static int
metrics_fail(metrics_parse *p, int code, uint64_t line, const char *fmt, ...)
{
	va_list ap;
	int n;

	n = snprintf(p->errbuf, p->errlen, "%s:%" PRIu64 ": ", p->name, line);
	if (n >= 0 && (size_t)n < p->errlen) {
		va_start(ap, fmt);
		com_verrf(p->errbuf + n, p->errlen - (size_t)n, fmt, ap);
		va_end(ap);
	}
	return code;
}

/* ---- growing arrays ---------------------------------------------------- */

static int
metrics_grow(void **arr, size_t elem, size_t need, size_t *cap)
{
	size_t nc;
	void *g;

	if (need <= *cap)
		return 0;
	nc = *cap ? *cap : 16;
	while (nc < need) {
		if (nc > SIZE_MAX / 2 / elem)
			return BELLOWS_ENOMEM;
		nc *= 2;
	}
	if ((g = realloc(*arr, nc * elem)) == NULL)
		return BELLOWS_ENOMEM;
	*arr = g;
	*cap = nc;
	return 0;
}

/* ---- layer names ------------------------------------------------------- */

static uint32_t
metrics_hash_name(const char *s)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	for (; *s != '\0'; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

static void
metrics_hash_put(metrics_parse *p, uint32_t index)
{
	uint32_t mask = p->hash_cap - 1;
	uint32_t i = metrics_hash_name(p->m->layers[index].name) & mask;

	while (p->hash[i] != 0)
		i = (i + 1) & mask;
	p->hash[i] = index + 1;
}

/* Makes room for one more name: at most half the slots are used. */
static int
metrics_hash_reserve(metrics_parse *p)
{
	uint32_t cap = p->hash_cap ? p->hash_cap : 64;
	uint32_t *old = p->hash, old_cap = p->hash_cap;

	if (2 * ((uint64_t)p->m->n_layers + 1) <= p->hash_cap)
		return 0;
	while (2 * ((uint64_t)p->m->n_layers + 1) > cap)
		cap *= 2;
	if ((p->hash = calloc(cap, sizeof(*p->hash))) == NULL) {
		p->hash = old;
		return BELLOWS_ENOMEM;
	}
	p->hash_cap = cap;
	for (uint32_t i = 0; i < old_cap; i++) {
		if (old[i] != 0)
			metrics_hash_put(p, old[i] - 1);
	}
	free(old);
	return 0;
}

/* Index of layer `name` in the table, or -1. `guess` is tried first. */
static int64_t
metrics_find(const metrics_parse *p, const char *name, uint32_t guess)
{
	const tool_metrics *m = p->m;
	uint32_t mask, i;

	if (guess < m->n_layers && strcmp(m->layers[guess].name, name) == 0)
		return guess;
	if (p->hash_cap == 0)
		return -1;
	mask = p->hash_cap - 1;
	for (i = metrics_hash_name(name) & mask; p->hash[i] != 0;
	     i = (i + 1) & mask) {
		if (strcmp(m->layers[p->hash[i] - 1].name, name) == 0)
			return p->hash[i] - 1;
	}
	return -1;
}

/* ---- fields ------------------------------------------------------------ */

static bool
metrics_blank(char c)
{
	return c == ' ' || c == '\t';
}

/* Splits line `s` in place into p->field. Returns 0, BELLOWS_EINVAL (a
 * quoting error, reported) or BELLOWS_ENOMEM. */
static int
metrics_split(metrics_parse *p, char *s, uint32_t *ret_n)
{
	uint32_t n = 0;
	char term;

	do {
		char *start, *end;
		size_t cap = p->cap_field;

		if (metrics_grow((void **)&p->field, sizeof(*p->field), n + 1,
			&cap) != 0)
			return BELLOWS_ENOMEM;
		p->cap_field = (uint32_t)cap;
		while (metrics_blank(*s))
			s++;
		start = end = s;
		if (*s == '"') {
			for (s++;; s++) {
				if (*s == '\0')
					return metrics_fail(p, BELLOWS_EINVAL,
					    p->line,
					    "field %u: unterminated quoted "
					    "field",
					    n + 1);
				if (*s == '"' && s[1] != '"')
					break;
				if (*s == '"')
					s++; /* "" stands for one quote */
				*end++ = *s;
			}
			for (s++; metrics_blank(*s); s++)
				;
			if (*s != ',' && *s != '\0')
				return metrics_fail(p, BELLOWS_EINVAL, p->line,
				    "field %u: text after a quoted field",
				    n + 1);
		} else {
			for (; *s != ',' && *s != '\0'; s++) {
				if (*s == '"')
					return metrics_fail(p, BELLOWS_EINVAL,
					    p->line,
					    "field %u: a quote inside an "
					    "unquoted field",
					    n + 1);
			}
			for (end = s; end > start && metrics_blank(end[-1]);
			     end--)
				;
		}
		/* end <= s: cutting the field may overwrite the comma. */
		term = *s++;
		*end = '\0';
		p->field[n++] = start;
	} while (term == ',');
	*ret_n = n;
	return 0;
}

/* ---- values ------------------------------------------------------------ */

static bool
metrics_parse_u64(const char *s, uint64_t *ret)
{
	unsigned long long v;
	char *end;

	if (s[0] < '0' || s[0] > '9')
		return false;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || *end != '\0')
		return false;
	*ret = (uint64_t)v;
	return true;
}

/* A finite number >= 0 from column `col`. */
static int
metrics_value(metrics_parse *p, enum metrics_col col, double *ret)
{
	const char *s = p->field[p->col[col]], *what = metrics_col_names[col];
	char *end;
	double v;

	if (s[0] == '\0')
		return metrics_fail(p, BELLOWS_EINVAL, p->line, "%s is empty",
		    what);
	errno = 0;
	v = strtod(s, &end);
	if (*end != '\0' || end == s || metrics_blank(s[0]))
		return metrics_fail(p, BELLOWS_EINVAL, p->line,
		    "%s: '%.*s' is not a number", what, METRICS_SHOWN, s);
	if (!isfinite(v))
		return metrics_fail(p, BELLOWS_EINVAL, p->line,
		    "%s must be finite, not '%.*s'", what, METRICS_SHOWN, s);
	if (v < 0)
		return metrics_fail(p, BELLOWS_EINVAL, p->line,
		    "%s must be >= 0, not '%.*s'", what, METRICS_SHOWN, s);
	*ret = v;
	return 0;
}

static int
metrics_layer_name(metrics_parse *p, const char **ret)
{
	const char *s = p->field[p->col[COL_LAYER]];
	size_t n = strlen(s);

	if (n == 0)
		return metrics_fail(p, BELLOWS_EINVAL, p->line,
		    "layer name is empty");
	if (n > METRICS_NAME_MAX)
		return metrics_fail(p, BELLOWS_EINVAL, p->line,
		    "layer name is longer than %d bytes", METRICS_NAME_MAX);
	for (size_t i = 0; i < n; i++) {
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return metrics_fail(p, BELLOWS_EINVAL, p->line,
			    "layer name contains control characters");
	}
	*ret = s;
	return 0;
}

/* The row's numel and shape columns, checked against each other. */
static int
metrics_row_size(metrics_parse *p, metrics_size *ret)
{
	const char *numel = p->col[COL_NUMEL] >= 0 ? p->field[p->col[COL_NUMEL]]
						   : "";
	const char *shape = p->col[COL_SHAPE] >= 0 ? p->field[p->col[COL_SHAPE]]
						   : "";
	metrics_size z = { 0 };
	uint64_t product = 1;

	if (numel[0] != '\0') {
		if (!metrics_parse_u64(numel, &z.numel) || z.numel == 0)
			return metrics_fail(p, BELLOWS_EINVAL, p->line,
			    "numel: '%.*s' is not a count (an integer >= 1)",
			    METRICS_SHOWN, numel);
		z.has_numel = true;
	}
	if (shape[0] != '\0') {
		const char *s = shape;

		for (;;) {
			char dim[32];
			size_t n = strcspn(s, "x");
			uint64_t v;

			if (z.ndim == COM_MAX_NDIM)
				return metrics_fail(p, BELLOWS_EINVAL, p->line,
				    "shape '%.*s' has more than %d dimensions",
				    METRICS_SHOWN, shape, COM_MAX_NDIM);
			if (n == 0 || n >= sizeof(dim))
				goto bad_shape;
			memcpy(dim, s, n);
			dim[n] = '\0';
			if (!metrics_parse_u64(dim, &v) || v == 0 ||
			    v > UINT32_MAX)
				goto bad_shape;
			z.shape[z.ndim++] = (uint32_t)v;
			if (product > UINT64_MAX / v)
				return metrics_fail(p, BELLOWS_EINVAL, p->line,
				    "shape '%.*s' has too many elements",
				    METRICS_SHOWN, shape);
			product *= v;
			if (s[n] == '\0')
				break;
			s += n + 1;
		}
		z.has_shape = true;
		if (z.has_numel && z.numel != product)
			return metrics_fail(p, BELLOWS_EINVAL, p->line,
			    "shape %.*s has %" PRIu64
			    " elements, numel says %" PRIu64,
			    METRICS_SHOWN, shape, product, z.numel);
		z.numel = product;
	}
	*ret = z;
	return 0;
bad_shape:
	return metrics_fail(p, BELLOWS_EINVAL, p->line,
	    "shape: '%.*s' is not a shape like 64x32 (dimensions >= 1 "
	    "joined by x)",
	    METRICS_SHOWN, shape);
}

static bool
metrics_size_same(const metrics_size *a, const metrics_size *b)
{
	if (a->has_numel != b->has_numel || a->has_shape != b->has_shape ||
	    a->numel != b->numel || a->ndim != b->ndim)
		return false;
	return memcmp(a->shape, b->shape, sizeof(uint32_t) * a->ndim) == 0;
}

/* ---- the table --------------------------------------------------------- */

/* Appends layer `name` to the table being built from the first window. */
static int
metrics_add_layer(metrics_parse *p, const char *name, const metrics_size *sz)
{
	tool_metrics *m = p->m;
	com_layer_info *li;
	size_t cap = p->cap_layers, cap2 = p->cap_layers;

	if (m->n_layers == TOOL_METRICS_MAX_LAYERS)
		return metrics_fail(p, BELLOWS_ELIMIT, p->line,
		    "more than %d layers", TOOL_METRICS_MAX_LAYERS);
	if (metrics_grow((void **)&m->layers, sizeof(*m->layers),
		m->n_layers + 1, &cap) != 0 ||
	    metrics_grow((void **)&p->size, sizeof(*p->size), m->n_layers + 1,
		&cap2) != 0 ||
	    metrics_hash_reserve(p) != 0)
		return BELLOWS_ENOMEM;
	/* Both grew from the same capacity by the same rule. */
	p->cap_layers = (uint32_t)cap;
	li = &m->layers[m->n_layers];
	memset(li, 0, sizeof(*li));
	if ((li->name = com_strdup(name)) == NULL)
		return BELLOWS_ENOMEM;
	li->numel = sz->numel;
	if (sz->has_shape) {
		li->ndim = sz->ndim;
		memcpy(li->shape, sz->shape, sizeof(uint32_t) * sz->ndim);
	} else {
		/* Unknown dimensions: 2-D, so that the default selectors
		 * (min_ndim 2) act on the layer as on a weight matrix. */
		li->ndim = 2;
		m->n_unshaped++;
	}
	p->size[m->n_layers] = *sz;
	m->n_layers++;
	metrics_hash_put(p, m->n_layers - 1);
	return 0;
}

/* Checks that the current window listed every layer. */
static int
metrics_end_window(metrics_parse *p)
{
	tool_metrics *m = p->m;

	if (m->n_windows == 0)
		return 0;
	if (!p->table_fixed) {
		p->table_fixed = true;
		p->seen = calloc(m->n_layers, 1);
		return p->seen == NULL ? BELLOWS_ENOMEM : 0;
	}
	if (p->n_seen == m->n_layers)
		return 0;
	for (uint32_t l = 0; l < m->n_layers; l++) {
		if (!p->seen[l])
			return metrics_fail(p, BELLOWS_EINVAL, p->window_line,
			    "window %" PRIu64 " lacks layer '%s'",
			    m->window[m->n_windows - 1], m->layers[l].name);
	}
	return 0;
}

static int
metrics_begin_window(metrics_parse *p, uint64_t window, double lr)
{
	tool_metrics *m = p->m;
	size_t cap = p->cap_windows, cap2 = p->cap_windows;
	int r;

	if (m->n_windows > 0 && window < m->window[m->n_windows - 1])
		return metrics_fail(p, BELLOWS_EINVAL, p->line,
		    "window %" PRIu64 " after window %" PRIu64
		    ": rows must be grouped by window in increasing order",
		    window, m->window[m->n_windows - 1]);
	if ((r = metrics_end_window(p)) != 0)
		return r;
	if (metrics_grow((void **)&m->window, sizeof(*m->window),
		m->n_windows + 1, &cap) != 0 ||
	    metrics_grow((void **)&m->lr, sizeof(*m->lr), m->n_windows + 1,
		&cap2) != 0)
		return BELLOWS_ENOMEM;
	p->cap_windows = cap;
	if (p->table_fixed) {
		size_t need = (size_t)(m->n_windows + 1) * m->n_layers;

		if (metrics_grow((void **)&m->grad_norm, sizeof(double), need,
			&p->cap_norm) != 0)
			return BELLOWS_ENOMEM;
		memset(p->seen, 0, m->n_layers);
	}
	m->window[m->n_windows] = window;
	m->lr[m->n_windows] = lr;
	m->n_windows++;
	p->n_seen = 0;
	p->window_line = p->line;
	return 0;
}

static int
metrics_row(metrics_parse *p, char *line)
{
	tool_metrics *m = p->m;
	const char *name = NULL;
	metrics_size sz;
	uint64_t window;
	double norm, lr;
	int64_t l;
	uint32_t n;
	int r;

	if ((r = metrics_split(p, line, &n)) != 0)
		return r;
	if (n != p->n_cols)
		return metrics_fail(p, BELLOWS_EINVAL, p->line,
		    "%u fields, the header has %u", n, p->n_cols);
	if (!metrics_parse_u64(p->field[p->col[COL_WINDOW]], &window))
		return metrics_fail(p, BELLOWS_EINVAL, p->line,
		    "window: '%.*s' is not a window index (an integer >= 0)",
		    METRICS_SHOWN, p->field[p->col[COL_WINDOW]]);
	if ((r = metrics_layer_name(p, &name)) != 0 ||
	    (r = metrics_value(p, COL_GRAD_NORM, &norm)) != 0 ||
	    (r = metrics_value(p, COL_LR, &lr)) != 0 ||
	    (r = metrics_row_size(p, &sz)) != 0)
		return r;
	if (m->n_windows == 0 || window != m->window[m->n_windows - 1]) {
		if ((r = metrics_begin_window(p, window, lr)) != 0)
			return r;
	} else if (lr != m->lr[m->n_windows - 1]) {
		return metrics_fail(p, BELLOWS_EINVAL, p->line,
		    "lr %.17g differs from %.17g on line %" PRIu64
		    ", the first row of window %" PRIu64,
		    lr, m->lr[m->n_windows - 1], p->window_line, window);
	}
	l = metrics_find(p, name, p->table_fixed ? p->n_seen : m->n_layers);
	if (!p->table_fixed) {
		if (l >= 0)
			return metrics_fail(p, BELLOWS_EINVAL, p->line,
			    "layer '%s' appears twice in window %" PRIu64, name,
			    window);
		if ((r = metrics_add_layer(p, name, &sz)) != 0)
			return r;
		l = m->n_layers - 1;
		if (metrics_grow((void **)&m->grad_norm, sizeof(double),
			m->n_layers, &p->cap_norm) != 0)
			return BELLOWS_ENOMEM;
		m->grad_norm[l] = norm;
		return 0;
	}
	if (l < 0)
		return metrics_fail(p, BELLOWS_EINVAL, p->line,
		    "layer '%s' is not in the table of window %" PRIu64
		    " (the first window fixes the layers)",
		    name, m->window[0]);
	if (p->seen[l])
		return metrics_fail(p, BELLOWS_EINVAL, p->line,
		    "layer '%s' appears twice in window %" PRIu64, name,
		    window);
	if (!metrics_size_same(&sz, &p->size[l]))
		return metrics_fail(p, BELLOWS_EINVAL, p->line,
		    "layer '%s' has another numel or shape than in window "
		    "%" PRIu64,
		    name, m->window[0]);
	p->seen[l] = 1;
	p->n_seen++;
	m->grad_norm[(size_t)(m->n_windows - 1) * m->n_layers +
	    (size_t)l] = norm;
	return 0;
}

static int
metrics_header(metrics_parse *p, char *line)
{
	uint32_t n;
	int r;

	for (int c = 0; c < COL_N; c++)
		p->col[c] = -1;
	if ((r = metrics_split(p, line, &n)) != 0)
		return r;
	for (uint32_t i = 0; i < n; i++) {
		int c;

		for (c = 0; c < COL_N; c++) {
			if (strcmp(p->field[i], metrics_col_names[c]) == 0)
				break;
		}
		if (c == COL_N)
			return metrics_fail(p, BELLOWS_EINVAL, p->line,
			    "unknown column '%.*s' (columns: window, layer, "
			    "grad_norm, lr, and optionally numel, shape)",
			    METRICS_SHOWN, p->field[i]);
		if (p->col[c] >= 0)
			return metrics_fail(p, BELLOWS_EINVAL, p->line,
			    "column '%s' appears twice", metrics_col_names[c]);
		p->col[c] = (int)i;
	}
	for (int c = 0; c < COL_REQUIRED; c++) {
		if (p->col[c] < 0)
			return metrics_fail(p, BELLOWS_EINVAL, p->line,
			    "missing column '%s' (the header needs window, "
			    "layer, grad_norm and lr)",
			    metrics_col_names[c]);
	}
	p->n_cols = n;
	p->header_line = p->line;
	return 0;
}

/* Handles one line (without its newline). */
static int
metrics_line(metrics_parse *p, char *line, size_t len)
{
	char *s = line;

	if (strlen(line) != len)
		return metrics_fail(p, BELLOWS_EINVAL, p->line,
		    "the line contains a NUL byte");
	if (p->line == 1 && strncmp(s, "\xef\xbb\xbf", 3) == 0)
		s += 3; /* a UTF-8 byte order mark, as spreadsheets write */
	while (metrics_blank(*s))
		s++;
	if (*s == '\0')
		return 0;
	if (p->header_line == 0)
		return metrics_header(p, s);
	return metrics_row(p, s);
}

static void
metrics_parse_fini(metrics_parse *p)
{
	free(p->field);
	free(p->size);
	free(p->hash);
	free(p->seen);
	tool_metrics_destroy(&p->m);
}

/* Reads the next line of f into buf (TOOL_METRICS_LINE_MAX + 1 bytes),
 * without its newline, and counts its bytes into p->bytes. Returns 1 with
 * *ret_len set, 0 at the end of the file, or a refusal naming the line: a
 * line longer than TOOL_METRICS_LINE_MAX, a file beyond max_bytes. The
 * bounds keep a reader of /dev/zero or of a file without newlines from
 * holding more than one line's buffer. */
static int
metrics_getline(metrics_parse *p, FILE *f, uint64_t max_bytes, char *buf,
    size_t *ret_len)
{
	size_t len = 0;
	int c;

	while ((c = getc(f)) != EOF) {
		if (++p->bytes > max_bytes)
			return metrics_fail(p, BELLOWS_ELIMIT, p->line + 1,
			    "the file is larger than %" PRIu64
			    " bytes, the most a metrics file may hold",
			    max_bytes);
		if (c == '\n')
			break;
		if (len == TOOL_METRICS_LINE_MAX)
			return metrics_fail(p, BELLOWS_ELIMIT, p->line + 1,
			    "the line is longer than %d bytes",
			    TOOL_METRICS_LINE_MAX);
		buf[len++] = (char)c;
	}
	if (c == EOF && len == 0)
		return 0;
	buf[len] = '\0';
	*ret_len = len;
	return 1;
}

int
tool_metrics_read(FILE *f, const char *name, tool_metrics **ret_m, char *errbuf,
    size_t errlen)
{
	return tool_metrics_read_max(f, name, TOOL_METRICS_FILE_MAX, ret_m,
	    errbuf, errlen);
}

int
tool_metrics_read_max(FILE *f, const char *name, uint64_t max_bytes,
    tool_metrics **ret_m, char *errbuf, size_t errlen)
{
	metrics_parse p = { .name = name, .errbuf = errbuf, .errlen = errlen };
	char *line = NULL;
	size_t len = 0;
	int r = 0;

	errbuf[0] = '\0';
	if ((p.m = calloc(1, sizeof(*p.m))) == NULL ||
	    (line = malloc(TOOL_METRICS_LINE_MAX + 1)) == NULL) {
		r = BELLOWS_ENOMEM;
		goto fail;
	}
	while ((r = metrics_getline(&p, f, max_bytes, line, &len)) == 1) {
		p.line++;
		while (
		    len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = '\0';
		if ((r = metrics_line(&p, line, len)) != 0)
			goto fail;
	}
	if (r != 0)
		goto fail;
	if (ferror(f)) {
		r = metrics_fail(&p, BELLOWS_EIO, p.line + 1, "read error: %s",
		    strerror(errno));
		goto fail;
	}
	if (p.header_line == 0) {
		r = metrics_fail(&p, BELLOWS_EINVAL, p.line ? p.line : 1,
		    "no header: expected columns window, layer, grad_norm, "
		    "lr");
		goto fail;
	}
	if (p.m->n_windows == 0) {
		r = metrics_fail(&p, BELLOWS_EINVAL, p.header_line,
		    "no rows after the header");
		goto fail;
	}
	if ((r = metrics_end_window(&p)) != 0)
		goto fail;
	free(line);
	*ret_m = p.m;
	p.m = NULL;
	metrics_parse_fini(&p);
	return 0;
fail:
	if (r == BELLOWS_ENOMEM)
		snprintf(errbuf, errlen, "%s: %s", name, bellows_strerror(r));
	free(line);
	metrics_parse_fini(&p);
	return r;
}

int
tool_metrics_load(const char *path, tool_metrics **ret_m, char *errbuf,
    size_t errlen)
{
	FILE *f;
	int r;

	if (strcmp(path, "-") == 0)
		return tool_metrics_read(stdin, "<stdin>", ret_m, errbuf,
		    errlen);
	if ((f = fopen(path, "r")) == NULL) {
		snprintf(errbuf, errlen, "%s: %s", path, strerror(errno));
		return BELLOWS_EIO;
	}
	r = tool_metrics_read(f, path, ret_m, errbuf, errlen);
	fclose(f);
	return r;
}

void
tool_metrics_destroy(tool_metrics **m)
{
	tool_metrics *t;

	if (m == NULL || *m == NULL)
		return;
	t = *m;
	for (uint32_t l = 0; l < t->n_layers; l++)
		free(t->layers[l].name);
	free(t->layers);
	free(t->window);
	free(t->lr);
	free(t->grad_norm);
	free(t);
	*m = NULL;
}

void
tool_metrics_number_text(double v, char *buf, size_t len)
{
	/* 17 significant digits always round-trip; fewer are tried first
	 * because most values (0.4, 1e-3) were typed with few digits. */
	for (int prec = 15; prec <= 17; prec++) {
		snprintf(buf, len, "%.*g", prec, v);
		if (prec == 17 || strtod(buf, NULL) == v || isnan(v))
			return;
	}
}

int
tool_metrics_put_number(FILE *f, double v)
{
	char buf[TOOL_NUMBER_TEXT_MAX];

	tool_metrics_number_text(v, buf, sizeof(buf));
	return fputs(buf, f) < 0 ? BELLOWS_EIO : 0;
}

int
tool_metrics_put_field(FILE *f, const char *s)
{
	size_t n = strlen(s);
	bool quote = strpbrk(s, ",\"\r\n") != NULL ||
	    (n > 0 && (metrics_blank(s[0]) || metrics_blank(s[n - 1])));

	if (!quote)
		return fputs(s, f) < 0 ? BELLOWS_EIO : 0;
	if (fputc('"', f) == EOF)
		return BELLOWS_EIO;
	for (; *s != '\0'; s++) {
		if ((*s == '"' && fputc('"', f) == EOF) || fputc(*s, f) == EOF)
			return BELLOWS_EIO;
	}
	return fputc('"', f) == EOF ? BELLOWS_EIO : 0;
}

void
tool_metrics_shape_text(const uint32_t *shape, uint32_t ndim, char *buf,
    size_t len)
{
	size_t used = 0;

	if (len == 0)
		return;
	buf[0] = '\0';
	for (uint32_t i = 0; i < ndim && used < len; i++) {
		int n = snprintf(buf + used, len - used, "%s%" PRIu32,
		    i ? "x" : "", shape[i]);

		if (n < 0)
			break;
		used += (size_t)n;
	}
}
