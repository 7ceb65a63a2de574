/*
 * export_hf.c — `parc export --names hf`: parc's global tensors under the
 * names and layouts of Hugging Face's GPT-2, Llama and Mixtral models
 * (export_hf.h).
 *
 * parc stores a linear weight as [in, out] (the input dims first: attn.qkv.w
 * [hidden, 3, heads, head_dim], or [hidden, kv_heads, G + 2, head_dim] with
 * grouped-query attention: per key/value head its G query heads, then k, then
 * v; mlp.up.w [hidden, 2, ffn] for SwiGLU, gate first).  GPT-2's Conv1D keeps
 * [in, out] with q, k, v fused in that order, so only lm_head (an nn.Linear,
 * [out, in]) is transposed; Llama's nn.Linear weights are all [out, in], with
 * q, k, v and gate, up apart.
 */
#include "export_hf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parc_rt.h"
#include "prt_hf.h"

typedef struct Mapper {
    const ExportTensor *in;
    int64_t n;
    char *used;
    ExportOut *out;
    int64_t nout, cap;
    char *err;
    size_t size;
} Mapper;

static int fail(Mapper *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(Mapper *m, const char *fmt, ...) {
    if (m->err[0]) return 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->err, m->size, fmt, ap);
    va_end(ap);
    return 1;
}

static size_t esize(int64_t dtype) { return dtype == PRT_F32 || dtype == PRT_I32 ? 4 : 2; }

static int64_t elems(const ExportTensor *t) {
    int64_t e = 1;
    for (int64_t k = 0; k < t->ndim; k++) e *= t->gdims[k];
    return e;
}

/* The tensor named "h.<layer>.<name>" (layer >= 0) or "<name>"; marks it used. */
static const ExportTensor *find(Mapper *m, int layer, const char *name) {
    char full[256];
    if (layer >= 0) snprintf(full, sizeof full, "h.%d.%s", layer, name);
    else snprintf(full, sizeof full, "%s", name);
    for (int64_t i = 0; i < m->n; i++)
        if (!strcmp(m->in[i].name, full)) {
            m->used[i] = 1;
            return &m->in[i];
        }
    return NULL;
}

/* A new output tensor of dims d[0..ndim) and t's dtype, data uninitialised. */
static ExportOut *add(Mapper *m, const ExportTensor *t, const char *name, int ndim, const int64_t *d) {
    if (m->nout == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 64;
        m->out = realloc(m->out, (size_t)m->cap * sizeof *m->out);
    }
    ExportOut *o = &m->out[m->nout++];
    memset(o, 0, sizeof *o);
    snprintf(o->name, sizeof o->name, "%s", name);
    o->dtype = t->dtype;
    o->ndim = ndim;
    int64_t e = 1;
    for (int k = 0; k < ndim; k++) o->shape[k] = d[k], e *= d[k];
    o->bytes = (size_t)e * esize(t->dtype);
    o->data = malloc(o->bytes ? o->bytes : 1);
    return o;
}

/* t's bytes under another name and shape (same element count). */
static void copy_as(Mapper *m, const ExportTensor *t, const char *name, int ndim, const int64_t *d) {
    ExportOut *o = add(m, t, name, ndim, d);
    memcpy(o->data, t->data, o->bytes);
}

/* Column block [col0, col0 + cols) of t viewed as [rows, stride] (row-major),
 * written transposed: out[c][r] = t[r][col0 + c], shape [cols, rows]. */
static void transposed_block(Mapper *m, const ExportTensor *t, const char *name, int64_t rows, int64_t stride,
                             int64_t col0, int64_t cols) {
    ExportOut *o = add(m, t, name, 2, (int64_t[]){cols, rows});
    size_t es = esize(t->dtype);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            memcpy(o->data + ((size_t)c * (size_t)rows + (size_t)r) * es,
                   t->data + ((size_t)r * (size_t)stride + (size_t)(col0 + c)) * es, es);
}

static const ExportTensor *need(Mapper *m, int layer, const char *name, const char *family) {
    const ExportTensor *t = find(m, layer, name);
    if (!t)
        fail(m, "the checkpoint has no %s%s%s, which a %s model has: export with --names parc",
             layer >= 0 ? "h.N." : "", name, layer >= 0 ? " (N the layer)" : "", family);
    return t;
}

/* The tensors of family `family` kept element for element (prt_hf.h's table):
 * each of the block L's (L >= 0) or the globals (L = -1) the checkpoint has,
 * renamed, in the file's shape; `required` ones it lacks are errors. */
static void same_rows(Mapper *m, int family, int L, const char *prefix, int required) {
    const char *parc, *hf;
    char name[128];
    for (int k = 0; (hf = prt_hf_same_row(family, L >= 0, k, &parc)); k++) {
        const ExportTensor *t = required ? need(m, L, parc, family == PRT_HF_GPT2 ? "GPT-2" : "Llama")
                                         : find(m, L, parc);
        if (!t) continue;  /* `bias false` models have none of the biases */
        int64_t d[2];
        int nd = prt_hf_same_shape(parc, t->ndim, t->gdims, d);
        snprintf(name, sizeof name, "%s%s", prefix, hf);
        copy_as(m, t, name, nd, d);
    }
}

static void gpt2_layer(Mapper *m, int L, int64_t C) {
    const ExportTensor *qkv = need(m, L, "attn.qkv.w", "GPT-2"), *proj = need(m, L, "attn.proj.w", "GPT-2");
    if (!qkv || !proj) return;
    if (qkv->ndim != 4 || qkv->gdims[0] != C || qkv->gdims[1] != 3) {
        fail(m, "h.%d.attn.qkv.w: [%lld, %lld, ...] is not GPT-2's fused [hidden, 3 x hidden] (grouped-query "
             "attention has no GPT-2 name): export with --names parc", L, (long long)qkv->gdims[0],
             (long long)qkv->gdims[1]);
        return;
    }
    char prefix[32];
    snprintf(prefix, sizeof prefix, "transformer.h.%d.", L);
    same_rows(m, PRT_HF_GPT2, L, prefix, 0);
}

/* A mixture of experts' MLP as Mixtral's block_sparse_moe: the router
 * [hidden, E] as gate.weight [E, hidden]; expert e's SwiGLU up [hidden, 2,
 * F] (gate, then up) as w1 (gate) and w3 (up), [F, hidden] each, its down
 * [F, hidden] as w2 [hidden, F]. */
static void mixtral_experts(Mapper *m, int L, int64_t C, const ExportTensor *router, const ExportTensor *up,
                            const ExportTensor *down) {
    char name[160];
    int64_t E = router->ndim == 2 ? router->gdims[1] : 0;
    if (router->ndim != 2 || router->gdims[0] != C || up->ndim != 4 || up->gdims[0] != E || up->gdims[1] != C ||
        up->gdims[2] != 2 || down->ndim != 3 || down->gdims[0] != E || down->gdims[2] != C ||
        down->gdims[1] != up->gdims[3]) {
        fail(m, "h.%d's experts are not SwiGLU experts [experts, hidden, 2, ffn] and [experts, ffn, hidden] under a "
                "router [hidden, experts]: Mixtral has no name for them; export with --names parc", L);
        return;
    }
    int64_t F = up->gdims[3];
    size_t es = esize(up->dtype), per_up = (size_t)(C * 2 * F) * es, per_down = (size_t)(F * C) * es;
    snprintf(name, sizeof name, "model.layers.%d.block_sparse_moe.gate.weight", L);
    transposed_block(m, router, name, C, E, 0, E);
    for (int64_t e = 0; e < E; e++) {
        ExportTensor ue = *up, de = *down;
        ue.data = up->data + (size_t)e * per_up;
        de.data = down->data + (size_t)e * per_down;
        snprintf(name, sizeof name, "model.layers.%d.block_sparse_moe.experts.%lld.w1.weight", L, (long long)e);
        transposed_block(m, &ue, name, C, 2 * F, 0, F);
        snprintf(name, sizeof name, "model.layers.%d.block_sparse_moe.experts.%lld.w3.weight", L, (long long)e);
        transposed_block(m, &ue, name, C, 2 * F, F, F);
        snprintf(name, sizeof name, "model.layers.%d.block_sparse_moe.experts.%lld.w2.weight", L, (long long)e);
        transposed_block(m, &de, name, F, C, 0, C);
    }
}

static void llama_layer(Mapper *m, int L, int64_t C) {
    char name[128];
    snprintf(name, sizeof name, "model.layers.%d.", L);
    same_rows(m, PRT_HF_LLAMA, L, name, 1);
    const ExportTensor *qkv = need(m, L, "attn.qkv.w", "Llama"), *proj = need(m, L, "attn.proj.w", "Llama");
    const ExportTensor *router = find(m, L, "mlp.router.w");
    const ExportTensor *up = need(m, L, router ? "mlp.experts.up.w" : "mlp.up.w", router ? "Mixtral" : "Llama");
    const ExportTensor *down = need(m, L, router ? "mlp.experts.down.w" : "mlp.down.w", router ? "Mixtral" : "Llama");
    if (m->err[0]) return;
    /* qkv [C, A, B, hd]: A = 3 and B = heads (C = heads x hd), or A = kv_heads and B = G + 2 */
    int64_t B = qkv->gdims[2], hd = qkv->gdims[3];
    int64_t heads, kv;
    if (!prt_hf_qkv_heads(qkv->ndim, qkv->gdims, &heads, &kv)) {
        fail(m, "h.%d.attn.qkv.w: cannot tell its q, k and v apart from its shape: export with --names parc", L);
        return;
    }
    int mha = heads == kv;
    int64_t width = elems(qkv) / C;  /* the row length of qkv viewed as [C, width] */
    int64_t G = heads / kv;
    ExportOut *q = NULL, *k = NULL, *v = NULL;
    static const char *const proj_names[] = {"q_proj", "k_proj", "v_proj"};
    for (int w = 0; w < 3; w++) {
        snprintf(name, sizeof name, "model.layers.%d.self_attn.%s.weight", L, proj_names[w]);
        ExportOut *o = add(m, qkv, name, 2, (int64_t[]){(w ? kv : heads) * hd, C});
        if (w == 0) q = o;
        else if (w == 1) k = o;
        else v = o;
    }
    size_t es = esize(qkv->dtype);
    for (int64_t c = 0; c < C; c++)
        for (int64_t h = 0; h < heads; h++)
            for (int64_t d = 0; d < hd; d++) {
                /* the column of query head h, and of its group's k and v, in qkv's row c */
                int64_t g = h / G, j = h % G;
                int64_t qcol = mha ? h * hd + d : (g * B + j) * hd + d;
                memcpy(q->data + ((size_t)(h * hd + d) * (size_t)C + (size_t)c) * es,
                       qkv->data + ((size_t)c * (size_t)width + (size_t)qcol) * es, es);
                if (j) continue;
                int64_t kcol = mha ? (heads + h) * hd + d : (g * B + G) * hd + d;
                int64_t vcol = mha ? (2 * heads + h) * hd + d : (g * B + G + 1) * hd + d;
                size_t at = ((size_t)(g * hd + d) * (size_t)C + (size_t)c) * es;
                memcpy(k->data + at, qkv->data + ((size_t)c * (size_t)width + (size_t)kcol) * es, es);
                memcpy(v->data + at, qkv->data + ((size_t)c * (size_t)width + (size_t)vcol) * es, es);
            }
    snprintf(name, sizeof name, "model.layers.%d.self_attn.o_proj.weight", L);
    transposed_block(m, proj, name, elems(proj) / C, C, 0, C);
    if (router) {
        mixtral_experts(m, L, C, router, up, down);
        return;
    }
    if (up->ndim != 3 || up->gdims[0] != C || up->gdims[1] != 2) {
        fail(m, "h.%d.mlp.up.w is not SwiGLU's [hidden, 2, ffn]: export with --names parc", L);
        return;
    }
    int64_t F = up->gdims[2];
    snprintf(name, sizeof name, "model.layers.%d.mlp.gate_proj.weight", L);
    transposed_block(m, up, name, C, 2 * F, 0, F);
    snprintf(name, sizeof name, "model.layers.%d.mlp.up_proj.weight", L);
    transposed_block(m, up, name, C, 2 * F, F, F);
    snprintf(name, sizeof name, "model.layers.%d.mlp.down_proj.weight", L);
    transposed_block(m, down, name, F, C, 0, C);
}

int export_hf(const ExportTensor *in, int64_t n, ExportOut **out, int64_t *nout, const char **family, char *err,
              size_t size) {
    Mapper m = {.in = in, .n = n, .used = calloc((size_t)(n ? n : 1), 1), .err = err, .size = size};
    err[0] = 0;
    int layers = 0;
    for (int64_t i = 0; i < n; i++) {
        int L = -1;
        if (sscanf(in[i].name, "h.%d.", &L) == 1 && L + 1 > layers) layers = L + 1;
    }
    const ExportTensor *wte = find(&m, -1, "wte"), *wpe = find(&m, -1, "wpe"), *head = find(&m, -1, "head.w");
    const ExportTensor *up0 = NULL, *ln0b = NULL, *experts0 = NULL, *shared0 = NULL;
    int dense_layers = 0, moe_layers = 0;
    for (int64_t i = 0; i < n; i++) {
        int L = -1, at = 0;
        if (sscanf(in[i].name, "h.%d.%n", &L, &at) == 1 && at > 0) {
            dense_layers += !strcmp(in[i].name + at, "mlp.up.w");
            moe_layers += !strcmp(in[i].name + at, "mlp.experts.up.w");
        }
    }
    for (int64_t i = 0; i < n; i++) {
        if (!strcmp(in[i].name, "h.0.mlp.up.w")) up0 = &in[i];
        if (!strcmp(in[i].name, "h.0.mlp.experts.up.w")) experts0 = &in[i];
        if (!strcmp(in[i].name, "h.0.mlp.shared.up.w")) shared0 = &in[i];
        if (!strcmp(in[i].name, "h.0.ln1.b")) ln0b = &in[i];
    }
    int gpt2 = wte && wpe && ln0b && up0 && up0->ndim == 2;
    int llama = wte && !wpe && !ln0b && ((up0 && up0->ndim == 3) || (experts0 && experts0->ndim == 4));
    if (dense_layers && moe_layers) {
        fail(&m, "this model has the mixture of experts in some layers and a dense MLP in the others (`every`): "
                 "Mixtral's and Llama's classes have one kind of layer; export with --names parc");
    } else if (shared0) {
        fail(&m, "this mixture of experts has shared experts, which parc adds ungated: no Hugging Face class "
                 "computes that (Qwen2-MoE gates its shared expert); export with --names parc");
    } else if (!wte || wte->ndim != 2 || !layers || gpt2 == llama) {
        fail(&m, "this model is neither a GPT-2 (learned positions, LayerNorm, GELU) nor a Llama (no learned "
                 "positions, RMSNorm, SwiGLU, or SwiGLU experts as Mixtral's): it has no Hugging Face names; "
                 "export with --names parc");
    } else {
        int64_t V = wte->gdims[0], C = wte->gdims[1];
        *family = gpt2 ? "gpt2" : experts0 ? "mixtral" : "llama";
        same_rows(&m, gpt2 ? PRT_HF_GPT2 : PRT_HF_LLAMA, -1, "", 0);  /* wte, wpe, the final norm */
        for (int L = 0; L < layers && !err[0]; L++) (gpt2 ? gpt2_layer : llama_layer)(&m, L, C);
        if (head && (head->ndim != 2 || head->gdims[0] != C || head->gdims[1] != V))
            fail(&m, "head.w is not [hidden, vocab]: export with --names parc");
        else if (head)
            transposed_block(&m, head, "lm_head.weight", C, V, 0, V);
        for (int64_t i = 0; i < n && !err[0]; i++)
            if (!m.used[i])
                fail(&m, "tensor %s has no %s name: export with --names parc", in[i].name,
                     gpt2 ? "GPT-2" : experts0 ? "Mixtral" : "Llama");
    }
    free(m.used);
    *out = m.out;
    *nout = m.nout;
    return err[0] ? 1 : 0;
}
