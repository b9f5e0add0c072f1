// rl_optim — AdamW over one flat float array, global-norm gradient clipping, learning-rate
// schedules with warmup, and the optimizer state file (optimizer.bin of a checkpoint).
//
// AdamW is torch.optim.AdamW (decoupled weight decay, amsgrad off, maximize off) step for
// step: with t the step count after incrementing, g the gradient and lr this step's rate,
//     p  <- p * (1 - lr * wd)
//     m  <- m + (1 - b1) * (g - m)                  (torch: exp_avg.lerp_(g, 1 - b1))
//     v  <- b2 * v + (1 - b2) * g * g
//     p  <- p - (lr / (1 - b1^t)) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
// Scalars (bias corrections, step size) are computed in double, elements in float.
//
// Not a parameter manager: the caller owns the parameters and gradients (rl_model_trainable);
// this module owns only the moments m and v and the step count.
#ifndef RL_OPTIM_H
#define RL_OPTIM_H

#include "rl_config.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// ---- AdamW ------------------------------------------------------------------------------------

typedef struct {
    double beta1, beta2;  // moment decay rates, in [0, 1)
    double eps;           // added to sqrt(vhat)
    double weight_decay;  // decoupled: p *= 1 - lr * weight_decay
} rl_optim_hparams_t;

typedef struct rl_optim rl_optim_t;

// Creates AdamW state for n parameters: m = v = 0, step count 0. NULL on allocation failure.
// caller owns result; free with rl_optim_destroy.
rl_optim_t *rl_optim_new(size_t n, const rl_optim_hparams_t *hp);

void rl_optim_destroy(rl_optim_t **self_p);

// One AdamW update of params[0..n) from grads[0..n) at learning rate lr (formula above);
// increments the step count first. grads are read only.
void rl_optim_step(rl_optim_t *self, float *params, const float *grads, double lr);

// A trainable array that is one segment of an optimizer's state (a model's flat view, a scalar
// head): the segments of one optimizer lie back to back in m and v, in the order given.
typedef struct {
    float *params;
    float *grads;
    size_t n;
} rl_optim_part_t;

// rl_optim_step over parts[0..k), whose sizes must add up to the optimizer's n (else RL_EINVAL
// and nothing changes): one step count, each part updated from its slice of m and v. With one
// part it is rl_optim_step exactly.
int rl_optim_step_parts(rl_optim_t *self, const rl_optim_part_t *parts, int k, double lr);

// Number of updates taken (restored by rl_optim_load).
int64_t rl_optim_steps(const rl_optim_t *self);
// Sets the update count (a sharded optimizer restored from a whole one's state).
void rl_optim_set_steps(rl_optim_t *self, int64_t steps);
size_t rl_optim_size(const rl_optim_t *self);
// The first and second moments, n floats each. borrowed; valid until destroy or release.
float *rl_optim_m(rl_optim_t *self);
float *rl_optim_v(rl_optim_t *self);
// Gives the moments' memory back and makes them zeros (fresh pages, unmapped until written):
// for a caller whose optimizer state lives elsewhere (on a GPU) and keeps this copy only for a
// checkpoint's moment. Nothing changes when the new allocation fails.
void rl_optim_release(rl_optim_t *self);

// ---- state file ---------------------------------------------------------------------------------
// Layout (little-endian):
//   0   char[8]  magic "RLOPTIM\0"
//   8   u32      format version (RL_OPTIM_FORMAT_VERSION)
//   12  u32      header size in bytes (256; data starts there)
//   16  u64      n, number of parameters
//   24  i64      step count
//   32  f64[4]   beta1, beta2, eps, weight_decay (informational; the recipe decides)
//   64  u32      CRC-32C of the data section
//   68  ...      reserved, zero, up to byte 256
//   256 f32[n]   m, then f32[n] v
// A file must be exactly 256 + 8n bytes.
#define RL_OPTIM_FORMAT_VERSION 1u
#define RL_OPTIM_HEADER_SIZE 256u

// Writes the state to `path` (through path.tmp + rename, so a crash leaves no half file).
// Returns 0 or an errno / RL_EIO with the message in err.
int rl_optim_save(const rl_optim_t *self, const char *path, char *err, size_t err_len);

// A state whose moments live elsewhere (a GPU), written without a copy of them in memory:
// begin creates path.tmp at its final size (the blocks reserved: a full disk is an error here)
// and maps it; *m and *v (n floats each) point into the mapping for the caller to fill (they are
// the file's pages, written back as the kernel sees fit). end checksums them, writes the header
// (the step count and hyperparameters of `like`, of n parameters too) and renames the file into
// place, as rl_optim_save does; abort removes it. Both free the writer (*w NULL). Return 0, an
// errno, RL_EIO (disk full, a failed write) or RL_EINVAL (like's n), with err set.
typedef struct rl_optim_writer rl_optim_writer_t;
int rl_optim_write_begin(const char *path, size_t n, rl_optim_writer_t **w, float **m, float **v,
                         char *err, size_t err_len);
int rl_optim_write_end(rl_optim_writer_t **w, const rl_optim_t *like, char *err, size_t err_len);
void rl_optim_write_abort(rl_optim_writer_t **w);

// Reads a state written by rl_optim_save into self (same n). Returns 0, or: RL_EPROTO (not an
// optimizer state file, or checksum mismatch: corrupt), RL_EVERSION (format version),
// RL_EINVAL (parameter count differs from self's), RL_EIO (truncated or trailing bytes), an
// errno (cannot open); err names the path and what is wrong. self is unchanged on error.
int rl_optim_load(rl_optim_t *self, const char *path, char *err, size_t err_len);
// As rl_optim_load, but m and v then read the file's pages where they are (a read-only mapping:
// the page cache, one copy for every process of the machine that loads the file) until
// rl_optim_release or destroy. The state must not be stepped or written meanwhile (the pages
// are read-only): for a caller that only uploads it (a GPU's optimizer at a resume: a mesh's
// ranks then share one copy of the moments instead of holding one each).
int rl_optim_load_shared(rl_optim_t *self, const char *path, char *err, size_t err_len);

// ---- gradient clipping ----------------------------------------------------------------------

// Global L2 norm of grads[0..n) (accumulated in double). When max_norm > 0 and the coefficient
// max_norm / (norm + 1e-6) is below 1, scales every gradient by it (torch
// clip_grad_norm_). Returns the norm before clipping (NaN/Inf pass through, unscaled).
double rl_optim_clip_grad_norm(float *grads, size_t n, double max_norm);
// The same over the gradients of parts[0..k) (params unused) as one vector: torch's
// clip_grad_norm_ over several tensors. With one part it is rl_optim_clip_grad_norm exactly.
double rl_optim_clip_grad_norm_parts(const rl_optim_part_t *parts, int k, double max_norm);

// ---- learning-rate schedules ------------------------------------------------------------------
// The rate for optimizer step `step` (0-based: the number of updates already taken, as
// torch's LambdaLR sees it) is lr * f(step), with W warmup steps, N total steps and
// r = min_lr_ratio (transformers get_*_schedule_with_warmup; r = 0 gives them exactly):
//   warmup  (step < W):  f = step / max(1, W)            (so step 0 trains at rate 0 when W > 0)
//   constant:            f = 1                           (r is ignored)
//   linear:              f = r + (1 - r) * max(0, (N - step) / max(1, N - W))
//   cosine:              p = (step - W) / max(1, N - W)
//                        f = r + (1 - r) * max(0, 0.5 * (1 + cos(pi * p)))
// (cosine with r > 0 is transformers' get_cosine_with_min_lr_schedule_with_warmup.)
enum { RL_SCHED_CONSTANT = 0, RL_SCHED_LINEAR = 1, RL_SCHED_COSINE = 2 };

typedef struct {
    int kind;            // RL_SCHED_*
    double lr;           // peak rate
    int64_t total_steps; // N
    int64_t warmup_steps;// W
    double min_lr_ratio; // r
} rl_sched_t;

// Warmup steps from the recipe: warmup_steps when > 0, else ceil(warmup_ratio * total_steps)
// (transformers TrainingArguments.get_warmup_steps).
int64_t rl_sched_warmup(int64_t warmup_steps, double warmup_ratio, int64_t total_steps);

// The schedule a recipe's optim section sets for train.steps steps.
rl_sched_t rl_sched_from_recipe(const rl_recipe_t *recipe);

// The learning rate of 0-based step `step` (formulas above).
double rl_sched_lr(const rl_sched_t *sched, int64_t step);

#ifdef __cplusplus
}
#endif
#endif
