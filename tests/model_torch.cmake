# rl_model against PyTorch: tests/fixtures/models/*/goldens.* written by
# tests/reference/make_model_goldens.py (docs/numerics.md). Registered once model/rl_model.c
# exists, so the default build stays green while the model is being written.
if(EXISTS ${CMAKE_SOURCE_DIR}/model/rl_model.c)
  rl_add_test(NAME model.torch SOURCES test_model_torch.c LIBS rl_trainer rl_model rl_core
              LABELS numeric TIMEOUT 120)
endif()
