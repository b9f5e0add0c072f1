rl_add_test(NAME model.hf SOURCES test_hf.c LIBS rl_model rl_core LABELS unit)
# runs the rlctl binary: an integration test of `rlctl init` against rl_hf and rl_safetensors
rl_add_test(NAME cli.init SOURCES test_init.c LIBS rl_model rl_core LABELS integration)
add_dependencies(test_cli_init rlctl)
