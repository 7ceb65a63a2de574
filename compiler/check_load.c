/*
 * check_load.c — the files of a plan: reading them and splicing includes.
 *
 * Takes a path (or text already in memory) and gives its statements with every
 * `include "PATH";` replaced by the statements of PATH, relative to the
 * including file.  Only regular files of at most MAX_SOURCE_BYTES are read (no
 * devices, FIFOs or directories: reading them could hang or never end);
 * cycles and nesting deeper than MAX_INCLUDE_DEPTH are errors at the include.
 */
#include "check.h"

#include <errno.h>
#include <stdlib.h>

/* ------------------------------------------------------------ includes */

char *read_whole_file(Arena *arena, const char *path, const char **why)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        *why = strerror(errno);
        return NULL;
    }
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    if (!buf) PARC_BUG("out of memory");
    size_t got;
    while ((got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (cap - len - 1 == 0) {
            cap *= 2;
            char *grown = realloc(buf, cap);
            if (!grown) PARC_BUG("out of memory");
            buf = grown;
        }
    }
    int failed = ferror(f);
    fclose(f);
    if (failed) {
        free(buf);
        *why = "read error";
        return NULL;
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

/* The canonical name of a file for cycle detection. */
const char *canonical_path(Check *c, const char *path)
{
    char *real = realpath(path, NULL);
    if (!real) return path;
    const char *s = arena_strdup(c->arena, real);
    free(real);
    return s;
}

static int load_includes(Check *c, StmtList *list, const char *file);

int parse_file(Check *c, const char *path, const char *text, StmtList *out)
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
            diag_error(stmt_span(st), "write it like `include \"common/tiny_gpt.par\";`",
                       "`include` takes one file name in quotes");
            rc = -1;
            continue;
        }
        const Value *v = &st->values[0];
        const char *name = v->text;
        const char *path = name;
        const char *slash = strrchr(file, '/');
        if (name[0] != '/' && slash)
            path = arena_printf(c->arena, "%.*s/%s", (int)(slash - file), file, name);
        const char *canon = canonical_path(c, path);
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
        char *text = read_whole_file(c->arena, path, &why);
        if (!text) {
            diag_error(v->loc, "include paths are relative to the including file", "cannot include `%s`: %s",
                       name, why);
            rc = -1;
            continue;
        }
        StmtList sub;
        c->include_stack[c->include_depth++] = canon;
        if (parse_file(c, path, text, &sub) != 0) rc = -1;
        c->include_depth--;
        for (int k = 0; k < sub.count; k++) ARR_PUSH(c->arena, out.items, out.count, out.cap, sub.items[k]);
    }
    *list = out;
    return rc;
}

