# rl_tokenizer: fixtures, errors, UTF-8 and the rlctl tokenize/detokenize CLI (unit), and the
# exactness goldens of the official JS port on the real Qwen3 / Llama-3 files (unit: a few
# seconds; they need tests/reference/fetch_tokenizers.sh to have run, and fail saying so).
rl_add_test(NAME text.tokenizer SOURCES test_tokenizer.c LIBS rl_text LABELS unit
            ARGS unit TIMEOUT 60)
rl_add_test(NAME text.tokenizer_goldens SOURCES test_tokenizer.c LIBS rl_text LABELS unit
            ARGS goldens TIMEOUT 300)
rl_add_test(NAME text.chat SOURCES test_chat.c LIBS rl_text LABELS unit TIMEOUT 120)
add_dependencies(test_text_chat rlctl) # rlctl template
# the model's own chat template found one way (rl_chat_model_source), and GRPO/PPO over a folder
# with the real Qwen3 template in tokenizer_config.json (validate, and the rollout's prompts)
rl_add_test(NAME text.chat_source SOURCES test_chat_source.c LIBS rl_algorithms rl_serving
            LABELS unit TIMEOUT 60)
add_dependencies(test_text_chat_source rlctl)
