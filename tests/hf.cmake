rl_add_test(NAME model.hf SOURCES test_hf.c LIBS rl_model rl_core LABELS unit)
