# Learning is proven by results: short runs of the cookbook recipes must improve their held-out
# metric by more than its measured noise (numbers in tests/test_learning.c's header).
rl_add_test(NAME roles.learning SOURCES test_learning.c LIBS rl_core ARGS grpo_lora.yaml 30 8
            LABELS learning TIMEOUT 600)
add_dependencies(test_roles_learning rlctl)
rl_add_test(NAME roles.learning_ppo SOURCES test_learning.c LIBS rl_core ARGS ppo_lora.yaml 20 8
            LABELS learning TIMEOUT 600)
add_dependencies(test_roles_learning_ppo rlctl)
