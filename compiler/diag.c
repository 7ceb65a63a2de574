/*
 * diag.c — user diagnostics and compiler-bug aborts.
 *
 * A diagnostic is `file:line:col: level: message`, then the source line, then a
 * caret line (`^~~~`) under the span, then `  hint: ...` when there is one.  A
 * location without a file prints `parc: level: message`; one with a file but
 * line 0 prints `file: level: message` (a whole-file problem).  Source lines come
 * from the texts registered with diag_add_source (not copied: they must outlive
 * the diagnostics).  Counters are global to the process; diag_reset zeroes them.
 */
#include "parc.h"

#include <stdlib.h>
#include <string.h>

typedef struct DiagSource {
    char *file; /* owned copy: the caller's name may live in a freed arena later */
    const char *text;
} DiagSource;

static FILE *diag_stream_;
static int diag_errors, diag_warnings;
static DiagSource *diag_sources;
static int diag_nsources, diag_cap_sources;

void diag_set_stream(FILE *stream) { diag_stream_ = stream; }

static FILE *diag_stream(void) { return diag_stream_ ? diag_stream_ : stderr; }

int diag_error_count(void) { return diag_errors; }
int diag_warning_count(void) { return diag_warnings; }

void diag_reset(void)
{
    diag_errors = diag_warnings = 0;
    for (int i = 0; i < diag_nsources; i++) free(diag_sources[i].file);
    free(diag_sources);
    diag_sources = NULL;
    diag_nsources = diag_cap_sources = 0;
}

void diag_add_source(const char *file, const char *text)
{
    if (!file || !text) return;
    for (int i = 0; i < diag_nsources; i++) {
        if (strcmp(diag_sources[i].file, file) == 0) {
            diag_sources[i].text = text; /* the newest text of a file wins */
            return;
        }
    }
    if (diag_nsources == diag_cap_sources) {
        int cap = diag_cap_sources ? diag_cap_sources * 2 : 8;
        DiagSource *grown = realloc(diag_sources, (size_t)cap * sizeof(*grown));
        if (!grown) return; /* no source line then; the message still prints */
        diag_sources = grown;
        diag_cap_sources = cap;
    }
    char *name = strdup(file);
    if (!name) return;
    diag_sources[diag_nsources++] = (DiagSource){name, text};
}

/* The text of line `line` (1-based) of `file`, its length in *len; NULL when the
 * file was not registered or is shorter. */
static const char *diag_source_line(const char *file, int line, int *len)
{
    const char *text = NULL;
    for (int i = diag_nsources - 1; i >= 0; i--) {
        if (strcmp(diag_sources[i].file, file) == 0) {
            text = diag_sources[i].text;
            break;
        }
    }
    if (!text || line < 1) return NULL;
    for (int l = 1; l < line; l++) {
        const char *nl = strchr(text, '\n');
        if (!nl) return NULL;
        text = nl + 1;
    }
    const char *end = strchr(text, '\n');
    size_t n = end ? (size_t)(end - text) : strlen(text);
    if (n > 0 && text[n - 1] == '\r') n--;
    *len = n > 100000 ? 100000 : (int)n;
    return text;
}

static const char *const diag_level_names[] = {"error", "warning", "note"};

void diag_report(DiagLevel level, SrcLoc loc, const char *hint, const char *fmt, ...)
{
    FILE *out = diag_stream();
    if (level == DIAG_ERROR) diag_errors++;
    if (level == DIAG_WARNING) diag_warnings++;
    const char *level_name = diag_level_names[level];

    if (!loc.file)
        fprintf(out, "parc: %s: ", level_name);
    else if (loc.line < 1)
        fprintf(out, "%s: %s: ", loc.file, level_name);
    else
        fprintf(out, "%s:%d:%d: %s: ", loc.file, loc.line, loc.col, level_name);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(out, fmt, ap);
    va_end(ap);
    fputc('\n', out);

    int len = 0;
    const char *line = loc.file && loc.line >= 1 ? diag_source_line(loc.file, loc.line, &len) : NULL;
    if (line) {
        /* Control bytes print as spaces so a binary file cannot garble the terminal. */
        fputs("  ", out);
        for (int i = 0; i < len; i++) {
            unsigned char ch = (unsigned char)line[i];
            fputc(ch == '\t' || ch >= 0x20 ? ch : ' ', out);
        }
        fputc('\n', out);
        /* Caret: the prefix keeps tabs so the caret lines up under tab-indented text. */
        int col = loc.col < 1 ? 1 : loc.col;
        if (col > len + 1) col = len + 1;
        fputs("  ", out);
        for (int i = 0; i < col - 1; i++) fputc(line[i] == '\t' ? '\t' : ' ', out);
        int span = loc.len < 1 ? 1 : loc.len;
        if (col - 1 + span > len) span = len - (col - 1) > 1 ? len - (col - 1) : 1;
        fputc('^', out);
        for (int i = 1; i < span; i++) fputc('~', out);
        fputc('\n', out);
    }
    if (hint) fprintf(out, "  hint: %s\n", hint);
}

/* Edit distance (Levenshtein plus adjacent transpositions), case-insensitive; words longer than 63 bytes are not
 * compared (nothing that long is a plausible typo of a keyword). */
static int diag_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63) return 1 << 20;
    /* Three rows: an adjacent transposition (`pd` for `dp`) costs one edit. */
    int rows[3][64];
    int *before = rows[0], *prev = rows[1], *cur = rows[2];
    for (size_t j = 0; j <= lb; j++) prev[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            char ca = a[i - 1], cb = b[j - 1];
            if (ca >= 'A' && ca <= 'Z') ca = (char)(ca - 'A' + 'a');
            if (cb >= 'A' && cb <= 'Z') cb = (char)(cb - 'A' + 'a');
            int best = prev[j - 1] + (ca == cb ? 0 : 1);
            if (prev[j] + 1 < best) best = prev[j] + 1;
            if (cur[j - 1] + 1 < best) best = cur[j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && before[j - 2] + 1 < best)
                best = before[j - 2] + 1;
            cur[j] = best;
        }
        int *t = before;
        before = prev;
        prev = cur;
        cur = t;
    }
    return prev[lb];
}

const char *diag_closest(const char *word, const char *const *candidates, int count)
{
    if (!word || !*word) return NULL;
    size_t n = strlen(word);
    /* A suggestion must be closer than about a third of the word; short words
     * get one edit. */
    int limit = n <= 3 ? 1 : (int)(n + 2) / 3;
    const char *best = NULL;
    int best_distance = limit + 1;
    for (int i = 0; i < count; i++) {
        if (!candidates[i]) continue;
        int d = diag_edit_distance(word, candidates[i]);
        if (d < best_distance) {
            best_distance = d;
            best = candidates[i];
        }
    }
    return best;
}

_Noreturn void parc_internal_error(const char *file, int line, const char *fmt, ...)
{
    fflush(stdout);
    fprintf(stderr, "parc: internal error at %s:%d: ", file, line);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    abort();
}
