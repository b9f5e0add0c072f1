rl_add_test(NAME rewards.math SOURCES test_reward_math.c LIBS rl_rewards LABELS unit)
# command and http rewards: the JSON both speak, a program over JSON lines, a server over HTTP
# (the Python helpers tests/reward_command.py and tests/reward_server.py, standard library only)
rl_add_test(NAME rewards.json SOURCES test_reward_json.c LIBS rl_rewards LABELS unit TIMEOUT 30)
rl_add_test(NAME rewards.command SOURCES test_reward_command.c LIBS rl_algorithms rl_serving LABELS unit
            TIMEOUT 60)
rl_add_test(NAME rewards.http SOURCES test_reward_http.c LIBS rl_algorithms rl_serving LABELS unit TIMEOUT 60)
# `rlctl run` of the cookbook GRPO recipe with math_answer as a built-in, a Python command and
# a server of either form: the same metrics; then a command or server that fails
rl_add_test(NAME rewards.run SOURCES test_reward_run.c LIBS rl_core LABELS integration
            TIMEOUT 120)
add_dependencies(test_rewards_run rlctl)
# `python:` rewards (TRL's signature, rewards/rlctl_trl_reward.py): the runner alone, then the
# cookbook GRPO recipe with a TRL-style function = the same rule as a command, byte for byte
rl_add_test(NAME rewards.python SOURCES test_reward_python.c LIBS rl_core LABELS integration
            TIMEOUT 120)
add_dependencies(test_rewards_python rlctl)
