# run/: `rlctl run` of PPO end to end (actor with the critic, or a critic worker; samplers, a
# reward worker): the run folder, exact resume with the critic and a moving KL coefficient,
# both critic placements giving the same bytes, critic warmup, a fully tuned critic.
rl_add_test(NAME roles.ppo_run SOURCES test_ppo_run.c LIBS rl_core LABELS integration
            TIMEOUT 600)
add_dependencies(test_roles_ppo_run rlctl)
