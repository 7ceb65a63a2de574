/*
 * check_load.c — the files of a plan: reading them and splicing includes.
 *
 * Takes a path (or text already in memory) and gives its statements with every
 * `include "PATH";` replaced by the statements of PATH, relative to the
 * including file.  Only regular files of at most MAX_SOURCE_BYTES are read (no
 * devices, FIFOs or directories: reading them could hang or never end);
 * cycles and nesting deeper than MAX_INCLUDE_DEPTH are errors at the include;
 * more than MAX_INCLUDED_FILES files or MAX_INCLUDED_BYTES of text read for
 * one plan (an include repeated by includes multiplies) is one error at the
 * plan file's include that led there.
 */
#include "check.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------------ includes */

/* Reads fd to its end, at most MAX_SOURCE_BYTES; the text in the arena, or
 * NULL with *why set. */
static char *read_text_fd(Arena *arena, int fd, const char **why)
{
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    if (!buf) PARC_BUG("out of memory");
    for (;;) {
        if (len == cap) {
            cap *= 2;
            char *grown = realloc(buf, cap);
            if (!grown) PARC_BUG("out of memory");
            buf = grown;
        }
        ssize_t got = read(fd, buf + len, cap - len);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            free(buf);
            *why = strerror(errno);
            return NULL;
        }
        if (got == 0) break;
        len += (size_t)got;
        if (len > MAX_SOURCE_BYTES) {
            free(buf);
            *why = "it is larger than 16 MiB, parc's limit for one file";
            return NULL;
        }
    }
    if (memchr(buf, '\0', len)) {
        free(buf);
        *why = "it contains NUL bytes (not a text file)";
        return NULL;
    }
    char *text = arena_strndup(arena, buf, len);
    free(buf);
    return text;
}

char *check_read_whole_file(Arena *arena, const char *path, int regular_only, const char **why)
{
    /* O_NONBLOCK for includes: opening a FIFO must not wait for a writer; it
     * is refused below like every other file that is not a regular one. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | (regular_only ? O_NONBLOCK : 0));
    if (fd < 0) {
        *why = strerror(errno);
        return NULL;
    }
    struct stat st;
    char *text = NULL;
    if (fstat(fd, &st) != 0)
        *why = strerror(errno);
    else if (S_ISDIR(st.st_mode))
        *why = "it is a directory";
    else if (regular_only && !S_ISREG(st.st_mode))
        *why = "it is not a regular file (a device, FIFO or socket)";
    else if ((uintmax_t)st.st_size > MAX_SOURCE_BYTES)
        *why = "it is larger than 16 MiB, parc's limit for one file";
    else if (regular_only && fcntl(fd, F_SETFL, 0) != 0)
        *why = strerror(errno);
    else
        text = read_text_fd(arena, fd, why);
    close(fd);
    return text;
}

char *check_read_stdin_text(Arena *arena, const char **why) { return read_text_fd(arena, 0, why); }

/* The canonical name of a file for cycle detection. */
const char *check_canonical_path(Check *c, const char *path)
{
    char *real = realpath(path, NULL);
    if (!real) return path;
    const char *s = arena_strdup(c->arena, real);
    free(real);
    return s;
}

static int load_includes(Check *c, StmtList *list, const char *file);

int check_parse_file(Check *c, const char *path, const char *text, StmtList *out)
{
    diag_add_source(path, text);
    if (ast_parse(c->arena, path, text, out) != 0) return -1;
    return load_includes(c, out, path);
}

/* Replaces every `include "PATH";` in list (at any depth) by the statements of
 * PATH, relative to the directory of `file`.  0 on success. */
static int load_includes(Check *c, StmtList *list, const char *file)
{
    int rc = 0;
    StmtList out = {0};
    for (int i = 0; i < list->count; i++) {
        Stmt *st = list->items[i];
        if (strcmp(st->key, "include") != 0) {
            if (st->has_body && load_includes(c, &st->body, file) != 0) rc = -1;
            ARR_PUSH(c->arena, out.items, out.count, out.cap, st);
            continue;
        }
        if (st->arrow || st->nvalues != 1 || st->values[0].kind != VAL_STRING || st->has_body) {
            diag_error(check_stmt_span(st), "write it like `include \"common/tiny_gpt.par\";`",
                       "`include` takes one file name in quotes");
            rc = -1;
            continue;
        }
        const Value *v = &st->values[0];
        const char *name = v->text;
        if (c->include_depth == 1) c->root_include = v->loc;
        if (c->includes_over) {
            rc = -1;
            continue;
        }
        const char *path = name;
        const char *slash = strrchr(file, '/');
        if (name[0] != '/' && slash)
            path = arena_printf(c->arena, "%.*s/%s", (int)(slash - file), file, name);
        const char *canon = check_canonical_path(c, path);
        int cycle = 0;
        for (int k = 0; k < c->include_depth; k++)
            if (strcmp(c->include_stack[k], canon) == 0) cycle = 1;
        if (cycle) {
            diag_error(v->loc, "a file cannot include itself, directly or through other files",
                       "include cycle: `%s` is already being included", name);
            rc = -1;
            continue;
        }
        if (c->include_depth >= MAX_INCLUDE_DEPTH) {
            diag_error(v->loc, NULL, "includes nest deeper than %d files", MAX_INCLUDE_DEPTH);
            rc = -1;
            continue;
        }
        const char *why = NULL;
        errno = 0;
        char *text = check_read_whole_file(c->arena, path, 1, &why);
        if (!text) {
            diag_error(v->loc, errno == ENOENT ? "include paths are relative to the including file" : NULL,
                       "cannot include `%s`: %s",
                       name, why);
            rc = -1;
            continue;
        }
        c->included_files++;
        c->included_bytes += (int64_t)strlen(text);
        if (c->included_files > MAX_INCLUDED_FILES || c->included_bytes > MAX_INCLUDED_BYTES) {
            diag_error(c->root_include,
                       "an include that other includes repeat multiplies: include each fragment once, from the plan",
                       "this include expands to more than %d included files or %lld MiB of included text",
                       MAX_INCLUDED_FILES, (long long)(MAX_INCLUDED_BYTES >> 20));
            c->includes_over = 1;
            rc = -1;
            continue;
        }
        StmtList sub;
        c->include_stack[c->include_depth++] = canon;
        if (check_parse_file(c, path, text, &sub) != 0) rc = -1;
        c->include_depth--;
        for (int k = 0; k < sub.count; k++) ARR_PUSH(c->arena, out.items, out.count, out.cap, sub.items[k]);
    }
    *list = out;
    return rc;
}

