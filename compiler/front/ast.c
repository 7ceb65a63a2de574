/*
 * ast.c — the unit table and a stable dump of the syntax tree.
 * (Node construction lives with the grammar actions in grammar/par.y.)
 */
#include "ast.h"

#include <string.h>

const UnitInfo unit_table[] = {
#define X(name, kind, factor) {name, kind, factor},
    PARC_UNITS(X)
#undef X
};
const int unit_table_count = (int)(sizeof(unit_table) / sizeof(unit_table[0]));

const char *const unit_kind_names[] = {"plain count", "memory size", "compute rate", "bandwidth",
                                       "time"};
const char *const unit_kind_examples[] = {"8", "80 GiB", "989 TFLOP/s", "450 GB/s", "2 us"};

const UnitInfo *ast_unit_find(const char *name, UnitKind want)
{
    const UnitInfo *any = NULL;
    for (int i = 0; i < unit_table_count; i++) {
        if (strcmp(unit_table[i].name, name) != 0) continue;
        if (unit_table[i].kind == want) return &unit_table[i];
        if (!any) any = &unit_table[i];
    }
    return any;
}

int ast_unit_is_known(const char *name)
{
    return ast_unit_find(name, UNIT_COUNT) != NULL;
}

static void ast_dump_number(const Number *n, FILE *out)
{
    fputs(n->text, out);
}

static void ast_dump_list(const StmtList *list, int depth, FILE *out)
{
    for (int i = 0; i < list->count; i++) {
        const Stmt *st = list->items[i];
        fprintf(out, "%*s%d:%d %s", depth * 2, "", st->key_loc.line, st->key_loc.col, st->key);
        if (st->arrow) fputs(" ->", out);
        for (int v = 0; v < st->nvalues; v++) {
            const Value *val = &st->values[v];
            fputc(' ', out);
            switch (val->kind) {
            case VAL_WORD: fputs(val->text, out); break;
            case VAL_STRING: fprintf(out, "\"%s\"", val->text); break;
            case VAL_NUMBER:
                ast_dump_number(&val->num, out);
                if (val->unit) fprintf(out, "[%s]", val->unit);
                break;
            case VAL_RANGE:
                ast_dump_number(&val->num, out);
                fputs("..", out);
                ast_dump_number(&val->hi, out);
                break;
            }
        }
        if (st->has_body) {
            fputs(" {\n", out);
            ast_dump_list(&st->body, depth + 1, out);
            fprintf(out, "%*s}\n", depth * 2, "");
        } else {
            fputs(";\n", out);
        }
    }
}

void ast_dump(const StmtList *list, FILE *out)
{
    ast_dump_list(list, 0, out);
}
