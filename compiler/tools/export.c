/*
 * export.c — `parc export CKPT -o OUT [--master] [--names hf|parc] [--max-shard-size SIZE]`:
 * one consolidated safetensors file (OUT ending in .safetensors), or a
 * directory Hugging Face transformers loads (config.json and the weights,
 * sharded with an index past SIZE), from a checkpoint of any layout
 * (runtime/prt_ckpt.c writes them).  Every parameter is assembled from the
 * shards of whichever rank files hold it (each checked against the manifest's
 * CRC-32), with its global shape.  --names hf (the default) writes the names
 * and layouts of Hugging Face's GPT-2 or Llama (export_hf.c); --names parc
 * keeps parc's global names: "h.<layer>.<name>" for the parameters of block
 * <layer>, the plain name for the others ("wte", "wpe", "lnf.g", ...).  The weights are written in their training dtype (bf16 for a
 * bf16 plan); --master writes the fp32 master weights instead where the plan
 * keeps them.  Loadable by safetensors' load_file / PyTorch.
 *
 * Exit status: 0, 1 a checkpoint that cannot be read (the message names the file
 * and the tensor), 2 usage, 3 a failed write.  The output is written to a
 * temporary name, fsynced and renamed, so a failed export leaves no partial file.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "export_hf.h"
#include "prt_hf.h"
#include "parc_rt.h"
#include "tools.h"

#ifdef PARC_HAVE_EXPORT
#include "prt_safetensors.h"

/* vsnprintf into a fixed buffer (a path or a message), cut if it must be. */
static void textf(char *out, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void textf(char *out, size_t size, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out, size, fmt, ap);
    va_end(ap);
}

static int export_error(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int export_error(int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "parc export: error: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    return status;
}

static int ints(const cJSON *o, const char *key, int64_t *v, int max) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key), *x;
    int n = 0;
    if (!cJSON_IsArray(a)) return -1;
    cJSON_ArrayForEach(x, a) {
        if (n >= max || !cJSON_IsNumber(x)) return -1;
        v[n++] = (int64_t)x->valuedouble;
    }
    return n;
}

/* One output tensor, assembled. */
typedef struct Assembled {
    char *name;
    int64_t dtype, ndim, gdims[8], total;
    char *data, *have;
} Assembled;

/* Adds shard `sh` of tensor `name` from rank file `path` to out (created at the
 * first shard).  Returns 0 or 1 with err filled. */
static int add_shard(Assembled *a, const char *name, const cJSON *sh, prt_st_file **file, const char *path,
                     char *err, size_t size) {
    int64_t gd[8], off[8], loc[8];
    int nd = ints(sh, "global", gd, 8);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(sh, "dtype"), *crc = cJSON_GetObjectItemCaseSensitive(sh, "crc32");
    const cJSON *first = cJSON_GetObjectItemCaseSensitive(sh, "first"), *count = cJSON_GetObjectItemCaseSensitive(sh, "count");
    int64_t dtype = cJSON_IsString(dt) ? prt_st_dtype_of(dt->valuestring) : -1;
    if (nd < 1 || ints(sh, "offset", off, 8) != nd || ints(sh, "local", loc, 8) != nd || dtype < 0 ||
        !cJSON_IsNumber(first) || !cJSON_IsNumber(count) || !cJSON_IsString(crc)) {
        textf(err, size, "manifest: tensor %s: corrupted shard entry for %s", name, path);
        return 1;
    }
    int64_t block = 1;
    for (int k = 0; k < nd; k++) {
        if (off[k] < 0 || loc[k] < 1 || off[k] + loc[k] > gd[k]) {
            textf(err, size, "manifest: tensor %s: the slice of %s lies outside its global shape", name, path);
            return 1;
        }
        block *= loc[k];
    }
    int64_t f0 = (int64_t)first->valuedouble, n = (int64_t)count->valuedouble;
    if (f0 < 0 || n < 0 || f0 + n > block) {
        textf(err, size, "manifest: tensor %s: bad share of %s", name, path);
        return 1;
    }
    size_t esize = dtype == PRT_F32 || dtype == PRT_I32 ? 4 : 2;
    if (!a->data) {
        a->name = strdup(name);
        a->dtype = dtype;
        a->ndim = nd;
        a->total = 1;
        for (int k = 0; k < nd; k++) a->gdims[k] = gd[k], a->total *= gd[k];
        a->data = calloc((size_t)a->total, esize);
        a->have = calloc((size_t)a->total, 1);
    } else if (a->dtype != dtype || a->ndim != nd || memcmp(a->gdims, gd, sizeof(int64_t) * (size_t)nd)) {
        textf(err, size, "manifest: tensor %s: shards disagree on its dtype or shape (%s)", name, path);
        return 1;
    }
    if (!*file && !(*file = prt_st_open(path, err, size))) return 1;
    char *buf = malloc((size_t)(n ? n : 1) * esize), hex[9];
    if (prt_st_read(*file, name, dtype, buf, (size_t)n * esize, err, size) != 0) {
        free(buf);
        return 1;
    }
    prt_st_crc32_hex(buf, (size_t)n * esize, hex);
    if (strcmp(hex, crc->valuestring)) {
        textf(err, size, "%s: tensor %s: checksum mismatch (CRC-32 %s in the manifest, %s read)", path, name,
                 crc->valuestring, hex);
        free(buf);
        return 1;
    }
    prt_st_scatter_shard(nd, gd, off, loc, f0, n, buf, a->data, a->have, esize);
    free(buf);
    return 0;
}

/* The step directory: CKPT itself when it holds a manifest, else CKPT/latest. */
static char *step_dir(const char *ckpt) {
    char path[4096], name[256] = "", base[4096];
    textf(path, sizeof path, "%s/manifest.json", ckpt);
    if (access(path, R_OK) == 0) return strdup(ckpt);
    /* a --checkpoint-dir holds `latest`; given that file itself, its directory does */
    struct stat st;
    if (stat(ckpt, &st) == 0 && S_ISREG(st.st_mode)) {
        textf(path, sizeof path, "%s", ckpt);
        const char *slash = strrchr(ckpt, '/');
        textf(base, sizeof base, "%.*s", slash ? (int)(slash - ckpt) : 1, slash ? ckpt : ".");
    } else {
        textf(path, sizeof path, "%s/latest", ckpt);
        textf(base, sizeof base, "%s", ckpt);
    }
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    if (!fgets(name, sizeof name, f)) name[0] = 0;
    fclose(f);
    name[strcspn(name, "\n")] = 0;
    if (!*name || strchr(name, '/')) return NULL;
    size_t len = strlen(base) + strlen(name) + 2;
    char *dir = malloc(len);
    textf(dir, len, "%s/%s", base, name);
    textf(path, sizeof path, "%s/manifest.json", dir);
    if (access(path, R_OK) != 0) {
        free(dir);
        return NULL;
    }
    return dir;
}

/* Assembles every tensor of `role`; returns the count, or -1 with err filled. */
static int64_t assemble(const char *dir, const cJSON *ranks, const char *role, Assembled **out, char *err,
                        size_t size) {
    int64_t n = 0, cap = 0;
    Assembled *as = NULL;
    int nranks = cJSON_GetArraySize(ranks);
    for (int r = 0; r < nranks; r++) {
        const cJSON *entry = cJSON_GetArrayItem(ranks, r), *sh;
        const cJSON *file = cJSON_GetObjectItemCaseSensitive(entry, "file");
        char path[4096];
        textf(path, sizeof path, "%s/%s", dir, cJSON_IsString(file) ? file->valuestring : "?");
        if (access(path, F_OK) != 0) {
            textf(err, size, "%s: missing (the file of rank %d of the %d that saved this checkpoint)", path, r,
                     nranks);
            return -1;
        }
        prt_st_file *st = NULL;
        cJSON_ArrayForEach(sh, cJSON_GetObjectItemCaseSensitive(entry, "tensors")) {
            const cJSON *rl = cJSON_GetObjectItemCaseSensitive(sh, "role");
            if (!cJSON_IsString(rl) || strcmp(rl->valuestring, role)) continue;
            int64_t i = 0;
            while (i < n && strcmp(as[i].name, sh->string)) i++;
            if (i == n) {
                if (n == cap) as = realloc(as, (size_t)(cap = cap ? 2 * cap : 64) * sizeof *as);
                memset(&as[n++], 0, sizeof *as);
            }
            if (add_shard(&as[i], sh->string, sh, &st, path, err, size) != 0) {
                prt_st_close(st);
                *out = as;
                return -1;
            }
        }
        prt_st_close(st);
    }
    *out = as;
    for (int64_t i = 0; i < n; i++)
        for (int64_t g = 0; g < as[i].total; g++)
            if (!as[i].have[g]) {
                textf(err, size, "tensor %s: element %lld is in no rank file of the checkpoint", as[i].name,
                         (long long)g);
                return -1;
            }
    return n;
}

/* --names hf: the tensors t[0..*n) renamed and laid out as the model family's
 * (export_hf.c); *hf holds the new data, *family its name.  0 or 1 with err.
 * t and names have room for 3 x *n entries (a tensor gives at most three). */
static int rename_hf(prt_st_tensor *t, int64_t *n, char (*names)[256], ExportOut **hf, int64_t *nhf,
                     const char **family, char *err, size_t size) {
    ExportTensor *in = calloc((size_t)(*n > 0 ? *n : 1), sizeof *in);
    for (int64_t i = 0; i < *n; i++) {
        in[i] = (ExportTensor){.name = strdup(t[i].name), .dtype = t[i].dtype, .ndim = t[i].ndim,
                               .data = t[i].data};
        memcpy(in[i].gdims, t[i].shape, sizeof in[i].gdims);
    }
    int64_t m = 0;
    int bad = export_hf(in, *n, hf, &m, family, err, size);
    *nhf = m;
    for (int64_t i = 0; i < *n; i++) free((char *)in[i].name);
    free(in);
    if (bad) return 1;
    for (int64_t i = 0; i < m; i++) {
        textf(names[i], sizeof names[i], "%s", (*hf)[i].name);
        t[i] = (prt_st_tensor){.name = names[i], .dtype = (*hf)[i].dtype, .ndim = (*hf)[i].ndim,
                               .data = (*hf)[i].data, .bytes = (*hf)[i].bytes};
        memcpy(t[i].shape, (*hf)[i].shape, sizeof t[i].shape);
    }
    *n = m;
    return 0;
}

/* The parc tensor `name` among the assembled ones, or NULL. */
static const Assembled *tensor(const Assembled *as, int64_t n, const char *name) {
    for (int64_t i = 0; i < n; i++)
        if (!strcmp(as[i].name, name)) return &as[i];
    return NULL;
}

static double model_number(const cJSON *model, const char *key, double otherwise) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(model, key);
    return cJSON_IsNumber(v) ? v->valuedouble : otherwise;
}

/* config.json of the Hugging Face class the model is (family "gpt2",
 * "llama" or "mixtral"), from the parc tensors' global shapes and the manifest's `model`
 * (the norm's epsilon, the rotary positions); NULL with err filled for a
 * model that class cannot express. */
static cJSON *hf_config(const Assembled *as, int64_t n, const char *family, int tied, int64_t dtype,
                        const cJSON *model, char *err, size_t size) {
    int mixtral = !strcmp(family, "mixtral");
    const Assembled *wte = tensor(as, n, "wte"), *qkv = tensor(as, n, "h.0.attn.qkv.w");
    const Assembled *up = tensor(as, n, mixtral ? "h.0.mlp.experts.up.w" : "h.0.mlp.up.w"), *wpe = tensor(as, n, "wpe");
    int layers = 0;
    for (int64_t i = 0; i < n; i++) {
        int L = -1;
        if (sscanf(as[i].name, "h.%d.", &L) == 1 && L + 1 > layers) layers = L + 1;
    }
    if (!wte || !qkv || !up || qkv->ndim != 4) {
        textf(err, size, "the checkpoint lacks wte, h.0.attn.qkv.w or h.0.mlp.up.w: no transformers config");
        return NULL;
    }
    int64_t V = wte->gdims[0], C = wte->gdims[1], hd = qkv->gdims[3], heads = 0, kv = 0;
    prt_hf_qkv_heads(qkv->ndim, qkv->gdims, &heads, &kv);  /* the renaming checked the layout */
    /* the settings the shapes do not carry: the manifest's model config (older
     * checkpoints have none: the defaults they were trained with) */
    const cJSON *config = cJSON_GetObjectItemCaseSensitive(model, "config");
    double eps = model_number(config, "norm_eps", 1e-5), final_eps = model_number(config, "final_norm_eps", eps);
    if (eps != final_eps) {
        textf(err, size, "the blocks' norms use eps %g and the final norm %g; transformers' %s config has one "
                         "epsilon: export to a .safetensors file", eps, final_eps, family);
        return NULL;
    }
    const char *dt = dtype == PRT_BF16 ? "bfloat16" : dtype == PRT_F16 ? "float16" : "float32";
    cJSON *c = cJSON_CreateObject(), *arch = cJSON_AddArrayToObject(c, "architectures");
    if (!strcmp(family, "gpt2")) {
        if (!tensor(as, n, "h.0.attn.qkv.b") || !wpe) {
            cJSON_Delete(c);
            textf(err, size, "a GPT-2 without biases or learned positions has no GPT2LMHeadModel config: export to "
                             "a .safetensors file");
            return NULL;
        }
        cJSON_AddItemToArray(arch, cJSON_CreateString("GPT2LMHeadModel"));
        cJSON_AddStringToObject(c, "model_type", "gpt2");
        cJSON_AddNumberToObject(c, "vocab_size", (double)V);
        cJSON_AddNumberToObject(c, "n_positions", (double)wpe->gdims[0]);
        cJSON_AddNumberToObject(c, "n_embd", (double)C);
        cJSON_AddNumberToObject(c, "n_layer", layers);
        cJSON_AddNumberToObject(c, "n_head", (double)heads);
        cJSON_AddNumberToObject(c, "n_inner", (double)up->gdims[up->ndim - 1]);
        cJSON_AddStringToObject(c, "activation_function", "gelu_new");  /* GELU's tanh form, as parc's */
        cJSON_AddNumberToObject(c, "layer_norm_epsilon", eps);
        cJSON_AddNumberToObject(c, "resid_pdrop", 0);
        cJSON_AddNumberToObject(c, "embd_pdrop", 0);
        cJSON_AddNumberToObject(c, "attn_pdrop", 0);
    } else {
        const cJSON *pos = cJSON_GetObjectItemCaseSensitive(config, "positions");
        const char *cls = mixtral ? "MixtralForCausalLM" : "LlamaForCausalLM";
        if (!cJSON_IsString(pos) || strcmp(pos->valuestring, "rope")) {
            cJSON_Delete(c);
            textf(err, size, "this %s has no rotary positions, which %s applies: it would compute other logits; "
                             "export to a .safetensors file", mixtral ? "mixture of experts" : "Llama", cls);
            return NULL;
        }
        if (mixtral) {
            /* Mixtral: softmax over every expert's logit, the top k renormalised
             * (parc's softmax router), SwiGLU experts, head_dim = hidden / heads,
             * no rope scaling */
            const cJSON *moe = cJSON_GetObjectItemCaseSensitive(config, "moe");
            const cJSON *router = cJSON_GetObjectItemCaseSensitive(moe, "router");
            const char *why = !cJSON_IsObject(moe) ? "the manifest does not state its router"
                              : !cJSON_IsString(router) || strcmp(router->valuestring, "softmax")
                                  ? "its router is not a softmax (Mixtral's is)"
                              : heads * hd != C ? "its head_dim x heads is not its hidden size (Mixtral derives head_dim)"
                              : cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(config, "rope_scaling"))
                                  ? "its rotary positions are scaled (Mixtral's are not)"
                                  : NULL;
            if (why) {
                cJSON_Delete(c);
                textf(err, size, "this mixture of experts has no MixtralForCausalLM config: %s; export to a "
                                 ".safetensors file", why);
                return NULL;
            }
            cJSON_AddItemToArray(arch, cJSON_CreateString(cls));
            cJSON_AddStringToObject(c, "model_type", "mixtral");
            cJSON_AddNumberToObject(c, "num_local_experts", (double)up->gdims[0]);
            cJSON_AddNumberToObject(c, "num_experts_per_tok", model_number(moe, "topk", 2));
            cJSON_AddNumberToObject(c, "router_aux_loss_coef", model_number(moe, "aux_loss", 0));
            cJSON_AddBoolToObject(c, "output_router_logits", 0);
            cJSON_AddNullToObject(c, "sliding_window");
        } else {
            cJSON_AddItemToArray(arch, cJSON_CreateString(cls));
            cJSON_AddStringToObject(c, "model_type", "llama");
        }
        cJSON_AddNumberToObject(c, "vocab_size", (double)V);
        cJSON_AddNumberToObject(c, "hidden_size", (double)C);
        cJSON_AddNumberToObject(c, "intermediate_size", (double)up->gdims[up->ndim - 1]);
        cJSON_AddNumberToObject(c, "num_hidden_layers", layers);
        cJSON_AddNumberToObject(c, "num_attention_heads", (double)heads);
        cJSON_AddNumberToObject(c, "num_key_value_heads", (double)kv);
        cJSON_AddNumberToObject(c, "head_dim", (double)hd);
        cJSON_AddNumberToObject(c, "max_position_embeddings", model_number(model, "seq", 0));
        cJSON_AddStringToObject(c, "hidden_act", "silu");
        cJSON_AddNumberToObject(c, "rms_norm_eps", eps);
        cJSON_AddNumberToObject(c, "rope_theta", model_number(config, "rope_theta", 10000));
        if (!mixtral) { /* Mixtral has neither rope scaling nor bias switches */
            /* transformers reads the scaling's factors as floats ("8.0"), its original
             * context as an integer */
            const cJSON *scaling = cJSON_GetObjectItemCaseSensitive(config, "rope_scaling"), *e;
            cJSON *rs = cJSON_IsObject(scaling) ? cJSON_CreateObject() : cJSON_CreateNull();
            const cJSON *from = cJSON_IsObject(scaling) ? scaling : NULL;
            cJSON_ArrayForEach(e, from) {
                char num[64];
                if (cJSON_IsNumber(e) && strcmp(e->string, "original_max_position_embeddings")) {
                    snprintf(num, sizeof num, "%.17g", e->valuedouble);
                    if (!strpbrk(num, ".eEn")) strcat(num, ".0");
                    cJSON_AddItemToObject(rs, e->string, cJSON_CreateRaw(num));
                } else {
                    cJSON_AddItemToObject(rs, e->string, cJSON_Duplicate(e, 1));
                }
            }
            cJSON_AddItemToObject(c, "rope_scaling", rs);
            cJSON_AddBoolToObject(c, "attention_bias", 0);
            cJSON_AddBoolToObject(c, "mlp_bias", 0);
        }
    }
    cJSON_AddBoolToObject(c, "tie_word_embeddings", tied);
    cJSON_AddStringToObject(c, "torch_dtype", dt);
    return c;
}

/* Writes text to path through path.tmp, fsynced and renamed; 0 or -1 with err. */
static int write_text(const char *path, const char *text, char *err, size_t size) {
    char tmp[4096];
    textf(tmp, sizeof tmp, "%s.tmp", path);
    if (prt_write_file_synced(tmp, text, strlen(text)) != 0 || rename(tmp, path) != 0) {
        textf(err, size, "%s: cannot write: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* The directory form: config.json and the weights in files of at most
 * max_shard bytes (one file, model.safetensors, when they fit; else
 * model-0000K-of-0000N.safetensors in tensor order, a tensor larger than the
 * limit alone in its file, and model.safetensors.index.json mapping every
 * tensor to its file), as save_pretrained writes them. 0 or -1 with err. */
static int write_dir(const char *out, const prt_st_tensor *t, int64_t n, const cJSON *meta, const cJSON *config,
                     int64_t max_shard, char *err, size_t size) {
    char path[4096];
    if (mkdir(out, 0777) != 0 && errno != EEXIST) {
        textf(err, size, "%s: cannot create the directory: %s", out, strerror(errno));
        return -1;
    }
    char *text = cJSON_Print(config);
    textf(path, sizeof path, "%s/config.json", out);
    int bad = write_text(path, text, err, size);
    free(text);
    if (bad) return -1;
    int64_t *file_of = calloc((size_t)(n ? n : 1), sizeof *file_of), files = 0, used = 0;
    uint64_t total = 0;
    for (int64_t i = 0; i < n; i++) {
        if (i == 0 || (used > 0 && used + (int64_t)t[i].bytes > max_shard)) files++, used = 0;
        file_of[i] = files - 1;
        used += (int64_t)t[i].bytes;
        total += t[i].bytes;
    }
    cJSON *map = cJSON_CreateObject();
    for (int64_t k = 0; k < files && !bad; k++) {
        int64_t first = 0, count = 0;
        while (file_of[first] != k) first++;
        while (first + count < n && file_of[first + count] == k) count++;
        char name[64];
        if (files == 1) textf(name, sizeof name, "model.safetensors");
        else textf(name, sizeof name, "model-%05lld-of-%05lld.safetensors", (long long)k + 1, (long long)files);
        for (int64_t i = first; i < first + count; i++) cJSON_AddStringToObject(map, t[i].name, name);
        char tmp[4096];
        textf(path, sizeof path, "%s/%s", out, name);
        textf(tmp, sizeof tmp, "%s.tmp", path);
        if (prt_st_write(tmp, t + first, count, meta, err, size) != 0 || rename(tmp, path) != 0) {
            if (!*err) textf(err, size, "%s: cannot rename into place: %s", path, strerror(errno));
            unlink(tmp);
            bad = -1;
        }
    }
    if (!bad && files > 1) {
        cJSON *index = cJSON_CreateObject(), *m = cJSON_AddObjectToObject(index, "metadata");
        cJSON_AddNumberToObject(m, "total_size", (double)total);
        cJSON_AddItemToObject(index, "weight_map", map);
        map = NULL;
        text = cJSON_Print(index);
        textf(path, sizeof path, "%s/model.safetensors.index.json", out);
        bad = write_text(path, text, err, size);
        free(text);
        cJSON_Delete(index);
    }
    cJSON_Delete(map);
    free(file_of);
    return bad ? -1 : 0;
}

int export_main(const CliOptions *o) {
    const char *ckpt = o->checkpoint, *out = o->output;
    int master = o->master, hf_names = o->hf_names;
    char *dir = step_dir(ckpt), err[2048] = "", path[4096];
    if (!dir) return export_error(1, "%s: not a checkpoint (no manifest.json, no latest)", ckpt);
    textf(path, sizeof path, "%s/manifest.json", dir);
    cJSON *manifest = prt_read_json(path, err, sizeof err);
    const cJSON *ranks = cJSON_GetObjectItemCaseSensitive(manifest, "ranks");
    if (!manifest || !cJSON_IsArray(ranks)) {
        free(dir);
        cJSON_Delete(manifest);
        return export_error(1, "%s", *err ? err : "manifest.json: corrupted: no ranks");
    }
    Assembled *as = NULL, *ms = NULL;
    int64_t n = assemble(dir, ranks, "weights", &as, err, sizeof err), nm = 0;
    if (n >= 0 && master) nm = assemble(dir, ranks, "master", &ms, err, sizeof err);
    int status = 0;
    if (n < 0 || nm < 0) status = export_error(1, "%s", err);
    /* room for --names hf, which splits a tensor into at most three */
    prt_st_tensor *t = calloc((size_t)(n > 0 ? 3 * n : 1), sizeof *t);
    char (*names)[256] = calloc((size_t)(n > 0 ? 3 * n : 1), 256);
    ExportOut *hf = NULL;
    int64_t nhf = 0, nweights = n;
    const char *family = "";
    for (int64_t i = 0; !status && i < n; i++) {
        const Assembled *src = &as[i];
        for (int64_t j = 0; j < nm; j++) {  /* --master: the fp32 master of this weight, where kept */
            size_t len = strlen(as[i].name);
            if (!strncmp(ms[j].name, as[i].name, len) && !strcmp(ms[j].name + len, ".master")) src = &ms[j];
        }
        textf(names[i], sizeof names[i], "%s", as[i].name);
        t[i] = (prt_st_tensor){.name = names[i], .dtype = src->dtype, .ndim = src->ndim, .data = src->data,
                               .bytes = (size_t)src->total * (src->dtype == PRT_F32 ? 4 : 2)};
        memcpy(t[i].shape, src->gdims, sizeof t[i].shape);
    }
    int tied = 1;
    for (int64_t i = 0; i < n; i++) tied = tied && strcmp(as[i].name, "head.w");
    if (!status && hf_names) {
        if (rename_hf(t, &n, names, &hf, &nhf, &family, err, sizeof err) != 0) status = export_error(1, "%s", err);
    }
    if (!status) {
        cJSON *meta = cJSON_CreateObject();
        cJSON_AddStringToObject(meta, "format", "pt");
        const cJSON *plan = cJSON_GetObjectItemCaseSensitive(manifest, "plan");
        cJSON_AddStringToObject(meta, "plan", cJSON_IsString(plan) ? plan->valuestring : "");
        char step[32];
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(manifest, "step");
        snprintf(step, sizeof step, "%lld", cJSON_IsNumber(st) ? (long long)st->valuedouble : -1LL);
        cJSON_AddStringToObject(meta, "step", step);
        cJSON_AddStringToObject(meta, "names", hf_names ? "hf" : "parc");
        if (hf_names) cJSON_AddStringToObject(meta, "model_type", family);
        cJSON_AddStringToObject(meta, "tie_word_embeddings", tied ? "true" : "false");
        size_t len = strlen(out);
        int dir_form = len < 12 || strcmp(out + len - 12, ".safetensors") != 0;
        cJSON *config = NULL;
        if (dir_form && !hf_names) status = export_error(2, "%s: a directory for transformers needs --names hf", out);
        else if (dir_form && !(config = hf_config(as, nweights, family, tied, t[0].dtype,
                                                   cJSON_GetObjectItemCaseSensitive(manifest, "model"), err,
                                                   sizeof err)))
            status = export_error(1, "%s", err);
        else if (dir_form) {
            if (write_dir(out, t, n, meta, config, o->max_shard > 0 ? o->max_shard : (int64_t)5000000000, err,
                          sizeof err) != 0)
                status = export_error(3, "%s", err);
        } else {
            textf(path, sizeof path, "%s.tmp", out);
            if (prt_st_write(path, t, n, meta, err, sizeof err) != 0 || rename(path, out) != 0) {
                if (!*err) textf(err, sizeof err, "%s: cannot rename into place: %s", out, strerror(errno));
                unlink(path);
                status = export_error(3, "%s", err);
            }
        }
        cJSON_Delete(config);
        cJSON_Delete(meta);
    }
    if (!status) printf("parc export: %lld tensors from %s -> %s\n", (long long)n, dir, out);
    for (int64_t i = 0; i < nhf; i++) free(hf[i].data);
    free(hf);
    for (int64_t i = 0; i < nweights; i++) free(as[i].name), free(as[i].data), free(as[i].have);
    for (int64_t i = 0; i < nm; i++) free(ms[i].name), free(ms[i].data), free(ms[i].have);
    free(as);
    free(ms);
    free(t);
    free(names);
    free(dir);
    cJSON_Delete(manifest);
    return status;
}
#else
int export_main(const CliOptions *o) {
    (void)o;
    fprintf(stderr, "parc export: error: this parc was built without cJSON and zlib (apt-get install libcjson-dev "
                    "zlib1g-dev)\n");
    return 2;
}
#endif
