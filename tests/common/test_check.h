/*
 * test_check.h — the compiler's C tests' one assertion: CHECK(cond, fmt, ...)
 * counts a pass, or counts a failure and prints file:line, the condition and
 * the formatted message on stderr; the test's main prints the two counts and
 * exits nonzero when anything failed.
 */
#ifndef PARC_TEST_CHECK_H
#define PARC_TEST_CHECK_H

#include <stdio.h>

static int passed, failed;

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (cond) {                                                            \
            passed++;                                                          \
        } else {                                                               \
            failed++;                                                          \
            fprintf(stderr, "%s:%d: FAILED: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                      \
            fputc('\n', stderr);                                               \
        }                                                                      \
    } while (0)

#endif
