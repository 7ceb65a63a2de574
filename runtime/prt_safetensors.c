/*
 * prt_safetensors.c — safetensors files, written and read (prt_safetensors.h
 * has the format and the contract).  The header lists tensors in the order they
 * are written; it is padded with spaces to a multiple of 8 bytes so the data of
 * every tensor starts 8-byte aligned, as the reference implementation does.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "parc_rt.h"
#include "prt_safetensors.h"

static int fail(char *err, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t size, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, size, fmt, ap);
    va_end(ap);
    return -1;
}

const char *prt_st_dtype_name(int64_t dtype) {
    switch (dtype) {
    case PRT_F32: return "F32";
    case PRT_BF16: return "BF16";
    case PRT_F16: return "F16";
    case PRT_I32: return "I32";
    case PRT_U8: return "U8";
    }
    return NULL;
}

int64_t prt_st_dtype_of(const char *name) {
    for (int64_t d = 0; d < PRT_NDTYPE; d++)
        if (name && prt_st_dtype_name(d) && !strcmp(prt_st_dtype_name(d), name)) return d;
    return -1;
}

uint32_t prt_st_crc32_update(uint32_t crc, const void *data, size_t bytes) {
    uLong c = crc;
    const Bytef *p = data;
    while (bytes > 0) {  /* zlib takes uInt lengths */
        uInt n = bytes > (1u << 30) ? (1u << 30) : (uInt)bytes;
        c = crc32(c, p, n);
        p += n;
        bytes -= n;
    }
    return (uint32_t)c;
}

void prt_st_crc32_format(uint32_t crc, char out[9]) { snprintf(out, 9, "%08lx", (unsigned long)crc); }

void prt_st_crc32_hex(const void *data, size_t bytes, char out[9]) {
    prt_st_crc32_format(prt_st_crc32_update(0, data, bytes), out);
}

static int write_all(int fd, const void *data, size_t bytes) {
    const char *p = data;
    while (bytes > 0) {
        ssize_t n = write(fd, p, bytes > (1u << 30) ? (1u << 30) : bytes);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        p += n;
        bytes -= (size_t)n;
    }
    return 0;
}

int prt_write_file_synced(const char *path, const char *text, size_t len) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    if (fd < 0) return -1;
    if (write_all(fd, text, len) != 0 || fsync(fd) != 0) {
        int e = errno ? errno : EIO;
        close(fd);
        errno = e;
        return -1;
    }
    return close(fd);
}

cJSON *prt_read_json(const char *path, char *err, size_t errsize) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fail(err, errsize, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    char *text = NULL;
    size_t len = 0, cap = 0, got;
    do {  /* grown as it reads: a pipe or a file that changes size reads whole too */
        if (cap - len < 4096) {
            cap = cap ? 2 * cap : 65536;
            char *grown = realloc(text, cap + 1);
            if (!grown) {
                free(text);
                fclose(f);
                fail(err, errsize, "%s: out of memory reading it", path);
                return NULL;
            }
            text = grown;
        }
        got = fread(text + len, 1, cap - len, f);
        len += got;
    } while (got > 0);
    int bad = ferror(f);
    fclose(f);
    text[len] = 0;
    cJSON *j = bad ? NULL : cJSON_Parse(text);
    free(text);
    if (!j) fail(err, errsize, bad ? "%s: cannot read it" : "%s: corrupted: not JSON", path);
    return j;
}

int prt_fsync_dir(const char *path) {
    int fd = open(path, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

int prt_st_write(const char *path, const prt_st_tensor *tensors, int64_t count, const cJSON *metadata, char *err,
                 size_t errsize) {
    cJSON *header = cJSON_CreateObject();
    if (metadata) cJSON_AddItemToObject(header, "__metadata__", cJSON_Duplicate(metadata, 1));
    uint64_t offset = 0;
    for (int64_t i = 0; i < count; i++) {
        const prt_st_tensor *t = &tensors[i];
        const char *dt = prt_st_dtype_name(t->dtype);
        if (!dt || t->ndim < 0 || t->ndim > 8) {
            cJSON_Delete(header);
            return fail(err, errsize, "%s: tensor %s: bad dtype or rank", path, t->name);
        }
        cJSON *entry = cJSON_AddObjectToObject(header, t->name);
        cJSON_AddStringToObject(entry, "dtype", dt);
        cJSON *shape = cJSON_AddArrayToObject(entry, "shape");
        for (int64_t d = 0; d < t->ndim; d++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[d]));
        cJSON *offsets = cJSON_AddArrayToObject(entry, "data_offsets");
        cJSON_AddItemToArray(offsets, cJSON_CreateNumber((double)offset));
        cJSON_AddItemToArray(offsets, cJSON_CreateNumber((double)(offset + t->bytes)));
        offset += t->bytes;
    }
    char *text = cJSON_PrintUnformatted(header);
    cJSON_Delete(header);
    size_t len = strlen(text), padded = (len + 7) & ~(size_t)7;
    char *head = malloc(8 + padded);
    if (!head) {
        free(text);
        return fail(err, errsize, "%s: out of memory for the header", path);
    }
    uint64_t hlen = padded;
    for (int b = 0; b < 8; b++) head[b] = (char)(hlen >> (8 * b));  /* little-endian */
    memcpy(head + 8, text, len);
    memset(head + 8 + len, ' ', padded - len);
    free(text);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    if (fd < 0) {
        free(head);
        return fail(err, errsize, "%s: cannot create: %s", path, strerror(errno));
    }
    int bad = write_all(fd, head, 8 + padded);
    free(head);
    for (int64_t i = 0; !bad && i < count; i++) bad = write_all(fd, tensors[i].data, tensors[i].bytes);
    if (!bad) bad = fsync(fd);
    int e = errno ? errno : EIO;
    if (close(fd) != 0 && !bad) bad = 1, e = errno;
    if (bad) return fail(err, errsize, "%s: cannot write: %s", path, strerror(e));
    return 0;
}

/* data_offsets of a header entry, checked to be two whole numbers inside the data. */
static int entry_range(const prt_st_file *st, const cJSON *entry, uint64_t *begin, uint64_t *end) {
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(entry, "data_offsets");
    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2) return -1;
    const cJSON *a = cJSON_GetArrayItem(off, 0), *b = cJSON_GetArrayItem(off, 1);
    if (!cJSON_IsNumber(a) || !cJSON_IsNumber(b) || a->valuedouble < 0 || b->valuedouble < a->valuedouble) return -1;
    *begin = (uint64_t)a->valuedouble;
    *end = (uint64_t)b->valuedouble;
    return *end <= st->size - st->data_start ? 0 : 1;
}

prt_st_file *prt_st_open(const char *path, char *err, size_t errsize) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fail(err, errsize, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat sb;
    unsigned char lenbytes[8];
    if (fstat(fileno(f), &sb) != 0 || fread(lenbytes, 1, 8, f) != 8) {
        fail(err, errsize, "%s: truncated: shorter than the 8-byte header length", path);
        fclose(f);
        return NULL;
    }
    uint64_t hlen = 0;
    for (int b = 7; b >= 0; b--) hlen = hlen << 8 | lenbytes[b];
    if (hlen > (uint64_t)sb.st_size - 8 || hlen > (100u << 20)) {
        fail(err, errsize, "%s: truncated or not a safetensors file: header of %" PRIu64 " bytes, file of %lld",
             path, hlen, (long long)sb.st_size);
        fclose(f);
        return NULL;
    }
    char *text = malloc(hlen + 1);
    if (!text || fread(text, 1, hlen, f) != hlen) {
        free(text);
        fail(err, errsize, "%s: cannot read the header", path);
        fclose(f);
        return NULL;
    }
    text[hlen] = 0;
    cJSON *header = cJSON_Parse(text);
    free(text);
    if (!cJSON_IsObject(header)) {
        cJSON_Delete(header);
        fail(err, errsize, "%s: corrupted: the header is not a JSON object", path);
        fclose(f);
        return NULL;
    }
    prt_st_file *st = calloc(1, sizeof *st);
    st->path = strdup(path);
    st->f = f;
    st->header = header;
    st->data_start = 8 + hlen;
    st->size = (uint64_t)sb.st_size;
    const cJSON *entry;
    cJSON_ArrayForEach(entry, header) {
        if (!strcmp(entry->string, "__metadata__")) continue;
        uint64_t b, e;
        int r = entry_range(st, entry, &b, &e);
        if (r != 0) {
            if (r < 0) fail(err, errsize, "%s: corrupted: tensor %s has no valid data_offsets", path, entry->string);
            else
                fail(err, errsize, "%s: truncated: tensor %s needs data bytes %" PRIu64 "..%" PRIu64
                     ", the file holds %" PRIu64, path, entry->string, b, e, st->size - st->data_start);
            prt_st_close(st);
            return NULL;
        }
    }
    return st;
}

int prt_st_read(prt_st_file *st, const char *name, int64_t dtype, void *dst, size_t bytes, char *err, size_t errsize) {
    const cJSON *entry = cJSON_GetObjectItemCaseSensitive(st->header, name);
    if (!cJSON_IsObject(entry)) return fail(err, errsize, "%s: has no tensor %s", st->path, name);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(entry, "dtype");
    if (!cJSON_IsString(dt) || prt_st_dtype_of(dt->valuestring) != dtype)
        return fail(err, errsize, "%s: tensor %s: dtype %s, expected %s", st->path, name,
                    cJSON_IsString(dt) ? dt->valuestring : "?", prt_st_dtype_name(dtype));
    uint64_t b = 0, e = 0;
    entry_range(st, entry, &b, &e);  /* checked at open */
    if (e - b != bytes)
        return fail(err, errsize, "%s: tensor %s: %" PRIu64 " bytes, expected %zu", st->path, name, e - b, bytes);
    if (fseeko(st->f, (off_t)(st->data_start + b), SEEK_SET) != 0 || fread(dst, 1, bytes, st->f) != bytes)
        return fail(err, errsize, "%s: tensor %s: short read", st->path, name);
    return 0;
}

int prt_st_read_part(prt_st_file *st, const char *name, int64_t dtype, size_t total, size_t offset, void *dst,
                     size_t bytes, char *err, size_t errsize) {
    const cJSON *entry = cJSON_GetObjectItemCaseSensitive(st->header, name);
    if (!cJSON_IsObject(entry)) return fail(err, errsize, "%s: has no tensor %s", st->path, name);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(entry, "dtype");
    if (!cJSON_IsString(dt) || prt_st_dtype_of(dt->valuestring) != dtype)
        return fail(err, errsize, "%s: tensor %s: dtype %s, expected %s", st->path, name,
                    cJSON_IsString(dt) ? dt->valuestring : "?", prt_st_dtype_name(dtype));
    uint64_t b = 0, e = 0;
    entry_range(st, entry, &b, &e);  /* checked at open */
    if (e - b != total || offset > total || bytes > total - offset)
        return fail(err, errsize, "%s: tensor %s: %" PRIu64 " bytes, expected %zu", st->path, name, e - b, total);
    if (fseeko(st->f, (off_t)(st->data_start + b + offset), SEEK_SET) != 0 || fread(dst, 1, bytes, st->f) != bytes)
        return fail(err, errsize, "%s: tensor %s: short read", st->path, name);
    return 0;
}

void prt_st_close(prt_st_file *st) {
    if (!st) return;
    if (st->f) fclose(st->f);
    cJSON_Delete(st->header);
    free(st->path);
    free(st);
}

void prt_st_scatter_shard(int64_t ndim, const int64_t *gdims, const int64_t *offset, const int64_t *local_dims,
                          int64_t first, int64_t count, const void *shard, void *global, char *have, size_t esize) {
    const char *src = shard;
    char *dst = global;
    for (int64_t e = 0; e < count; e++) {
        int64_t rem = first + e, idx[8], g = 0;  /* local flat -> local multi-index -> global flat */
        for (int64_t k = ndim - 1; k >= 0; k--) {
            idx[k] = rem % local_dims[k] + offset[k];
            rem /= local_dims[k];
        }
        for (int64_t k = 0; k < ndim; k++) g = g * gdims[k] + idx[k];
        memcpy(dst + (size_t)g * esize, src + (size_t)e * esize, esize);
        have[g] = 1;
    }
}
