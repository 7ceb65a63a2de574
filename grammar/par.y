/*
 * par.y — the .par grammar (bison: pure, locations, LAC, %expect 0).
 *
 * The grammar is uniform on purpose (see compiler/front/ast.h): a file is a list of
 * statements `KEY VALUE* ;`, `KEY VALUE* { ... }` or `KEY -> VALUE* ;`.  Which
 * keys exist and what values they take is check.c's business, so it can say
 * "unknown key `gpus_per_nod`; did you mean `gpus_per_node`?".  Actions only
 * build nodes; no semantics here.
 *
 * Error recovery: `error ;` ends a broken statement; `{ ... error }` ends a
 * broken block; at top level a stray `}` is skipped.  Every syntax error goes
 * through diag with file:line:col and a caret; several are reported per run.
 */
%define api.pure full
%define parse.error custom
%define parse.lac full
%locations
%expect 0
%param {void *scanner}
%parse-param {ParseCtx *ctx}

%code requires {
#include "ast.h"

/* State shared by the scanner and the parser for one file. */
typedef struct ParseCtx {
    Arena *arena;
    const char *file;
    int line, col;              /* position of the next unread byte */
    int lex_errors, syntax_errors;
    int bad_line, bad_end_col;  /* end of the last reported bad byte run */
    /* The last two tokens: `prev` precedes `last` (the parser's lookahead). */
    SrcLoc prev_loc, last_loc;
    const char *prev_text, *last_text;
    /* Unclosed `{`s, innermost last (deeper ones are only counted). */
    SrcLoc open[64];
    int depth;
    StmtList result;
} ParseCtx;

#define PARSE_MAX_LEX_ERRORS 20
#define PARSE_MAX_SYNTAX_ERRORS 30
}

%code provides {
void parse_lex_token(ParseCtx *ctx, const YYLTYPE *loc, const char *text, int len);
void parse_lex_error(ParseCtx *ctx, const YYLTYPE *loc, const char *msg, const char *hint);
void parse_lex_bad(ParseCtx *ctx, const YYLTYPE *loc, const char *text, const char *hint);
void parse_lex_open(ParseCtx *ctx, const YYLTYPE *loc);
void parse_lex_close(ParseCtx *ctx);
}

%code {
#include <string.h>
#include <stdlib.h>
#include <errno.h>
#include <limits.h>

int yylex(YYSTYPE *lvalp, YYLTYPE *llocp, void *scanner);
static void yyerror(const YYLTYPE *loc, void *scanner, ParseCtx *ctx, const char *msg);

static SrcLoc parse_loc(const ParseCtx *ctx, YYLTYPE l)
{
    int len = l.last_line == l.first_line ? l.last_column - l.first_column : 1;
    return (SrcLoc){ctx->file, l.first_line, l.first_column, len < 1 ? 1 : len};
}
#define LOC(l) parse_loc(ctx, (l))

static Number parse_number(const ParseCtx *ctx, const char *text, YYLTYPE l)
{
    Number n = {.text = text, .loc = LOC(l)};
    n.value = strtod(text, NULL);
    if (strspn(text, "0123456789") == strlen(text)) {
        errno = 0;
        long long v = strtoll(text, NULL, 10);
        if (errno == 0) {
            n.is_integer = 1;
            n.integer = v;
        }
    }
    return n;
}

static Stmt *parse_stmt(ParseCtx *ctx, const char *key, YYLTYPE key_loc)
{
    Stmt *st = arena_alloc(ctx->arena, sizeof(Stmt));
    st->key = key;
    st->key_loc = LOC(key_loc);
    return st;
}

static Stmt *parse_values(ParseCtx *ctx, Stmt *st, Value v)
{
    ARR_PUSH(ctx->arena, st->values, st->nvalues, st->cap_values, v);
    return st;
}

static StmtList parse_append(ParseCtx *ctx, StmtList list, Stmt *st)
{
    if (st) ARR_PUSH(ctx->arena, list.items, list.count, list.cap, st);
    return list;
}
}

%union {
    char *text;
    Value value;
    Stmt *stmt;
    StmtList list;
}

%token END 0 "end of file"
%token <text> IDENT "word"
%token <text> NUMBER "number"
%token <text> UNIT "unit"
%token <text> STRING "string"
%token ARROW "`->`"
%token DOTDOT "`..`"
%token LBRACE "`{`"
%token RBRACE "`}`"
%token SEMI "`;`"

%type <list> file stmts block
%type <stmt> stmt head values
%type <value> value

%%

file
    : %empty                    { $$ = (StmtList){0}; ctx->result = $$; }
    | file stmt                 { $$ = parse_append(ctx, $1, $2); ctx->result = $$; }
    | file RBRACE               { $$ = $1; yyerror(&@2, scanner, ctx, "unexpected `}` with no open `{`"); }
    ;

stmts
    : %empty                    { $$ = (StmtList){0}; }
    | stmts stmt                { $$ = parse_append(ctx, $1, $2); }
    ;

stmt
    : values SEMI               { $$ = $1; $$->end_loc = LOC(@2); }
    | values block              { $$ = $1; $$->has_body = 1; $$->body = $2; $$->body_loc = LOC(@2);
                                  $$->body_loc.len = 1; }
    | head ARROW values SEMI    { /* `head` is only the key here */
                                  $$ = $1; $$->arrow = 1; $$->arrow_loc = LOC(@2);
                                  parse_values(ctx, $$, (Value){.kind = VAL_WORD, .loc = $3->key_loc,
                                                                .text = $3->key});
                                  for (int i = 0; i < $3->nvalues; i++) parse_values(ctx, $$, $3->values[i]);
                                  $$->end_loc = LOC(@4); }
    | error SEMI                { $$ = NULL; }
    ;

head
    : IDENT                     { $$ = parse_stmt(ctx, $1, @1); }
    ;

values
    : head                      { $$ = $1; }
    | values value              { $$ = parse_values(ctx, $1, $2); }
    ;

block
    : LBRACE stmts RBRACE       { $$ = $2; }
    | LBRACE stmts error RBRACE { $$ = $2; }
    ;

value
    : IDENT                     { $$ = (Value){.kind = VAL_WORD, .loc = LOC(@1), .text = $1}; }
    | STRING                    { $$ = (Value){.kind = VAL_STRING, .loc = LOC(@1), .text = $1}; }
    | NUMBER                    { $$ = (Value){.kind = VAL_NUMBER, .loc = LOC(@1),
                                               .num = parse_number(ctx, $1, @1)}; }
    | NUMBER UNIT               { $$ = (Value){.kind = VAL_NUMBER, .loc = LOC(@1),
                                               .num = parse_number(ctx, $1, @1),
                                               .unit = $2, .unit_loc = LOC(@2)};
                                  if (@2.first_line == @1.first_line)
                                      $$.loc.len = @2.last_column - @1.first_column; }
    | NUMBER DOTDOT NUMBER      { $$ = (Value){.kind = VAL_RANGE, .loc = LOC(@1),
                                               .num = parse_number(ctx, $1, @1),
                                               .hi = parse_number(ctx, $3, @3)};
                                  if (@3.first_line == @1.first_line)
                                      $$.loc.len = @3.last_column - @1.first_column; }
    ;

%%

/* ------------------------------------------------------------ scanner hooks */

void parse_lex_token(ParseCtx *ctx, const YYLTYPE *loc, const char *text, int len)
{
    ctx->prev_loc = ctx->last_loc;
    ctx->prev_text = ctx->last_text;
    ctx->last_loc = parse_loc(ctx, *loc);
    ctx->last_text = arena_strndup(ctx->arena, text, (size_t)(len > 40 ? 40 : len));
}

void parse_lex_error(ParseCtx *ctx, const YYLTYPE *loc, const char *msg, const char *hint)
{
    if (ctx->lex_errors++ < PARSE_MAX_LEX_ERRORS) diag_error(parse_loc(ctx, *loc), hint, "%s", msg);
}

void parse_lex_bad(ParseCtx *ctx, const YYLTYPE *loc, const char *text, const char *hint)
{
    /* One report per run of adjacent bad bytes. */
    int adjacent = loc->first_line == ctx->bad_line && loc->first_column == ctx->bad_end_col;
    ctx->bad_line = loc->last_line;
    ctx->bad_end_col = loc->last_column;
    if (adjacent) return;
    unsigned char ch = (unsigned char)text[0];
    char msg[64];
    if (ch > 0x20 && ch < 0x7f)
        snprintf(msg, sizeof msg, "unexpected character `%c`", ch);
    else
        snprintf(msg, sizeof msg, "unexpected byte 0x%02X", ch);
    if (ctx->lex_errors == PARSE_MAX_LEX_ERRORS)
        diag_error(parse_loc(ctx, *loc), "is this a .par file?", "too many bad characters; not reporting more");
    if (ctx->lex_errors++ < PARSE_MAX_LEX_ERRORS)
        diag_error(parse_loc(ctx, *loc), hint, "%s", msg);
}

void parse_lex_open(ParseCtx *ctx, const YYLTYPE *loc)
{
    if (ctx->depth < (int)(sizeof ctx->open / sizeof ctx->open[0])) ctx->open[ctx->depth] = parse_loc(ctx, *loc);
    if (ctx->depth < INT_MAX) ctx->depth++;
}

void parse_lex_close(ParseCtx *ctx)
{
    if (ctx->depth > 0) ctx->depth--;
}

/* ------------------------------------------------------------ syntax errors */

static void parse_report(ParseCtx *ctx, SrcLoc loc, const char *hint, const char *msg)
{
    ctx->syntax_errors++;
    if (ctx->syntax_errors <= PARSE_MAX_SYNTAX_ERRORS)
        diag_error(loc, hint, "%s", msg);
    else if (ctx->syntax_errors == PARSE_MAX_SYNTAX_ERRORS + 1)
        diag_error(loc, NULL, "too many syntax errors; not reporting more");
}

static void yyerror(const YYLTYPE *loc, void *scanner, ParseCtx *ctx, const char *msg)
{
    (void)scanner;
    parse_report(ctx, parse_loc(ctx, *loc), NULL, msg);
}

/* "unexpected X, expected Y or Z" in the words of the language. */
static int yyreport_syntax_error(const yypcontext_t *pctx, void *scanner, ParseCtx *ctx)
{
    (void)scanner;
    enum { MAX_EXPECTED = 8 };
    yysymbol_kind_t expected[MAX_EXPECTED];
    int n = yypcontext_expected_tokens(pctx, expected, MAX_EXPECTED);
    if (n < 0) n = 0;
    yysymbol_kind_t unexpected = yypcontext_token(pctx);
    SrcLoc at = parse_loc(ctx, *yypcontext_location(pctx));

    /* The expected list, with word/number/string folded into "a value". */
    int has_value_kinds = 0, expects_semi = 0;
    for (int i = 0; i < n; i++) {
        if (expected[i] == YYSYMBOL_IDENT || expected[i] == YYSYMBOL_NUMBER || expected[i] == YYSYMBOL_STRING)
            has_value_kinds++;
        if (expected[i] == YYSYMBOL_SEMI) expects_semi = 1;
    }
    char list[256] = "";
    int items = 0;
    for (int i = 0; i < n; i++) {
        const char *name = yysymbol_name(expected[i]);
        if (has_value_kinds == 3 && (expected[i] == YYSYMBOL_IDENT || expected[i] == YYSYMBOL_NUMBER ||
                                     expected[i] == YYSYMBOL_STRING)) {
            if (expected[i] != YYSYMBOL_IDENT) continue;
            name = "a value";
        } else if (expected[i] == YYSYMBOL_IDENT) {
            name = "a word";
        }
        size_t used = strlen(list);
        int last = 1;
        for (int j = i + 1; j < n; j++)
            if (!(has_value_kinds == 3 && (expected[j] == YYSYMBOL_NUMBER || expected[j] == YYSYMBOL_STRING)))
                last = 0;
        snprintf(list + used, sizeof list - used, "%s%s", items == 0 ? "" : last ? " or " : ", ", name);
        items++;
    }

    char what[96];
    switch (unexpected) {
    case YYSYMBOL_YYEOF: snprintf(what, sizeof what, "end of file"); break;
    case YYSYMBOL_IDENT: snprintf(what, sizeof what, "`%s`", ctx->last_text ? ctx->last_text : "?"); break;
    case YYSYMBOL_NUMBER: snprintf(what, sizeof what, "number `%s`", ctx->last_text ? ctx->last_text : "?"); break;
    case YYSYMBOL_UNIT: snprintf(what, sizeof what, "unit `%s`", ctx->last_text ? ctx->last_text : "?"); break;
    case YYSYMBOL_STRING: snprintf(what, sizeof what, "string %s", ctx->last_text ? ctx->last_text : "?"); break;
    default: snprintf(what, sizeof what, "%s", yysymbol_name(unexpected)); break;
    }

    char msg[512];
    if (expects_semi && unexpected != YYSYMBOL_YYEOF && ctx->prev_text && ctx->prev_loc.line < at.line &&
        ctx->prev_loc.line > 0) {
        /* The statement ended on an earlier line: point at its end. */
        SrcLoc end = ctx->prev_loc;
        end.col += end.len;
        end.len = 1;
        snprintf(msg, sizeof msg, "expected `;` after `%s`", ctx->prev_text);
        parse_report(ctx, end, "every statement ends with `;`", msg);
        return 0;
    }
    if (expects_semi)
        snprintf(msg, sizeof msg, "unexpected %s, expected `;`", what); /* the rest only continue the statement */
    else if (items > 0)
        snprintf(msg, sizeof msg, "unexpected %s, expected %s", what, list);
    else
        snprintf(msg, sizeof msg, "unexpected %s", what);
    const char *hint = NULL;
    if (unexpected == YYSYMBOL_YYEOF && ctx->depth > 0)
        hint = "a `{` is not closed (see the note below)";
    else if (unexpected == YYSYMBOL_UNIT)
        hint = "a unit follows a number directly, as in `80 GiB`";
    else if (unexpected == YYSYMBOL_ARROW)
        hint = "a layout rule is `DIM -> AXIS;`, as in `heads -> tp;`";
    else if (unexpected == YYSYMBOL_NUMBER || unexpected == YYSYMBOL_STRING)
        hint = "a statement starts with a key, as in `nodes 2;`";
    parse_report(ctx, at, hint, msg);
    if (unexpected == YYSYMBOL_YYEOF && ctx->depth > 0 && ctx->syntax_errors <= PARSE_MAX_SYNTAX_ERRORS) {
        int innermost = ctx->depth <= 64 ? ctx->depth - 1 : 63;
        diag_note(ctx->open[innermost], NULL, "this `{` is not closed");
    }
    return 0;
}

/* ------------------------------------------------------------ entry point */

typedef void *yyscan_t;
int yylex_init_extra(ParseCtx *extra, yyscan_t *scanner);
int yylex_destroy(yyscan_t scanner);
struct yy_buffer_state *yy_scan_bytes(const char *bytes, int len, yyscan_t scanner);

int ast_parse(Arena *arena, const char *path, const char *text, StmtList *out)
{
    ParseCtx ctx = {.arena = arena, .file = path, .line = 1, .col = 1};
    *out = (StmtList){0};
    size_t len = strlen(text);
    if (len > (size_t)INT_MAX / 2) {
        SrcLoc whole = {.file = path};
        diag_error(whole, NULL, "file too large (%zu bytes)", len);
        return -1;
    }
    yyscan_t scanner;
    if (yylex_init_extra(&ctx, &scanner) != 0) PARC_BUG("cannot create the scanner");
    yy_scan_bytes(text, (int)len, scanner);
    int rc = yyparse(scanner, &ctx);
    yylex_destroy(scanner);
    *out = ctx.result;
    return rc == 0 && ctx.lex_errors == 0 && ctx.syntax_errors == 0 ? 0 : -1;
}
