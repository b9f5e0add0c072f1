rl_add_test(NAME rewards.math SOURCES test_reward_math.c LIBS rl_rewards LABELS unit)
