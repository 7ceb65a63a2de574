/*
 * export_hf.h — the Hugging Face names and layouts of `parc export --names hf`
 * (export_hf.c): parc's global tensors of a GPT-2 or a Llama model renamed,
 * split and transposed as those libraries store them.
 */
#ifndef PARC_EXPORT_HF_H
#define PARC_EXPORT_HF_H

#include <stddef.h>
#include <stdint.h>

/* One whole tensor as `parc export` assembled it: parc's global name
 * ("h.3.attn.qkv.w", "wte"), its dtype (enum prt_dtype), global dims and
 * row-major data (not owned). */
typedef struct ExportTensor {
    const char *name;
    int64_t dtype, ndim, gdims[8];
    const char *data;
} ExportTensor;

/* One tensor of the output file; data is malloc'ed. */
typedef struct ExportOut {
    char name[128];
    int64_t dtype, ndim, shape[8];
    char *data;
    size_t bytes;
} ExportOut;

/* Maps the n tensors of `in` to the names of the model family they form:
 *   GPT-2 (learned positions, LayerNorm with bias, GELU MLP, fused qkv):
 *     transformer.wte / wpe / h.L.ln_1 / attn.c_attn / attn.c_proj / ln_2 /
 *     mlp.c_fc / mlp.c_proj / ln_f, lm_head when untied; Conv1D weights are
 *     [in, out] as parc's, lm_head [vocab, hidden] is transposed;
 *   Llama (rotary or no positions, RMSNorm, SwiGLU, no biases): model.embed_tokens /
 *     layers.L.input_layernorm / self_attn.{q,k,v,o}_proj / post_attention_layernorm
 *     / mlp.{gate,up,down}_proj / model.norm, lm_head when untied; qkv is split
 *     into q, k and v (grouped-query attention too) and every nn.Linear weight
 *     is transposed to [out, in].
 * The names kept element for element are prt_hf.h's table, which the
 * import reads by too.
 * Returns 0 with *out (malloc'ed, *nout entries) and *family ("gpt2" or
 * "llama"), or 1 with err filled: a model neither family fits, or a tensor
 * the family has no name for (nothing is dropped silently). */
int export_hf(const ExportTensor *in, int64_t n, ExportOut **out, int64_t *nout, const char **family, char *err,
              size_t size);

#endif
