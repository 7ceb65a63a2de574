/*
 * arena.c — the bump allocator every compilation allocates from.
 *
 * Contract (parc.h): arena_alloc returns zeroed, 16-byte aligned memory and
 * never returns NULL (out of memory is fatal); arena_free releases everything
 * the arena ever handed out at once.  Blocks are chained newest first.
 */
#include "parc.h"

#include <stdlib.h>
#include <string.h>

#define ARENA_ALIGN 16
#define ARENA_BLOCK_SIZE (64 * 1024)

struct ArenaBlock {
    ArenaBlock *next;
    size_t used, size;       /* bytes used / available in data[] */
    _Alignas(16) unsigned char data[];
};

static _Noreturn void arena_out_of_memory(size_t size)
{
    fprintf(stderr, "parc: out of memory (allocating %zu bytes)\n", size);
    abort();
}

void *arena_alloc(Arena *arena, size_t size)
{
    if (size == 0) size = 1;
    if (size > SIZE_MAX / 2) arena_out_of_memory(size);
    size = (size + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    ArenaBlock *block = arena->head;
    if (!block || block->size - block->used < size) {
        size_t cap = size > ARENA_BLOCK_SIZE ? size : ARENA_BLOCK_SIZE;
        block = malloc(sizeof(ArenaBlock) + cap);
        if (!block) arena_out_of_memory(size);
        block->used = 0;
        block->size = cap;
        /* A big one-off allocation goes behind the current block so the
         * current block's free tail stays usable. */
        if (arena->head && cap > ARENA_BLOCK_SIZE) {
            block->next = arena->head->next;
            arena->head->next = block;
        } else {
            block->next = arena->head;
            arena->head = block;
        }
    }
    void *p = block->data + block->used;
    block->used += size;
    memset(p, 0, size);
    return p;
}

char *arena_strndup(Arena *arena, const char *s, size_t n)
{
    char *p = arena_alloc(arena, n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *arena_strdup(Arena *arena, const char *s)
{
    return arena_strndup(arena, s, strlen(s));
}

char *arena_printf(Arena *arena, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) n = 0;
    char *p = arena_alloc(arena, (size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return p;
}

void arena_free(Arena *arena)
{
    ArenaBlock *block = arena->head;
    while (block) {
        ArenaBlock *next = block->next;
        free(block);
        block = next;
    }
    arena->head = NULL;
}
