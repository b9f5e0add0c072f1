# trainer/rl_grpo: GRPO advantages and the clipped policy loss, against hand values, finite
# differences and the PyTorch goldens of tests/reference/make_grpo_goldens.py
# (tests/fixtures/grpo/).
rl_add_test(NAME trainer.grpo SOURCES test_grpo.c LIBS rl_trainer LABELS unit numeric TIMEOUT 60)
