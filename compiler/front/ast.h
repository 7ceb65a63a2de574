/*
 * ast.h — the syntax tree of a .par file.
 *
 * The grammar (grammar/par.y) is deliberately uniform: a file is a list of
 * statements, and every statement is
 *
 *     KEY VALUE* ;                 nodes 2;   precision bf16 master fp32;
 *     KEY VALUE* { STATEMENT* }    gpu { ... }   model llama7b { ... }   stage 0 { ... }
 *     KEY -> VALUE* ;              heads -> tp;   layers -> pp schedule 1f1b;
 *
 * where a VALUE is a word, a string, a number with an optional unit
 * (`80 GiB`, `450 GB/s`) or a range of two numbers (`0..9`).  What a key means,
 * which values it takes and which keys a block allows is decided by check.c,
 * which can then name the closest valid key ("did you mean `tp`?") instead of
 * a bare "unexpected identifier".  Every node carries the SrcLoc of its text;
 * everything lives in the compilation's arena.
 */
#ifndef PARC_AST_H
#define PARC_AST_H

#include "parc.h"

/* ---------------------------------------------------------------- units */

typedef enum {
    UNIT_COUNT,     /* plain counts; K / M / B scale them */
    UNIT_MEMORY,    /* bytes */
    UNIT_COMPUTE,   /* FLOP/s */
    UNIT_BANDWIDTH, /* bytes/s */
    UNIT_TIME,      /* seconds */
} UnitKind;

/* Every unit the lexer accepts after a number: spelling, kind, factor to the
 * base unit.  `B` is both bytes and billion: the kind the key expects decides
 * (ast_unit_find).  ORDER: unit_kind_names[] in ast.c follows UnitKind. */
#define PARC_UNITS(X)                      \
    X("B", UNIT_MEMORY, 1.0)               \
    X("KB", UNIT_MEMORY, 1e3)              \
    X("MB", UNIT_MEMORY, 1e6)              \
    X("GB", UNIT_MEMORY, 1e9)              \
    X("TB", UNIT_MEMORY, 1e12)             \
    X("KiB", UNIT_MEMORY, 1024.0)          \
    X("MiB", UNIT_MEMORY, 1048576.0)       \
    X("GiB", UNIT_MEMORY, 1073741824.0)    \
    X("TiB", UNIT_MEMORY, 1099511627776.0) \
    X("FLOP/s", UNIT_COMPUTE, 1.0)         \
    X("GFLOP/s", UNIT_COMPUTE, 1e9)        \
    X("TFLOP/s", UNIT_COMPUTE, 1e12)       \
    X("PFLOP/s", UNIT_COMPUTE, 1e15)       \
    X("B/s", UNIT_BANDWIDTH, 1.0)          \
    X("KB/s", UNIT_BANDWIDTH, 1e3)         \
    X("MB/s", UNIT_BANDWIDTH, 1e6)         \
    X("GB/s", UNIT_BANDWIDTH, 1e9)         \
    X("TB/s", UNIT_BANDWIDTH, 1e12)        \
    X("KiB/s", UNIT_BANDWIDTH, 1024.0)     \
    X("MiB/s", UNIT_BANDWIDTH, 1048576.0)  \
    X("GiB/s", UNIT_BANDWIDTH, 1073741824.0) \
    X("ns", UNIT_TIME, 1e-9)               \
    X("us", UNIT_TIME, 1e-6)               \
    X("ms", UNIT_TIME, 1e-3)               \
    X("s", UNIT_TIME, 1.0)                 \
    X("K", UNIT_COUNT, 1e3)                \
    X("M", UNIT_COUNT, 1e6)                \
    X("B", UNIT_COUNT, 1e9)

typedef struct UnitInfo {
    const char *name;
    UnitKind kind;
    double factor;
} UnitInfo;

extern const UnitInfo unit_table[];
extern const int unit_table_count;
extern const char *const unit_kind_names[];   /* "count", "memory size", ... */
extern const char *const unit_kind_examples[]; /* "8", "80 GiB", ... */

/* The unit spelled `name` of kind `want`; if none, the first unit spelled
 * `name` of any kind; NULL when the spelling is unknown. */
const UnitInfo *ast_unit_find(const char *name, UnitKind want);
/* Whether the lexer should read `name` after a number as a unit. */
int ast_unit_is_known(const char *name);

/* ----------------------------------------------------------------- nodes */

typedef enum { VAL_WORD, VAL_NUMBER, VAL_STRING, VAL_RANGE } ValueKind;

/* A number as written.  `value` is strtod of the text (inf when out of range);
 * `is_integer` says the text is plain digits that fit an int64 (then `integer`
 * holds it exactly, e.g. for seeds beyond 2^53). */
typedef struct Number {
    const char *text;
    double value;
    int is_integer;
    int64_t integer;
    SrcLoc loc;
} Number;

typedef struct Value {
    ValueKind kind;
    SrcLoc loc;          /* the whole value, unit or range included */
    const char *text;    /* VAL_WORD: the word; VAL_STRING: contents without quotes */
    Number num;          /* VAL_NUMBER; VAL_RANGE: the low end */
    Number hi;           /* VAL_RANGE: the high end (inclusive) */
    const char *unit;    /* VAL_NUMBER: the unit as written, or NULL */
    SrcLoc unit_loc;
} Value;

typedef struct Stmt Stmt;

typedef struct StmtList {
    Stmt **items;
    int count, cap;
} StmtList;

struct Stmt {
    const char *key;
    SrcLoc key_loc;
    int arrow;           /* KEY -> VALUE* */
    SrcLoc arrow_loc;
    Value *values;
    int nvalues, cap_values;
    int has_body;        /* KEY VALUE* { ... } */
    StmtList body;
    SrcLoc body_loc;     /* the opening `{` */
    SrcLoc end_loc;      /* the `;` or the closing `}` */
};

/* Parses `text` (the contents of `path`) into a statement list.  Syntax errors
 * are reported through diag (with recovery, so several per run); returns 0 when
 * there were none, -1 otherwise (out still holds what could be parsed).
 * Implemented in grammar/par.y. */
int ast_parse(Arena *arena, const char *path, const char *text, StmtList *out);

/* Prints the tree in a stable text form (debugging, golden tests). */
void ast_dump(const StmtList *list, FILE *out);

#endif
