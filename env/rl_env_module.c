// rl_env_module — an environment of the ABI in this process (rl_env_module.h).
#include "rl_env_module.h"

#include "rl_env_calc.h"
#include "rl_err.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define S_NAME_MAX 128
// the size of a version-1 table: every field through destroy
#define S_TABLE_V1_SIZE (offsetof(rl_env_table_t, destroy) + sizeof(((rl_env_table_t *)0)->destroy))

struct rl_env_module {
    void *dl; // NULL for a built-in
    const rl_env_table_t *t;
    void *state;
};

static int s_load(const char *path, void **dl_p, const rl_env_table_t **t_p, char *err,
                  size_t err_len) {
    struct stat st;
    if (stat(path, &st) != 0) {
        int e = errno;
        return rl_errf(err, err_len, RL_EPLUGIN, "env plugin %s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        return rl_errf(err, err_len, RL_EPLUGIN, "env plugin %s: not a regular file", path);
    }
    char dlpath[4200]; // dlopen searches the library path for a bare name; a path never means it
    snprintf(dlpath, sizeof dlpath, "%s%s", strchr(path, '/') ? "" : "./", path);
    dlerror();
    void *dl = dlopen(dlpath, RTLD_NOW | RTLD_LOCAL);
    if (!dl) {
        const char *why = dlerror();
        return rl_errf(err, err_len, RL_EPLUGIN,
                       "env plugin %s cannot be loaded (is it a shared object built for this "
                       "machine?): %s",
                       path, why ? why : "unknown dlopen error");
    }
    int rc = RL_EPLUGIN;
    void *sym = dlsym(dl, RL_ENV_ENTRY_SYMBOL);
    const rl_env_table_t *t = NULL;
    if (!sym) {
        rl_errf(err, err_len, rc,
                "env plugin %s does not export %s (declare it with RL_ENV_EXPORT from "
                "rlctl/env.h; -fvisibility=hidden hides unmarked symbols)",
                path, RL_ENV_ENTRY_SYMBOL);
        goto fail;
    }
    rl_env_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry); // the object-to-function conversion POSIX allows
    t = entry();
    if (!t) {
        rl_errf(err, err_len, rc, "env plugin %s: %s() returned NULL", path, RL_ENV_ENTRY_SYMBOL);
        goto fail;
    }
    if (t->abi_version != RL_ENV_ABI_VERSION) { // first: another version, another layout
        rc = RL_EVERSION;
        rl_errf(err, err_len, rc,
                "env plugin %s was built for environment ABI version %u, this rlctl supports "
                "version %d; rebuild it against this rlctl's include/rlctl/env.h",
                path, (unsigned)t->abi_version, RL_ENV_ABI_VERSION);
        goto fail;
    }
    if (t->struct_size < S_TABLE_V1_SIZE) {
        rl_errf(err, err_len, rc,
                "env plugin %s: short table: struct_size %u < %zu bytes (set struct_size = "
                "sizeof(rl_env_table_t))",
                path, (unsigned)t->struct_size, (size_t)S_TABLE_V1_SIZE);
        goto fail;
    }
    const char *missing = !t->name         ? "name"
                          : !t->create     ? "create"
                          : !t->answer     ? "answer"
                          : !t->free_reply ? "free_reply"
                          : !t->destroy    ? "destroy"
                                           : NULL;
    if (missing) {
        rl_errf(err, err_len, rc, "env plugin %s: the table's %s is NULL", path, missing);
        goto fail;
    }
    size_t nl = strnlen(t->name, S_NAME_MAX + 1);
    if (nl == 0 || nl > S_NAME_MAX) {
        rl_errf(err, err_len, rc, "env plugin %s: the table's name is %s", path,
                nl ? "longer than 128 bytes" : "empty");
        goto fail;
    }
    *dl_p = dl;
    *t_p = t;
    return 0;
fail:
    dlclose(dl);
    return rc;
}

int rl_env_module_check(const char *path, char *err, size_t err_len) {
    void *dl = NULL;
    const rl_env_table_t *t = NULL;
    int rc = s_load(path, &dl, &t, err, err_len);
    if (!rc) {
        dlclose(dl);
    }
    return rc;
}

void rl_env_module_close(rl_env_module_t **self_p) {
    rl_env_module_t *m = *self_p;
    if (!m) {
        return;
    }
    if (m->t) {
        m->t->destroy(m->state);
    }
    if (m->dl) {
        dlclose(m->dl);
    }
    free(m);
    *self_p = NULL;
}

int rl_env_module_open(const char *path, const char *builtin, const char *config_json,
                       rl_env_module_t **out, char *err, size_t err_len) {
    *out = NULL;
    rl_env_module_t *m = calloc(1, sizeof *m);
    if (!m) {
        return rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    const rl_env_table_t *t = NULL;
    int rc = 0;
    if (path) {
        rc = s_load(path, &m->dl, &t, err, err_len);
    } else if (builtin && strcmp(builtin, "calc") == 0) {
        t = rl_env_calc_table();
    } else {
        rc = rl_errf(err, err_len, RL_EINVAL, "no built-in environment '%s' (built-ins: calc)",
                     builtin ? builtin : "");
    }
    if (!rc) {
        char e[1024] = "";
        if (t->create(config_json ? config_json : "{}", &m->state, e, sizeof e) != 0) {
            rc = rl_errf(err, err_len, RL_EPLUGIN, "env %s %s: create failed: %s",
                         path ? "plugin" : "builtin", path ? path : builtin,
                         e[0] ? e : "(no message)");
        } else {
            m->t = t;
        }
    }
    if (rc) {
        rl_env_module_close(&m);
        return rc;
    }
    *out = m;
    return 0;
}

int rl_env_module_answer(rl_env_module_t *m, const char *request, size_t len, char **reply,
                         size_t *reply_len, char *err, size_t err_len) {
    *reply = NULL;
    *reply_len = 0;
    char e[1024] = "", *r = NULL;
    size_t rl = 0;
    if (m->t->answer(m->state, request, len, &r, &rl, e, sizeof e) != 0 || !r) {
        if (r) {
            m->t->free_reply(m->state, r);
        }
        return rl_errf(err, err_len, RL_EPLUGIN, "env %s: answer failed: %s", m->t->name,
                       e[0] ? e : "(no reply)");
    }
    *reply = malloc(rl + 1); // ours, so that the caller frees it as any reply
    if (*reply) {
        memcpy(*reply, r, rl);
        (*reply)[rl] = '\0';
        *reply_len = rl;
    }
    m->t->free_reply(m->state, r);
    return *reply ? 0 : rl_errf(err, err_len, RL_ENOMEM, "out of memory");
}

const char *rl_env_module_name(const rl_env_module_t *m) {
    return m->t->name;
}
