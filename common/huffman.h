/* huffman - GComp's exponent code: a canonical, length-limited Huffman code
 * over the 256 float32 exponents, with an escape.
 *
 * Built from a 256-bin histogram of biased exponents (the histogram
 * statistic, summed over ranks), by the policy in bellowsd and by
 * `bellows codec table`, and read back by the codec on every rank: both
 * sides link this one module, so a table means the same code everywhere.
 *
 * Construction (com_huff_build), deterministic, ties always broken by the
 * lower symbol:
 *   1. Native Huffman code lengths over the symbols of non-zero count
 *      (two lightest nodes merged first; equal weights: the node holding
 *      the lowest symbol first).
 *   2. The escaped set: every symbol of count 0, and every symbol whose
 *      native length exceeds max_code_bits (the paper's "overly long
 *      codes"). While more than 2^max_code_bits - 1 symbols are left,
 *      the lightest (highest symbol on ties) is escaped too, so that the
 *      escape always has room.
 *   3. The kept symbols and one more symbol, ESC (weight: the summed
 *      counts of the escaped symbols; it sorts after symbol 255 on ties),
 *      get optimal code lengths of at most max_code_bits by package-merge.
 *      That fixes the escape's own length: the one that minimises the
 *      expected length of the histogram's code, at most max_code_bits. An
 *      unused escape (weight 0) gets the longest length.
 *   4. Canonical codes from the lengths: sorted by (length, symbol, ESC
 *      last), each code the previous plus one, shifted left as the length
 *      grows; codes are read most significant bit first.
 * An escaped exponent is written as the escape's code followed by its 8
 * raw bits (most significant first). The escape always exists, so any
 * exponent can be encoded with any table.
 *
 * Serialised table (com_huff_write/com_huff_read), COM_HUFF_TABLE_BYTES
 * bytes, little-endian:
 *   bytes 0-3     'B' 'G' 'H' 'T'       magic
 *   byte  4       COM_HUFF_FORMAT (1)   format version
 *   byte  5       max_code_bits         1..COM_HUFF_MAX_BITS
 *   byte  6       escape length         1..max_code_bits
 *   byte  7       0                     reserved
 *   bytes 8-11    table version         uint32, the caller's (the policy's)
 *   bytes 12-267  code lengths          one byte per exponent, 0 = escaped
 * Only lengths travel; the codes follow from them (step 4). A received
 * table is checked (com_huff_from_lengths): every length at most
 * max_code_bits, an escape, and a Kraft sum of at most 1 (which, for
 * canonical codes, is exactly "is a prefix code"); a sum below 1 (an
 * incomplete code) is accepted, its unused codes are decode errors.
 *
 * Pure functions, no allocation, any thread. Errors: 0 or a negative
 * BELLOWS_E*; outputs untouched on failure.
 */
#ifndef COM_HUFFMAN_H
#define COM_HUFFMAN_H

#include <stddef.h>
#include <stdint.h>

#define COM_HUFF_SYMBOLS      256 /* exponents: float32's biased exponent */
#define COM_HUFF_RAW_BITS     8   /* bits of an escaped exponent */
#define COM_HUFF_MAX_BITS     15  /* most max_code_bits allowed */
#define COM_HUFF_DEFAULT_BITS 8   /* the paper's n_theta */
#define COM_HUFF_FORMAT       1   /* serialised format version */
#define COM_HUFF_TABLE_BYTES  268 /* bytes of a serialised table */

/* A table: lengths (what travels) and the canonical codes they give. */
typedef struct com_huff_table {
	uint32_t version;   /* the caller's table version */
	uint8_t max_bits;   /* longest code, 1..COM_HUFF_MAX_BITS */
	uint8_t esc_len;    /* the escape's code length, 1..max_bits */
	uint16_t esc_code;  /* the escape's code (low esc_len bits) */
	uint8_t len[256];   /* code length per exponent, 0 = escaped */
	uint16_t code[256]; /* canonical code (low len bits), 0 if escaped */
} com_huff_table;

/* Builds the table of hist (256 counts) with codes of at most max_bits
 * bits (see the header comment), tagged `version`, into *ret. An empty
 * histogram gives a table where every exponent is escaped and the escape
 * is 1 bit. Returns 0; BELLOWS_EINVAL for NULL pointers or max_bits
 * outside 1..COM_HUFF_MAX_BITS. */
int com_huff_build(const uint64_t *hist, unsigned max_bits, uint32_t version,
    com_huff_table *ret);

/* Checks lengths (256 bytes, 0 = escaped) and esc_len against max_bits
 * and fills *ret with the canonical codes. Returns 0; BELLOWS_EINVAL for
 * NULL pointers; BELLOWS_EPROTO for max_bits out of range, a length above
 * max_bits, an escape length of 0 or above max_bits, or a Kraft sum above
 * 1 (not a prefix code); errbuf (may be NULL) then says which. */
int com_huff_from_lengths(const uint8_t *lengths, unsigned esc_len,
    unsigned max_bits, uint32_t version, com_huff_table *ret, char *errbuf,
    size_t errlen);

/* Writes t as COM_HUFF_TABLE_BYTES bytes to out (cap bytes available).
 * Returns 0; BELLOWS_EINVAL for NULL pointers; BELLOWS_EMSGSIZE when cap
 * is too small. */
int com_huff_write(const com_huff_table *t, uint8_t *out, size_t cap);

/* Reads a serialised table from the first bytes of buf (len bytes; bytes
 * after the table are left alone, *ret_used may be NULL and gets
 * COM_HUFF_TABLE_BYTES) and checks it as com_huff_from_lengths. Returns 0;
 * BELLOWS_EINVAL for NULL pointers; BELLOWS_EPROTO for a short buffer, a
 * wrong magic, a non-zero reserved byte or a bad table, BELLOWS_EVERSION
 * for another format version; errbuf (may be NULL) says which and at what
 * byte offset. */
int com_huff_read(const uint8_t *buf, size_t len, com_huff_table *ret,
    size_t *ret_used, char *errbuf, size_t errlen);

/* Returns the mean bits per exponent of hist under t (an escaped exponent
 * costs esc_len + 8): the cross-entropy a policy compares with
 * com_huff_entropy. 0 for an empty histogram or NULL pointers. */
double com_huff_bits(const com_huff_table *t, const uint64_t *hist);

/* Returns the entropy of hist in bits per exponent (the bound no table
 * beats); 0 for an empty histogram or NULL. */
double com_huff_entropy(const uint64_t *hist);

#endif /* COM_HUFFMAN_H */
