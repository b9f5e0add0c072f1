// rl_lora — LoRA adapter state for rl_model (REFERENCE.md §5): the A/B matrices of every
// targeted Linear in one contiguous allocation (and their gradients in another, for the
// optimizer), PEFT's init, seeded dropout masks that backward can regenerate, the PEFT folder
// format (adapter_config.json + adapter_model.safetensors) and merging into base weights.
// It does no forward/backward arithmetic (rl_layers' rl_lora_forward/backward do) and knows
// nothing about optimizers.
//
// Modules are numbered in PEFT order m = 0..6: q_proj, k_proj, v_proj, o_proj, gate_proj,
// up_proj, down_proj; a target set is a bit set with bit m for module m (the same bits as
// RL_LORA_* in rl_model.h). For module m of layer l: A is (R, in) and B is (out, R) with the
// in/out of that Linear, so the branch adds scale * (x A^T) B^T to y = x W^T.
#ifndef RL_LORA_H
#define RL_LORA_H

#include "rl_hf.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RL_LORA_NMOD 7

typedef struct rl_lora rl_lora_t;

// PEFT's module name of module m ("q_proj"; the recipe's list, rl_recipe_lora_module_name of
// core/rl_config.h) and its path inside a decoder layer ("self_attn.q_proj").
// borrowed; valid until program exit. NULL for m outside 0..6.
const char *rl_lora_module_name(int m);
const char *rl_lora_module_path(int m);
// The Linear's input and output widths of module m under cfg.
void rl_lora_module_dims(const rl_hf_config_t *cfg, int m, int *in, int *out);

// Creates the adapter of a model with config cfg: rank r >= 1, targets a non-empty subset of
// the 7 module bits, dropout in [0, 1). A ~ U(-1/sqrt(in), 1/sqrt(in)) drawn from one rl_rng
// stream seeded with `seed` (layer by layer, module order, A row-major), B = 0 (PEFT's init:
// kaiming_uniform with a = sqrt(5) gives that bound). with_grads = 1 also allocates the
// gradient array (zeroed). scale = alpha / r, or alpha / sqrt(r) with use_rslora.
// caller owns result; free with rl_lora_destroy. NULL on bad arguments or allocation failure.
rl_lora_t *rl_lora_new(const rl_hf_config_t *cfg, int r, float alpha, float dropout,
                       int targets, int use_rslora, uint64_t seed, int with_grads);
void rl_lora_destroy(rl_lora_t **self_p);

int rl_lora_rank(const rl_lora_t *self);
int rl_lora_targets(const rl_lora_t *self);
float rl_lora_alpha(const rl_lora_t *self);
float rl_lora_dropout(const rl_lora_t *self);
int rl_lora_use_rslora(const rl_lora_t *self);
float rl_lora_scale(const rl_lora_t *self);
// Sets the dropout probability used by later training forwards (PEFT keeps it in the config).
void rl_lora_set_dropout(rl_lora_t *self, float dropout);

// A (R, in) and B (out, R) of module m of layer l, and their gradients (NULL when the module is
// not targeted, or for gradients when the adapter has none). borrowed; valid until destroy.
float *rl_lora_A(const rl_lora_t *self, int l, int m);
float *rl_lora_B(const rl_lora_t *self, int l, int m);
float *rl_lora_dA(const rl_lora_t *self, int l, int m);
float *rl_lora_dB(const rl_lora_t *self, int l, int m);

// Layer l's A and B are floats [*off, *off + n) of the flat array below (layer-major); returns n.
size_t rl_lora_layer_span(const rl_lora_t *self, int l, size_t *off);
// Layer l's gradients go to grads (its span's n floats, laid out as the span) instead of the
// gradient array; NULL: back to the array. A sharded trainer (trainer/rl_fsdp) points each layer
// at a buffer of one layer while that layer's backward runs.
void rl_lora_set_layer_grads(rl_lora_t *self, int l, float *grads);
// Frees the gradient array (rl_lora_grads is NULL from now on): every layer's gradients then go
// where rl_lora_set_layer_grads says, and nowhere while it says NULL.
void rl_lora_drop_grads(rl_lora_t *self);

// Every A and B as one flat array (layer-major, module order, A then B) and the gradients in the
// same layout (NULL without gradients). borrowed; valid until destroy.
float *rl_lora_params(rl_lora_t *self, size_t *n_p);
float *rl_lora_grads(rl_lora_t *self);
void rl_lora_zero_grad(rl_lora_t *self);

// Copies A, B, alpha and use_rslora (so the scale) from src into self; dropout and gradients
// stay. Both must have the same rank and targets; otherwise returns RL_EINVAL with err naming
// the module or the rank that differs.
int rl_lora_copy_from(rl_lora_t *self, const rl_lora_t *src, char *err, size_t err_len);

// ---- shadows -----------------------------------------------------------------------------------
// A shadow reads src's adapter (the same A and B memory) and accumulates gradients of its own,
// zeroed (a model's lanes, rl_model.c). rl_lora_shadow_sync follows src after it changed (a
// loaded adapter); rl_lora_shadow_move adds the shadow's gradients into src's and zeroes them.
// src must outlive the shadow; free it with rl_lora_destroy. NULL on allocation failure.
rl_lora_t *rl_lora_shadow_new(const rl_lora_t *src);
int rl_lora_shadow_sync(rl_lora_t *self, const rl_lora_t *src);
void rl_lora_shadow_move(rl_lora_t *src, rl_lora_t *self);

// ---- dropout ---------------------------------------------------------------------------------
// mask (n) for rl_layers' rl_dropout_forward/backward: mask[i] = 1/(1-p) with probability 1-p,
// else 0, drawn from a counter-based hash of (seed, key, i): the same key gives the same mask,
// so backward (and a recomputed forward) regenerates a forward's mask instead of storing it.
// key identifies one module of one layer in one forward (rl_lora_dropout_key). p in [0, 1).
void rl_lora_dropout_mask(float *mask, size_t n, float p, uint64_t seed, uint64_t key);
// The same mask for n rows of `width` elements taken out of a larger one: row r of mask is row
// rows[r] of rl_lora_dropout_mask's (element rows[r]*width + c), so packing rows changes no mask.
void rl_lora_dropout_mask_rows(float *mask, const int *rows, int n, int width, float p,
                               uint64_t seed, uint64_t key);
uint64_t rl_lora_dropout_key(uint64_t step, int l, int m);

// ---- merge -----------------------------------------------------------------------------------
// W (out, in) += scale * B A for module m of layer l (a no-op when m is not targeted).
void rl_lora_merge(const rl_lora_t *self, int l, int m, float *W);

// ---- PEFT folders ----------------------------------------------------------------------------
// Writes dir/adapter_config.json (peft_type LORA, task_type CAUSAL_LM, r, lora_alpha,
// lora_dropout, target_modules, bias "none", use_rslora, base_model_name_or_path = base_model
// or null) and dir/adapter_model.safetensors (F32; keys
// base_model.model.model.layers.{l}.{self_attn|mlp}.{module}.lora_{A|B}.weight). dir is created
// when absent (one level). Returns 0 or an error with err filled.
int rl_lora_save(const rl_lora_t *self, const char *dir, const char *base_model, char *err,
                 size_t err_len);

// Reads a PEFT folder written for a model with config cfg. Refuses (RL_EINVAL, or
// RL_EUNSUPPORTED for PEFT features rlctl does not implement: DoRA, bias other than "none",
// lora_bias, modules_to_save, layers_to_transform, layer_replication, exclude_modules,
// target_parameters, rank/alpha patterns, fan_in_fan_out) with err naming
// the key, the module (a target that is not one of the 7 Linears) or the tensor (missing,
// unexpected, misshapen, or holding a NaN or inf), and a lora_alpha that is no finite float
// (1e39). F16/BF16 tensors are converted. with_grads as in rl_lora_new.
// Returns 0 and *out, or an error (RL_ENOTFOUND when a file is missing). caller owns *out;
// free with rl_lora_destroy.
int rl_lora_load(const rl_hf_config_t *cfg, const char *dir, int with_grads, rl_lora_t **out,
                 char *err, size_t err_len);

// What a PEFT folder holds, read without its base model (`rlctl inspect`): adapter_config.json
// checked as rl_lora_load checks it, and adapter_model.safetensors' names and ranks (every
// tensor a lora_A (r, in) or lora_B (out, r) of a target module, each A with its B). The
// shapes against a model's are rl_lora_load's.
typedef struct {
    int r;
    float alpha, dropout;
    int use_rslora;
    int targets;           // bit m: module m (rl_lora_module_name) is a target
    int layers;            // 1 + the highest layer index of a tensor (0: no tensor)
    int pairs;             // (layer, module) pairs with their A and B
    char base_model[1024]; // base_model_name_or_path, "" when null or absent
} rl_lora_info_t;

// Returns 0 and *out, or an error naming the file and the key or tensor (RL_ENOTFOUND when a
// file is missing).
int rl_lora_describe(const char *dir, rl_lora_info_t *out, char *err, size_t err_len);

#ifdef __cplusplus
}
#endif
#endif
