// rl_config_priv — what the parts of rl_config share, and nobody outside core/rl_config_*.c
// uses: the schema's sections and lookups (rl_config_schema.c), the load context with its error
// list and the source positions of keys (rl_config_load.c), and the stages the other parts add
// to a load (overrides, checks). Not an API: rl_config.h is. Names are rl_cfg_* so they never
// clash with the public rl_recipe_*; everything file-local stays static s_* in its part.
//
// A load runs, in this order (rl_recipe_load_string in rl_config_load.c):
//   defaults (table `def`) -> parse -> rl_cfg_apply_override for each override -> duplicate
//   keys -> the tree walk (conversions) -> rl_cfg_algo_defaults -> derived defaults ->
//   rl_cfg_check_recipe -> rl_cfg_check_files
// Every stage appends to the one error list in rl_cfg_ctx_t; the list is sorted by position
// (then by the order of appending) before it is printed, so the order of the stages is part of
// the output wherever two errors share a position.
#ifndef RL_CONFIG_PRIV_H
#define RL_CONFIG_PRIV_H

#include "rl_config.h"
#include "rl_yaml.h"

#include <stdarg.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// ---- the schema (rl_config_schema.c) --------------------------------------------------------

// Numeric bounds of schema rows that mean "none": IMAX for int keys, +-BIG for float keys.
#define RL_CFG_IMAX RL_RECIPE_IMAX
#define RL_CFG_BIG RL_RECIPE_BIG

typedef struct {
    const char *name;
    int is_list; // a list of entries (rewards), each described by the section's keys
    const char *doc;
} rl_cfg_section_t;

// Sets *sections to the sections in recipe order and returns their count.
// borrowed; valid until program exit.
int rl_cfg_sections(const rl_cfg_section_t **sections);

// The section called `name`, or NULL. borrowed; valid until program exit.
const rl_cfg_section_t *rl_cfg_section(const char *name);

// The row of section.key among the shared rows and every algorithm's, or NULL.
// borrowed; valid until program exit.
const rl_recipe_key_t *rl_cfg_key(const rl_recipe_algos_t *algos, const char *section,
                                  const char *key);
// 1 when key k applies to recipe r: its algorithm's (any, while algorithm.name is unknown) and
// its gate (a bool key that must be true); else 0.
int rl_cfg_applies(const rl_recipe_t *r, const rl_recipe_key_t *k);
// ---- a recipe's private state: where each key was set ---------------------------------------

typedef struct {
    char *key;        // "optim.lr", "rewards[1].plugin", or a section ("rewards", "rewards[0]")
    const char *file; // one of rl_recipe_priv.files
    int line, col;
} rl_cfg_loc_t;

struct rl_recipe_priv {
    rl_cfg_loc_t *locs;
    int n, cap;
    char **files; // owned names referenced by locs: [0] the recipe, then "<override N>"
    int nfiles;
    char note[512]; // what the loader took from elsewhere (rl_recipe_note), "" for nothing
};

// The position where `key` was set, or NULL when it took its default.
const rl_cfg_loc_t *rl_cfg_loc_find(const rl_recipe_priv_t *p, const char *key);

// 1 when the recipe (or an override) set `key`, else 0.
int rl_cfg_is_set(const rl_recipe_t *r, const char *key);

// ---- the load context and its error list (rl_config_load.c) ---------------------------------

typedef struct {
    int ord, line, col, seq; // sort key: file order, position, order of appending
    char *msg;
} rl_cfg_err_t;

struct rl_cfg_ctx {
    rl_recipe_t *r;
    const rl_recipe_algos_t *algos; // the catalog (== r->algos)
    unsigned flags;   // RL_RECIPE_NO_FILE_CHECKS
    const char *file; // == r->priv->files[0]; nodes from the recipe carry this pointer
    char *base;       // absolute directory of the recipe (relative inputs resolve here)
    char *cwd;        // absolute working directory (overrides and run.dir resolve here)
    rl_cfg_err_t *errs;
    int nerr, cap, dropped;
    int oom;
};
typedef struct rl_cfg_ctx rl_cfg_ctx_t;

// Appends msg (takes ownership of msg; NULL means out of memory) as an error at file:line:col.
void rl_cfg_push(rl_cfg_ctx_t *c, const char *file, int line, int col, char *msg);

// "file:line:col: path: <fmt...>" at an explicit position (line 0: "file: path: ...").
void rl_cfg_err_at(rl_cfg_ctx_t *c, const char *file, int line, int col, const char *path,
                   const char *fmt, ...) __attribute__((format(printf, 6, 7)));

// The same at a node of the tree (NULL: the recipe file, no position).
void rl_cfg_err(rl_cfg_ctx_t *c, const rl_yaml_node_t *at, const char *path, const char *fmt,
                ...) __attribute__((format(printf, 4, 5)));

// The same at the recorded position of `key`, or at the recipe file when it was defaulted.
void rl_cfg_err_key(rl_cfg_ctx_t *c, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

// ---- helpers the parts share (rl_config_load.c) ---------------------------------------------

// Where a key's value lives: rl_recipe_t for a map section, one rl_recipe_reward_t for an
// entry of the list section.
typedef struct {
    void *base;
    int entry; // list entry index, -1 for a map section
} rl_cfg_dst_t;

#define RL_CFG_FIELD(d, k, T) ((T *)((char *)(d)->base + (k)->offset))
// Where the value of key k of a map section lives in r: r itself, or the algorithm's settings
// (RL_RECIPE_K_SETTINGS; base NULL while the recipe has none, or when they are another
// algorithm's, whose keys then have nowhere to go).
rl_cfg_dst_t rl_cfg_dst(const rl_recipe_t *r, const rl_recipe_key_t *k);

// s quoted for a message: control bytes as \xNN, cut after 48 bytes with "...".
void rl_cfg_quote_short(const char *s, char *out, size_t n);

// rl_config_foreign.c: when `value` of the key named `key` (its last component) is a value TRL or
// verl users write there for something rlctl keeps under another key (TRL's loss_type: cispo is
// rlctl's algorithm.policy_loss), writes into out "loss_type: cispo is TRL's GRPOConfig value;
// rlctl's is algorithm.policy_loss: cispo (...)" and returns 1; else 0. Only a key that a
// recipe of algorithm `a` has is named (a NULL: any).
int rl_cfg_foreign_value(const rl_recipe_algos_t *algos, const rl_recipe_algo_def_t *a,
                         const char *key, const char *value, char *out, size_t cap);

// A printf into a new string, or NULL when out of memory. caller owns result; free with free().
char *rl_cfg_strdupf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// 1 when v is a YAML null (`~`, `null`, or nothing after the colon).
int rl_cfg_is_null(const rl_yaml_node_t *v);

// Frees the items of l and empties it.
void rl_cfg_strlist_free(rl_recipe_strlist_t *l);
void rl_cfg_endpoints_free(rl_recipe_endpoints_t *l);

// Sets every key the recipe's algorithm has a default of (rl_recipe_algo_def_t.defaults) and
// that the recipe left unset (or null) to that default; keys the recipe set keep their value. A
// no-op while algorithm.name is unknown.
void rl_cfg_algo_defaults(rl_cfg_ctx_t *c);
// ---- the stages of the other parts ----------------------------------------------------------

// rl_config_override.c: splices the override `arg` ("a.b.c=<yaml>", named `fname` in
// messages) into the tree before the walk, so it gets exactly the checks a recipe gets.
void rl_cfg_apply_override(rl_cfg_ctx_t *c, rl_yaml_node_t *root, const char *arg,
                           const char *fname);

// rl_config_check.c: the cross-key checks (required keys, keys of another algorithm or behind
// a false gate, lora, optimizer schedule, the algorithm's own checks, eval), which also expand
// all-linear and derive train.micro_batch_size.
void rl_cfg_check_recipe(rl_cfg_ctx_t *c);

// rl_config_check.c: every RL_RECIPE_K_EXISTS path that applies exists and has the right kind.
void rl_cfg_check_files(rl_cfg_ctx_t *c);

#ifdef __cplusplus
}
#endif
#endif
