# rl_model + rl_lora on tiny random models (tests/test_model.c). One source, two suites:
# `numeric` (backward vs double finite differences, the scalar head of rl_head through
# rl_model_backward_hidden likewise, cached decode vs forward, recompute) and
# `unit` (PEFT folders and refusals, merged export, argument errors, zero-copy, rlctl export).
rl_add_test(NAME model.model_numeric SOURCES test_model.c LIBS rl_model rl_core ARGS numeric
            LABELS numeric TIMEOUT 120)
rl_add_test(NAME model.model_unit SOURCES test_model.c LIBS rl_model rl_core ARGS unit
            LABELS unit TIMEOUT 120)
add_dependencies(test_model_model_unit rlctl)
