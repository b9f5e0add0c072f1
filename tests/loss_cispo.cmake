# trainer/rl_loss_cispo: CISPO's clipped, detached importance weight against hand values, finite
# differences and the PyTorch goldens of tests/reference/make_policy_loss_goldens.py
# (tests/fixtures/cispo/).
rl_add_test(NAME trainer.loss_cispo SOURCES test_loss_cispo.c LIBS rl_trainer LABELS unit numeric
            TIMEOUT 60)
