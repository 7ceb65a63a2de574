/*
 * prt_safetensors.h — writing and reading safetensors files (the format
 * Hugging Face's safetensors library and PyTorch load): an 8-byte little-endian
 * header length, a JSON header mapping each tensor name to its dtype, shape and
 * data_offsets (begin, end: bytes from the end of the header), plus a
 * "__metadata__" map of strings, then the raw little-endian data.
 *
 * Plain C over cJSON and zlib, no MPI and no runtime context, so the compiler's
 * `parc export` uses it too.  Every function reports a problem as text in
 * `err` (naming the file and, where there is one, the tensor) and returns -1 /
 * NULL; nothing here exits.
 */
#ifndef PRT_SAFETENSORS_H
#define PRT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The safetensors dtype name of a prt dtype ("F32", "BF16", "F16", "I32"), or NULL. */
const char *prt_st_dtype_name(int64_t dtype);
/* The prt dtype of a safetensors dtype name, or -1. */
int64_t prt_st_dtype_of(const char *name);

/* One tensor to write: `bytes` bytes at `data` (host memory), `ndim` dims. */
typedef struct prt_st_tensor {
    const char *name;
    int64_t dtype;
    int64_t ndim;
    int64_t shape[8];
    const void *data;
    size_t bytes;
} prt_st_tensor;

/* Writes `path` (created or truncated): the header with every tensor and the
 * string pairs of `metadata` (may be NULL: an object of string values), then
 * the data in table order; fsyncs the file before closing it.  Returns 0, or -1
 * with err filled. */
int prt_st_write(const char *path, const prt_st_tensor *tensors, int64_t count, const cJSON *metadata, char *err,
                 size_t errsize);

/* An open safetensors file: its header parsed and checked against its size. */
typedef struct prt_st_file {
    char *path;
    FILE *f;
    cJSON *header;        /* the whole header object */
    uint64_t data_start;  /* 8 + header length */
    uint64_t size;        /* the file's bytes */
} prt_st_file;

/* Opens and checks `path`: header length within the file, header valid JSON,
 * every tensor's data_offsets inside the file.  Returns NULL with err filled. */
prt_st_file *prt_st_open(const char *path, char *err, size_t errsize);
/* Reads tensor `name` into dst (exactly `bytes` bytes, its dtype `dtype`).
 * Errors name the file and the tensor: absent, another dtype or size, a short read. */
int prt_st_read(prt_st_file *st, const char *name, int64_t dtype, void *dst, size_t bytes, char *err, size_t errsize);
/* Reads bytes [offset, offset + bytes) of tensor `name`, whose whole size must
 * be `total` bytes, into dst; errors as prt_st_read's. */
int prt_st_read_part(prt_st_file *st, const char *name, int64_t dtype, size_t total, size_t offset, void *dst,
                     size_t bytes, char *err, size_t errsize);
void prt_st_close(prt_st_file *st);

/* Copies the `count` elements of a saved shard into `global` (a whole tensor of
 * ndim dims gdims, elements of esize bytes) and sets have[g] for each: the shard
 * holds elements first, first + 1, ... of the row-major block local_dims at
 * offset (a ZeRO share of a tensor-parallel block; first = 0 and count = the
 * block's size when unsharded). */
void prt_st_scatter_shard(int64_t ndim, const int64_t *gdims, const int64_t *offset, const int64_t *local_dims,
                          int64_t first, int64_t count, const void *shard, void *global, char *have, size_t esize);

/* CRC-32 (zlib's) of `bytes` bytes, as 8 lowercase hex digits into out[9]. */
void prt_st_crc32_hex(const void *data, size_t bytes, char out[9]);
/* The same in pieces: crc = prt_st_crc32_update(0, piece, n) over the pieces in
 * order, then prt_st_crc32_format(crc, out). */
uint32_t prt_st_crc32_update(uint32_t crc, const void *data, size_t bytes);
void prt_st_crc32_format(uint32_t crc, char out[9]);

/* Creates/truncates `path`, writes `text`, fsyncs and closes; 0 or -1 (errno set). */
int prt_write_file_synced(const char *path, const char *text, size_t len);
/* The JSON document in file `path` (a manifest, an index, a config.json), or
 * NULL with err filled: the file cannot be opened or read, or is not JSON. */
cJSON *prt_read_json(const char *path, char *err, size_t errsize);
/* fsync of a directory (after a rename into it); 0 or -1 (errno set). */
int prt_fsync_dir(const char *path);

#ifdef __cplusplus
}
#endif
#endif
