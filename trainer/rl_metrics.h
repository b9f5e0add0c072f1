// rl_metrics — the per-step metrics sinks of a run directory: metrics.jsonl (one flat JSON
// object per optimizer step with "step" and "time", names as REFERENCE.md §6) and a TensorBoard
// event file written without protobuf (records hand-encoded, REFERENCE.md §6).
// Not a logger (rl_log) and not the progress line (rl_progress).
//
// Event file framing (TFRecord): u64 length (LE), u32 masked CRC-32C of those 8 bytes, the
// data, u32 masked CRC-32C of the data. The data is a serialized tensorflow.Event:
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3;
//             Summary summary = 5; }
//   Summary { repeated Value value = 1; }   Value { string tag = 1; float simple_value = 2; }
// The first record carries file_version "brain.Event:2".
#ifndef RL_METRICS_H
#define RL_METRICS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rl_metrics rl_metrics_t;

// Opens <dir>/metrics.jsonl for appending (first ending its last line with a newline when a
// crash left it without one) and, when tensorboard != 0, creates
// <dir>/events.out.tfevents.<unix seconds>.<host>.rlctl with its file_version record. Both are
// opened with O_NOFOLLOW|O_CLOEXEC (a symbolic link in their place is refused; the event file
// is created new, O_EXCL). On failure returns NULL with the message in err. caller owns
// result; free with rl_metrics_destroy (which flushes and closes both files).
rl_metrics_t *rl_metrics_new(const char *dir, int tensorboard, char *err, size_t err_len);

void rl_metrics_destroy(rl_metrics_t **self_p);

// Adds name = value to the pending line (insertion order is kept; a name added twice keeps the
// last value). Non-finite values are written as null in JSON (JSON has no NaN) and as
// themselves in TensorBoard. Returns 0 or RL_ENOMEM. `name` is copied.
int rl_metrics_add(rl_metrics_t *self, const char *name, double value);

// Writes the pending values as one line {"step": step, "time": time, ...} and as one event
// with every value as a scalar, flushes both files, and clears the pending values.
// Returns 0 or RL_EIO (details in rl_metrics_errmsg).
int rl_metrics_write(rl_metrics_t *self, int64_t step, double time);

// Drops the pending values without writing them.
void rl_metrics_clear(rl_metrics_t *self);

// The message of the last failure. borrowed; valid until the next call.
const char *rl_metrics_errmsg(const rl_metrics_t *self);

// Keeps only the lines of metrics file `path` whose "step" is <= step (a resumed run must not
// repeat the steps a crashed run logged after its last checkpoint), and drops every line that
// is not a JSON object (a line a crash cut short; a warning gives how many) and empty lines;
// each kept line ends with a newline. Crash-safe: written to `path`.tmp (a stale one, or a
// link in its place, is removed first), fsynced, renamed over `path`. `path` itself is opened
// without following a link. A missing file is fine. Returns 0, or an errno / RL_EIO with the
// message in err.
int rl_metrics_truncate_after(const char *path, int64_t step, char *err, size_t err_len);

// ---- the event encoding, exposed for tests -----------------------------------------------------

// Appends one framed record of `n` data bytes to f. Returns 0 or RL_EIO.
int rl_metrics_tf_record(void *file, const void *data, size_t n);

// Encodes an Event into buf (cap bytes): wall_time, step, and either file_version (when
// non-NULL) or a summary with n scalars tags[i] = values[i]. Returns the byte count, or 0 when
// cap is too small.
size_t rl_metrics_tf_event(unsigned char *buf, size_t cap, double wall_time, int64_t step,
                           const char *file_version, const char *const *tags,
                           const float *values, int n);

#ifdef __cplusplus
}
#endif
#endif
