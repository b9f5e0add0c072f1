# rl_jinja: the Jinja engine for chat templates (tests/test_jinja.c). `unit`: every construct
# with expectations written from jinja2's semantics, errors with line:column, limits; and the
# goldens of tests/fixtures/chat/golden/ (jinja2 renders of the real Qwen3, Llama-3, Llama-3.1
# and Llama-3.2 templates, written by tests/reference/make_jinja_goldens.py). The templates are
# fetched by tests/reference/fetch_tokenizers.sh; without them the golden part fails only when
# CI=true.
rl_add_test(NAME text.jinja SOURCES test_jinja.c LIBS rl_text LABELS unit ARGS unit
            TIMEOUT 120)
rl_add_test(NAME text.jinja_goldens SOURCES test_jinja.c LIBS rl_text LABELS unit
            ARGS goldens TIMEOUT 120)
