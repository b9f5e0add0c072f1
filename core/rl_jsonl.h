// rl_jsonl — the one JSONL reader: a file (or bytes in memory) read line by line, each line that
// holds anything but JSON whitespace handed out with its 1-based line number, parsed as a JSON
// object when asked. Lines are split at "\n"; the "\n" and any "\r" before it are not part of a
// line (CRLF files read as LF ones), and a last line without "\n" counts. A line longer than the
// reader's cap is refused as soon as the cap is passed, so a file without newlines cannot make
// it allocate more than the cap. A folder reads as its *.jsonl files one after another, in name
// order, each from its line 1 (rl_jsonl_path names the current one); a list of files and folders
// reads the same way, in the order given. Errors name "path:line".
// The datasets (trainer/rl_data: SFT rows, trainer/rl_prompts: GRPO prompts, rollout/rl_eval:
// eval rows) read through it.
// Not a JSON parser (jansson parses each line) and not a writer.
#ifndef RL_JSONL_H
#define RL_JSONL_H

#include <jansson.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RL_JSONL_MAX_LINE ((size_t)64 << 20) // default cap: bytes of one line (64 MiB)

typedef struct rl_jsonl rl_jsonl_t;

// Opens `path` for reading: a file, or a folder of *.jsonl files (hidden ones skipped; a folder
// with none is RL_EINVAL). max_line: the most bytes of one line, counted before its "\n" (a
// "\r" there counts); 0 = RL_JSONL_MAX_LINE. Returns 0, or the errno of the failed open (err:
// "path: strerror") or RL_ENOMEM. caller owns *out; free with rl_jsonl_destroy.
int rl_jsonl_open(const char *path, size_t max_line, rl_jsonl_t **out, char *err, size_t err_len);
// As rl_jsonl_open, over paths[0..n_paths) read one after another (a dataset given as a list of
// files or folders; each file from its line 1, rl_jsonl_path naming it). n_paths 0 is RL_EINVAL.
// caller owns *out; free with rl_jsonl_destroy.
int rl_jsonl_open_list(const char *const *paths, int n_paths, size_t max_line, rl_jsonl_t **out,
                       char *err, size_t err_len);
// The name messages give paths[0..n_paths): "a.jsonl" for one, "a.jsonl (+2 more)" for several,
// cut to fit out[0..cap). Returns out.
const char *rl_jsonl_names(const char *const *paths, int n_paths, char *out, size_t cap);
// As rl_jsonl_open, over data[0..len) in memory (borrowed; valid until rl_jsonl_destroy); `name`
// stands for the path in messages (copied). caller owns *out; free with rl_jsonl_destroy.
int rl_jsonl_open_mem(const char *name, const void *data, size_t len, size_t max_line,
                      rl_jsonl_t **out, char *err, size_t err_len);
// Closes the file and frees the reader; a no-op when *self_p is NULL; sets *self_p to NULL.
void rl_jsonl_destroy(rl_jsonl_t **self_p);

// The next line that holds anything but spaces, tabs and "\r" (blank lines are skipped, their
// numbers counted). Returns 1 with *line_p / *len_p set (the line without its "\n" and trailing
// "\r"s, NUL-terminated after len; it may hold NULs; borrowed; valid until the next call or
// rl_jsonl_destroy), 0 at the end of the input, or an error with rl_jsonl_errmsg set: RL_EINVAL
// "path:L: line longer than N bytes (the JSONL line limit)", RL_EIO "path: read error",
// RL_ENOMEM. After an error, further calls return the same error.
int rl_jsonl_next_line(rl_jsonl_t *self, const char **line_p, size_t *len_p);

// The next line (as rl_jsonl_next_line) parsed as one JSON object (jansson, duplicate keys
// refused). Returns 1 with *row_p (caller owns; free with json_decref), 0 at the end, or an error:
// the errors of rl_jsonl_next_line, or RL_EINVAL for a line that is not JSON ("path:L:C: invalid
// JSON: <jansson's text>"; rl_jsonl_json_error gives the parts) or not an object ("path:L: a row
// must be a JSON object"). A JSON error does not end the input: the next call reads the next line.
int rl_jsonl_next(rl_jsonl_t *self, json_t **row_p);

// The 1-based number of the line last returned or refused (0 before the first).
long rl_jsonl_lineno(const rl_jsonl_t *self);
// The text of the line last returned by rl_jsonl_next or rl_jsonl_next_line (as the latter
// gives it). borrowed; valid until the next call or rl_jsonl_destroy. *len_p may be NULL.
const char *rl_jsonl_line(const rl_jsonl_t *self, size_t *len_p);
// The path (or name) given to open; for a folder, the file being read. borrowed; valid until
// the next call or rl_jsonl_destroy.
const char *rl_jsonl_path(const rl_jsonl_t *self);
// The message of the last failed call ("" when none). borrowed; valid until the next call.
const char *rl_jsonl_errmsg(const rl_jsonl_t *self);
// jansson's report of the last line that was not JSON (line, column, text), or NULL when the
// last failure was not a JSON error. borrowed; valid until the next call.
const json_error_t *rl_jsonl_json_error(const rl_jsonl_t *self);

// A field of a row as text, the way the datasets read answers: a string as it is, an integer
// printed "%lld", a real "%.17g" (so 12 and "12" read alike). Returns 0 with *text_p (caller
// owns; free with free()), RL_ENOTFOUND when the field is absent or of another type, or
// RL_ENOMEM.
int rl_jsonl_field_text(const json_t *row, const char *field, char **text_p);
// As rl_jsonl_field_text, for a row kept as JSON text (rl_prompt_t.row): parses row[0..len)
// first (RL_EINVAL when it is not a JSON object).
int rl_jsonl_row_field_text(const char *row, size_t len, const char *field, char **text_p);

#ifdef __cplusplus
}
#endif
#endif
