# trainer/rl_pref: the DPO losses (sigmoid, cDPO, hinge, IPO, RPO's NLL term) and the reward
# model's Bradley-Terry loss, against hand values, finite differences and the PyTorch goldens of
# tests/reference/make_pref_goldens.py (tests/fixtures/pref/).
rl_add_test(NAME trainer.pref SOURCES test_pref.c LIBS rl_trainer LABELS unit numeric TIMEOUT 60)
