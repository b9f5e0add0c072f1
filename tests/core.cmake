rl_add_test(NAME core.err SOURCES test_err.c LIBS rl_core LABELS unit)
rl_add_test(NAME core.log SOURCES test_log.c LIBS rl_core LABELS unit)
rl_add_test(NAME core.progress SOURCES test_progress.c LIBS rl_core LABELS unit)
rl_add_test(NAME core.pool SOURCES test_pool.c LIBS rl_core LABELS unit)
