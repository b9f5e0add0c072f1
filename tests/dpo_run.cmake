# roles/: `rlctl run` of DPO end to end: TRL's metrics, the reference cache across runs, exact
# resume, refused row layouts.
rl_add_test(NAME roles.dpo_run SOURCES test_dpo_run.c LIBS rl_core LABELS integration
            TIMEOUT 300)
add_dependencies(test_roles_dpo_run rlctl)
