/*
 * test_abi.c — the runtime's call table against itself: for every row of
 * PRT_CALLS (parc_rt.h), the signature string the compiler declares the call
 * from must be exactly the row's parameter types (p pointer, i int64_t, d double,
 * t the trailing dtypes word of every op and collective, of no host call), and
 * PRT_OPS must list the rows in order; every backend of this build
 * (prt_backends) must fill every op and collective slot and its memory hooks.
 * No MPI: it reads tables only.  Exit status 0 iff every check held.
 */
#include <stdio.h>
#include <string.h>

#include "prt_backend.h"

static int checks, failures;

static void expect(int ok, const char *what, const char *name, const char *detail) {
    checks++;
    if (!ok) {
        failures++;
        printf("FAIL: %s %s: %s\n", what, name, detail);
    }
}

/* FOR_EACH(m, a, b, ...) = m(a) m(b) ... for up to 14 arguments. */
#define FE_1(m, x) m(x)
#define FE_2(m, x, ...) m(x) FE_1(m, __VA_ARGS__)
#define FE_3(m, x, ...) m(x) FE_2(m, __VA_ARGS__)
#define FE_4(m, x, ...) m(x) FE_3(m, __VA_ARGS__)
#define FE_5(m, x, ...) m(x) FE_4(m, __VA_ARGS__)
#define FE_6(m, x, ...) m(x) FE_5(m, __VA_ARGS__)
#define FE_7(m, x, ...) m(x) FE_6(m, __VA_ARGS__)
#define FE_8(m, x, ...) m(x) FE_7(m, __VA_ARGS__)
#define FE_9(m, x, ...) m(x) FE_8(m, __VA_ARGS__)
#define FE_10(m, x, ...) m(x) FE_9(m, __VA_ARGS__)
#define FE_11(m, x, ...) m(x) FE_10(m, __VA_ARGS__)
#define FE_12(m, x, ...) m(x) FE_11(m, __VA_ARGS__)
#define FE_13(m, x, ...) m(x) FE_12(m, __VA_ARGS__)
#define FE_14(m, x, ...) m(x) FE_13(m, __VA_ARGS__)
#define FE_15(m, x, ...) m(x) FE_14(m, __VA_ARGS__)
#define FE_16(m, x, ...) m(x) FE_15(m, __VA_ARGS__)
#define FE_17(m, x, ...) m(x) FE_16(m, __VA_ARGS__)
#define FE_18(m, x, ...) m(x) FE_17(m, __VA_ARGS__)
#define FE_19(m, x, ...) m(x) FE_18(m, __VA_ARGS__)
#define FE_20(m, x, ...) m(x) FE_19(m, __VA_ARGS__)
#define FE_PICK(_1, _2, _3, _4, _5, _6, _7, _8, _9, _10, _11, _12, _13, _14, _15, _16, _17, _18, _19, _20, N, ...) N
#define FOR_EACH(m, ...)                                                                                      \
    FE_PICK(__VA_ARGS__, FE_20, FE_19, FE_18, FE_17, FE_16, FE_15, FE_14, FE_13, FE_12, FE_11, FE_10, FE_9, FE_8, FE_7, FE_6, FE_5, \
            FE_4, FE_3, FE_2, FE_1, _)(m, __VA_ARGS__)

/* The parameters as local declarations, and the signature letter of each argument's type. */
#define DECLARE_(decl) decl;
#define DECLARE(...) FOR_EACH(DECLARE_, __VA_ARGS__)
#define LETTER_(x) abi_types_[abi_n_++] = !strcmp(#x, "dtypes") ? 't' : _Generic((x), int64_t: 'i', double: 'd', default: 'p');
#define LETTERS(...) FOR_EACH(LETTER_, __VA_ARGS__)

/* An op or a collective ends with its dtypes word ('t'), nothing else has one. */
#define CHECK_ROW(X, kind, name, sig, params, args)                                                    \
    {                                                                                                  \
        DECLARE params                                                                                 \
        char abi_types_[32];                                                                           \
        int abi_n_ = 0;                                                                                \
        LETTERS args                                                                                   \
        abi_types_[abi_n_] = '\0';                                                                     \
        expect(!strcmp(abi_types_, sig), "signature of", #name, "differs from its parameter types");  \
        const char *abi_t_ = strchr(sig, 't');                                                         \
        expect(strcmp(#kind, "HOST") ? abi_t_ && abi_t_ == sig + strlen(sig) - 1 : !abi_t_,            \
               "dtypes word of", #name, "an op or collective ends with it, a host call has none");      \
    }

static const char *const ops_names[] = {
#define NAME_(name, sig) #name,
    PRT_OPS(NAME_)
#undef NAME_
};

int main(void) {
    PRT_CALLS(CHECK_ROW, _)
    int row = 0;
#define ORDER_(X, kind, name, sig, params, args) \
    expect(!strcmp(ops_names[row++], "prt_" #name), "PRT_OPS order at", #name, "another row");
    PRT_CALLS(ORDER_, _)
    expect(row == (int)(sizeof ops_names / sizeof ops_names[0]), "PRT_OPS", "rows", "count differs from PRT_CALLS");
    for (int b = 0; prt_backends[b]; b++) {
        const prt_backend *be = prt_backends[b];
        if (be->load) { /* a backend in a module (prt_backend.c): its loaded table */
            char why[512] = "";
            const char *name = be->name;
            be = be->load(why, sizeof why);
            expect(be != NULL, "backend module", name, why);
            if (!be) continue;
            expect(!strcmp(be->name, name), "backend module", name, "its table has another name");
        }
        expect(be->alloc_zero && be->free && be->upload && be->download && be->copy_bytes, "backend", be->name,
               "a memory hook is missing");
        const char *backend_name = be->name;
#define SLOT_OP(call) expect(be->call != NULL, "backend slot", #call, backend_name);
#define SLOT_COMM(call) SLOT_OP(call)
#define SLOT_HOST(call)
#define SLOT_(X, kind, call, sig, params, args) SLOT_##kind(call)
        PRT_CALLS(SLOT_, _)
    }
    expect(prt_backends[0] == &prt_backend_cpu, "backend", "default", "the CPU reference is not the default");
    printf("test_abi: %d checks, %d failed: %s\n", checks, failures, failures ? "FAIL" : "ok");
    return failures ? 1 : 0;
}
