# rl_layers: fast kernels vs double twins, finite differences on every backward, padding, RoPE.
rl_add_test(NAME model.layers SOURCES test_layers.c LIBS rl_model rl_core LABELS numeric TIMEOUT 60)
