/*
 * prt_import.c — `--init-from PATH`: a run starts from a Hugging Face GPT-2,
 * Llama or Mixtral checkpoint (a safetensors file, or a directory with model.safetensors or
 * model.safetensors.index.json and its files) in any layout.
 *
 * Every rank maps the files read-only and fills its own shards only: for each
 * element of its weights and fp32 master buffers it takes the global index
 * (prt_param_global: the tensor-parallel block, the ZeRO share, the layer) to
 * the element of the Hugging Face tensor that holds it, through the layouts
 * docs/checkpoints.md tabulates (the inverse of `parc export --names hf`):
 *   GPT-2: parc's [in, out] weights are Conv1D's, element for element
 *     (attn.qkv.w [C, 3, heads, hd] is c_attn [C, 3C]); head.w [C, V] is
 *     lm_head [V, C] transposed;
 *   Llama: nn.Linear weights are [out, in]: attn.qkv.w [C, A, B, hd] (A = 3 and
 *     B = heads, or A = kv_heads and B = G + 2: per key/value head its G query
 *     heads, then k, then v) takes q_proj, k_proj, v_proj transposed; mlp.up.w
 *     [C, 2, F] gate_proj then up_proj, transposed; proj, down and head
 *     transposed;
 *   Mixtral: a Llama whose MLP is block_sparse_moe: mlp.router.w [C, E] its
 *     gate transposed, mlp.experts.up.w [E, C, 2, F] each expert's w1 then w3
 *     transposed, mlp.experts.down.w [E, F, C] each one's w2 transposed.
 * No rank reads a whole tensor it does not hold (the pages it touches are its
 * shard's).  Optimizer moments start at zero, as in a fresh run.
 *
 * Checks, every problem of the rank in one message: a directory's config.json
 * against the plan's model (rope_theta, rope_scaling, the norms' epsilon, the
 * activation: what the shapes do not carry); a tensor the plan needs
 * that the files lack, one of another shape (expected and found), a dtype
 * other than F32, BF16 or F16; and, over all ranks, a tensor of the files no
 * rank used (a model with more layers, a head the plan ties), except the
 * buffers older exports carry (attn.bias, attn.masked_bias, rotary inv_freq).
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "prt_backend.h"
#include "prt_hf.h"
#include "prt_internal.h"
#include "prt_math.h"
#include "prt_safetensors.h"


/* One tensor of the files: where its bytes are mapped. */
typedef struct hf_tensor {
    char *name;
    int64_t dtype, ndim, shape[8];
    const char *data;
    int used;
} hf_tensor;

typedef struct importer {
    prt *rt;
    const char *path;
    hf_tensor *t;
    int64_t n;
    void **maps;
    size_t *map_bytes;
    int nfiles;
    int family;
    int mixtral;  /* a Llama whose MLPs are block_sparse_moe */
    char err[8192];
    int64_t dropped;  /* problems past what err holds */
} importer;

static char *copy_text(const char *text) {
    size_t n = strlen(text) + 1;
    return memcpy(prt_xmalloc(n), text, n);
}

static void problem(importer *im, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void problem(importer *im, const char *fmt, ...) {
    size_t len = strlen(im->err);
    if (len + 300 >= sizeof im->err) {
        im->dropped++;
        return;
    }
    if (len) len += (size_t)snprintf(im->err + len, sizeof im->err - len, "\n  ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(im->err + len, sizeof im->err - len, fmt, ap);
    va_end(ap);
}

/* Maps one safetensors file and adds its tensors (only `want`, a weight_map's
 * names for this file, when not NULL). */
static void add_file(importer *im, const char *path, const cJSON *want) {
    char err[1024] = "";
    prt_st_file *st = prt_st_open(path, err, sizeof err);
    if (!st) {
        problem(im, "%s", err);
        return;
    }
    int fd = open(path, O_RDONLY);
    void *map = fd >= 0 && st->size ? mmap(NULL, st->size, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
    if (fd >= 0) close(fd);
    if (map == MAP_FAILED) {
        problem(im, "%s: cannot map: %s", path, strerror(errno));
        prt_st_close(st);
        return;
    }
    im->maps = prt_xrealloc(im->maps, sizeof *im->maps * (size_t)(im->nfiles + 1));
    im->map_bytes = prt_xrealloc(im->map_bytes, sizeof *im->map_bytes * (size_t)(im->nfiles + 1));
    im->maps[im->nfiles] = map;
    im->map_bytes[im->nfiles++] = st->size;
    const cJSON *e;
    cJSON_ArrayForEach(e, st->header) {
        if (!strcmp(e->string, "__metadata__")) continue;
        if (want && !cJSON_GetObjectItemCaseSensitive(want, e->string)) continue;
        const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype"), *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
        const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
        hf_tensor t = {.name = copy_text(e->string), .dtype = cJSON_IsString(dt) ? prt_st_dtype_of(dt->valuestring) : -1};
        const cJSON *x;
        cJSON_ArrayForEach(x, sh) if (t.ndim < 8) t.shape[t.ndim++] = (int64_t)x->valuedouble;
        t.data = (const char *)map + st->data_start + (uint64_t)cJSON_GetArrayItem(off, 0)->valuedouble;
        if (t.dtype != PRT_F32 && t.dtype != PRT_BF16 && t.dtype != PRT_F16)
            problem(im, "%s: tensor %s is %s; parc reads F32, BF16 and F16", path, t.name,
                    cJSON_IsString(dt) ? dt->valuestring : "?");
        im->t = prt_xrealloc(im->t, sizeof *im->t * (size_t)(im->n + 1));
        im->t[im->n++] = t;
    }
    prt_st_close(st);
}

/* The files of PATH: the file itself, or a directory's index and its files, or
 * its model.safetensors. */
static void open_source(importer *im) {
    struct stat st;
    if (stat(im->path, &st) != 0) {
        problem(im, "--init-from %s: %s", im->path, strerror(errno));
        return;
    }
    if (!S_ISDIR(st.st_mode)) {
        add_file(im, im->path, NULL);
        return;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", im->path);
    if (access(path, F_OK) == 0) {
        char err[1024];
        cJSON *index = prt_read_json(path, err, sizeof err);
        const cJSON *map = cJSON_GetObjectItemCaseSensitive(index, "weight_map"), *e;
        if (!index) problem(im, "%s", err);
        else if (!cJSON_IsObject(map)) problem(im, "%s: not an index (no weight_map)", path);
        /* each file once, with the names the index gives it */
        cJSON *files = cJSON_CreateObject();
        cJSON_ArrayForEach(e, map) {
            if (!cJSON_IsString(e) || strchr(e->valuestring, '/')) {
                problem(im, "%s: tensor %s: bad file name", path, e->string);
                continue;
            }
            cJSON *names = cJSON_GetObjectItemCaseSensitive(files, e->valuestring);
            if (!names) names = cJSON_AddObjectToObject(files, e->valuestring);
            cJSON_AddTrueToObject(names, e->string);
        }
        cJSON_ArrayForEach(e, files) {
            snprintf(path, sizeof path, "%s/%s", im->path, e->string);
            add_file(im, path, e);
        }
        cJSON_Delete(files);
        cJSON_Delete(index);
        return;
    }
    snprintf(path, sizeof path, "%s/model.safetensors", im->path);
    if (access(path, F_OK) != 0) {
        problem(im, "--init-from %s: a directory without model.safetensors or model.safetensors.index.json",
                im->path);
        return;
    }
    add_file(im, path, NULL);
}

static hf_tensor *find(importer *im, const char *name) {
    for (int64_t i = 0; i < im->n; i++)
        if (!strcmp(im->t[i].name, name)) return &im->t[i];
    return NULL;
}

/* How a parc tensor's elements map into the files: up to three Hugging Face
 * tensors and the index arithmetic between them. */
enum { MAP_SAME, MAP_TRANSPOSE, MAP_QKV, MAP_GATE_UP, MAP_EXPERTS_UP, MAP_EXPERTS_DOWN };
typedef struct hf_map {
    int kind, nparts;
    hf_tensor *part[3];
    hf_tensor **experts; /* MAP_EXPERTS_*: per expert its w1 and w3 ([2E]) or its w2 ([E]), malloc'ed */
    int64_t rows, cols;  /* MAP_TRANSPOSE: parc [rows, cols] is the file's [cols, rows] */
    int64_t C, A, B, hd, heads, kv, G, F, E;
} hf_map;

/* Checks the file tensor `name` has shape dims[0..nd) and adds it to m. */
static void part(importer *im, hf_map *m, const char *name, int nd, const int64_t *dims) {
    hf_tensor *t = find(im, name);
    char want[128] = "", got[128] = "";
    size_t w = 0, g = 0;
    for (int k = 0; k < nd; k++) w += (size_t)snprintf(want + w, sizeof want - w, "%s%lld", k ? ", " : "", (long long)dims[k]);
    if (!t) {
        problem(im, "the plan needs tensor %s [%s], which %s lacks", name, want, im->path);
        m->nparts = -1;
        return;
    }
    t->used = 1;
    int same = t->ndim == nd;
    for (int k = 0; k < nd && same; k++) same = t->shape[k] == dims[k];
    if (!same) {
        for (int k = 0; k < t->ndim; k++)
            g += (size_t)snprintf(got + g, sizeof got - g, "%s%lld", k ? ", " : "", (long long)t->shape[k]);
        problem(im, "tensor %s: the plan's model needs [%s], %s holds [%s]", name, want, im->path, got);
        m->nparts = -1;
        return;
    }
    if (m->nparts < 0) return;
    if (m->experts) m->experts[m->nparts++] = t;
    else m->part[m->nparts++] = t;
}

static int64_t numel(const prt_buffer_desc *d) {
    int64_t n = 1;
    for (int64_t k = 0; k < d->ndim; k++) n *= d->gdims[k];
    return n;
}

/* The map of parc tensor `base` of layer `layer` (-1: none), dims d->gdims. */
static hf_map map_of(importer *im, const prt_buffer_desc *d, const char *base, int64_t layer) {
    hf_map m = {.kind = MAP_SAME};
    char name[256], pre[64] = "";
    int gpt2 = im->family == PRT_HF_GPT2;
    if (layer >= 0) snprintf(pre, sizeof pre, gpt2 ? "transformer.h.%lld." : "model.layers.%lld.", (long long)layer);
    int64_t n = numel(d), C = 0;
    /* element for element (prt_hf.h's table, which the export writes by) */
    const char *same = prt_hf_same_name(im->family, layer >= 0, base);
    if (same) {
        int64_t dims[2];
        int nd = prt_hf_same_shape(base, d->ndim, d->gdims, dims);
        snprintf(name, sizeof name, "%s%s", pre, same);
        part(im, &m, name, nd, dims);
        return m;
    }
    if (!strcmp(base, "head.w") && layer < 0) {  /* [C, V] <- lm_head [V, C] */
        m.kind = MAP_TRANSPOSE;
        m.rows = d->gdims[0], m.cols = n / d->gdims[0];
        part(im, &m, "lm_head.weight", 2, (int64_t[]){m.cols, m.rows});
        return m;
    }
    if (gpt2 || layer < 0) {
        problem(im, "parc tensor %s%s has no %s name", base, layer >= 0 ? " (a block's)" : "",
                gpt2 ? "GPT-2" : "Llama");
        m.nparts = -1;
        return m;
    }
    C = d->gdims[0];
    if (!strcmp(base, "attn.proj.w") || !strcmp(base, "mlp.down.w")) {  /* [in, C] <- o_proj / down_proj [C, in] */
        m.kind = MAP_TRANSPOSE;
        m.rows = n / d->gdims[d->ndim - 1], m.cols = d->gdims[d->ndim - 1];
        snprintf(name, sizeof name, "%s%s", pre, base[0] == 'a' ? "self_attn.o_proj.weight" : "mlp.down_proj.weight");
        part(im, &m, name, 2, (int64_t[]){m.cols, m.rows});
        return m;
    }
    if (!strcmp(base, "attn.qkv.w") && d->ndim == 4) {
        m.kind = MAP_QKV;
        m.C = C, m.A = d->gdims[1], m.B = d->gdims[2], m.hd = d->gdims[3];
        if (!prt_hf_qkv_heads(d->ndim, d->gdims, &m.heads, &m.kv)) {
            problem(im, "parc tensor attn.qkv.w [%lld, %lld, %lld, %lld]: neither of its q/k/v layouts",
                    (long long)C, (long long)m.A, (long long)m.B, (long long)m.hd);
            m.nparts = -1;
            return m;
        }
        m.G = m.heads / m.kv;
        static const char *const proj[] = {"q_proj", "k_proj", "v_proj"};
        for (int w = 0; w < 3; w++) {
            snprintf(name, sizeof name, "%sself_attn.%s.weight", pre, proj[w]);
            part(im, &m, name, 2, (int64_t[]){(w ? m.kv : m.heads) * m.hd, C});
        }
        return m;
    }
    /* a mixture of experts as Mixtral's block_sparse_moe: the router [C, E]
     * <- gate [E, C]; experts.up.w [E, C, 2, F] <- each expert's w1 (gate)
     * and w3 (up) [F, C]; experts.down.w [E, F, C] <- each one's w2 [C, F] */
    if (!strcmp(base, "mlp.router.w") && d->ndim == 2) {
        m.kind = MAP_TRANSPOSE;
        m.rows = C, m.cols = d->gdims[1];
        snprintf(name, sizeof name, "%sblock_sparse_moe.gate.weight", pre);
        part(im, &m, name, 2, (int64_t[]){m.cols, m.rows});
        return m;
    }
    int up = !strcmp(base, "mlp.experts.up.w") && d->ndim == 4 && d->gdims[2] == 2;
    int down = !strcmp(base, "mlp.experts.down.w") && d->ndim == 3;
    if (up || down) {
        m.kind = up ? MAP_EXPERTS_UP : MAP_EXPERTS_DOWN;
        m.E = d->gdims[0], m.C = up ? d->gdims[1] : d->gdims[2], m.F = up ? d->gdims[3] : d->gdims[1];
        m.experts = prt_xcalloc((size_t)(2 * m.E), sizeof *m.experts);
        for (int64_t e = 0; e < m.E && m.nparts >= 0; e++)
            for (int w = 0; w < (up ? 2 : 1) && m.nparts >= 0; w++) {
                snprintf(name, sizeof name, "%sblock_sparse_moe.experts.%lld.w%d.weight", pre, (long long)e,
                         up ? (w ? 3 : 1) : 2);
                part(im, &m, name, 2, up ? (int64_t[]){m.F, m.C} : (int64_t[]){m.C, m.F});
            }
        return m;
    }
    if (!strcmp(base, "mlp.up.w") && d->ndim == 3 && d->gdims[1] == 2) {
        m.kind = MAP_GATE_UP;
        m.C = C, m.F = d->gdims[2];
        snprintf(name, sizeof name, "%smlp.gate_proj.weight", pre);
        part(im, &m, name, 2, (int64_t[]){m.F, C});
        snprintf(name, sizeof name, "%smlp.up_proj.weight", pre);
        part(im, &m, name, 2, (int64_t[]){m.F, C});
        return m;
    }
    problem(im, "parc tensor %s (a block's) has no Llama name", base);
    m.nparts = -1;
    return m;
}

/* The value of parc's global element g under map m. */
static float value_at(const hf_map *m, int64_t g) {
    const hf_tensor *t = m->part[0];
    int64_t i = g;
    switch (m->kind) {
    case MAP_TRANSPOSE: i = (g % m->cols) * m->rows + g / m->cols; break;
    case MAP_QKV: {  /* g = ((c x A + a) x B + b) x hd + d */
        int64_t dd = g % m->hd, b = g / m->hd % m->B, a = g / (m->hd * m->B) % m->A, c = g / (m->hd * m->B * m->A);
        int w, h;
        if (m->A == 3 && m->B == m->heads) w = (int)a, h = (int)b;            /* [C, 3, heads, hd] */
        else if (b < m->G) w = 0, h = (int)(a * m->G + b);                      /* query head a x G + b */
        else w = (int)(b - m->G + 1), h = (int)a;                              /* k (b = G) or v of group a */
        t = m->part[w];
        i = ((int64_t)h * m->hd + dd) * m->C + c;
        break;
    }
    case MAP_GATE_UP: {  /* g = (c x 2 + w) x F + f */
        int64_t f = g % m->F, w = g / m->F % 2, c = g / (2 * m->F);
        t = m->part[w];
        i = f * m->C + c;
        break;
    }
    case MAP_EXPERTS_UP: {  /* g = ((e x C + c) x 2 + w) x F + f */
        int64_t f = g % m->F, w = g / m->F % 2, c = g / (2 * m->F) % m->C, e = g / (2 * m->F * m->C);
        t = m->experts[2 * e + w];
        i = f * m->C + c;
        break;
    }
    case MAP_EXPERTS_DOWN: {  /* g = (e x F + f) x C + c */
        int64_t c = g % m->C, f = g / m->C % m->F, e = g / (m->C * m->F);
        t = m->experts[e];
        i = c * m->F + f;
        break;
    }
    default: break;
    }
    return prt_load(t->data, t->dtype, i);
}

/* Fills instance `inst` of buffer b from the files. */
static void fill(importer *im, prt_buffer *b, int64_t inst) {
    const prt_buffer_desc *d = &b->desc;
    int64_t layer = prt_param_layer(d, inst);
    hf_map m = map_of(im, d, d->init_name ? d->init_name : d->name, layer);
    if (m.nparts <= 0) {
        free(m.experts);
        return;
    }
    prt_param_map pm;
    prt_param_map_init(im->rt, &pm, d, d->name, d->elems);
    int host = im->rt->backend->host_memory;
    size_t bytes = b->instance_bytes;
    char *dst = host ? b->base + inst * bytes : prt_xcalloc(bytes ? bytes : 1, 1);
    for (int64_t e = 0; e < d->elems; e++) {
        int64_t g = prt_param_global(&pm, e);
        if (g >= 0) prt_store(dst, d->dtype, e, value_at(&m, g));
    }
    if (!host) {
        if (bytes) im->rt->backend->upload(im->rt, b->base + inst * bytes, dst, bytes);
        free(dst);
    }
    free(m.experts);
}

static double number(const cJSON *o, const char *key, double otherwise) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : otherwise;
}

/* Two settings that must agree; relative 1e-9 for what JSON prints in decimal. */
static void same(importer *im, const char *what, double file, double plan) {
    double scale = fabs(plan) > 1e-300 ? fabs(plan) : 1.0;
    if (fabs(file - plan) > 1e-9 * scale)
        problem(im, "config.json: %s %.9g, the plan's model has %.9g: it would compute other logits", what, file, plan);
}

/* A directory's config.json against the plan's model (its settings the shapes
 * do not carry: the positions, rope_theta and rope_scaling, the norms'
 * epsilon, the activation). */
static void check_config(importer *im) {
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", im->path);
    struct stat st;
    if (stat(im->path, &st) != 0 || !S_ISDIR(st.st_mode) || access(path, F_OK) != 0) return;
    char err[1024];
    cJSON *c = prt_read_json(path, err, sizeof err);
    cJSON *plan = im->rt->plan.model_json ? cJSON_Parse(im->rt->plan.model_json) : NULL;
    if (!c) problem(im, "%s", err);
    if (c && plan) {
        const cJSON *pos = cJSON_GetObjectItemCaseSensitive(plan, "positions");
        int rope = cJSON_IsString(pos) && !strcmp(pos->valuestring, "rope");
        double eps = number(plan, "norm_eps", 1e-5), final_eps = number(plan, "final_norm_eps", eps);
        if (im->family == PRT_HF_LLAMA) {
            if (!rope) problem(im, "config.json: a Llama applies rotary positions; the plan's model has %s positions: "
                               "`embed positions rope theta %g;`", cJSON_IsString(pos) ? pos->valuestring : "no",
                               number(c, "rope_theta", 10000));
            else same(im, "rope_theta", number(c, "rope_theta", 10000), number(plan, "rope_theta", 10000));
            const cJSON *fs = cJSON_GetObjectItemCaseSensitive(c, "rope_scaling");
            const cJSON *ps = cJSON_GetObjectItemCaseSensitive(plan, "rope_scaling");
            const cJSON *type = cJSON_GetObjectItemCaseSensitive(fs, "rope_type");
            if (!cJSON_IsString(type)) type = cJSON_GetObjectItemCaseSensitive(fs, "type");
            if (cJSON_IsObject(fs) && (!cJSON_IsString(type) || strcmp(type->valuestring, "llama3")))
                problem(im, "config.json: rope_scaling of type %s; parc has Llama 3.1's (`scaling llama3 ...`)",
                        cJSON_IsString(type) ? type->valuestring : "?");
            else if (cJSON_IsObject(fs) != cJSON_IsObject(ps))
                problem(im, "config.json: rope_scaling %s, the plan's model %s", cJSON_IsObject(fs) ? "llama3" : "none",
                        cJSON_IsObject(ps) ? "scales (`scaling llama3 ...`)" : "does not scale");
            else if (cJSON_IsObject(fs)) {
                static const char *const keys[] = {"factor", "low_freq_factor", "high_freq_factor",
                                                   "original_max_position_embeddings"};
                for (int k = 0; k < 4; k++) {
                    char what[64];
                    snprintf(what, sizeof what, "rope_scaling %s", keys[k]);
                    same(im, what, number(fs, keys[k], -1), number(ps, keys[k], -1));
                }
            }
            same(im, "rms_norm_eps", number(c, "rms_norm_eps", 1e-6), eps);
            if (final_eps != eps) same(im, "rms_norm_eps (the final norm's)", number(c, "rms_norm_eps", 1e-6), final_eps);
            /* Mixtral: its experts per token and router (the shapes carry the rest) */
            const cJSON *mtype = cJSON_GetObjectItemCaseSensitive(c, "model_type");
            const cJSON *moe = cJSON_GetObjectItemCaseSensitive(plan, "moe");
            const cJSON *router = cJSON_GetObjectItemCaseSensitive(moe, "router");
            int mixtral = cJSON_IsString(mtype) && !strcmp(mtype->valuestring, "mixtral");
            if (mixtral != cJSON_IsObject(moe))
                problem(im, "config.json: a %s, the plan's model %s", mixtral ? "Mixtral (a mixture of experts)" : "dense Llama",
                        cJSON_IsObject(moe) ? "a mixture of experts" : "dense (`mlp moe experts E top K;` for Mixtral)");
            else if (mixtral) {
                double every = number(moe, "every", 1);
                if (every != 1)
                    problem(im, "config.json: a Mixtral has a mixture of experts in every layer, the plan's model "
                                "in one layer of every %g (`every %g`): `every 1` loads it", every, every);
                same(im, "num_experts_per_tok", number(c, "num_experts_per_tok", 2), number(moe, "topk", 0));
                if (!cJSON_IsString(router) || strcmp(router->valuestring, "softmax"))
                    problem(im, "config.json: Mixtral routes by a softmax; the plan's router is %s: `router softmax`",
                            cJSON_IsString(router) ? router->valuestring : "?");
            }
        } else {
            const cJSON *act = cJSON_GetObjectItemCaseSensitive(c, "activation_function");
            if (cJSON_IsString(act) && strcmp(act->valuestring, "gelu_new") && strcmp(act->valuestring, "gelu_pytorch_tanh"))
                problem(im, "config.json: activation_function %s; parc's GELU is the tanh form (gelu_new)",
                        act->valuestring);
            same(im, "layer_norm_epsilon", number(c, "layer_norm_epsilon", 1e-5), eps);
            if (final_eps != eps)
                same(im, "layer_norm_epsilon (the final norm's)", number(c, "layer_norm_epsilon", 1e-5), final_eps);
        }
    }
    cJSON_Delete(c);
    cJSON_Delete(plan);
}

/* Names older exports carry that are not parameters. */
static int ignorable(const char *name) {
    static const char *const tails[] = {".attn.bias", ".attn.masked_bias", ".rotary_emb.inv_freq"};
    size_t len = strlen(name);
    for (size_t k = 0; k < sizeof tails / sizeof tails[0]; k++) {
        size_t t = strlen(tails[k]);
        if (len >= t && !strcmp(name + len - t, tails[k])) return 1;
    }
    return 0;
}

void prt_import_hf(prt *rt, const char *path) {
    importer im = {.rt = rt, .path = path};
    double t0 = MPI_Wtime();
    open_source(&im);
    if (!im.err[0]) {
        if (find(&im, "transformer.wte.weight")) im.family = PRT_HF_GPT2;
        else if (find(&im, "model.embed_tokens.weight")) im.family = PRT_HF_LLAMA;
        else problem(&im, "%s: neither a GPT-2 (transformer.wte.weight) nor a Llama (model.embed_tokens.weight)", path);
        im.mixtral = find(&im, "model.layers.0.block_sparse_moe.gate.weight") != NULL;
        if (!im.err[0]) check_config(&im);
    }
    int opened = !im.err[0];
    for (int64_t i = 0; i < rt->nbuffers && opened; i++) {  /* every tensor's problem, not the first */
        prt_buffer *b = &rt->buffers[i];
        int64_t k = b->desc.klass;
        if ((k != PRT_WEIGHTS && k != PRT_MASTER) || b->desc.ndim < 1 || b->desc.init == PRT_INIT_NONE) continue;
        for (int64_t inst = 0; inst < b->desc.instances; inst++) fill(&im, b, inst);
    }
    /* a tensor no rank used (the plan's model is smaller than the file's), once
     * every rank read the same files without a problem: the ranks agree on
     * that first, so all of them take part in the same reductions */
    int agree[3] = {im.err[0] ? 1 : 0, (int)im.n, -(int)im.n};
    MPI_Request req;
    PRT_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, agree, 3, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &req));
    prt_wait(rt, &req, MPI_STATUS_IGNORE, "the import's tensor check (start-up)", -1);
    if (!agree[0] && agree[1] == -agree[2] && im.n > 0) {
        int *used = prt_xcalloc((size_t)im.n, sizeof *used);
        for (int64_t i = 0; i < im.n; i++) used[i] = im.t[i].used;
        PRT_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, used, (int)im.n, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &req));
        prt_wait(rt, &req, MPI_STATUS_IGNORE, "the import's tensor check (start-up)", -1);
        for (int64_t i = 0; i < im.n && rt->world_rank == 0; i++)
            if (!used[i] && !ignorable(im.t[i].name))
                problem(&im, "tensor %s of %s has no place in the plan's model (%s)", im.t[i].name, path,
                        strcmp(im.t[i].name, "lm_head.weight") ? "more layers or another model in the file?"
                                                              : "the plan ties its head to the embedding: `head untied`");
        free(used);
    }
    for (int f = 0; f < im.nfiles; f++) munmap(im.maps[f], im.map_bytes[f]);
    for (int64_t i = 0; i < im.n; i++) free(im.t[i].name);
    free(im.t);
    free(im.maps);
    free(im.map_bytes);
    char message[sizeof im.err + 4200], more[64] = "";
    if (im.dropped)
        snprintf(more, sizeof more, "\n  ... and %lld more problem%s", (long long)im.dropped, im.dropped == 1 ? "" : "s");
    if (im.err[0]) snprintf(message, sizeof message, "--init-from %s:\n  %s%s", path, im.err, more);
    prt_startup_verdict(rt, PRT_STARTUP_IMPORT, im.err[0] ? message : NULL);
    if (rt->world_rank == 0 && !rt->quiet) {
        printf("initialised from %s (%s, %.1f ms)\n", path,
               im.family == PRT_HF_GPT2 ? "GPT-2" : im.mixtral ? "Mixtral" : "Llama", (MPI_Wtime() - t0) * 1e3);
        fflush(stdout);
    }
}
