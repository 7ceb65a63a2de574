/*
 * prt_ckpt.c — checkpoints: save, resume in any layout, and stop on a signal.
 *
 * A checkpoint is a directory DIR/step-NNNNNNNNN holding one safetensors file per
 * rank (rank-RRRRR.safetensors, written by that rank, in parallel; nothing is
 * gathered) and manifest.json (rank 0).  A rank file holds every persistent
 * tensor of the rank — weights, fp32 master, optimizer moments — named by its
 * global parameter name ("h.<layer>.<name>" for per-layer parameters, plus
 * ".master", ".m", ".v"), with its global shape and the slice it covers in the
 * header metadata.  The manifest has the plan's identity, the layout, the step
 * (the next step is step + 1; the synthetic data and the optimizer's step count
 * are functions of it), the seed, and every shard's slice and CRC-32.
 *
 * Saving writes into DIR/.tmp.step-N, fsyncs every file and the directory, then
 * renames it to step-N and points DIR/latest at it (written and renamed the same
 * way); only then are checkpoints beyond --checkpoint-keep removed.  A kill at
 * any moment leaves the previous checkpoint whole.
 *
 * Loading is resharding from slices on disk: for each of its buffers a rank maps
 * every local element to its global index (prt_param_map, the initialiser's
 * mapping), reads the shards of that tensor whose blocks meet its own from the
 * files that hold them, checks their CRC-32, and copies the elements it needs.
 * In the same layout a rank finds its own slices whole and reads each shard
 * straight into its buffer; either way every element comes back bit for bit.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "prt_backend.h"
#include "prt_internal.h"
#include "prt_safetensors.h"

#define CKPT_FORMAT "parc-checkpoint-1"

struct prt_ckpt {
    const char *dir;        /* --checkpoint-dir, NULL: none */
    int64_t every, keep;    /* save every N steps (0: never); keep the newest N (0: all) */
    const char *resume;     /* --resume: "latest" or a directory; NULL: none */
    const char *init_from;  /* --init-from: a Hugging Face checkpoint; NULL: none */
    int save_on_exit;
    char *resume_path;      /* the step directory resumed from (prt_ckpt_init) */
    int64_t die_step;       /* PRT_TEST_CKPT_DIE: the last rank kills itself inside this step's save */
    double slow_seconds;    /* PRT_TEST_CKPT_SLOW: every rank's file takes this much longer (a slow disk) */
    int64_t first_step;
    int imported;           /* --init-from has filled the weights */
};

const char prt_ckpt_usage[] =
    "  --checkpoint-dir DIR    save checkpoints under DIR (step-N/ per checkpoint, DIR/latest names the newest)\n"
    "  --checkpoint-every N    save every N steps (default: only at the last step and on a signal)\n"
    "  --checkpoint-keep N     keep the newest N checkpoints, deleting older ones once a new one is complete\n"
    "  --resume latest|DIR     continue from the newest checkpoint of --checkpoint-dir, or from DIR (a step-N\n"
    "                          directory or a checkpoint directory); any layout of the same model and settings\n"
    "  --init-from PATH        start from a Hugging Face GPT-2 or Llama checkpoint (a safetensors file or a\n"
    "                          directory from save_pretrained / parc export), any layout\n"
    "  --save-on-exit          save after the last step (the default with --checkpoint-dir).  SIGINT/SIGTERM\n"
    "                          finish the step, save when\n"
    "                          --checkpoint-dir is set and exit (status 128 + signal); a second signal kills\n";

/* snprintf for paths: a path that does not fit is a user error, not a silent cut. */
static void path_printf(char *out, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void path_printf(char *out, size_t size, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, size, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= size) prt_user_fail(2, "checkpoint: a path longer than %zu bytes: %s...", size, out);
}

static volatile sig_atomic_t g_signal;  /* the first SIGINT/SIGTERM received */
static char g_second_int[MPI_MAX_PROCESSOR_NAME + 160], g_second_term[MPI_MAX_PROCESSOR_NAME + 160];  /* what a second signal prints, made at init */

/* The first signal asks for a stop after the step; a second one ends the
 * process at once with the signal's default action (status 128 + signal). */
static void on_signal(int sig) {
    if (!g_signal) {
        g_signal = sig;
        return;
    }
    const char *m = sig == SIGINT ? g_second_int : g_second_term;
    ssize_t ignored = write(2, m, strlen(m));
    (void)ignored;
    signal(sig, SIG_DFL);
    raise(sig);
}

static struct prt_ckpt *ck(prt *rt) {
    if (!rt->ckpt) rt->ckpt = prt_xcalloc(1, sizeof *rt->ckpt);
    return rt->ckpt;
}

int prt_ckpt_option(prt *rt, const char *name, const char *value, char *err, size_t size) {
    struct prt_ckpt *c = ck(rt);
    if (!strcmp(name, "--save-on-exit")) {
        c->save_on_exit = 1;
        return 1;
    }
    int is_every = !strcmp(name, "--checkpoint-every"), is_keep = !strcmp(name, "--checkpoint-keep");
    if (is_every || is_keep) {
        char *end = NULL;
        errno = 0;
        long long v = strtoll(value, &end, 10);
        if (!*value || *end || errno || v < 1 || v > 1000000000LL)
            snprintf(err, size, "%s needs a whole number from 1 to 1000000000, got '%s'", name, value);
        else if (is_every) c->every = v;
        else c->keep = v;
        return 1;
    }
    if (!strcmp(name, "--init-from")) {
        if (!*value) snprintf(err, size, "--init-from needs a safetensors file or a directory");
        else c->init_from = value;
        return 1;
    }
    if (!strcmp(name, "--checkpoint-dir") || !strcmp(name, "--resume")) {
        if (!*value) snprintf(err, size, "%s needs a directory%s", name, name[2] == 'r' ? " or 'latest'" : "");
        else if (name[2] == 'c') c->dir = value;
        else c->resume = value;
        return 1;
    }
    return 0;
}

static int is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The step of a directory name "step-N", or -1. */
static int64_t step_of_name(const char *name) {
    if (strncmp(name, "step-", 5) != 0) return -1;
    char *end = NULL;
    long long v = strtoll(name + 5, &end, 10);
    return *end || end == name + 5 || v < 0 ? -1 : v;
}

/* The newest complete checkpoint of a checkpoint directory: DIR/latest, else the
 * highest step-N holding a manifest.  Malloc'ed path, or NULL. */
static char *newest_checkpoint(const char *dir) {
    char path[4096], name[256] = "";
    path_printf(path, sizeof path, "%s/latest", dir);
    FILE *f = fopen(path, "r");
    if (f) {
        if (!fgets(name, sizeof name, f)) name[0] = 0;
        fclose(f);
        name[strcspn(name, "\n")] = 0;
    }
    if (step_of_name(name) < 0) {  /* no pointer (or a bad one): scan */
        DIR *d = opendir(dir);
        int64_t best = -1;
        for (struct dirent *e; d && (e = readdir(d));) {
            int64_t s = step_of_name(e->d_name);
            path_printf(path, sizeof path, "%s/%s/manifest.json", dir, e->d_name);
            if (s > best && access(path, R_OK) == 0) best = s, snprintf(name, sizeof name, "%s", e->d_name);
        }
        if (d) closedir(d);
        if (best < 0) return NULL;
    }
    path_printf(path, sizeof path, "%s/%s", dir, name);
    return strdup(path);
}

/* The plan's `checkpoint every N steps keep K;`: what the options did not set.
 * Rank 0 says where the plan's checkpoints go when no --checkpoint-dir did. */
static void plan_defaults(prt *rt, struct prt_ckpt *c) {
    const prt_plan_desc *p = &rt->plan;
    if (!p->ckpt_dir) return;
    int own_dir = !c->dir;
    if (!c->every) c->every = p->ckpt_every;
    if (!c->keep) c->keep = p->ckpt_keep;
    if (own_dir) c->dir = p->ckpt_dir;
    if (own_dir && rt->world_rank == 0 && !rt->quiet) {
        if (c->every) printf("parc: checkpoints every %lld steps", (long long)c->every);
        else printf("parc: checkpoints at the last step and on a signal");
        if (c->keep) printf(", the newest %lld kept,", (long long)c->keep);
        printf(" into %s (the plan's `checkpoint`; --checkpoint-dir DIR saves elsewhere)\n", c->dir);
        fflush(stdout);
    }
}

void prt_ckpt_init(prt *rt, char *message, size_t size) {
    struct prt_ckpt *c = ck(rt);
    c->first_step = 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    for (int k = 0; k < 2; k++)
        snprintf(k ? g_second_term : g_second_int, sizeof g_second_int,
                 "parc: rank %d (%s): second %s: stopping at once, without saving this step\n", rt->world_rank,
                 rt->host, k ? "SIGTERM" : "SIGINT");
    sa.sa_handler = on_signal;
    sa.sa_flags = 0;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGINT);
    sigaddset(&sa.sa_mask, SIGTERM);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    const char *die = getenv("PRT_TEST_CKPT_DIE");
    c->die_step = die && *die ? strtoll(die, NULL, 10) : -1;
    const char *slow = getenv("PRT_TEST_CKPT_SLOW");
    c->slow_seconds = slow && *slow ? strtod(slow, NULL) : 0;
    plan_defaults(rt, c);
    if (c->dir) {
        if (mkdir(c->dir, 0777) != 0 && errno != EEXIST)
            snprintf(message, size, "--checkpoint-dir %s: cannot create the directory: %s", c->dir, strerror(errno));
        else if (!is_dir(c->dir))
            snprintf(message, size, "--checkpoint-dir %s: is not a directory", c->dir);
        else if (access(c->dir, W_OK | X_OK) != 0)
            snprintf(message, size, "--checkpoint-dir %s: cannot write into it: %s", c->dir, strerror(errno));
        if (*message) return;
    }
    if (c->save_on_exit && !c->dir) {
        snprintf(message, size, "--save-on-exit needs --checkpoint-dir DIR (where to save)");
        return;
    }
    if ((c->every || c->keep) && !c->dir) {
        snprintf(message, size, "--checkpoint-%s needs --checkpoint-dir DIR", c->every ? "every" : "keep");
        return;
    }
    if (c->init_from && c->resume) {
        snprintf(message, size, "--init-from and --resume both give the starting weights: a resumed run continues "
                                "from its checkpoint (drop --init-from)");
        return;
    }
    if (c->init_from && access(c->init_from, R_OK) != 0) {
        snprintf(message, size, "--init-from %s: %s", c->init_from, strerror(errno));
        return;
    }
    if (!c->resume) return;
    char path[4096];
    if (!strcmp(c->resume, "latest")) {
        if (!c->dir) {
            snprintf(message, size, "--resume latest needs --checkpoint-dir DIR (where to look)");
            return;
        }
        c->resume_path = newest_checkpoint(c->dir);
        if (!c->resume_path)
            snprintf(message, size, "--resume latest: %s holds no complete checkpoint (no step-N/manifest.json)",
                     c->dir);
        return;
    }
    path_printf(path, sizeof path, "%s/manifest.json", c->resume);
    if (access(path, R_OK) == 0) c->resume_path = strdup(c->resume);
    else if (is_dir(c->resume)) c->resume_path = newest_checkpoint(c->resume);
    if (!c->resume_path)
        snprintf(message, size, "--resume %s: not a checkpoint (no manifest.json) nor a directory holding one",
                 c->resume);
}

/* ---------------------------------------------------------------- tensors of a rank */

/* Buffers a checkpoint holds: the optimizer's persistent state, described. */
static int persistent(const prt_buffer *b) {
    int64_t k = b->desc.klass;
    return (k == PRT_WEIGHTS || k == PRT_MASTER || k == PRT_OPTIM) && b->desc.ndim > 0 && b->desc.instances > 0;
}

/* The global tensor name of instance `inst` of buffer b. */
static void tensor_name(const prt_buffer *b, int64_t inst, char *out, size_t size) {
    const prt_buffer_desc *d = &b->desc;
    const char *base = d->init_name ? d->init_name : d->name;
    const char *role = "";
    if (d->klass == PRT_MASTER) role = ".master";
    else if (d->klass == PRT_OPTIM) {
        const char *dot = strrchr(d->name, '.');
        role = dot ? dot : ".state";
    }
    int64_t layer = prt_param_layer(d, inst);
    if (layer >= 0) snprintf(out, size, "h.%lld.%s%s", (long long)layer, base, role);
    else snprintf(out, size, "%s%s", base, role);
}

/* The element count a shard really holds (its ZeRO share without padding). */
static int64_t shard_count(const prt_param_map *m, int64_t elems) {
    int64_t left = m->local_total - m->first;
    return left < 0 ? 0 : left < elems ? left : elems;
}

static cJSON *int_array(const int64_t *v, int64_t n) {
    cJSON *a = cJSON_CreateArray();
    for (int64_t i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v[i]));
    return a;
}


/* ---------------------------------------------------------------- save */

static void save_fail(const char *what, const char *path) __attribute__((noreturn));
static void save_fail(const char *what, const char *path) {
    prt_user_fail(1, "checkpoint: %s %s: %s", what, path, strerror(errno ? errno : EIO));
}

/* Removes a directory of plain files (a checkpoint), then the directory. */
static void remove_tree(const char *dir) {
    DIR *d = opendir(dir);
    char path[4096];
    for (struct dirent *e; d && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        path_printf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    if (d) closedir(d);
    rmdir(dir);
}

/* Writes this rank's file into tmp and returns its manifest entry. */
static cJSON *write_rank_file(prt *rt, const char *tmp, int64_t step) {
    int64_t n = 0;
    for (int64_t i = 0; i < rt->nbuffers; i++)
        if (persistent(&rt->buffers[i])) n += rt->buffers[i].desc.instances;
    prt_st_tensor *t = prt_xcalloc((size_t)(n ? n : 1), sizeof *t);
    char (*names)[256] = prt_xcalloc((size_t)(n ? n : 1), 256);
    cJSON *meta = cJSON_CreateObject(), *entry = cJSON_CreateObject(), *list = cJSON_AddObjectToObject(entry, "tensors");
    char file[64], text[64];
    snprintf(file, sizeof file, "rank-%05d.safetensors", rt->world_rank);
    cJSON_AddStringToObject(entry, "file", file);
    cJSON_AddNumberToObject(entry, "rank", rt->world_rank);
    int64_t coord[PRT_MAX_AXES];
    for (int a = 0; a < rt->naxes; a++) coord[a] = rt->coord[a];
    cJSON_AddItemToObject(entry, "coord", int_array(coord, rt->naxes));
    cJSON_AddStringToObject(meta, "format", "pt");
    cJSON_AddStringToObject(meta, "parc", CKPT_FORMAT);
    snprintf(text, sizeof text, "%lld", (long long)step);
    cJSON_AddStringToObject(meta, "step", text);
    snprintf(text, sizeof text, "%d", rt->world_rank);
    cJSON_AddStringToObject(meta, "rank", text);
    int64_t k = 0;
    for (int64_t i = 0; i < rt->nbuffers; i++) {
        const prt_buffer *b = &rt->buffers[i];
        if (!persistent(b)) continue;
        prt_param_map m;
        prt_param_map_init(rt, &m, &b->desc, b->desc.name, b->desc.elems);
        int64_t count = shard_count(&m, b->desc.elems);
        size_t dsize = prt_dtype_size(b->desc.dtype);
        for (int64_t inst = 0; inst < b->desc.instances; inst++, k++) {
            tensor_name(b, inst, names[k], sizeof names[k]);
            t[k].name = names[k];
            t[k].dtype = b->desc.dtype;
            t[k].ndim = 1;
            t[k].shape[0] = count;
            t[k].bytes = (size_t)count * dsize;
            const char *src = b->base + inst * b->instance_bytes;  /* host buffers are written in place */
            t[k].data = rt->backend->host_memory ? src : prt_host_copy(rt, src, t[k].bytes);
            char crc[9];
            prt_st_crc32_hex(t[k].data, t[k].bytes, crc);
            cJSON *sh = cJSON_AddObjectToObject(list, names[k]);
            cJSON_AddStringToObject(sh, "role", b->desc.klass == PRT_WEIGHTS  ? "weights"
                                                : b->desc.klass == PRT_MASTER ? "master"
                                                                              : "optimizer");
            cJSON_AddStringToObject(sh, "dtype", prt_st_dtype_name(b->desc.dtype));
            cJSON_AddItemToObject(sh, "global", int_array(m.gdims, m.ndim));
            cJSON_AddItemToObject(sh, "offset", int_array(m.offset, m.ndim));
            cJSON_AddItemToObject(sh, "local", int_array(m.local_dims, m.ndim));
            cJSON_AddNumberToObject(sh, "first", (double)m.first);
            cJSON_AddNumberToObject(sh, "count", (double)count);
            cJSON_AddStringToObject(sh, "crc32", crc);
            char *slice = cJSON_PrintUnformatted(sh);  /* the same, for readers of the file alone */
            cJSON_AddStringToObject(meta, names[k], slice);
            free(slice);
        }
    }
    char path[4096], err[1024];
    path_printf(path, sizeof path, "%s/%s", tmp, file);
    if (prt_st_write(path, t, n, meta, err, sizeof err) != 0) prt_user_fail(1, "checkpoint: %s", err);
    for (int64_t i = 0; i < n && !rt->backend->host_memory; i++) free((void *)t[i].data);
    free(t);
    free(names);
    cJSON_Delete(meta);
    return entry;
}

/* Gathers every rank's manifest entry (JSON text) on rank 0; NULL elsewhere. */
static cJSON *gather_entries(prt *rt, cJSON *mine) {
    char *text = cJSON_PrintUnformatted(mine);
    cJSON_Delete(mine);
    int len = (int)strlen(text) + 1;
    int *lens = rt->world_rank == 0 ? prt_xcalloc((size_t)rt->world_size, sizeof(int)) : NULL;
    MPI_Request req;
    PRT_MPI_CHECK(MPI_Igather(&len, 1, MPI_INT, lens, 1, MPI_INT, 0, MPI_COMM_WORLD, &req));
    prt_wait(rt, &req, NULL, "the checkpoint manifest gather", -1);
    int *displs = NULL;
    char *all = NULL;
    if (rt->world_rank == 0) {
        displs = prt_xcalloc((size_t)rt->world_size, sizeof(int));
        size_t total = 0;
        for (int r = 0; r < rt->world_size; r++) displs[r] = (int)total, total += (size_t)lens[r];
        all = prt_xmalloc(total);
    }
    PRT_MPI_CHECK(MPI_Igatherv(text, len, MPI_CHAR, all, lens, displs, MPI_CHAR, 0, MPI_COMM_WORLD, &req));
    prt_wait(rt, &req, NULL, "the checkpoint manifest gather", -1);
    free(text);
    cJSON *ranks = NULL;
    if (rt->world_rank == 0) {
        ranks = cJSON_CreateArray();
        for (int r = 0; r < rt->world_size; r++) cJSON_AddItemToArray(ranks, cJSON_Parse(all + displs[r]));
    }
    free(lens);
    free(displs);
    free(all);
    return ranks;
}

/* The token file the run trains on, as an absolute path where it resolves
 * (the plan's data section's or --data's), or "synthetic". */
static const char *data_source(prt *rt, char *buf, size_t size) {
    const char *path = rt->data_path ? rt->data_path : rt->plan.data ? rt->plan.data->train : NULL;
    if (!path) return "synthetic";
    char resolved[PATH_MAX];
    snprintf(buf, size, "%s", realpath(path, resolved) ? resolved : path);
    return buf;
}

/* The plan's identity: what a resumed run must share with the saved one. */
static cJSON *plan_identity(prt *rt) {
    const prt_plan_desc *p = &rt->plan;
    cJSON *o = cJSON_CreateObject();
    char data[PATH_MAX];
    cJSON_AddNumberToObject(o, "seed", (double)p->seed);
    cJSON_AddNumberToObject(o, "batch", (double)p->batch);
    cJSON_AddNumberToObject(o, "seq", (double)p->seq);
    cJSON_AddNumberToObject(o, "vocab", (double)p->vocab);
    cJSON_AddStringToObject(o, "data", data_source(rt, data, sizeof data));
    cJSON *config = p->model_json ? cJSON_Parse(p->model_json) : NULL;  /* positions, norm epsilons, sizes */
    if (config) cJSON_AddItemToObject(o, "config", config);
    return o;
}

static void write_manifest(prt *rt, const char *tmp, int64_t step, cJSON *ranks) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "format", CKPT_FORMAT);
    cJSON_AddStringToObject(m, "plan", rt->plan.plan_name ? rt->plan.plan_name : "plan");
    cJSON_AddStringToObject(m, "source", rt->plan.source_file ? rt->plan.source_file : "");
    cJSON_AddItemToObject(m, "model", plan_identity(rt));
    cJSON *layout = cJSON_AddObjectToObject(m, "layout");
    for (int a = 0; a < rt->naxes; a++)
        cJSON_AddNumberToObject(layout, rt->plan.axis_names[a] ? rt->plan.axis_names[a] : "?", rt->axis_size[a]);
    cJSON_AddNumberToObject(m, "world", rt->world_size);
    cJSON_AddNumberToObject(m, "step", (double)step);
    cJSON_AddNumberToObject(m, "optimizer_step", (double)step);
    cJSON_AddNumberToObject(m, "next_step", (double)step + 1);
    cJSON_AddItemToObject(m, "ranks", ranks);
    char *text = cJSON_Print(m);
    cJSON_Delete(m);
    char path[4096];
    path_printf(path, sizeof path, "%s/manifest.json", tmp);
    errno = 0;
    if (prt_write_file_synced(path, text, strlen(text)) != 0) save_fail("cannot write", path);
    free(text);
}

/* Deletes the oldest complete checkpoints beyond --checkpoint-keep (rank 0). */
/* A checkpoint of the directory and when it was written (its manifest's
 * modification time). */
typedef struct Written {
    int64_t step;
    struct timespec at;
} Written;

/* Newest first: the one just written, then by write time, then by step. */
static int newer_first(const Written *a, const Written *b, int64_t just) {
    if ((a->step == just) != (b->step == just)) return a->step == just ? -1 : 1;
    if (a->at.tv_sec != b->at.tv_sec) return a->at.tv_sec > b->at.tv_sec ? -1 : 1;
    if (a->at.tv_nsec != b->at.tv_nsec) return a->at.tv_nsec > b->at.tv_nsec ? -1 : 1;
    return a->step > b->step ? -1 : a->step < b->step;
}

/* --checkpoint-keep N: keeps the N checkpoints written last, the one of step
 * `just` (which `latest` names) always among them; a directory that holds
 * higher-numbered checkpoints of an earlier run loses those first. */
static void prune(const struct prt_ckpt *c, int64_t just) {
    if (c->keep <= 0) return;
    DIR *d = opendir(c->dir);
    static Written all[4096];
    int n = 0;
    char path[4096];
    for (struct dirent *e; d && (e = readdir(d)) && n < 4096;) {
        int64_t s = step_of_name(e->d_name);
        if (s < 0) continue;
        struct stat st;
        path_printf(path, sizeof path, "%s/%s/manifest.json", c->dir, e->d_name);
        all[n].step = s;
        all[n].at = stat(path, &st) == 0 ? st.st_mtim : (struct timespec){0, 0};
        n++;
    }
    if (d) closedir(d);
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (newer_first(&all[j], &all[i], just) < 0) {
                Written x = all[i];
                all[i] = all[j], all[j] = x;
            }
    for (int i = (int)c->keep; i < n; i++) {
        path_printf(path, sizeof path, "%s/step-%09lld", c->dir, (long long)all[i].step);
        remove_tree(path);
    }
}

static void save(prt *rt, int64_t step) {
    struct prt_ckpt *c = rt->ckpt;
    char tmp[4096], final[4096], old[4096], path[4096];
    path_printf(tmp, sizeof tmp, "%s/.tmp.step-%09lld", c->dir, (long long)step);
    path_printf(final, sizeof final, "%s/step-%09lld", c->dir, (long long)step);
    double t0 = MPI_Wtime();
    if (rt->world_rank == 0) {
        remove_tree(tmp);  /* what a killed save left */
        errno = 0;
        if (mkdir(tmp, 0777) != 0) save_fail("cannot create", tmp);
    }
    prt_watched_barrier(rt, "the checkpoint's start");
    cJSON *mine = write_rank_file(rt, tmp, step);
    for (double until = MPI_Wtime() + c->slow_seconds; MPI_Wtime() < until;) usleep(10000);  /* signals too */
    if (c->die_step == step && rt->world_rank == rt->world_size - 1) {  /* the test of a kill mid-save */
        fprintf(stderr, "parc: rank %d: PRT_TEST_CKPT_DIE: killing myself inside the save of step %lld\n",
                rt->world_rank, (long long)step);
        fflush(stderr);
        raise(SIGKILL);
    }
    cJSON *ranks = gather_entries(rt, mine);
    if (rt->world_rank == 0) {
        write_manifest(rt, tmp, step, ranks);
        errno = 0;
        if (prt_fsync_dir(tmp) != 0) save_fail("cannot sync", tmp);
        path_printf(old, sizeof old, "%s/.old.step-%09lld", c->dir, (long long)step);
        int replaced = is_dir(final) && rename(final, old) == 0;  /* a checkpoint of this step already */
        errno = 0;
        if (rename(tmp, final) != 0) save_fail("cannot rename the finished checkpoint to", final);
        if (replaced) remove_tree(old);
        path_printf(path, sizeof path, "%s/latest.tmp", c->dir);
        char text[64];
        int len = snprintf(text, sizeof text, "step-%09lld\n", (long long)step);
        errno = 0;
        if (prt_write_file_synced(path, text, (size_t)len) != 0) save_fail("cannot write", path);
        path_printf(old, sizeof old, "%s/latest", c->dir);
        if (rename(path, old) != 0 || prt_fsync_dir(c->dir) != 0) save_fail("cannot update", old);
        prune(c, step);
        if (!rt->quiet) {
            printf("checkpoint %s (step %lld, %.1f ms)\n", final, (long long)step, (MPI_Wtime() - t0) * 1e3);
            fflush(stdout);
        }
    }
    prt_watched_barrier(rt, "the checkpoint's end");
}

void prt_ckpt_step_end(prt *rt, int64_t step) {
    struct prt_ckpt *c = ck(rt);
    int sig = (int)g_signal;
    MPI_Request req;  /* a signal may reach some ranks only: all stop after the same step */
    PRT_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, &sig, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &req));
    prt_wait(rt, &req, NULL, "the signal check at the step's end", -1);
    /* a run with a checkpoint directory saves its last step, as Megatron-LM and torchtitan do */
    int due = c->dir && ((c->every > 0 && step % c->every == 0) || step == rt->steps || sig);
    if (due) save(rt, step);
    if (!sig) return;
    if (rt->world_rank == 0) {
        fprintf(stderr, "parc: %s: stopped after step %lld%s%s\n", sig == SIGINT ? "SIGINT" : "SIGTERM",
                (long long)step, c->dir ? "; resume with --resume latest --checkpoint-dir " : " (no --checkpoint-dir: "
                "nothing saved)", c->dir ? c->dir : "");
        fflush(stderr);
    }
    int64_t status = prt_finalize(rt);
    exit(status ? (int)status : 128 + sig);
}

/* ---------------------------------------------------------------- load */

/* What a load needs: the manifest, the rank files opened so far, the first error. */
typedef struct loader {
    prt *rt;
    const char *dir;
    cJSON *manifest, *ranks;
    prt_st_file **files;  /* per saved rank, opened on first use */
    int nranks;
    char err[2048];
} loader;

static int lfail(loader *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int lfail(loader *L, const char *fmt, ...) {
    if (L->err[0]) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(L->err, sizeof L->err, fmt, ap);
    va_end(ap);
    return -1;
}

static int64_t num(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? (int64_t)v->valuedouble : -1;
}

/* Reads n whole numbers of array `key` of o into v; 0 or -1. */
static int nums(const cJSON *o, const char *key, int64_t *v, int64_t n) {
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != n) return -1;
    for (int64_t i = 0; i < n; i++) {
        const cJSON *x = cJSON_GetArrayItem(a, (int)i);
        if (!cJSON_IsNumber(x)) return -1;
        v[i] = (int64_t)x->valuedouble;
    }
    return 0;
}

static int open_manifest(loader *L) {
    char path[4096];
    path_printf(path, sizeof path, "%s/manifest.json", L->dir);
    char err[1024];
    L->manifest = prt_read_json(path, err, sizeof err);
    if (!L->manifest && access(path, R_OK) != 0) return lfail(L, "%s", err);
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(L->manifest, "format");
    L->ranks = cJSON_GetObjectItemCaseSensitive(L->manifest, "ranks");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, CKPT_FORMAT) || !cJSON_IsArray(L->ranks))
        return lfail(L, "%s: corrupted or not a parc checkpoint manifest (%s)", path, CKPT_FORMAT);
    L->nranks = cJSON_GetArraySize(L->ranks);
    L->files = prt_xcalloc((size_t)(L->nranks ? L->nranks : 1), sizeof *L->files);
    /* the settings the loss curve depends on must agree */
    cJSON *mine = plan_identity(L->rt);
    const cJSON *saved = cJSON_GetObjectItemCaseSensitive(L->manifest, "model"), *item;
    cJSON_ArrayForEach(item, mine) {
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(saved, item->string);
        if (!s || !cJSON_Compare(s, item, 1)) {
            char *a = s ? cJSON_PrintUnformatted(s) : strdup("(none)"), *b = cJSON_PrintUnformatted(item);
            lfail(L, "%s: saved with %s %s, this run has %s %s: it cannot continue that run", path, item->string, a,
                  item->string, b);
            free(a);
            free(b);
            break;
        }
    }
    cJSON_Delete(mine);
    return L->err[0] ? -1 : 0;
}

/* The file of saved rank r, opened and checked. */
static prt_st_file *rank_file(loader *L, int r) {
    if (L->files[r]) return L->files[r];
    const cJSON *entry = cJSON_GetArrayItem(L->ranks, r);
    const cJSON *file = cJSON_GetObjectItemCaseSensitive(entry, "file");
    char path[4096], err[1024];
    path_printf(path, sizeof path, "%s/%s", L->dir, cJSON_IsString(file) ? file->valuestring : "?");
    if (access(path, F_OK) != 0) {
        lfail(L, "%s: missing (the file of rank %d of the %d that saved this checkpoint)", path, r, L->nranks);
        return NULL;
    }
    L->files[r] = prt_st_open(path, err, sizeof err);
    if (!L->files[r]) {
        lfail(L, "%s", err);
        return NULL;
    }
    /* each shard says the step it holds: a manifest edited or mixed with other shards is refused */
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(L->files[r]->header, "__metadata__");
    const cJSON *saved = cJSON_GetObjectItemCaseSensitive(meta, "step");
    int64_t step = num(L->manifest, "step");
    char want[32];
    snprintf(want, sizeof want, "%lld", (long long)step);
    if (!cJSON_IsString(saved) || strcmp(saved->valuestring, want) != 0) {
        lfail(L, "%s: holds step %s, but the manifest says step %s: the checkpoint's files do not belong together",
              path, cJSON_IsString(saved) ? saved->valuestring : "(none)", want);
        return NULL;
    }
    return L->files[r];
}

/* Whether the saved block [offset, offset + local) meets this rank's block. */
static int blocks_meet(const prt_param_map *a, const prt_param_map *b) {
    for (int64_t d = 0; d < a->ndim; d++)
        if (a->offset[d] >= b->offset[d] + b->local_dims[d] || b->offset[d] >= a->offset[d] + a->local_dims[d])
            return 0;
    return 1;
}

/* Elements a reshard reads at a time: its only buffer, on the stack. */
#define CKPT_CHUNK 4096

/* The index in this rank's share of global flat element g, or -1 when the
 * share (count elements from the block's element mine->first) lacks it. */
static int64_t local_of(const prt_param_map *mine, int64_t count, int64_t g) {
    int64_t idx[PRT_MAX_DIMS], flat = 0;
    for (int64_t k = mine->ndim - 1; k >= 0; k--) {
        idx[k] = g % mine->gdims[k];
        g /= mine->gdims[k];
    }
    for (int64_t k = 0; k < mine->ndim; k++) {
        int64_t x = idx[k] - mine->offset[k];
        if (x < 0 || x >= mine->local_dims[k]) return -1;
        flat = flat * mine->local_dims[k] + x;
    }
    int64_t e = flat - mine->first;
    return e >= 0 && e < count ? e : -1;
}

/* Streams saved shard `sh` (its slice `saved`, `count` elements) of `name` from
 * st through a stack buffer, checking its CRC-32, and copies the elements this
 * rank's share holds to their places in dst; adds their number to *filled. */
static int stream_shard(loader *L, const char *name, const prt_buffer_desc *d, const prt_param_map *mine,
                        int64_t mine_count, const prt_param_map *saved, int64_t count, const cJSON *sh,
                        prt_st_file *st, char *dst, int64_t *filled) {
    size_t es = prt_dtype_size(d->dtype);
    char buf[CKPT_CHUNK * 4], err[1024], crc[9];
    uint32_t c = 0;
    for (int64_t s0 = 0; s0 < count; s0 += CKPT_CHUNK) {
        int64_t n = count - s0 < CKPT_CHUNK ? count - s0 : CKPT_CHUNK;
        if (prt_st_read_part(st, name, d->dtype, (size_t)count * es, (size_t)s0 * es, buf, (size_t)n * es, err,
                             sizeof err) != 0)
            return lfail(L, "%s", err);
        c = prt_st_crc32_update(c, buf, (size_t)n * es);
        for (int64_t s = 0; s < n; s++) {
            int64_t rem = saved->first + s0 + s, idx[PRT_MAX_DIMS], g = 0;  /* the saved block's element -> global */
            for (int64_t k = d->ndim - 1; k >= 0; k--) {
                idx[k] = rem % saved->local_dims[k] + saved->offset[k];
                rem /= saved->local_dims[k];
            }
            for (int64_t k = 0; k < d->ndim; k++) g = g * d->gdims[k] + idx[k];
            int64_t e = local_of(mine, mine_count, g);
            if (e < 0) continue;
            memcpy(dst + (size_t)e * es, buf + (size_t)s * es, es);
            (*filled)++;
        }
    }
    prt_st_crc32_format(c, crc);
    const cJSON *want = cJSON_GetObjectItemCaseSensitive(sh, "crc32");
    if (!cJSON_IsString(want) || strcmp(want->valuestring, crc))
        return lfail(L, "%s: tensor %s: checksum mismatch (CRC-32 %s in the manifest, %s read): the file is "
                     "corrupted", st->path, name, cJSON_IsString(want) ? want->valuestring : "?", crc);
    return 0;
}

/* Whether rank r's shard `sh` repeats the slice of an earlier rank's (a
 * replica on another data-parallel rank): the earlier one was read. */
static int slice_seen(loader *L, const char *name, int r, const cJSON *sh) {
    static const char *const keys[] = {"offset", "local", "first", "count"};
    for (int q = 0; q < r; q++) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(L->ranks, q), "tensors");
        const cJSON *other = cJSON_GetObjectItemCaseSensitive(list, name);
        int same = other != NULL;
        for (int k = 0; k < 4 && same; k++)
            same = cJSON_Compare(cJSON_GetObjectItemCaseSensitive(other, keys[k]),
                                 cJSON_GetObjectItemCaseSensitive(sh, keys[k]), 1);
        if (same) return 1;
    }
    return 0;
}

/* Fills this rank's share of `name` (mine, mine_count elements) in dst from
 * the saved shards whose blocks meet it, read straight into place: no buffer
 * of the tensor's size.  Every element must come from exactly one slice. */
static int reshard_tensor(loader *L, const char *name, const prt_buffer_desc *d, const prt_param_map *mine,
                          int64_t mine_count, char *dst) {
    int found = 0;
    int64_t filled = 0;
    for (int r = 0; r < L->nranks && !L->err[0]; r++) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(L->ranks, r), "tensors");
        const cJSON *sh = cJSON_GetObjectItemCaseSensitive(list, name);
        if (!sh) continue;
        found = 1;
        prt_param_map saved;
        memset(&saved, 0, sizeof saved);
        saved.ndim = d->ndim;
        const cJSON *dt = cJSON_GetObjectItemCaseSensitive(sh, "dtype");
        if (nums(sh, "global", saved.gdims, d->ndim) != 0)
            return lfail(L, "tensor %s: the checkpoint has %d dims, this plan %lld (another model shape)", name,
                         cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(sh, "global")), (long long)d->ndim);
        for (int64_t k = 0; k < d->ndim; k++)
            if (saved.gdims[k] != d->gdims[k])
                return lfail(L, "tensor %s: global dim %lld is %lld in the checkpoint, %lld in this plan (another "
                             "model shape)", name, (long long)k, (long long)saved.gdims[k], (long long)d->gdims[k]);
        if (!cJSON_IsString(dt) || prt_st_dtype_of(dt->valuestring) != d->dtype)
            return lfail(L, "tensor %s: saved as %s, this plan holds it as %s (another precision)", name,
                         cJSON_IsString(dt) ? dt->valuestring : "?", prt_st_dtype_name(d->dtype));
        int bad = nums(sh, "offset", saved.offset, d->ndim) || nums(sh, "local", saved.local_dims, d->ndim);
        for (int64_t k = 0; k < d->ndim && !bad; k++)
            bad = saved.offset[k] < 0 || saved.local_dims[k] < 1 || saved.offset[k] + saved.local_dims[k] > d->gdims[k];
        if (bad) return lfail(L, "tensor %s: the manifest's slice of rank %d is corrupted", name, r);
        if (!blocks_meet(&saved, mine) || slice_seen(L, name, r, sh)) continue;
        saved.local_total = 1;
        for (int64_t k = 0; k < d->ndim; k++) saved.local_total *= saved.local_dims[k];
        saved.first = num(sh, "first");
        int64_t count = num(sh, "count");
        if (saved.first < 0 || count < 0 || saved.first + count > saved.local_total)
            return lfail(L, "tensor %s: the manifest's slice of rank %d is corrupted", name, r);
        prt_st_file *st = rank_file(L, r);
        if (!st) return -1;
        if (stream_shard(L, name, d, mine, mine_count, &saved, count, sh, st, dst, &filled) != 0) return -1;
    }
    if (!found)
        return lfail(L, "the checkpoint has no tensor %s (this plan's %s): saved from another model or optimizer",
                     name, d->name);
    if (!L->err[0] && filled != mine_count)
        return lfail(L, "tensor %s: the rank files hold %lld of this rank's %lld elements (%s)", name,
                     (long long)filled, (long long)mine_count,
                     filled < mine_count ? "a part is in no file" : "the manifest's slices overlap");
    return L->err[0] ? -1 : 0;
}

/* Whether saved shard `sh` covers exactly the slice `mine` of d. */
static int same_slice(const cJSON *sh, const prt_buffer_desc *d, const prt_param_map *mine) {
    int64_t g[PRT_MAX_DIMS], off[PRT_MAX_DIMS], loc[PRT_MAX_DIMS];
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(sh, "dtype");
    if (!cJSON_IsString(dt) || prt_st_dtype_of(dt->valuestring) != d->dtype || nums(sh, "global", g, d->ndim) ||
        nums(sh, "offset", off, d->ndim) || nums(sh, "local", loc, d->ndim))
        return 0;
    for (int64_t k = 0; k < d->ndim; k++)
        if (g[k] != d->gdims[k] || off[k] != mine->offset[k] || loc[k] != mine->local_dims[k]) return 0;
    return num(sh, "first") == mine->first && num(sh, "count") == shard_count(mine, d->elems);
}

/* The same layout's shortcut: reads the shard that covers exactly this rank's
 * slice of `name` (this rank's own file first) into local, CRC-checked.
 * Returns 1 when one was read, 0 when no file has that slice, -1 on an error. */
static int read_same_slice(loader *L, const char *name, const prt_buffer_desc *d, const prt_param_map *mine,
                           char *local) {
    for (int i = 0; i < L->nranks; i++) {
        int r = (L->rt->world_rank + i) % L->nranks;
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(L->ranks, r), "tensors");
        const cJSON *sh = cJSON_GetObjectItemCaseSensitive(list, name), *want;
        if (!sh || !same_slice(sh, d, mine)) continue;
        prt_st_file *st = rank_file(L, r);
        if (!st) return -1;
        size_t bytes = (size_t)shard_count(mine, d->elems) * prt_dtype_size(d->dtype);
        char err[1024], crc[9];
        if (prt_st_read(st, name, d->dtype, local, bytes, err, sizeof err) != 0) return lfail(L, "%s", err);
        prt_st_crc32_hex(local, bytes, crc);
        want = cJSON_GetObjectItemCaseSensitive(sh, "crc32");
        if (!cJSON_IsString(want) || strcmp(want->valuestring, crc))
            return lfail(L, "%s: tensor %s: checksum mismatch (CRC-32 %s in the manifest, %s read): the file is "
                         "corrupted", st->path, name, cJSON_IsString(want) ? want->valuestring : "?", crc);
        return 1;
    }
    return 0;
}

/* Loads every instance of buffer b.  Host memory (the CPU backend) is
 * written in place; a device buffer is staged in one instance of host memory
 * and uploaded. */
static int load_buffer(loader *L, prt_buffer *b) {
    prt *rt = L->rt;
    const prt_buffer_desc *d = &b->desc;
    prt_param_map mine;
    prt_param_map_init(rt, &mine, d, d->name, d->elems);
    int64_t mine_count = shard_count(&mine, d->elems);
    size_t dsize = prt_dtype_size(d->dtype);
    char *local = NULL;  /* staging for device buffers */
    for (int64_t inst = 0; inst < d->instances && !L->err[0]; inst++) {
        char name[256];
        tensor_name(b, inst, name, sizeof name);
        char *dst = b->base + inst * b->instance_bytes, *into = dst;
        if (!rt->backend->host_memory) {
            if (!local) local = prt_xcalloc((size_t)(d->elems ? d->elems : 1), dsize);
            memset(local, 0, (size_t)d->elems * dsize);  /* ZeRO padding stays zero */
            into = local;
        }
        int same = read_same_slice(L, name, d, &mine, into);  /* the same layout: one read */
        if (same < 0) break;
        if (!same && reshard_tensor(L, name, d, &mine, mine_count, into) != 0) break;
        if (into != dst) rt->backend->upload(rt, dst, local, b->instance_bytes);
    }
    free(local);
    return L->err[0] ? -1 : 0;
}

int64_t prt_first_step(prt *rt) {
    struct prt_ckpt *c = ck(rt);
    if (!c->resume_path) {
        if (c->init_from && !c->imported) prt_import_hf(rt, c->init_from), c->imported = 1;
        return c->first_step > 0 ? c->first_step : 1;
    }
    loader L = {.rt = rt, .dir = c->resume_path};
    double t0 = MPI_Wtime();
    if (open_manifest(&L) == 0)
        for (int64_t i = 0; i < rt->nbuffers && !L.err[0]; i++)
            if (persistent(&rt->buffers[i])) load_buffer(&L, &rt->buffers[i]);
    int64_t step = L.manifest ? num(L.manifest, "step") : -1;
    if (!L.err[0] && step < 0) lfail(&L, "%s/manifest.json: no step", L.dir);
    for (int r = 0; r < L.nranks; r++) prt_st_close(L.files[r]);
    free(L.files);
    cJSON_Delete(L.manifest);
    prt_startup_verdict(rt, PRT_STARTUP_RESUME, L.err[0] ? L.err : NULL);  /* every rank exits 2 when any failed */
    c->first_step = step + 1;
    if (rt->world_rank == 0 && !rt->quiet) {
        printf("resumed from %s (step %lld, %.1f ms)\n", c->resume_path, (long long)step, (MPI_Wtime() - t0) * 1e3);
        fflush(stdout);
    }
    return c->first_step;
}
