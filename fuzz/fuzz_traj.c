// fuzz_traj — libFuzzer target for the trajectory record decoder (rl_traj_decode), which reads
// values from disk: any input must give either a record whose arrays all have their stated
// lengths, or an error with a message and an empty record; never a crash, a leak or a read
// past the input. A record that decodes must encode again and decode to the same record (what
// the decoder accepts, the writer can store).
#include "rl_err.h"
#include "rl_traj.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int s_same(const void *a, const void *b, size_t n) {
    return (!a && !b) || (a && b && (n == 0 || memcmp(a, b, n) == 0));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    // A private copy, so ASan flags any read past the end of exactly `size` bytes.
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) {
        return 0;
    }
    memcpy(buf, data, size);
    char err[512];
    err[0] = '\0';
    rl_traj_record_t r;
    int rc = rl_traj_decode(buf, size, &r, err, sizeof err);
    if (rc != 0) {
        if (err[0] == '\0' || r.prompt_ids || r.completion_ids || r.reward_names ||
            r.n_completion || (rc != RL_EPROTO && rc != RL_EVERSION && rc != RL_ENOMEM)) {
            abort(); // a failure must come with a message and an empty record
        }
        free(buf);
        return 0;
    }
    size_t nc = (size_t)r.n_completion;
    // touch every element: ASan reports an array shorter than its count
    volatile uint32_t sink = 0;
    for (int i = 0; i < r.n_prompt; i++) {
        sink += (uint32_t)r.prompt_ids[i];
    }
    for (size_t i = 0; i < nc; i++) {
        sink += (uint32_t)r.completion_ids[i] + r.mask[i] + (r.sampler_logprobs[i] != 0.0f);
    }
    for (int i = 0; i < r.n_rewards; i++) {
        sink += (uint32_t)strlen(r.reward_names[i]);
    }
    (void)sink;
    void *enc = NULL;
    size_t len = 0;
    if (rl_traj_encode(&r, &enc, &len) != 0) {
        abort();
    }
    rl_traj_record_t d;
    if (rl_traj_decode(enc, len, &d, err, sizeof err) != 0) {
        abort();
    }
    int same = d.step == r.step && d.prompt_index == r.prompt_index &&
               d.sample_index == r.sample_index && d.data_index == r.data_index &&
               d.policy_version == r.policy_version && d.n_prompt == r.n_prompt &&
               d.n_completion == r.n_completion && d.finish == r.finish &&
               d.n_rewards == r.n_rewards && s_same(&d.reward, &r.reward, 8) &&
               s_same(&d.advantage, &r.advantage, 8) &&
               s_same(d.prompt_ids, r.prompt_ids, (size_t)r.n_prompt * 4) &&
               s_same(d.completion_ids, r.completion_ids, nc * 4) &&
               s_same(d.mask, r.mask, nc) &&
               s_same(d.sampler_logprobs, r.sampler_logprobs, nc * 4) &&
               s_same(d.old_logprobs, r.old_logprobs, nc * 4) &&
               s_same(d.ref_logprobs, r.ref_logprobs, nc * 4) &&
               s_same(d.values, r.values, nc * 4) && s_same(d.advantages, r.advantages, nc * 4);
    for (int i = 0; same && i < r.n_rewards; i++) {
        same = !strcmp(d.reward_names[i], r.reward_names[i]) &&
               s_same(&d.rewards[i], &r.rewards[i], 8);
    }
    if (!same) {
        abort();
    }
    rl_traj_record_clear(&d);
    rl_traj_record_clear(&r);
    free(enc);
    free(buf);
    return 0;
}
