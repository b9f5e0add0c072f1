// test_env_mask — an episode's environment tokens get no gradient (docs/envs.md, "Masks"). A
// multi-turn row is prompt, the policy's first turn, the environment's answer, the policy's
// second turn, padding; its loss mask is 1 on the two turns only. For every policy loss of GRPO's
// family (rl_grpo_math: grpo, gspo, cispo), every aggregation, with the KL term, token and
// sequence TIS and the dual clip: dL/dlogp is exactly 0 on the environment's tokens, and
// perturbing every input there (logp, old, reference and sampler logprobs; NaN included) changes
// neither the loss nor any dL/dlogp, bit for bit. So the environment's tokens reach the update
// only as context. (That a one-turn episode trains exactly as GRPO does is env.run's.)
#include "rl_grpo.h"
#include "rl_loss.h"
#include "rl_rng.h"
#include "rl_test.h"

#include <math.h>
#include <string.h>

#define S_B 3
#define S_T 14

// row b: [0, p) prompt, [p, p+4) turn 1, [p+4, p+7) environment, [p+7, p+10) turn 2, padding
static const int s_prompt[S_B] = {2, 1, 3};

static void s_mask(float *mask, uint8_t *env) {
    memset(mask, 0, sizeof(float) * S_B * S_T);
    memset(env, 0, S_B * S_T);
    for (int b = 0; b < S_B; b++) {
        int p = s_prompt[b];
        for (int t = p; t < p + 10; t++) {
            int is_env = t >= p + 4 && t < p + 7;
            mask[b * S_T + t] = is_env ? 0.0f : 1.0f;
            env[b * S_T + t] = (uint8_t)is_env;
        }
    }
}

static void s_fill(rl_rng_t *g, float *x, double lo, double hi) {
    for (int i = 0; i < S_B * S_T; i++) {
        x[i] = (float)(lo + (hi - lo) * rl_rng_uniform(g));
    }
}

static rl_recipe_algorithm_t s_alg(int agg, int variant) {
    rl_recipe_algorithm_t a;
    memset(&a, 0, sizeof a);
    a.epsilon_low = 0.2;
    a.epsilon_high = 0.28;
    a.kl_estimator = RL_RECIPE_KL_K3;
    a.loss_agg = agg;
    a.tis = RL_RECIPE_TIS_NONE;
    a.tis_cap = 2.0;
    a.beta = variant >= 1 ? 0.04 : 0.0;
    a.tis = variant == 2 ? RL_RECIPE_TIS_TOKEN : variant == 3 ? RL_RECIPE_TIS_SEQUENCE : a.tis;
    a.dual_clip = variant == 4 ? 3.0 : 0.0;
    a.tis_cap = variant == 3 ? 1e4 : a.tis_cap; // rows kept: their ratios' products are wide
    return a;
}

static void test_env_tokens_no_gradient(void) {
    const rl_loss_t *const *all = NULL;
    int n_loss = rl_loss_all(&all), tried = 0, losses = 0;
    char names[256] = "";
    float mask[S_B * S_T], logp[S_B * S_T], old[S_B * S_T], ref[S_B * S_T], mu[S_B * S_T];
    float logp2[S_B * S_T], old2[S_B * S_T], ref2[S_B * S_T], mu2[S_B * S_T], d1[S_B * S_T],
        d2[S_B * S_T];
    uint8_t env[S_B * S_T];
    const double adv[S_B] = {0.7, -1.3, 0.4};
    s_mask(mask, env);
    rl_rng_t g;
    rl_rng_seed(&g, 30);
    for (int li = 0; li < n_loss; li++) {
        rl_grpo_math_fn math = rl_grpo_math(all[li]);
        if (!math) {
            continue;
        }
        losses++;
        size_t l = strlen(names);
        snprintf(names + l, sizeof names - l, "%s%s", l ? ", " : "", all[li]->name);
        for (int agg = 0; agg < 3; agg++) {
            for (int variant = 0; variant < 5; variant++) {
                rl_recipe_algorithm_t alg = s_alg(agg, variant);
                s_fill(&g, logp, -3.0, -0.05);
                s_fill(&g, old, -3.0, -0.05);
                s_fill(&g, ref, -3.0, -0.05);
                s_fill(&g, mu, -3.0, -0.05);
                rl_grpo_batch_t bt = {.B = S_B,
                                      .T = S_T,
                                      .logp = logp,
                                      .old_logp = old,
                                      .ref_logp = ref,
                                      .mu_logp = mu,
                                      .mask = mask,
                                      .adv = adv,
                                      .denom = agg == RL_RECIPE_AGG_TOKEN_MEAN ? 21.0 : 3.0};
                rl_grpo_loss_stats_t s1, s2;
                memset(&s1, 0, sizeof s1);
                memset(&s2, 0, sizeof s2);
                CHECK_INT(math(&bt, &alg, d1, &s1), 0);
                // the environment's positions: anything, NaN included
                memcpy(logp2, logp, sizeof logp);
                memcpy(old2, old, sizeof old);
                memcpy(ref2, ref, sizeof ref);
                memcpy(mu2, mu, sizeof mu);
                for (int i = 0; i < S_B * S_T; i++) {
                    if (env[i]) {
                        logp2[i] = i % 2 ? NAN : (float)(-5.0 * rl_rng_uniform(&g));
                        old2[i] = (float)(-5.0 * rl_rng_uniform(&g));
                        ref2[i] = i % 3 ? NAN : 0.0f;
                        mu2[i] = (float)(-9.0 * rl_rng_uniform(&g));
                    }
                }
                rl_grpo_batch_t bt2 = bt;
                bt2.logp = logp2;
                bt2.old_logp = old2;
                bt2.ref_logp = ref2;
                bt2.mu_logp = mu2;
                CHECK_INT(math(&bt2, &alg, d2, &s2), 0);
                const char *name = all[li]->name;
                CHECK_MSG(memcmp(&s1.loss, &s2.loss, sizeof s1.loss) == 0,
                          "%s agg %d variant %d: the loss moved with the environment's tokens "
                          "(%.17g -> %.17g)",
                          name, agg, variant, s1.loss, s2.loss);
                int moved = 0, leaked = 0;
                for (int i = 0; i < S_B * S_T; i++) {
                    moved += memcmp(&d1[i], &d2[i], sizeof d1[i]) != 0;
                    leaked += env[i] && d1[i] != 0.0f;
                }
                CHECK_MSG(moved == 0, "%s agg %d variant %d: %d dlogp values moved", name, agg,
                          variant, moved);
                CHECK_MSG(leaked == 0,
                          "%s agg %d variant %d: %d environment tokens have a "
                          "gradient",
                          name, agg, variant, leaked);
                CHECK_MSG(s1.loss != 0.0, "%s agg %d variant %d: a zero loss proves nothing", name,
                          agg, variant);
                tried++;
            }
        }
    }
    CHECK_MSG(losses >= 3 && tried == losses * 15, "%d settings of %d losses tried (%s)", tried,
              losses, names);
    printf("losses: %s; %d settings\n", names, tried);
}

int main(void) {
    RL_TEST_RUN(test_env_tokens_no_gradient);
    RL_TEST_DONE();
}
