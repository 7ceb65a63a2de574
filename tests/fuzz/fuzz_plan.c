/*
 * fuzz_plan.c — libFuzzer harness over the whole compiler short of codegen.
 *
 * Each input is a .par text.  It goes through the pass table as `parc
 * explain` does (passes_run_text up to analyze, balance and every verifier
 * included), then the fit advice (advise_plan), every report and dump, all
 * written to /dev/null.  Any crash, sanitizer report, leak, internal error (abort) or
 * hang is a finding; a user diagnostic is not.
 *
 * The structure-aware mutator (LLVMFuzzerCustomMutator) edits plans the way
 * a user would: a number becomes another (edge values included), a word
 * becomes another of its kind or of the language, a whole section is
 * replaced by the same section of another example, a statement is dropped,
 * or (rarely) libFuzzer's byte mutation runs; it prefers edits whose result
 * still checks.  LLVMFuzzerCustomCrossOver swaps whole sections between two
 * inputs.  So most inputs stay plans that check and reach lowering.
 *
 * PARC_FUZZ_STATS=1 prints at exit how many inputs were run and which share
 * was checked, lowered and analysed (docs/fuzzing.md).
 */
#include "advise.h"
#include "analyze.h"
#include "explain.h"
#include "ir.h"
#include "passes.h"

#include <dirent.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);

/* ---------------------------------------------------------------- the passes */

static FILE *null_out;
static long stat_runs, stat_checked, stat_lowered;

static void print_stats(void)
{
    if (!getenv("PARC_FUZZ_STATS") || stat_runs == 0) return;
    fprintf(stderr, "parc-fuzz: %ld inputs, %.1f%% checked, %.1f%% reached lowering and analysis\n", stat_runs,
            100.0 * stat_checked / stat_runs, 100.0 * stat_lowered / stat_runs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!null_out) {
        null_out = fopen("/dev/null", "w");
        if (!null_out) abort();
        atexit(print_stats);
    }
    stat_runs++;
    diag_set_default_stream(null_out);
    Arena arena = {0};
    /* Through the driver with every verifier (a broken invariant aborts: the
     * fuzzer reports it).  A name in a directory that does not exist:
     * relative includes fail. */
    Compilation c;
    const char *text = arena_strndup(&arena, (const char *)data, size);
    if (passes_run_text(&c, &arena, "/nonexistent/fuzz.par", text, 1, passes_find("front")) == 0) {
        stat_checked++;
        if (passes_continue(&c, passes_find("analyze")) == 0) {
            stat_lowered++;
            const Analysis *an = c.analysis;
            advise_plan(&arena, &c);
            explain_check_summary(null_out, an);
            passes_explain_text(null_out, &arena, &c, 1);
            explain_json(null_out, an);
            explain_collectives(null_out, an);
            explain_collectives_json(null_out, an);
            plan_dump(&c.plan, null_out);
            expand_dump(c.graph, null_out);
            program_dump(c.prog, null_out);
            schedule_dump(&c.prog->schedule, null_out);
        }
    }
    passes_finish(&c);
    arena_free(&arena);
    diag_reset();
    return 0;
}

/* ---------------------------------------------------------------- the mutator */

typedef struct Span {
    size_t start, end;
} Span;

static unsigned next_random(unsigned *state)
{
    *state = *state * 1103515245u + 12345u;
    return (*state >> 8) & 0xffffff;
}

/* Words of the language: keys, values, axis and dim names, units. */
static const char *const vocabulary[] = {
    "cluster", "model", "train", "mesh", "layout", "nodes", "gpus_per_node", "gpu", "link", "memory", "bf16",
    "fp32", "fp16", "hbm", "intra", "inter", "vocab", "seq", "hidden", "heads", "ffn", "layers", "head_dim",
    "kv_heads", "embed", "positions", "learned", "repeat", "block", "norm", "head", "loss", "mlp", "act",
    "attention", "bias", "residual", "transformer", "gpt2", "llama", "layer", "rms", "none", "gelu", "swiglu",
    "relu", "causal", "full", "true", "false", "tied", "untied", "cross_entropy", "batch", "micro_batch",
    "micro_batches", "precision", "master", "optimizer", "adamw", "adam", "sgd", "lr", "beta1", "beta2", "eps",
    "weight_decay", "momentum", "steps", "seed", "dp", "tp", "pp", "sp", "cp", "sequence_parallel", "zero", "fsdp",
    "over", "recompute", "selective", "stage", "schedule", "gpipe", "1f1b", "interleaved", "grad_overlap",
    "tp_overlap", "on", "off", "GiB", "GB", "MiB",
    "TB/s", "GB/s", "TFLOP/s", "us", "ms", "K", "M", "B",
};
#define NVOCAB ((int)(sizeof vocabulary / sizeof vocabulary[0]))

/* Words that can stand for one another; a word of a class is usually replaced
 * by another of its class, so the plan keeps its shape. */
static const char *const word_classes[][8] = {
    {"gpipe", "1f1b", "interleaved", "none"}, {"layer", "rms", "none"},
    {"gelu", "swiglu", "relu"},                {"transformer", "gpt2", "llama", "mlp"},
    {"fp32", "bf16", "fp16"},                  {"adamw", "adam", "sgd"},
    {"selective", "full", "none"},             {"dp", "tp", "pp", "sp", "cp"},
    {"tied", "untied", "none"},                {"batch", "seq", "hidden", "heads", "ffn", "vocab", "layers"},
    {"GiB", "GB", "MiB", "TB"},                {"TB/s", "GB/s"},
    {"us", "ms"},                              {"zero", "fsdp", "sequence_parallel", "recompute"},
    {"causal", "full"},                        {"true", "false"},
    {"on", "off"},                             {"grad_overlap", "tp_overlap"},
};
#define NCLASSES ((int)(sizeof word_classes / sizeof word_classes[0]))

/* Another word for the one at data[span]: of its class when it has one
 * (three times in four), else any word of the language. */
static const char *other_word(const uint8_t *data, Span span, unsigned *state);

static const char *const numbers[] = {
    "0", "1", "2", "3", "4", "5", "6", "7", "8", "12", "16", "24", "32", "48", "64", "96", "100", "128", "256",
    "1000", "1024", "4096", "32000", "65536", "1e-3", "0.5", "1.5", "2147483647", "2147483648", "4294967296",
    "1099511627776", "9223372036854775806", "9223372036854775807", "9223372036854775808", "9.223372036854775808e18",
    "18446744073709551616", "99999999999999999999", "1e30", "1e308", "1e-308",
};
#define NNUMBERS ((int)(sizeof numbers / sizeof numbers[0]))

/* The seed plans, read once from PARC_FUZZ_CORPUS (a directory), for
 * section swaps. */
static char *examples[64];
static int nexamples;

static void load_examples(void)
{
    static int loaded;
    if (loaded) return;
    loaded = 1;
    const char *dir = getenv("PARC_FUZZ_CORPUS");
#ifdef PARC_FUZZ_CORPUS_DIR
    if (!dir) dir = PARC_FUZZ_CORPUS_DIR;
#endif
    DIR *d = dir ? opendir(dir) : NULL;
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && nexamples < 64) {
        if (e->d_name[0] == '.') continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f) continue;
        char *text = malloc(1 << 16);
        size_t n = text ? fread(text, 1, (1 << 16) - 1, f) : 0;
        fclose(f);
        if (!text) continue;
        text[n] = 0;
        examples[nexamples++] = text;
    }
    closedir(d);
}


static int is_word_char(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (c >= '0' && c <= '9'); }

/* The tokens of one kind in data: numbers (digits first) or words (a letter
 * first); at most `max`. */
static int find_tokens(const uint8_t *data, size_t size, int want_numbers, Span *out, int max)
{
    int n = 0;
    for (size_t i = 0; i < size && n < max;) {
        if (data[i] == '#') { /* comments are not tokens */
            while (i < size && data[i] != '\n') i++;
            continue;
        }
        if (!is_word_char(data[i])) {
            i++;
            continue;
        }
        size_t j = i;
        int digit = data[i] >= '0' && data[i] <= '9';
        while (j < size && (is_word_char(data[j]) || (digit && (data[j] == '.' || data[j] == '-')))) j++;
        if (digit == want_numbers) out[n++] = (Span){i, j};
        i = j;
    }
    return n;
}

/* Top-level sections `KEY ... { ... }` of text: their spans and key lengths. */
static int find_sections(const char *text, size_t size, Span *out, int max)
{
    int n = 0, depth = 0;
    size_t start = (size_t)-1;
    int in_comment = 0;
    for (size_t i = 0; i < size && n < max; i++) {
        char c = text[i];
        if (in_comment) {
            in_comment = c != '\n';
            continue;
        }
        if (c == '#') in_comment = 1;
        else if (depth == 0 && is_word_char(c) && (i == 0 || !is_word_char(text[i - 1])) && start == (size_t)-1)
            start = i;
        else if (c == '{') depth++;
        else if (c == '}' && depth > 0 && --depth == 0 && start != (size_t)-1) {
            out[n++] = (Span){start, i + 1};
            start = (size_t)-1;
        } else if (c == ';' && depth == 0)
            start = (size_t)-1;
    }
    return n;
}

/* Replaces data[span] by `text` (len bytes); the new size, or `size` when it
 * would not fit in max_size. */
static size_t replace(uint8_t *data, size_t size, size_t max_size, Span span, const char *text, size_t len)
{
    size_t old = span.end - span.start;
    if (size - old + len > max_size) return size;
    memmove(data + span.start + len, data + span.end, size - span.end);
    memcpy(data + span.start, text, len);
    return size - old + len;
}

static size_t key_length(const char *s, size_t n)
{
    size_t k = 0;
    while (k < n && is_word_char(s[k])) k++;
    return k;
}

/* Replaces a section of data by the section with the same key from another
 * text (or appends one when data has none of that key). */
static size_t swap_section(uint8_t *data, size_t size, size_t max_size, const char *other, unsigned *state)
{
    Span theirs[32], ours[32];
    int nt = find_sections(other, strlen(other), theirs, 32);
    if (nt == 0) return size;
    Span t = theirs[next_random(state) % nt];
    size_t tk = key_length(other + t.start, t.end - t.start);
    int no = find_sections((const char *)data, size, ours, 32);
    for (int i = 0; i < no; i++) {
        size_t ok = key_length((const char *)data + ours[i].start, ours[i].end - ours[i].start);
        if (ok == tk && memcmp(data + ours[i].start, other + t.start, tk) == 0)
            return replace(data, size, max_size, ours[i], other + t.start, t.end - t.start);
    }
    Span end = {size, size};
    return replace(data, size, max_size, end, other + t.start, t.end - t.start);
}

static const char *other_word(const uint8_t *data, Span span, unsigned *state)
{
    size_t len = span.end - span.start;
    for (int c = 0; c < NCLASSES && next_random(state) % 4 != 0; c++) {
        int n = 0;
        int member = 0;
        for (; n < 8 && word_classes[c][n]; n++)
            if (strlen(word_classes[c][n]) == len && memcmp(word_classes[c][n], data + span.start, len) == 0) member = 1;
        if (member) return word_classes[c][next_random(state) % n];
    }
    return vocabulary[next_random(state) % NVOCAB];
}

/* One edit of data (see the banner); the new size. */
static size_t mutate_once(uint8_t *data, size_t size, size_t max_size, unsigned *state)
{
    unsigned choice = next_random(state) % 100;
    Span spans[512];
    if (choice < 35) { /* a number */
        int n = find_tokens(data, size, 1, spans, 512);
        if (n > 0) {
            Span s = spans[next_random(state) % n];
            char buf[32];
            const char *text = numbers[next_random(state) % NNUMBERS];
            if (next_random(state) % 2 == 0) { /* near the old value: powers of two keep divisibility */
                unsigned long long v = strtoull((const char *)data + s.start, NULL, 10);
                int op = next_random(state) % 4;
                v = op == 0 ? v * 2 : op == 1 ? v / 2 : op == 2 ? v + 1 : v - 1;
                snprintf(buf, sizeof buf, "%llu", v);
                text = buf;
            }
            return replace(data, size, max_size, s, text, strlen(text));
        }
    } else if (choice < 60) { /* a word */
        int n = find_tokens(data, size, 0, spans, 512);
        if (n > 0) {
            Span s = spans[next_random(state) % n];
            const char *w = other_word(data, s, state);
            return replace(data, size, max_size, s, w, strlen(w));
        }
    } else if (choice < 85 && nexamples > 0) { /* a whole section from an example */
        return swap_section(data, size, max_size, examples[next_random(state) % nexamples], state);
    } else if (choice < 90) { /* drop a statement */
        for (int tries = 0; tries < 8 && size > 0; tries++) {
            size_t at = next_random(state) % size;
            const uint8_t *semi = memchr(data + at, ';', size - at);
            if (!semi) continue;
            size_t end = (size_t)(semi - data) + 1, start = at;
            while (start > 0 && data[start - 1] != ';' && data[start - 1] != '{' && data[start - 1] != '\n') start--;
            return replace(data, size, max_size, (Span){start, end}, "", 0);
        }
    }
    return LLVMFuzzerMutate(data, size, max_size);
}

/* Whether data is a plan that checks (the front end alone, diagnostics to
 * /dev/null). */
static int plan_checks(const uint8_t *data, size_t size)
{
    Arena arena = {0};
    Plan plan;
    diag_set_default_stream(null_out);
    int ok = check_plan_buffer(&arena, "/nonexistent/fuzz.par", (const char *)data, size, &plan) == 0;
    arena_free(&arena);
    diag_reset();
    return ok;
}

/* Most edits of a valid plan make an invalid one, and an invalid one rarely
 * becomes valid again: so an input that does not check is usually swapped for
 * a seed plan first, and an edit whose result does not check is usually tried
 * again (up to four times) from the same input.  About one output in four is
 * kept whatever it is, so the error paths stay fuzzed too. */
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
    load_examples();
    if (!null_out && !(null_out = fopen("/dev/null", "w"))) abort();
    unsigned state = seed;
    if (nexamples > 0 && next_random(&state) % 4 != 0 && !plan_checks(data, size)) {
        const char *ex = examples[next_random(&state) % nexamples];
        size_t n = strlen(ex);
        if (n <= max_size) memcpy(data, ex, n), size = n;
    }
    uint8_t *original = malloc(size ? size : 1);
    if (!original) return mutate_once(data, size, max_size, &state);
    memcpy(original, data, size);
    size_t n = size;
    for (int tries = 0; tries < 4; tries++) {
        n = mutate_once(data, size, max_size, &state);
        if (next_random(&state) % 4 == 0 || plan_checks(data, n)) break;
        memcpy(data, original, size);
        n = size;
    }
    free(original);
    return n;
}

size_t LLVMFuzzerCustomCrossOver(const uint8_t *data1, size_t size1, const uint8_t *data2, size_t size2,
                                 uint8_t *out, size_t max_out_size, unsigned int seed)
{
    size_t n = size1 < max_out_size ? size1 : max_out_size;
    memcpy(out, data1, n);
    char *other = malloc(size2 + 1);
    if (!other) return n;
    memcpy(other, data2, size2);
    other[size2] = 0;
    unsigned state = seed;
    n = swap_section(out, n, max_out_size, other, &state);
    free(other);
    return n;
}
