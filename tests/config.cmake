# recipes: rl_config + rl_yaml; the suite also runs the rlctl binary (validate), so it depends on it
rl_add_test(NAME core.config SOURCES test_config.c LIBS rl_algorithms rl_serving LABELS unit TIMEOUT 60)
add_dependencies(test_core_config rlctl)
# validate reading the model folder a recipe names (runs the rlctl binary)
rl_add_test(NAME cli.validate SOURCES test_validate.c LIBS rl_core LABELS unit TIMEOUT 60)
add_dependencies(test_cli_validate rlctl)
