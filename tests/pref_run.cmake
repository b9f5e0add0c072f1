# run/: `rlctl run` of the preference algorithms end to end on pairs made by the test. DPO:
# TRL's metrics, the reference cache across runs, exact resume, held-out pairs and prompts,
# refused row layouts. RM: its metrics and held-out accuracy, final/ as an HF sequence classifier
# that scores as the trained actor did, exact resume, margins, full tuning, training on from a
# reward model's folder.
rl_add_test(NAME roles.pref_run SOURCES test_pref_run.c LIBS rl_trainer rl_model rl_core LABELS integration
            TIMEOUT 300)
add_dependencies(test_roles_pref_run rlctl)
