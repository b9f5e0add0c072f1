// rl_config_check — the checks of a recipe that need more than one value, run after the walk
// has converted every key: the generic cross-key checks, then the checks of the recipe's
// algorithm (one function per algorithm: s_check_grpo, s_check_sft, s_check_ppo; docs/status.md
// says why they live here and not beside the algorithm's file), then the existence of referenced
// files. Two derivations live here because they need checked values: all-linear is expanded to
// the 7 projections, and train.micro_batch_size defaults to the sequences of one step.
//
// Not here: the type, range or choices of a single value (rl_config_load.c reports those while
// converting), derived defaults that need no check (rl_config_load.c), and anything that reads
// a file's contents (the model folder and the prompts are checked by rlctl validate and the
// controller's preflight, outside core).
#include "rl_config_priv.h"
#include "rl_err.h"

#include <dirent.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

// ---------------------------------------------------------------------------------------------
// generic cross-key checks

// every required key of a map section was set; a missing one is reported at its section (or
// the file when the section is missing too)
static void s_check_required(rl_cfg_ctx_t *c) {
    rl_recipe_t *r = c->r;
    char key[96];
    rl_recipe_keys_t it;
    rl_recipe_keys_begin(&it, c->algos, NULL);
    for (const rl_recipe_key_t *k; (k = rl_recipe_keys_next(&it)) != NULL;) {
        if (!(k->flags & RL_RECIPE_K_REQUIRED) || rl_cfg_section(k->section)->is_list) {
            continue;
        }
        snprintf(key, sizeof key, "%s.%s", k->section, k->key);
        if (!rl_cfg_is_set(r, key)) {
            const rl_cfg_loc_t *sl = rl_cfg_loc_find(r->priv, k->section);
            rl_cfg_err_at(c, sl ? sl->file : c->file, sl ? sl->line : 0, sl ? sl->col : 0, key,
                          "required key is missing (%s)", k->doc);
        }
    }
}

// no key written for another algorithm, or behind a false gate (lora.r with lora.enabled
// false): such a key would be silently ignored
static void s_check_applies(rl_cfg_ctx_t *c) {
    rl_recipe_t *r = c->r;
    for (int i = 0; i < r->priv->n; i++) {
        const rl_cfg_loc_t *l = &r->priv->locs[i];
        const rl_recipe_key_t *k = rl_recipe_key_find(c->algos, l->key);
        if (!k || !strchr(l->key, '.') || rl_cfg_applies(r, k)) {
            continue;
        }
        const rl_recipe_algo_def_t *def = r->algorithm.def;
        if (def && !rl_recipe_key_for(k, def)) {
            char names[256] = "";
            for (int a = 0; a < c->algos->n; a++) {
                if (rl_recipe_key_for(k, c->algos->all[a])) {
                    snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s",
                             names[0] ? " or " : "", c->algos->all[a]->name);
                }
            }
            rl_cfg_err_key(c, l->key, "applies only when algorithm.name is %s (this recipe: %s)",
                           names, def->name);
        } else if (k->gate) {
            rl_cfg_err_key(c, l->key, "set while %s is false; set %s: true or remove %s",
                           k->gate, k->gate, l->key);
        }
    }
}

// lora.target_modules: all-linear alone, no repeats; all-linear is expanded to the projections
static void s_check_lora(rl_cfg_ctx_t *c) {
    rl_recipe_t *r = c->r;
    rl_recipe_strlist_t *tm = &r->lora.target_modules;
    for (int i = 0; i < tm->n; i++) {
        if (!strcmp(tm->items[i], RL_RECIPE_LORA_ALL_LINEAR) && tm->n > 1) {
            rl_cfg_err_key(c, "lora.target_modules",
                           "all-linear already names every projection; use it alone");
            break;
        }
        for (int j = 0; j < i; j++) {
            if (!strcmp(tm->items[i], tm->items[j])) {
                rl_cfg_err_key(c, "lora.target_modules", "'%s' is listed twice", tm->items[i]);
            }
        }
    }
    if (tm->n == 1 && !strcmp(tm->items[0], RL_RECIPE_LORA_ALL_LINEAR)) {
        rl_recipe_strlist_t all = {calloc(RL_RECIPE_LORA_NMOD + 1, sizeof(char *)), 0};
        for (int i = 0; all.items && i < RL_RECIPE_LORA_NMOD; i++) {
            if ((all.items[i] = strdup(rl_recipe_lora_module_name(i))) != NULL) {
                all.n++;
            }
        }
        if (all.n != RL_RECIPE_LORA_NMOD) {
            c->oom = 1;
        }
        rl_cfg_strlist_free(tm);
        *tm = all;
    } else if (r->lora.enabled && tm->n == 0) {
        rl_cfg_err_key(c, "lora.target_modules", "empty; LoRA needs at least one projection");
    }
}

// the warmup is given one way, and fits in the run
static void s_check_optim(rl_cfg_ctx_t *c) {
    rl_recipe_t *r = c->r;
    if (r->optim.warmup_steps > 0 && r->optim.warmup_ratio > 0) {
        const rl_cfg_loc_t *ws = rl_cfg_loc_find(r->priv, "optim.warmup_steps");
        rl_cfg_err_key(c, "optim.warmup_ratio",
                       "set together with optim.warmup_steps (at %s:%d:%d); use one of them",
                       ws ? ws->file : c->file, ws ? ws->line : 0, ws ? ws->col : 0);
    }
    if (r->optim.warmup_steps > 0 && r->train.steps > 0 &&
        r->optim.warmup_steps > r->train.steps) {
        rl_cfg_err_key(c, "optim.warmup_steps", "%d is more than train.steps (%d)",
                       r->optim.warmup_steps, r->train.steps);
    }
}

// The shape of one optimizer step, which each algorithm defines: it takes `per_step` sequences,
// which `what` names for a message ("train.batch_size (8)"). train.micro_batch_size counts
// sequences and must divide them; unset, it takes the whole step.
static void s_check_step(rl_cfg_ctx_t *c, long long per_step, const char *what) {
    rl_recipe_t *r = c->r;
    long long ranks = (long long)r->mesh.dp * r->mesh.fsdp;
    int pairs = r->algorithm.def && (r->algorithm.def->uses & RL_RECIPE_USES_PAIRS);
    long long units = pairs ? per_step / 2 : per_step; // pairs are never split across ranks
    if (ranks > 1 && units % ranks != 0) {
        rl_cfg_err_key(c, r->mesh.dp > 1 ? "mesh.dp" : "mesh.fsdp",
                       "a mesh of dp %d x fsdp %d = %lld ranks cannot split %s%s: each rank "
                       "takes an equal share",
                       r->mesh.dp, r->mesh.fsdp, ranks, pairs ? "the pairs of " : "", what);
    }
    if (per_step > 1048576) {
        rl_cfg_err_key(c, "train.batch_size", "%lld sequences per step is more than 1048576",
                       per_step);
        return;
    }
    r->train.step_sequences = (int)per_step;
    if (!rl_cfg_is_set(r, "train.micro_batch_size")) {
        r->train.micro_batch_size = (int)per_step;
    } else if (r->train.micro_batch_size > 0 && per_step % r->train.micro_batch_size != 0) {
        // (<= 0 only when its own conversion failed, already reported)
        rl_cfg_err_key(c, "train.micro_batch_size", "%d does not divide %s",
                       r->train.micro_batch_size, what);
    }
}

// a step of an algorithm whose step is train.batch_size sequences (SFT, and a recipe whose
// algorithm.name is unknown, already reported)
static void s_check_step_batch(rl_cfg_ctx_t *c) {
    char what[64];
    snprintf(what, sizeof what, "train.batch_size (%d)", c->r->train.batch_size);
    s_check_step(c, c->r->train.batch_size, what);
}

// ---------------------------------------------------------------------------------------------
// the checks of what an algorithm does (rl_recipe_algo_def_t.uses); its own checks are in its
// file (algorithms/rl_algo_*.c), through the rl_recipe_check_* calls below

// An algorithm that samples its own policy (GRPO, PPO):
//   - algorithm.dual_clip is 0 (off) or > 1 (dual-clip PPO bounds the loss of a negative
//     advantage A by -c A, which needs c > 1)
//   - algorithm.overlong_buffer < sampling.max_new_tokens: the DAPO shaping window lies inside
//     the completion length
//   - data.format has prompts to sample from (auto, prompt or messages; not prompt_completion
//     nor text)
//   - at least one reward (reported at rewards:, or the file when the section is missing)
static void s_check_sampling(rl_cfg_ctx_t *c, const char *algo) {
    rl_recipe_t *r = c->r;
    double dc = r->algorithm.dual_clip;
    if (dc > 0 && dc <= 1) {
        rl_cfg_err_key(c, "algorithm.dual_clip", "%g: must be 0 (off) or > 1 (e.g. 3)", dc);
    }
    if (r->algorithm.overlong_buffer >= r->sampling.max_new_tokens) {
        rl_cfg_err_key(c, "algorithm.overlong_buffer",
                       "%d must be less than sampling.max_new_tokens (%d)",
                       r->algorithm.overlong_buffer, r->sampling.max_new_tokens);
    }
    if (r->data.format == RL_RECIPE_FORMAT_PROMPT_COMPLETION ||
        r->data.format == RL_RECIPE_FORMAT_TEXT) {
        rl_cfg_err_key(c, "data.format",
                       "%s rows hold no prompt to sample from; %s takes auto, prompt or messages",
                       rl_recipe_enum_name(NULL, "data.format", r->data.format), algo);
    }
    if (r->n_rewards == 0 && !rl_recipe_has_env(r)) { // an env's step rewards may be all there is
        const rl_cfg_loc_t *sl = rl_cfg_loc_find(r->priv, "rewards");
        rl_cfg_err_at(c, sl ? sl->file : c->file, sl ? sl->line : 0, sl ? sl->col : 0, "rewards",
                      "%s needs at least one reward (e.g. - builtin: math_answer)", algo);
    }
}

// An algorithm that trains on pairs (DPO, RM):
//   - data.format is auto or preference
//   - a step is train.batch_size pairs = 2 x batch_size sequences, which train.micro_batch_size
//     divides (and, being even-sized groups, must be even)
static void s_check_pairs(rl_cfg_ctx_t *c, const char *who) {
    rl_recipe_t *r = c->r;
    if (r->data.format != RL_RECIPE_FORMAT_AUTO && r->data.format != RL_RECIPE_FORMAT_PREFERENCE) {
        rl_cfg_err_key(c, "data.format", "%s rows hold no pairs; %s takes auto or preference",
                       rl_recipe_enum_name(NULL, "data.format", r->data.format), who);
    }
    long long per_step = 2LL * r->train.batch_size;
    char what[160];
    snprintf(what, sizeof what,
             "the %lld sequences of a step (train.batch_size %d pairs, chosen and rejected)",
             per_step, r->train.batch_size);
    s_check_step(c, per_step, what);
    if (rl_cfg_is_set(r, "train.micro_batch_size") && r->train.micro_batch_size % 2 != 0) {
        rl_cfg_err_key(c, "train.micro_batch_size", "%d is odd: %s micro-batches hold whole pairs",
                       r->train.micro_batch_size, who);
    }
}

void rl_recipe_check_err(rl_recipe_check_t *c, const char *key, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    rl_cfg_err_key(c, key, "%s", msg);
}

int rl_recipe_check_is_set(rl_recipe_check_t *c, const char *key) {
    return rl_cfg_is_set(c->r, key);
}

void rl_recipe_check_step(rl_recipe_check_t *c, long long per_step, const char *what) {
    s_check_step(c, per_step, what);
}

// ---------------------------------------------------------------------------------------------

// A mesh across hosts (mesh.hostfile) needs where its ranks reach us and the keys of both
// sides; the ranks' key path is read on their hosts, so it must be absolute.
static void s_check_hosts(rl_cfg_ctx_t *c) {
    const rl_recipe_mesh_t *m = &c->r->mesh;
    if (!m->hostfile) {
        const char *stray = m->endpoint ? "mesh.endpoint" : m->rank_key ? "mesh.rank_key"
                            : m->allow  ? "mesh.allow"    : NULL;
        if (stray) {
            rl_cfg_err_key(c, stray, "is for ranks on other hosts: set mesh.hostfile too");
        }
        return;
    }
    if (m->dp * m->fsdp < 2) {
        rl_cfg_err_key(c, "mesh.hostfile", "places the ranks of a mesh: set mesh.dp or mesh.fsdp");
    }
    const char *ep = m->endpoint;
    if (!ep) {
        rl_cfg_err_key(c, "mesh.hostfile",
                       "needs mesh.endpoint: tcp://ADDR:PORT of this host that every host in "
                       "the hostfile reaches (port 0 picks a free one)");
    } else if (strncmp(ep, "tcp://", 6) != 0 || !strchr(ep + 6, ':') ||
               strchr(ep + 6, ':')[1] == '\0') {
        rl_cfg_err_key(c, "mesh.endpoint", "\"%s\" is not tcp://ADDR:PORT", ep);
    }
    if (!m->key && !c->r->roles.client_key) {
        rl_cfg_err_key(c, "mesh.hostfile",
                       "needs mesh.key (or roles.client_key): this controller's secret key file "
                       "(rlctl keygen)");
    }
    if (!m->rank_key) {
        rl_cfg_err_key(c, "mesh.hostfile",
                       "needs mesh.rank_key: the ranks' secret key file, the same absolute path "
                       "on every host");
    } else if (m->rank_key[0] != '/') {
        rl_cfg_err_key(c, "mesh.rank_key",
                       "\"%s\" is read on each rank's host: give an absolute path", m->rank_key);
    }
    if (!m->allow) {
        rl_cfg_err_key(c, "mesh.hostfile",
                       "needs mesh.allow: a file of the ranks' public keys (their key.pub)");
    }
}

// Samplers: local, remote, or both; remote ones need our key.
static void s_check_roles(rl_cfg_ctx_t *c) {
    const rl_recipe_t *r = c->r;
    int n_remote = r->roles.remote_samplers.n;
    int rollouts = r->algorithm.def && (r->algorithm.def->uses & RL_RECIPE_USES_SAMPLES);
    if (r->roles.samplers == 0 && n_remote == 0 && (rollouts || r->data.eval.n)) {
        rl_cfg_err_key(c, "roles.samplers",
                       "0 leaves the run without a sampler: use 1 or more, or list "
                       "roles.remote_samplers");
    }
    if (n_remote > 0 && !r->roles.client_key) {
        rl_cfg_err_key(c, "roles.remote_samplers",
                       "needs roles.client_key: this controller's secret key file (rlctl "
                       "keygen), whose key.pub is on each sampler's --allow list");
    }
    s_check_hosts(c);
    for (int i = 0; i < n_remote; i++) {
        for (int j = 0; j < i; j++) {
            if (!strcmp(r->roles.remote_samplers.items[i].endpoint,
                        r->roles.remote_samplers.items[j].endpoint)) {
                rl_cfg_err_key(c, "roles.remote_samplers",
                               "entry %d repeats the endpoint of entry %d (%s)", i, j,
                               r->roles.remote_samplers.items[j].endpoint);
            }
        }
    }
}

void rl_cfg_check_recipe(rl_cfg_ctx_t *c) {
    rl_recipe_t *r = c->r;
    s_check_required(c);
    s_check_applies(c);
    s_check_lora(c);
    s_check_optim(c);
    s_check_roles(c);
    const rl_recipe_algo_def_t *def = r->algorithm.def;
    if (!def) {
        s_check_step_batch(c); // algorithm.name unknown: already an error
    } else {
        if (def->uses & RL_RECIPE_USES_SAMPLES) {
            s_check_sampling(c, def->title);
        }
        if (def->uses & RL_RECIPE_USES_PAIRS) {
            s_check_pairs(c, def->title);
        }
        if (def->check) {
            def->check(c, r); // with its step's shape (rl_recipe_check_step), unless on pairs
        } else if (!(def->uses & RL_RECIPE_USES_PAIRS)) {
            s_check_step_batch(c);
        }
    }
    int pref = def && (def->uses & RL_RECIPE_USES_PAIRS);
    if (r->train.eval_every > 0 && !r->data.eval.n && !(pref && r->data.eval_pairs.n)) {
        rl_cfg_err_key(c, "train.eval_every",
                       pref ? "%d needs data.eval_pairs (held-out pairs) or data.eval; set one "
                              "or use 0"
                            : "%d needs data.eval (a held-out JSONL); set it or use 0",
                       r->train.eval_every);
    }
}

// ---------------------------------------------------------------------------------------------
// referenced files: stat only, nothing is read

// 1 when folder p holds a *.jsonl file (not a hidden one), as rl_jsonl reads folders.
static int s_has_jsonl(const char *p) {
    DIR *d = opendir(p);
    int found = 0;
    for (struct dirent *e = d ? readdir(d) : NULL; e && !found; e = readdir(d)) {
        size_t l = strlen(e->d_name);
        found = l > 6 && e->d_name[0] != '.' && strcmp(e->d_name + l - 6, ".jsonl") == 0;
    }
    if (d) {
        closedir(d);
    }
    return found;
}

// A Hugging Face dataset folder names its splits in its file names (train.jsonl, test.jsonl,
// train-00000-of-00002.jsonl, validation.jsonl): 1 for a training split's file, 2 for a held-out
// one's, 0 for neither.
static int s_split(const char *name) {
    static const char *const held[] = {"test", "validation", "valid", "val", "eval", "dev"};
    size_t l = strlen(name);
    if (l <= 6 || name[0] == '.' || strcmp(name + l - 6, ".jsonl") != 0) {
        return 0;
    }
    // the split word ends where the name does, or at a separator
#define S_WORD(w) (!strncmp(name, w, strlen(w)) && strchr("-._", name[strlen(w)]) != NULL)
    if (S_WORD("train")) {
        return 1;
    }
    for (size_t i = 0; i < sizeof held / sizeof held[0]; i++) {
        if (S_WORD(held[i])) {
            return 2;
        }
    }
#undef S_WORD
    return 0;
}

// rlctl reads a folder whole, so a folder holding a training split and a held-out one would
// train on the held-out rows too: 1 when folder p holds both, their first names in a and b.
static int s_mixed_splits(const char *p, char *a, char *b, size_t cap) {
    DIR *d = opendir(p);
    a[0] = b[0] = '\0';
    for (struct dirent *e = d ? readdir(d) : NULL; e; e = readdir(d)) {
        int sp = s_split(e->d_name);
        char *out = sp == 1 ? a : sp == 2 ? b : NULL;
        if (out && (!out[0] || strcmp(e->d_name, out) < 0)) {
            snprintf(out, cap, "%s", e->d_name);
        }
    }
    if (d) {
        closedir(d);
    }
    return a[0] && b[0];
}

static void s_check_path(rl_cfg_ctx_t *c, const rl_recipe_key_t *k, const char *key, const char *p,
                         const char *loc_key) {
    struct stat st;
    const char *kind = k->type == RL_RECIPE_T_PATH_DIR ? "directory" : "file";
    if (stat(p, &st) != 0) {
        rl_cfg_err_key(c, loc_key, "%s%s%s '%s' does not exist%s", strcmp(key, loc_key) ? key : "",
                       strcmp(key, loc_key) ? ": " : "", kind, p,
                       strcmp(key, loc_key) ? " (the default; set it to override)" : "");
        return;
    }
    int is_dir = S_ISDIR(st.st_mode);
    if (k->type == RL_RECIPE_T_PATH_DIR && !is_dir) {
        rl_cfg_err_key(c, loc_key, "'%s' is not a directory", p);
        return;
    }
    int file = k->type == RL_RECIPE_T_PATH_FILE || k->type == RL_RECIPE_T_PATH_LIST;
    if (file && is_dir && (k->flags & RL_RECIPE_K_FOLDER) && !s_has_jsonl(p)) {
        rl_cfg_err_key(c, loc_key, "'%s' is a folder with no *.jsonl file", p);
        return;
    }
    char tr[256], ho[256];
    if (file && is_dir && (k->flags & RL_RECIPE_K_FOLDER) && s_mixed_splits(p, tr, ho, sizeof tr)) {
        rl_cfg_err_key(c, loc_key,
                       "'%s' holds a dataset's splits (%s, %s) and a folder is read whole; name "
                       "the split's files, e.g. '%s/train*.jsonl'",
                       p, tr, ho, p);
        return;
    }
    if (file && is_dir && !(k->flags & RL_RECIPE_K_FOLDER)) {
        rl_cfg_err_key(c, loc_key, "%s%s'%s' is a directory, expected a file",
                       strcmp(key, loc_key) ? key : "", strcmp(key, loc_key) ? ": " : "", p);
        return;
    }
    if (k->needs) {
        char *f = rl_cfg_strdupf("%s/%s", p, k->needs);
        if (!f) {
            c->oom = 1;
            return;
        }
        if (stat(f, &st) != 0 || !S_ISREG(st.st_mode)) {
            rl_cfg_err_key(c, loc_key, "'%s' has no %s; is it a Hugging Face model folder?", p,
                           k->needs);
        }
        free(f);
    }
}

void rl_cfg_check_files(rl_cfg_ctx_t *c) {
    rl_recipe_t *r = c->r;
    char key[96];
    rl_recipe_keys_t it;
    rl_recipe_keys_begin(&it, c->algos, NULL);
    for (const rl_recipe_key_t *k; (k = rl_recipe_keys_next(&it)) != NULL;) {
        if (!(k->flags & RL_RECIPE_K_EXISTS)) {
            continue;
        }
        int list = rl_cfg_section(k->section)->is_list;
        int n = list ? r->n_rewards : 1;
        for (int e = 0; e < n; e++) {
            rl_cfg_dst_t d = list ? (rl_cfg_dst_t){&r->rewards[e], e} : rl_cfg_dst(r, k);
            if (!d.base || !rl_cfg_applies(r, k)) {
                continue;
            }
            if (k->type == RL_RECIPE_T_PATH_LIST) { // data.train: each of its paths
                const rl_recipe_strlist_t *l = RL_CFG_FIELD(&d, k, rl_recipe_strlist_t);
                snprintf(key, sizeof key, "%s.%s", k->section, k->key);
                for (int i = 0; i < l->n; i++) {
                    s_check_path(c, k, key, l->items[i], key);
                }
                continue;
            }
            const char *p = *RL_CFG_FIELD(&d, k, char *);
            if (!p) {
                continue;
            }
            if (list) {
                snprintf(key, sizeof key, "%s[%d].%s", k->section, e, k->key);
            } else {
                snprintf(key, sizeof key, "%s.%s", k->section, k->key);
            }
            // a derived path (model.tokenizer) is reported at the key it came from
            const char *loc_key = key;
            if (!rl_cfg_is_set(r, key) && !strcmp(k->section, "model") &&
                !strcmp(k->key, "tokenizer")) {
                struct stat st;
                if (!r->model.path || stat(r->model.path, &st) != 0 || !S_ISDIR(st.st_mode)) {
                    continue; // the folder itself is missing: one error is enough
                }
                loc_key = "model.path";
            }
            s_check_path(c, k, key, p, loc_key);
        }
    }
    // each remote sampler's public key file
    const rl_recipe_key_t *rk = rl_cfg_key(c->algos, "roles", "client_key");
    for (int i = 0; i < r->roles.remote_samplers.n; i++) {
        snprintf(key, sizeof key, "roles.remote_samplers[%d].server_key", i);
        s_check_path(c, rk, key, r->roles.remote_samplers.items[i].server_key,
                     "roles.remote_samplers");
    }
    // a reward command's program, when it is a path (a bare name is searched on PATH when the
    // command starts)
    rl_recipe_key_t prog = *rl_cfg_key(c->algos, "rewards", "command");
    prog.type = RL_RECIPE_T_PATH_FILE;
    for (int e = 0; e < r->n_rewards; e++) {
        const rl_recipe_strlist_t *cmd = &r->rewards[e].command;
        if (cmd->n > 0 && cmd->items[0][0] == '/') {
            snprintf(key, sizeof key, "rewards[%d].command", e);
            s_check_path(c, &prog, key, cmd->items[0], key);
        }
    }
    // critic.init: `base` or an HF folder (a string key: `base` is not a path)
    if (r->algorithm.def && (r->algorithm.def->uses & RL_RECIPE_USES_CRITIC) && r->critic.init &&
        strcmp(r->critic.init, "base") != 0) {
        const rl_recipe_key_t *k = rl_cfg_key(c->algos, "critic", "init");
        rl_recipe_key_t dir = *k;
        dir.type = RL_RECIPE_T_PATH_DIR;
        dir.needs = "config.json";
        s_check_path(c, &dir, "critic.init", r->critic.init, "critic.init");
    }
}

