/*
 * prt_hf.h — the Hugging Face names of the parc tensors that keep their
 * elements as they are, for GPT-2 and Llama: the one table `parc export
 * --names hf` writes by (compiler/tools/export_hf.c) and `--init-from` reads by
 * (runtime/prt_import.c).  Plain C, no MPI, no runtime context.
 *
 * A table row maps parc's global name to the model family's, a block's without
 * its prefix ("h.L." and "transformer.h.L." / "model.layers.L.").  The tensors
 * that need more than a new name — Llama's q/k/v split of attn.qkv.w, gate/up
 * of mlp.up.w, its [out, in] transposes, lm_head — are each side's own code,
 * docs/checkpoints.md tabulates all of them.
 */
#ifndef PRT_HF_H
#define PRT_HF_H
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

enum { PRT_HF_GPT2, PRT_HF_LLAMA };

/* Row k of the family's table of blocks' (block = 1) or global (0) tensors:
 * returns the Hugging Face name and sets *parc, or NULL past the last row. */
const char *prt_hf_same_row(int family, int block, int k, const char **parc);
/* The Hugging Face name of parc tensor `parc` in that table, or NULL. */
const char *prt_hf_same_name(int family, int block, const char *parc);
/* The file's shape of such a tensor of global dims gdims[0..ndim): a norm's
 * gain or a bias (a name ending in .g or .b) 1-D; else 2-D, [in, out] as
 * GPT-2's Conv1D and parc keep it: the output projection (attn.proj.w)
 * [n / its last dim, its last dim], the others [gdims[0], n / gdims[0]].
 * Returns that ndim (1 or 2) with dims filled. */
int prt_hf_same_shape(const char *parc, int64_t ndim, const int64_t *gdims, int64_t dims[2]);

/* The heads of parc's attn.qkv.w of dims gdims[0..ndim) = [C, A, B, hd]: A = 3
 * and B = heads with C = heads x hd (q, k, v apart), or A = kv_heads and B =
 * G + 2 with C = kv_heads x G x hd (per key/value head its G query heads, then
 * k, then v).  Sets *heads and *kv_heads and returns 1, or 0 for dims neither
 * layout has. */
int prt_hf_qkv_heads(int64_t ndim, const int64_t *gdims, int64_t *heads, int64_t *kv_heads);

#ifdef __cplusplus
}
#endif
#endif
