/* kern_cuda_gcomp_host - the CUDA GComp codec's host side: orders the launches
 * of kern_cuda_gcomp.cu, copies the chunk sizes and headers the host needs, and
 * checks a block's headers as the CPU decoder does before any chunk is decoded.
 * Its per-chunk scratch is the caller's (kern_cuda_gcomp_scratch), grown
 * when a block has more chunks than it holds, so that a steady run makes
 * no allocation per call; reads and waits on the caller's stream,
 * so a block written there just before is complete when its headers are
 * read. Also uploads a table for libbellows' public twin (agent/agent_gcomp.c).
 */
#include "kern_cuda_gcomp_launch.h"

#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include <bellows/error.h>

#include "kern_cuda_codec.h"
#include "common/errbuf.h"

/* The codecs' mapping: BELLOWS_ENOTSUP without a device or code for it,
 * BELLOWS_ENOMEM, BELLOWS_EINVAL for a pointer the runtime refuses,
 * BELLOWS_EIO otherwise. */
static int
gh_rc(cudaError_t e)
{
	return kern_cuda_codec_rc((int)e);
}

static uint32_t
gh_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	    (uint32_t)p[3] << 24;
}

static uint64_t
gh_le64(const uint8_t *p)
{
	return (uint64_t)gh_le32(p) | (uint64_t)gh_le32(p + 4) << 32;
}

void
kern_cuda_gcomp_scratch_free(kern_cuda_gcomp_scratch *w)
{
	if (w == NULL)
		return;
	if (w->dev != NULL)
		(void)cudaFree(w->dev);
	w->dev = NULL;
	w->chunks = 0;
}

/* Makes w hold at least `chunks` chunks and points *offsets, *sizes and
 * *status (each may be NULL) at their parts. The calls below wait for
 * their stream before they return, so nothing queued still uses memory
 * that is freed here. Returns 0 or a BELLOWS_E*. */
static int
gh_scratch(kern_cuda_gcomp_scratch *w, uint64_t chunks, uint64_t **offsets,
    uint32_t **sizes, uint32_t **status)
{
	char *p;

	if (w == NULL)
		return BELLOWS_EINVAL;
	if (w->chunks < chunks) {
		uint64_t want = chunks * 2;
		int rc;

		kern_cuda_gcomp_scratch_free(w);
		if ((rc = gh_rc(cudaMalloc(&w->dev, want * 24))) < 0) {
			w->dev = NULL;
			return rc;
		}
		w->chunks = want;
	}
	p = w->dev;
	if (offsets != NULL)
		*offsets = (uint64_t *)(void *)p;
	if (sizes != NULL)
		*sizes = (uint32_t *)(void *)(p + 8 * w->chunks);
	if (status != NULL)
		*status = (uint32_t *)(void *)(p + 20 * w->chunks);
	return 0;
}

int
kern_cuda_gcomp_encode_block(const kern_gcomp_table *t,
    const kern_gcomp_table *t_dev, int dtype, const void *x, uint64_t n,
    int level, const uint8_t *levels, uint8_t *out, size_t cap,
    size_t *ret_bytes, uint64_t *ret_bits, kern_cuda_gcomp_scratch *w,
    void *stream)
{
	uint64_t chunks = (n + KERN_GCOMP_CHUNK - 1) / KERN_GCOMP_CHUNK;
	uint64_t off = KERN_GCOMP_HEADER + chunks * KERN_GCOMP_CHUNK_HEADER;
	cudaStream_t s = (cudaStream_t)stream;
	uint32_t *sizes = NULL, *h_sizes = NULL;
	uint64_t *offsets = NULL, *h_off = NULL;
	uint8_t head[KERN_GCOMP_HEADER];
	int rc = 0;

	if (dtype != KERN_F32 && dtype != KERN_F16 && dtype != KERN_BF16)
		return BELLOWS_EINVAL;
	if (level < 0 || level > 3)
		return BELLOWS_EINVAL;
	if (cap < off)
		return BELLOWS_EMSGSIZE;
	h_sizes = malloc(chunks * 3 * sizeof(*h_sizes) + 1);
	h_off = malloc(chunks * sizeof(*h_off) + 1);
	if (h_sizes == NULL || h_off == NULL) {
		rc = BELLOWS_ENOMEM;
		goto fail;
	}
	if (chunks > 0) {
		if ((rc = gh_scratch(w, chunks, &offsets, &sizes, NULL)) < 0)
			goto fail;
		if ((rc = gh_rc((cudaError_t)kern_cuda_gcomp_sizes(t_dev, dtype,
			 x, n, level, levels, sizes, chunks, stream))) < 0 ||
		    (rc = gh_rc(cudaMemcpyAsync(h_sizes, sizes,
			 chunks * 3 * sizeof(*sizes), cudaMemcpyDeviceToHost,
			 s))) < 0 ||
		    (rc = gh_rc(cudaStreamSynchronize(s))) < 0)
			goto fail;
	}
	if (ret_bits != NULL)
		ret_bits[0] = ret_bits[1] = ret_bits[2] = 0;
	for (uint64_t c = 0; c < chunks; c++) {
		h_off[c] = off;
		for (int k = 0; ret_bits != NULL && k < 3; k++)
			ret_bits[k] += h_sizes[3 * c + k];
		off += ((uint64_t)h_sizes[3 * c] + 7) / 8 +
		    ((uint64_t)h_sizes[3 * c + 1] + 7) / 8 +
		    ((uint64_t)h_sizes[3 * c + 2] + 7) / 8;
	}
	if (off > cap) {
		rc = BELLOWS_EMSGSIZE;
		goto fail;
	}
	memcpy(head, "BGCB", 4);
	head[4] = KERN_GCOMP_FORMAT;
	head[5] = (uint8_t)dtype;
	head[6] = head[7] = 0;
	for (int i = 0; i < 4; i++) {
		head[8 + i] = (uint8_t)(t->h.version >> (8 * i));
		head[12 + i] = (uint8_t)(chunks >> (8 * i));
	}
	for (int i = 0; i < 8; i++) {
		head[16 + i] = (uint8_t)(n >> (8 * i));
		head[24 + i] = (uint8_t)(off >> (8 * i));
	}
	if ((rc = gh_rc(cudaMemcpyAsync(out, head, sizeof(head),
		 cudaMemcpyHostToDevice, s))) < 0)
		goto fail;
	if (chunks > 0 &&
	    ((rc = gh_rc(cudaMemcpyAsync(offsets, h_off,
		  chunks * sizeof(*offsets), cudaMemcpyHostToDevice, s))) < 0 ||
		(rc = gh_rc((cudaError_t)kern_cuda_gcomp_encode(t_dev, dtype, x,
		     n, level, levels, sizes, offsets, chunks, out, stream))) <
		    0))
		goto fail;
	if ((rc = gh_rc(cudaStreamSynchronize(s))) < 0)
		goto fail;
	if (ret_bytes != NULL)
		*ret_bytes = (size_t)off;
fail:
	free(h_sizes);
	free(h_off);
	return rc;
}

int
kern_cuda_gcomp_decode_block(const kern_gcomp_table *t,
    const kern_gcomp_table *t_dev, const uint8_t *in, size_t bytes, int dtype,
    void *out, uint64_t n, int add, char *errbuf, size_t errlen,
    kern_cuda_gcomp_scratch *w, void *stream)
{
	cudaStream_t s = (cudaStream_t)stream;
	uint8_t head[KERN_GCOMP_HEADER];
	uint8_t *ch = NULL;
	uint32_t *status = NULL, *h_status = NULL;
	uint64_t bn, block, chunks, expect, done = 0;
	uint32_t version;
	int bdtype, rc;

	if (bytes < sizeof(head)) {
		com_errf(errbuf, errlen, "byte %zu: block header truncated",
		    bytes);
		return BELLOWS_EPROTO;
	}
	/* On the stream, so that the block's writers come first. */
	if ((rc = gh_rc(cudaMemcpyAsync(head, in, sizeof(head),
		 cudaMemcpyDeviceToHost, s))) < 0 ||
	    (rc = gh_rc(cudaStreamSynchronize(s))) < 0)
		return rc;
	if (memcmp(head, "BGCB", 4) != 0) {
		com_errf(errbuf, errlen,
		    "byte 0: not a GComp block (magic 'BGCB' expected)");
		return BELLOWS_EPROTO;
	}
	if (head[4] != KERN_GCOMP_FORMAT) {
		com_errf(errbuf, errlen, "byte 4: block format %u", head[4]);
		return BELLOWS_EVERSION;
	}
	bn = gh_le64(head + 16);
	bdtype = head[5];
	version = gh_le32(head + 8);
	block = gh_le64(head + 24);
	chunks = gh_le32(head + 12);
	if (block > bytes) {
		com_errf(errbuf, errlen,
		    "byte %zu: block truncated (%llu bytes "
		    "expected)",
		    bytes, (unsigned long long)block);
		return BELLOWS_EPROTO;
	}
	if (chunks > n ||
	    block < KERN_GCOMP_HEADER + chunks * KERN_GCOMP_CHUNK_HEADER) {
		com_errf(errbuf, errlen, "byte 12: bad chunk count or length");
		return BELLOWS_EPROTO;
	}
	if (bdtype != dtype || bn != n || version != t->h.version) {
		com_errf(errbuf, errlen,
		    "byte 5: block of %llu values, dtype %d, table version %u "
		    "where %llu, %d, %u are expected",
		    (unsigned long long)bn, bdtype, version,
		    (unsigned long long)n, dtype, t->h.version);
		return BELLOWS_EMISMATCH;
	}
	ch = malloc(chunks * KERN_GCOMP_CHUNK_HEADER + 1);
	h_status = calloc(chunks + 1, sizeof(*h_status));
	if (ch == NULL || h_status == NULL) {
		rc = BELLOWS_ENOMEM;
		goto fail;
	}
	if (chunks > 0 &&
	    ((rc = gh_rc(cudaMemcpyAsync(ch, in + KERN_GCOMP_HEADER,
		  chunks * KERN_GCOMP_CHUNK_HEADER, cudaMemcpyDeviceToHost,
		  s))) < 0 ||
		(rc = gh_rc(cudaStreamSynchronize(s))) < 0))
		goto fail;
	expect = KERN_GCOMP_HEADER + chunks * KERN_GCOMP_CHUNK_HEADER;
	for (uint64_t c = 0; c < chunks; c++) {
		const uint8_t *h = ch + c * KERN_GCOMP_CHUNK_HEADER;
		uint64_t m = gh_le32(h + 8);
		uint64_t len = ((uint64_t)gh_le32(h + 12) + 7) / 8 +
		    ((uint64_t)gh_le32(h + 16) + 7) / 8 +
		    ((uint64_t)gh_le32(h + 20) + 7) / 8;

		if (gh_le64(h) != expect || m == 0 || m > n - done ||
		    (c + 1 < chunks && m != KERN_GCOMP_CHUNK) ||
		    len > block - expect) {
			com_errf(errbuf, errlen,
			    "byte %llu: chunk %llu does not tile the block",
			    (unsigned long long)(KERN_GCOMP_HEADER +
				c * KERN_GCOMP_CHUNK_HEADER),
			    (unsigned long long)c);
			rc = BELLOWS_EPROTO;
			goto fail;
		}
		done += m;
		expect += len;
	}
	if (done != n || expect != block) {
		com_errf(errbuf, errlen,
		    "byte 12: chunks do not hold the block");
		rc = BELLOWS_EPROTO;
		goto fail;
	}
	if (chunks == 0)
		goto fail; /* rc is 0: nothing to decode */
	if ((rc = gh_scratch(w, chunks, NULL, NULL, &status)) < 0 ||
	    (rc = gh_rc((cudaError_t)kern_cuda_gcomp_decode(t_dev, in, chunks,
		 dtype, out, add, status, stream))) < 0 ||
	    (rc = gh_rc(cudaMemcpyAsync(h_status, status,
		 chunks * sizeof(*status), cudaMemcpyDeviceToHost, s))) < 0 ||
	    (rc = gh_rc(cudaStreamSynchronize(s))) < 0)
		goto fail;
	for (uint64_t c = 0; c < chunks; c++) {
		if (h_status[c] != 0) {
			com_errf(errbuf, errlen, "byte %llu: chunk %llu: %s",
			    (unsigned long long)gh_le64(
				ch + c * KERN_GCOMP_CHUNK_HEADER),
			    (unsigned long long)c,
			    h_status[c] == 1 ? "a code no exponent has"
				: h_status[c] == 2
				? "an exponent no float16 has"
				: "segment lengths other than decoding used");
			rc = BELLOWS_EPROTO;
			goto fail;
		}
	}
fail:
	free(ch);
	free(h_status);
	return rc;
}

int
kern_cuda_gcomp_table_upload(const kern_gcomp_table *t,
    kern_gcomp_table **ret_dev)
{
	kern_gcomp_table *dev = NULL;
	int rc = gh_rc(cudaMalloc((void **)&dev, sizeof(*dev)));

	if (rc < 0)
		return rc;
	if ((rc = gh_rc(
		 cudaMemcpy(dev, t, sizeof(*t), cudaMemcpyHostToDevice))) < 0) {
		cudaFree(dev);
		return rc;
	}
	*ret_dev = dev;
	return 0;
}

void
kern_cuda_gcomp_table_free(kern_gcomp_table *dev)
{
	if (dev != NULL)
		cudaFree(dev);
}
