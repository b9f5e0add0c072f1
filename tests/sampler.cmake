# rollout: the sampling kernels (unit) and the sampler engine on tiny random models (numeric: the
# sampler/forward logprob gap, greedy vs argmax, determinism, stop/length, refusals).
rl_add_test(NAME rollout.sample SOURCES test_sample.c LIBS rl_rollout LABELS unit TIMEOUT 60)
rl_add_test(NAME rollout.sampler SOURCES test_sampler.c LIBS rl_rollout LABELS numeric
            TIMEOUT 300)
# runs the rlctl binary: generate --json, then logprobs of each completion (the printed numbers
# agree), and the refusals
rl_add_test(NAME cli.generate SOURCES test_generate.c LIBS rl_model rl_core LABELS integration)
add_dependencies(test_cli_generate rlctl)
# held-out evaluation: the JSONL reader, scoring bookkeeping, and `rlctl eval`
rl_add_test(NAME rollout.eval SOURCES test_eval.c LIBS rl_rollout LABELS unit TIMEOUT 60)
add_dependencies(test_rollout_eval rlctl)
