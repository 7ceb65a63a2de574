/*
 * prt_hf.c — the Hugging Face names of parc tensors kept element for element
 * (prt_hf.h).
 */
#include "prt_hf.h"

#include <stddef.h>
#include <string.h>

typedef struct row {
    const char *parc, *hf;
} row;

static const row gpt2_global[] = {
    {"wte", "transformer.wte.weight"},   {"wpe", "transformer.wpe.weight"},
    {"lnf.g", "transformer.ln_f.weight"}, {"lnf.b", "transformer.ln_f.bias"},
    {NULL, NULL},
};
static const row gpt2_block[] = {
    {"ln1.g", "ln_1.weight"},          {"ln1.b", "ln_1.bias"},           {"ln2.g", "ln_2.weight"},
    {"ln2.b", "ln_2.bias"},            {"attn.qkv.w", "attn.c_attn.weight"}, {"attn.qkv.b", "attn.c_attn.bias"},
    {"attn.proj.w", "attn.c_proj.weight"}, {"attn.proj.b", "attn.c_proj.bias"}, {"mlp.up.w", "mlp.c_fc.weight"},
    {"mlp.up.b", "mlp.c_fc.bias"},     {"mlp.down.w", "mlp.c_proj.weight"}, {"mlp.down.b", "mlp.c_proj.bias"},
    {NULL, NULL},
};
static const row llama_global[] = {{"wte", "model.embed_tokens.weight"}, {"lnf.g", "model.norm.weight"}, {NULL, NULL}};
static const row llama_block[] = {
    {"ln1.g", "input_layernorm.weight"}, {"ln2.g", "post_attention_layernorm.weight"}, {NULL, NULL}};

static const row *table(int family, int block) {
    if (family == PRT_HF_GPT2) return block ? gpt2_block : gpt2_global;
    return block ? llama_block : llama_global;
}

const char *prt_hf_same_row(int family, int block, int k, const char **parc) {
    const row *t = table(family, block);
    for (int i = 0; i <= k; i++)
        if (!t[i].parc) return NULL;
    *parc = t[k].parc;
    return t[k].hf;
}

const char *prt_hf_same_name(int family, int block, const char *parc) {
    for (const row *t = table(family, block); t->parc; t++)
        if (!strcmp(t->parc, parc)) return t->hf;
    return NULL;
}

int prt_hf_same_shape(const char *parc, int64_t ndim, const int64_t *gdims, int64_t dims[2]) {
    int64_t n = 1;
    for (int64_t k = 0; k < ndim; k++) n *= gdims[k];
    size_t len = strlen(parc);
    if (ndim < 1 || (len > 2 && parc[len - 2] == '.' && (parc[len - 1] == 'g' || parc[len - 1] == 'b'))) {
        dims[0] = n;
        return 1;
    }
    int64_t first = !strcmp(parc, "attn.proj.w") ? n / gdims[ndim - 1] : gdims[0];
    dims[0] = first;
    dims[1] = first ? n / first : 0;
    return 2;
}

int prt_hf_qkv_heads(int64_t ndim, const int64_t *gdims, int64_t *heads, int64_t *kv_heads) {
    if (ndim != 4) return 0;
    int64_t C = gdims[0], A = gdims[1], B = gdims[2], hd = gdims[3];
    int mha = A == 3 && B * hd == C, gqa = B > 2 && A * (B - 2) * hd == C;
    if (mha == gqa) return 0;
    *heads = mha ? B : A * (B - 2);
    *kv_heads = mha ? B : A;
    return 1;
}
