rl_add_test(NAME core.err SOURCES test_err.c LIBS rl_core LABELS unit)
rl_add_test(NAME core.log SOURCES test_log.c LIBS rl_core LABELS unit)
rl_add_test(NAME core.progress SOURCES test_progress.c LIBS rl_core LABELS unit)
rl_add_test(NAME core.pool SOURCES test_pool.c LIBS rl_core LABELS unit)
rl_add_test(NAME core.reaper SOURCES test_reaper.c LIBS rl_core LABELS unit TIMEOUT 30)
# the shared test kit (tests/rl_test.h): FAIL lines name the test case and function; temporary
# folders removed when a suite passed (not through links), kept when it failed; the finite
# differences of tests/rl_test_fd.h
rl_add_test(NAME tests.kit SOURCES test_kit.c LIBS m LABELS unit TIMEOUT 60)
# a program spoken to in lines (rl_child): echo, exits, a kill, a hang past 0.3 s (its group
# killed), too long lines, stderr past the 16 MiB cap, programs that cannot start, the 1 s grace
rl_add_test(NAME core.child SOURCES test_child.c LIBS rl_core LABELS unit TIMEOUT 60)
