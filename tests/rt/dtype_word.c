/*
 * dtype_word.c — the runtime's check of each call's dtypes word (parc_rt.h)
 * against the registered buffers.  One rank, mesh {x: 1}, one bf16 buffer and
 * one fp32 buffer.  DTYPE_WORD_CASE in the environment picks the case
 * (test_dtype_word.sh runs them and asserts the exit status and the message):
 *   ok     gelu_fwd bf16 -> fp32 with the right word, an allgather of bf16
 *          elements, a step, then the same calls again: exit 0 iff every output
 *          equals the formula (the word, not the address, says how to read);
 *   op     gelu_fwd declares its bf16 input fp32: the run stops naming the op,
 *          the argument, the buffer and both dtypes;
 *   comm   an allgather whose word declares bf16 and fp32 elements (the fp32
 *          one unregistered, so only the agreement check can catch it);
 *   fixed  embed_fwd whose token ids are declared fp32;
 *   later  after the first step a wrong word is not looked up (the run ends
 *          normally, that call's output unchecked), unless PRT_CHECK_DTYPES=1,
 *          which checks every call: then it stops as in op.
 */
#include "rt_test.h"

#include "prt_internal.h"

enum { N = 40 };

static int check_gelu(const float *out, const uint16_t *in) {
    int bad = 0;
    for (int i = 0; i < N; i++) bad += out[i] != prt_gelu(prt_bf16_to_f32(in[i]));
    return bad;
}

int main(int argc, char **argv) {
    const char *mode = getenv("DTYPE_WORD_CASE") ? getenv("DTYPE_WORD_CASE") : "ok";
    static const char *names[1] = {"x"};
    static const int64_t sizes[1] = {1};
    prt_plan_desc plan = rt_plan("dtype_word", 1, names, sizes);
    prt *rt = prt_init(argc, argv, &plan);
    prt_buffer_desc descs[2];
    memset(descs, 0, sizeof descs);
    for (int k = 0; k < 2; k++) {
        descs[k].name = k ? "acts.f32" : "acts.bf16";
        descs[k].klass = PRT_ACTIVATIONS;
        descs[k].dtype = k ? PRT_F32 : PRT_BF16;
        descs[k].elems = 2 * N;
        descs[k].instances = 1;
        descs[k].init = PRT_INIT_NONE;
        descs[k].first_layer = -1;
        descs[k].zero_axis = -1;
        descs[k].copy_of = -1;
        for (int d = 0; d < PRT_MAX_DIMS; d++) descs[k].split_axis[d] = -1;
    }
    prt_register_buffers(rt, descs, 2);
    uint16_t *h = prt_ptr(rt, 0, 0);
    float *f = prt_ptr(rt, 1, 0);
    for (int i = 0; i < N; i++) h[i] = prt_f32_to_bf16(0.1f * (float)(i - N / 2));
    int bad = 0;
    const int64_t gelu_word = PRT_ARG_DTYPES(PRT_F32, PRT_BF16), gather_word = PRT_ARG_DTYPES(PRT_BF16, PRT_BF16);
    if (!strcmp(mode, "op")) prt_gelu_fwd(rt, f, h, N, 0);
    if (!strcmp(mode, "comm")) {
        float staged[N];  /* unregistered: taken as declared */
        prt_allgather(rt, 0, h + N, staged, 1, N, PRT_ARG_DTYPES(PRT_BF16, PRT_F32));
    }
    if (!strcmp(mode, "fixed")) {
        int32_t tokens[4] = {0, 1, 2, 3};
        int32_t *ids = (int32_t *)(void *)(f + N);  /* token ids in the fp32 buffer, declared fp32 */
        memcpy(ids, tokens, sizeof tokens);
        prt_embed_fwd(rt, f, ids, f + N + 4, 4, 1, 4, 0, 0);
    }
    for (int step = 1; step <= 2; step++) {
        prt_step_begin(rt, step);
        memset(f, 0, N * sizeof(float));
        if (!strcmp(mode, "later") && step == 2) {
            prt_gelu_fwd(rt, f, h, N, 0);  /* read as fp32: numbers, not a check, unless PRT_CHECK_DTYPES=1 */
        } else {
            prt_gelu_fwd(rt, f, h, N, gelu_word);
            bad += check_gelu(f, h);
        }
        prt_allgather(rt, 0, h + N, h, 1, N, gather_word);
        bad += memcmp(h + N, h, N * sizeof(uint16_t)) != 0;
        prt_step_end(rt, step);
    }
    if (bad) fprintf(stderr, "dtype_word %s: %d wrong outputs\n", mode, bad);
    int64_t status = prt_finalize(rt);
    return bad ? 1 : (int)status;
}
