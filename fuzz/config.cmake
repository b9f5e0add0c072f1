# the recipe loader (rl_yaml + rl_config), seeded with the cookbook and test recipes
rl_add_fuzz(config fuzz_config.c rl_algorithms rl_serving)
