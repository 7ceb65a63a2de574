/*
 * diag.c — user diagnostics and compiler-bug aborts.
 *
 * A diagnostic is `file:line:col: level: message`, then the source line, then a
 * caret line (`^~~~`) under the span, then `  hint: ...` when there is one.  A
 * location without a file prints `parc: level: message`; one with a file but
 * line 0 prints `file: level: message` (a whole-file problem).  Source lines come
 * from the texts registered with diag_add_source (not copied: they must outlive
 * the diagnostics).  Counters are global to the process; diag_reset zeroes them.
 * Between diag_mute and diag_unmute reports are counted but not printed: trial
 * compilations (the fit advice, search) whose errors are not the user's.
 * diag_set_style switches to ANSI colours (gcc's) or to one JSON object per
 * diagnostic and line, for editors and CI.
 */
#include "parc.h"

#include <stdlib.h>
#include <string.h>

typedef struct DiagSource {
    char *file; /* owned copy: the caller's name may live in a freed arena later */
    const char *text;
} DiagSource;

static FILE *diag_default_stream_;
static int diag_errors, diag_warnings;
static int diag_muted; /* diag_mute depth: reports are counted, not printed */
static DiagSource *diag_sources;
static int diag_nsources, diag_cap_sources;

void diag_set_default_stream(FILE *stream) { diag_default_stream_ = stream; }
void diag_mute(void) { diag_muted++; }
void diag_unmute(void)
{
    if (diag_muted <= 0) PARC_BUG("diag_unmute without diag_mute");
    diag_muted--;
}

static FILE *diag_stream(void) { return diag_default_stream_ ? diag_default_stream_ : stderr; }

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

DiagMark diag_mark(void)
{
    DiagMark m = {diag_errors, diag_warnings, diag_nsources};
    return m;
}

void diag_rewind(DiagMark mark)
{
    diag_errors = mark.errors;
    diag_warnings = mark.warnings;
    for (int i = mark.nsources; i < diag_nsources; i++) free(diag_sources[i].file);
    if (mark.nsources < diag_nsources) diag_nsources = mark.nsources;
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

static int diag_color, diag_json;

void diag_set_style(int color, int json)
{
    diag_color = color;
    diag_json = json;
}

/* ANSI styles, as gcc colours them: bold location, red errors, magenta
 * warnings, cyan notes, a green caret. */
static const char *const diag_level_styles[] = {"\033[1;31m", "\033[1;35m", "\033[1;36m"};
#define DIAG_BOLD "\033[1m"
#define DIAG_CARET "\033[1;32m"
#define DIAG_RESET "\033[0m"

static const char *diag_style(const char *style) { return diag_color ? style : ""; }

/* `s` as a JSON string literal (NULL as null). */
static void diag_json_string(FILE *out, const char *s)
{
    if (!s) {
        fputs("null", out);
        return;
    }
    fputc('"', out);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\') fprintf(out, "\\%c", *c);
        else if (*c == '\n') fputs("\\n", out);
        else if (*c == '\t') fputs("\\t", out);
        else if (*c < 0x20 || *c == 0x7f) fprintf(out, "\\u%04x", *c);
        else fputc(*c, out);
    }
    fputc('"', out);
}

/* One line: {"file":..., "line":..., "column":..., "length":..., "severity":...,
 * "message":..., "hint":...}; line and column are 0 where unknown. */
static void diag_print_json(FILE *out, DiagLevel level, SrcLoc loc, const char *hint, const char *message)
{
    fputs("{\"file\": ", out);
    diag_json_string(out, loc.file);
    int line = loc.file && loc.line > 0 ? loc.line : 0;
    fprintf(out, ", \"line\": %d, \"column\": %d, \"length\": %d, \"severity\": \"%s\", \"message\": ", line,
            line ? (loc.col > 0 ? loc.col : 1) : 0, line ? (loc.len > 0 ? loc.len : 1) : 0, diag_level_names[level]);
    diag_json_string(out, message);
    fputs(", \"hint\": ", out);
    diag_json_string(out, hint);
    fputs("}\n", out);
}

/* The source line of loc and a caret line under its span, each written in
 * one call: stderr is unbuffered, and a write per byte made a 128 KB line
 * take seconds. */
static void diag_print_source(FILE *out, SrcLoc loc)
{
    int len = 0;
    const char *line = loc.file && loc.line >= 1 ? diag_source_line(loc.file, loc.line, &len) : NULL;
    if (!line) return;
    char *text = malloc((size_t)len + 4);
    if (!text) return;
    /* Control bytes print as spaces so a binary file cannot garble the terminal. */
    text[0] = text[1] = ' ';
    for (int i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)line[i];
        text[2 + i] = (char)(ch == '\t' || ch >= 0x20 ? ch : ' ');
    }
    text[2 + len] = '\n';
    text[3 + len] = 0;
    fputs(text, out);
    /* Caret: the prefix keeps tabs so the caret lines up under tab-indented text. */
    int col = loc.col < 1 ? 1 : loc.col;
    if (col > len + 1) col = len + 1;
    int span = loc.len < 1 ? 1 : loc.len;
    if (col - 1 + span > len) span = len - (col - 1) > 1 ? len - (col - 1) : 1;
    for (int i = 0; i < col - 1; i++) text[2 + i] = line[i] == '\t' ? '\t' : ' ';
    text[2 + col - 1] = 0;
    char *tilde = malloc((size_t)span + 1);
    if (!tilde) {
        free(text);
        return;
    }
    tilde[0] = '^';
    memset(tilde + 1, '~', (size_t)span - 1);
    tilde[span] = 0;
    fprintf(out, "%s%s%s%s\n", text, diag_style(DIAG_CARET), tilde, diag_style(DIAG_RESET));
    free(tilde);
    free(text);
}

void diag_report(DiagLevel level, SrcLoc loc, const char *hint, const char *fmt, ...)
{
    FILE *out = diag_stream();
    if (level == DIAG_ERROR) diag_errors++;
    if (level == DIAG_WARNING) diag_warnings++;
    if (diag_muted) return;
    char small[512];
    char *message = small;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof small && (message = malloc((size_t)n + 1)) != NULL) {
        va_start(ap, fmt);
        vsnprintf(message, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    if (!message) message = small; /* truncated rather than lost */

    if (diag_json) {
        diag_print_json(out, level, loc, hint, message);
    } else {
        fputs(diag_style(DIAG_BOLD), out);
        if (!loc.file) fputs("parc: ", out);
        else if (loc.line < 1) fprintf(out, "%s: ", loc.file);
        else fprintf(out, "%s:%d:%d: ", loc.file, loc.line, loc.col);
        fprintf(out, "%s%s:%s %s\n", diag_style(diag_level_styles[level]), diag_level_names[level],
                diag_style(DIAG_RESET), message);
        diag_print_source(out, loc);
        if (hint) fprintf(out, "  %shint:%s %s\n", diag_style(DIAG_BOLD), diag_style(DIAG_RESET), hint);
    }
    if (message != small) free(message);
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

_Noreturn void diag_internal_error(const char *file, int line, const char *fmt, ...)
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
