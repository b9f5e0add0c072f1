# trainer/rl_loss_gspo: GSPO's sequence-level ratio against hand values, finite differences and
# the PyTorch goldens of tests/reference/make_policy_loss_goldens.py (tests/fixtures/gspo/).
rl_add_test(NAME trainer.loss_gspo SOURCES test_loss_gspo.c LIBS rl_trainer LABELS unit numeric
            TIMEOUT 60)
