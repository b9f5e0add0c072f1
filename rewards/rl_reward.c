// rl_reward — opening, checking and calling reward tables, built-in or loaded from a plugin
// (command and http rewards are tables of rlctl's own, like the built-ins).
// Everything a plugin hands back (its table, its messages, its scores) is untrusted: versions
// and sizes are checked before a field is read, messages are cut to the buffer, and infinite
// scores are refused.
#include "rl_reward.h"

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "rl_err.h"
#include "rl_log.h"
#include "rl_reward_builtin.h"
#include "rl_reward_command.h"
#include "rl_reward_http.h"
#include "rl_reward_model.h"

#include <jansson.h>

// The bytes of a table the host reads: every field of ABI version 1, up to destroy.
#define S_TABLE_V1_SIZE (offsetof(rl_reward_table_t, destroy) + sizeof(void (*)(void *)))
#define S_NAME_MAX 128 // longest plugin name accepted (the name is shown, not trusted)

struct rl_reward {
    char *name;                     // the recipe's name, or the table's
    char *origin;                   // "builtin <name>" or the plugin path as given
    void *dl;                       // dlopen handle; NULL for a built-in
    const rl_reward_table_t *table; // borrowed from the plugin (or static); valid until dlclose
    void *state;                    // create()'s result
    int created;                    // destroy() is owed
    rl_reward_host_t host;          // handed to create(); ctx points back here
};

// ---------------------------------------------------------------------------------------------
// the host's services

static void s_host_log(void *ctx, int level, const char *fmt, ...) {
    const rl_reward_t *r = ctx;
    if (level < RL_REWARD_LOG_ERROR) {
        level = RL_REWARD_LOG_ERROR;
    }
    if (level > RL_REWARD_LOG_DEBUG) {
        level = RL_REWARD_LOG_DEBUG;
    }
    if ((rl_log_level_t)level > rl_log_get_level()) {
        return;
    }
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt ? fmt : "(null)", ap);
    va_end(ap);
    rl_log((rl_log_level_t)level, "reward '%s': %s", r->name, msg);
}

// ---------------------------------------------------------------------------------------------
// loading

// Loads the plugin at `path` and returns its checked table; *dl_p gets the handle. On failure
// everything is dlclose'd and err says why, naming `label` (the reward) and the path.
static int s_load_plugin(const char *label, const char *path, void **dl_p,
                         const rl_reward_table_t **table_p, char *err, size_t err_len) {
    struct stat st;
    if (stat(path, &st) != 0) {
        int e = errno;
        return rl_errf(err, err_len, RL_EPLUGIN, "reward '%s': plugin %s: %s", label, path,
                       strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        return rl_errf(err, err_len, RL_EPLUGIN, "reward '%s': plugin %s: not a regular file",
                       label, path);
    }
    // dlopen searches the library path for a bare name; a recipe path never means that
    char *dlpath = malloc(strlen(path) + 3);
    if (!dlpath) {
        return rl_errf(err, err_len, RL_ENOMEM, "reward '%s': out of memory", label);
    }
    snprintf(dlpath, strlen(path) + 3, "%s%s", strchr(path, '/') ? "" : "./", path);
    dlerror();
    void *dl = dlopen(dlpath, RTLD_NOW | RTLD_LOCAL);
    free(dlpath);
    if (!dl) {
        const char *why = dlerror();
        return rl_errf(err, err_len, RL_EPLUGIN,
                       "reward '%s': cannot load plugin %s (is it a shared object built for "
                       "this machine?): %s",
                       label, path, why ? why : "unknown dlopen error");
    }
    int rc = RL_EPLUGIN;
    dlerror();
    // POSIX allows the object-to-function pointer conversion dlsym needs; copy the bytes so
    // -Wpedantic stays quiet too.
    void *sym = dlsym(dl, RL_REWARD_ENTRY_SYMBOL);
    if (!sym) {
        rl_errf(err, err_len, rc,
                "reward '%s': plugin %s does not export %s (declare it with RL_REWARD_EXPORT "
                "from rlctl/reward.h; -fvisibility=hidden hides unmarked symbols)",
                label, path, RL_REWARD_ENTRY_SYMBOL);
        goto fail;
    }
    rl_reward_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry);
    const rl_reward_table_t *t = entry();
    if (!t) {
        rl_errf(err, err_len, rc, "reward '%s': plugin %s: %s() returned NULL", label, path,
                RL_REWARD_ENTRY_SYMBOL);
        goto fail;
    }
    // abi_version first: a table of another version may have another layout after it
    if (t->abi_version != RL_REWARD_ABI_VERSION) {
        rc = RL_EVERSION;
        rl_errf(err, err_len, rc,
                "reward '%s': plugin %s was built for reward ABI version %u, this rlctl "
                "supports version %d; rebuild it against this rlctl's include/rlctl/reward.h",
                label, path, (unsigned)t->abi_version, RL_REWARD_ABI_VERSION);
        goto fail;
    }
    if (t->struct_size < S_TABLE_V1_SIZE) {
        rl_errf(err, err_len, rc,
                "reward '%s': plugin %s: short table: struct_size %u < %zu bytes, the size of "
                "a version %d table (set struct_size = sizeof(rl_reward_table_t))",
                label, path, (unsigned)t->struct_size, (size_t)S_TABLE_V1_SIZE,
                RL_REWARD_ABI_VERSION);
        goto fail;
    }
    const char *missing = !t->name      ? "name"
                          : !t->create  ? "create"
                          : !t->score   ? "score"
                          : !t->destroy ? "destroy"
                                        : NULL;
    if (missing) {
        rl_errf(err, err_len, rc, "reward '%s': plugin %s: the table's %s is NULL", label, path,
                missing);
        goto fail;
    }
    size_t name_len = strnlen(t->name, S_NAME_MAX + 1);
    if (name_len == 0 || name_len > S_NAME_MAX) {
        rl_errf(err, err_len, rc, "reward '%s': plugin %s: the table's name is %s", label, path,
                name_len ? "longer than 128 bytes" : "empty");
        goto fail;
    }
    *dl_p = dl;
    *table_p = t;
    return 0;
fail:
    dlclose(dl);
    return rc;
}

// A name for messages before the reward is open: the recipe's, or the plugin's file name, or
// the built-in's.
static const char *s_label(const rl_recipe_reward_t *spec, const rl_reward_table_t *builtin) {
    if (spec->name) {
        return spec->name;
    }
    if (builtin) {
        return builtin->name;
    }
    const char *slash = spec->plugin ? strrchr(spec->plugin, '/') : NULL;
    return slash ? slash + 1 : spec->plugin ? spec->plugin : "?";
}

// A model reward's create() config: the entry's `config:` map with "path" (the folder) and
// "threads" set. caller owns result; free with free(). NULL: out of memory or a config that is
// not a map (*bad = 1).
static char *s_model_config(const rl_recipe_reward_t *spec, int threads, int *bad) {
    json_error_t je;
    json_t *cfg = json_loads(spec->config_json ? spec->config_json : "{}", 0, &je);
    *bad = cfg && !json_is_object(cfg);
    char *out = NULL;
    if (cfg && !*bad && json_object_set_new(cfg, "path", json_string(spec->model)) == 0 &&
        json_object_set_new(cfg, "threads", json_integer(threads)) == 0) {
        out = json_dumps(cfg, JSON_COMPACT);
    }
    json_decref(cfg);
    return out;
}

// The seconds a command or http reward may spend on one batch: a little under
// roles.reward_timeout (spec->reward_timeout), so that it reports its own failure, naming the
// command or the URL, before the controller stops waiting for the whole reward worker.
static double s_deadline(const rl_recipe_reward_t *spec) {
    double t = spec->reward_timeout;
    return t > 0 ? t - fmin(1.0, 0.1 * t) : 0;
}

// The create() config of a command or http reward, built from its entry. caller owns result;
// free with free(). NULL: out of memory.
static char *s_own_config(const rl_recipe_reward_t *spec) {
    json_t *cfg = json_object();
    int bad = !cfg;
    if (spec->builtin == RL_RECIPE_REWARD_COMMAND) {
        json_t *argv = json_array();
        for (int i = 0; i < spec->command.n; i++) {
            bad |= json_array_append_new(argv, json_string(spec->command.items[i])) != 0;
        }
        bad |= json_object_set_new(cfg, "argv", argv) != 0;
    } else {
        const rl_recipe_http_t *h = &spec->http;
        bad |= json_object_set_new(cfg, "url", json_string(h->url)) != 0;
        bad |=
            json_object_set_new(cfg, "timeout", json_real(h->timeout > 0 ? h->timeout : 30)) != 0;
        bad |= json_object_set_new(
                   cfg, "format",
                   json_string(h->format == RL_RECIPE_HTTP_OPENRLHF ? "openrlhf" : "rlctl")) != 0;
        bad |= json_object_set_new(cfg, "retries", json_integer(h->retries)) != 0;
        bad |= json_object_set_new(
                   cfg, "label_field",
                   json_string(spec->answer_field ? spec->answer_field : "answer")) != 0;
    }
    bad |= json_object_set_new(cfg, "deadline", json_real(s_deadline(spec))) != 0;
    char *out = bad ? NULL : json_dumps(cfg, JSON_COMPACT);
    json_decref(cfg);
    return out;
}

int rl_reward_spec_origin(const rl_recipe_reward_t *spec, char *out, size_t cap) {
    RL_ASSERT(spec && out && cap > 0);
    size_t o = 0;
    out[0] = '\0';
    switch (spec->builtin) {
    case RL_RECIPE_REWARD_PLUGIN:
        snprintf(out, cap, "%s", spec->plugin ? spec->plugin : "?");
        break;
    case RL_RECIPE_REWARD_MODEL:
        snprintf(out, cap, "model %s", spec->model ? spec->model : "?");
        break;
    case RL_RECIPE_REWARD_HTTP:
        snprintf(out, cap, "%s", spec->http.url ? spec->http.url : "?");
        break;
    case RL_RECIPE_REWARD_COMMAND:
        o = (size_t)snprintf(out, cap, "command");
        for (int i = 0; i < spec->command.n && o < cap; i++) {
            const char *a = spec->command.items[i];
            int quote = !a[0] || strpbrk(a, " \t'\"") != NULL;
            o += (size_t)snprintf(out + o, cap - o, quote ? " '%s'" : " %s", a);
        }
        break;
    default: {
        const char *b = rl_recipe_reward_builtin_name(spec->builtin);
        snprintf(out, cap, "builtin %s", b ? b : "?");
        break;
    }
    }
    return (int)strlen(out);
}

int rl_reward_open(const rl_recipe_reward_t *spec, int threads, rl_reward_t **out, char *err,
                   size_t err_len) {
    RL_ASSERT(spec && out);
    *out = NULL;
    const rl_reward_table_t *table = NULL;
    void *dl = NULL;
    char *made_cfg = NULL;
    if (spec->builtin == RL_RECIPE_REWARD_MODEL) {
        int bad = 0;
        if (!spec->model || !spec->model[0]) {
            return rl_errf(err, err_len, RL_EINVAL, "reward '%s': no model folder",
                           spec->name ? spec->name : "?");
        }
        table = rl_reward_model_table();
        made_cfg = s_model_config(spec, threads, &bad);
        if (!made_cfg) {
            return rl_errf(err, err_len, bad ? RL_EINVAL : RL_ENOMEM, "reward '%s': %s",
                           s_label(spec, table), bad ? "config is not a map" : "out of memory");
        }
    } else if (spec->builtin == RL_RECIPE_REWARD_COMMAND ||
               spec->builtin == RL_RECIPE_REWARD_HTTP) {
        int cmd = spec->builtin == RL_RECIPE_REWARD_COMMAND;
        if (cmd ? spec->command.n < 1 || !spec->command.items[0][0] : !spec->http.url) {
            return rl_errf(err, err_len, RL_EINVAL, "reward '%s': no %s",
                           spec->name ? spec->name : "?", cmd ? "command" : "url");
        }
        table = cmd ? rl_reward_command_table() : rl_reward_http_table();
        if (!(made_cfg = s_own_config(spec))) {
            return rl_errf(err, err_len, RL_ENOMEM, "reward '%s': out of memory",
                           s_label(spec, table));
        }
    } else if (spec->builtin == RL_RECIPE_REWARD_PLUGIN) {
        if (!spec->plugin || !spec->plugin[0]) {
            return rl_errf(err, err_len, RL_EINVAL, "reward '%s': no plugin path",
                           spec->name ? spec->name : "?");
        }
        int rc = s_load_plugin(s_label(spec, NULL), spec->plugin, &dl, &table, err, err_len);
        if (rc != 0) {
            return rc;
        }
    } else {
        table = rl_reward_builtin_table(spec->builtin);
        if (!table) {
            return rl_errf(err, err_len, RL_EINVAL, "reward '%s': unknown builtin %d",
                           spec->name ? spec->name : "?", spec->builtin);
        }
    }

    int rc = RL_ENOMEM;
    rl_reward_t *r = calloc(1, sizeof *r);
    if (!r) {
        goto fail;
    }
    r->dl = dl;
    r->table = table;
    r->name = strdup(spec->name ? spec->name : table->name);
    char origin[4096];
    rl_reward_spec_origin(spec, origin, sizeof origin);
    r->origin = strdup(origin);
    if (!r->name || !r->origin) {
        goto fail;
    }
    r->host = (rl_reward_host_t){
        .abi_version = RL_REWARD_ABI_VERSION,
        .struct_size = sizeof(rl_reward_host_t),
        .reward_name = r->name,
        .ctx = r,
        .log = s_host_log,
    };

    char perr[1024] = "";
    void *state = NULL;
    const char *config = made_cfg ? made_cfg : spec->config_json ? spec->config_json : "{}";
    if (table->create(&r->host, config, &state, perr, sizeof perr) != 0) {
        perr[sizeof perr - 1] = '\0'; // the plugin may not have terminated it
        rc = rl_errf(err, err_len, RL_EPLUGIN, "reward '%s' (%s): create failed: %s", r->name,
                     r->origin, perr[0] ? perr : "(the plugin gave no message)");
        goto fail;
    }
    r->state = state;
    r->created = 1;
    *out = r;
    free(made_cfg);
    return 0;
fail:
    free(made_cfg);
    if (rc == RL_ENOMEM) {
        rl_errf(err, err_len, rc, "reward '%s': out of memory", s_label(spec, table));
    }
    if (r) {
        r->dl = NULL; // closed below, once
        rl_reward_close(&r);
    }
    if (dl) {
        dlclose(dl);
    }
    return rc;
}

int rl_reward_check(const rl_recipe_reward_t *spec, char *err, size_t err_len) {
    rl_reward_t *r = NULL;
    int rc = rl_reward_open(spec, 1, &r, err, err_len);
    rl_reward_close(&r);
    return rc;
}

// ---------------------------------------------------------------------------------------------
// scoring

int rl_reward_score(rl_reward_t *r, const rl_reward_item_t *items, size_t n, double *out, char *err,
                    size_t err_len) {
    RL_ASSERT(r && (n == 0 || (items && out)));
    if (n == 0) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        out[i] = NAN;
    }
    char perr[1024] = "";
    if (r->table->score(r->state, items, n, out, perr, sizeof perr) != 0) {
        perr[sizeof perr - 1] = '\0';
        return rl_errf(err, err_len, RL_EPLUGIN, "reward '%s' (%s): score failed: %s", r->name,
                       r->origin, perr[0] ? perr : "(the plugin gave no message)");
    }
    for (size_t i = 0; i < n; i++) {
        if (isinf(out[i])) {
            return rl_errf(err, err_len, RL_EPLUGIN,
                           "reward '%s' (%s): score returned %s for item %zu of %zu (use NaN "
                           "for an unscorable item)",
                           r->name, r->origin, out[i] > 0 ? "inf" : "-inf", i, n);
        }
    }
    return 0;
}

const char *rl_reward_name(const rl_reward_t *r) {
    return r->name;
}

const char *rl_reward_origin(const rl_reward_t *r) {
    return r->origin;
}

void rl_reward_close(rl_reward_t **r_p) {
    if (!r_p || !*r_p) {
        return;
    }
    rl_reward_t *r = *r_p;
    if (r->created) {
        r->table->destroy(r->state);
    }
    if (r->dl) {
        dlclose(r->dl);
    }
    free(r->name);
    free(r->origin);
    free(r);
    *r_p = NULL;
}
