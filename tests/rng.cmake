rl_add_test(NAME core.rng SOURCES test_rng.c LIBS rl_core LABELS unit)
