// rl_fsdp — a model's parameters sharded across the mesh (DESIGN.md §2, "The mesh"). Every
// unit of a model loaded with opts.sharded (rl_model.h: decoder layer l, or the root = embedding,
// final norm and vocabulary head) is one flat array of its tensors in HF order, split evenly over
// the fsdp group (rl_mesh_split): this rank keeps only its piece of each unit. Before a unit is
// computed its pieces are all-gathered into a buffer of one unit and its tensors pointed there;
// after, the buffer is free for the next unit. Full tuning: a unit's gradients are computed into a
// zeroed buffer of one unit and reduce-scattered into this rank's gradient shard (summed over
// micro-batches); the dp group then sums the shards (all-reduce), so every gradient is the sum over
// all ranks' rows. AdamW updates only the shard; its state is only the shard's.
//
// LoRA's A and B stay whole on every rank (the forward reads them; small next to the frozen base,
// which is sharded like full tuning's parameters, without gradients), but each layer's adapter
// gradients are computed into a buffer of one layer and reduce-scattered into this rank's piece
// of that layer (summed over dp after the pass); the optimizer holds the pieces' state and the
// updated pieces are all-gathered back. Other trainables that stay whole (rep: a critic's or
// reward model's head) are *replicated*: their gradients are reduce-scattered over the fsdp group
// and summed over dp, the optimizer holds this rank's slice, the slices are all-gathered back.
//
// With fsdp = 1 a unit is used in place (no copies) and its gradients accumulate in place, as in
// a 1×1 run. Collectives are blocking and every rank of the mesh must make the same calls in the
// same order (rl_model_units_idle keeps a rank without rows in step).
#ifndef RL_FSDP_H
#define RL_FSDP_H

#include "rl_coll.h"
#include "rl_model.h"
#include "rl_optim.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rl_fsdp rl_fsdp_t;

// Shards `model` (loaded with opts.sharded, not yet dropped) over `coll`: copies this rank's
// piece of every unit, drops the model's own weights and installs the unit hook. rep[0..n_rep):
// the replicated trainables (borrowed: their arrays must outlive the fsdp). caller owns *out;
// free with rl_fsdp_destroy (before the model). Returns 0 or an error with err filled.
int rl_fsdp_new(rl_model_t *model, rl_coll_t *coll, const rl_optim_part_t *rep, int n_rep,
                rl_fsdp_t **out, char *err, size_t err_len);
// Without a model: only replicated trainables (rep), the whole model left on every rank. What a
// mesh on GPUs uses (docs/gpu.md): each rank's device holds the whole model, whose trainable
// parameters and their gradients (pulled to the host) are rep[0] and a head rep[1]; the
// gradients are reduce-scattered over fsdp and summed over dp, the optimizer holds this rank's
// slice, the updated slices are all-gathered back (ZeRO-2's split). The whole-state layout is
// then the parts laid end to end: a 1×1 run's optimizer layout. full_size is 0 and the
// whole-model views (gather_full, scatter_full, scatter_model) must not be called. Same
// ownership as rl_fsdp_new.
int rl_fsdp_new_replicated(rl_coll_t *coll, const rl_optim_part_t *rep, int n_rep, rl_fsdp_t **out,
                           char *err, size_t err_len);
void rl_fsdp_destroy(rl_fsdp_t **self_p);

// The optimizer's view of what this rank updates: the parameter shard (full tuning) and the
// slice of the replicated trainables, as at most 2 parts into parts; returns their count. The
// sizes add up to rl_fsdp_optim_size. Arrays owned by the fsdp; valid until destroy.
int rl_fsdp_optim_parts(rl_fsdp_t *self, rl_optim_part_t parts[2]);
size_t rl_fsdp_optim_size(const rl_fsdp_t *self);

// Zeroes the gradient shard and the replicated trainables' gradients (a new pass).
void rl_fsdp_zero_grad(rl_fsdp_t *self);
// After a pass's last backward on every rank: sums the gradients over the mesh (the shard over
// dp; the replicated ones reduce-scattered over fsdp into this rank's slice, then over dp), and
// returns the global L2 norm of the whole gradient in *norm (the same on every rank), then clips
// it to max_norm (<= 0: no clipping) as rl_optim_clip_grad_norm_parts does.
int rl_fsdp_reduce_grads(rl_fsdp_t *self, double max_norm, double *norm, char *err, size_t err_len);
// After the optimizer step: the updated slices of the replicated trainables to every rank.
int rl_fsdp_gather_replicated(rl_fsdp_t *self, char *err, size_t err_len);

// The full-tuning or frozen parameters, whole, in HF order (rl_model_trainable's layout of an
// unsharded full model: the tied head once), gathered to every rank of this rank's fsdp group:
// what a checkpoint or a sampler needs. out: rl_fsdp_full_size floats.
size_t rl_fsdp_full_size(const rl_fsdp_t *self);
int rl_fsdp_gather_full(rl_fsdp_t *self, float *out, char *err, size_t err_len);
// The opposite: this rank's pieces from a whole array in that layout (a checkpoint of any mesh).
void rl_fsdp_scatter_full(rl_fsdp_t *self, const float *full);
// The same from a whole model of the same architecture (a checkpoint's model/ folder, loaded
// unsharded), tensor by tensor by name. Returns 0 or RL_EINVAL naming a missing tensor.
int rl_fsdp_scatter_model(rl_fsdp_t *self, rl_model_t *src, char *err, size_t err_len);
// The optimizer state's layout is rl_fsdp_optim_parts'; whole-model state (a 1×1 run's m or v:
// full parameters in HF order, or LoRA's adapter, then the replicated trainables in order; of
// rl_fsdp_whole_state_size floats) maps to it:
// gather: out (full_size + replicated size floats) from this rank's `state` (optim_size floats),
// on every rank of this rank's fsdp group; scatter: the reverse.
int rl_fsdp_gather_state(rl_fsdp_t *self, const float *state, float *out, char *err,
                         size_t err_len);
void rl_fsdp_scatter_state(rl_fsdp_t *self, const float *whole, float *state);
size_t rl_fsdp_replicated_size(const rl_fsdp_t *self);
size_t rl_fsdp_whole_state_size(const rl_fsdp_t *self);

// This rank's bytes: persistent (shards: parameters; gradients: full tuning's shard or the
// adapter's pieces; replicated: LoRA's whole A and B, the head and its gradients) and transient
// (the gather and gradient buffers of the root and of one layer, held only while those units are
// computed).
typedef struct {
    size_t params, grads, replicated, buffers;
} rl_fsdp_bytes_t;
void rl_fsdp_bytes(const rl_fsdp_t *self, rl_fsdp_bytes_t *out);
// Seconds spent in collectives since creation (the gathers, reduce-scatters, all-reduces).
double rl_fsdp_coll_seconds(const rl_fsdp_t *self);

#ifdef __cplusplus
}
#endif
#endif
