# env/: the environments of multi-turn rollouts. The calc tool against Python's goldens
# (tests/reference/make_calc_goldens.py).
rl_add_test(NAME env.calc SOURCES test_env_calc.c LIBS rl_env rl_core LABELS unit TIMEOUT 60)
# the tool-call formats (hermes, llama3_json) on the shapes models write and on broken ones
rl_add_test(NAME env.toolcall SOURCES test_env_toolcall.c LIBS rl_env rl_core LABELS unit TIMEOUT 60)
# the environment protocol's requests and checked replies, the built-in calc environment and its
# twin in Python (cookbook/envs/calc_env.py) on the same requests
rl_add_test(NAME env.proto SOURCES test_env_proto.c LIBS rl_env rl_core LABELS unit TIMEOUT 120)
# token-in-token-out turns with the real Qwen3 template and tokenizer (fetched fixtures)
rl_add_test(NAME env.turns SOURCES test_env_turns.c LIBS rl_env rl_text rl_core LABELS unit TIMEOUT 60)
# multi-turn episodes against the built-in calc environment with the real Qwen3 template and a
# scripted policy: masks, turns, limits, a wrong environment
rl_add_test(NAME env.episode SOURCES test_env_episode.c LIBS rl_env rl_text rl_core LABELS unit TIMEOUT 60)
