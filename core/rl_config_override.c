// rl_config_override — command-line overrides: "a.b.c=<YAML value>" (list entries by index:
// rewards.0.weight or rewards[0].weight) spliced into the recipe's YAML tree before the walk,
// so an override gets exactly the checks the file gets and its errors point into the argument
// ("<override N>:1:col"). A key the override replaces moves to the command line.
//
// Not here: the checks themselves (rl_config_load.c converts, rl_config_check.c cross-checks)
// and the order of overrides (rl_recipe_load_string applies them in argument order).
#include "rl_config_priv.h"
#include "rl_err.h"
#include "rl_yaml.h"

#include <stdlib.h>
#include <string.h>


static int s_is_index(const char *s, int *out) {
    if (!*s || strlen(s) > 6) {
        return 0;
    }
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9') {
            return 0;
        }
    }
    *out = atoi(s);
    return 1;
}

// splits "rewards[0].config.x" into "rewards","0","config","x"; returns the count or -1
static int s_split_key(char *key, char **parts, int max) {
    int n = 0;
    for (char *p = key; *p; p++) {
        if (*p == '[') {
            *p = '.';
        } else if (*p == ']') {
            if (p[1] && p[1] != '.' && p[1] != '[') {
                return -1;
            }
            memmove(p, p + 1, strlen(p));
            p--;
        }
    }
    char *s = key;
    while (n < max) {
        char *dot = strchr(s, '.');
        if (dot) {
            *dot = '\0';
        }
        if (!*s) {
            return -1;
        }
        parts[n++] = s;
        if (!dot) {
            return n;
        }
        s = dot + 1;
    }
    return -1;
}

void rl_cfg_apply_override(rl_cfg_ctx_t *c, rl_yaml_node_t *root, const char *arg,
                           const char *fname) {
    const char *eq = strchr(arg, '=');
    rl_yaml_node_t at = {.kind = RL_YAML_SCALAR, .file = fname, .line = 1, .col = 1};
    char q[128];
    rl_cfg_quote_short(arg, q, sizeof q);
    if (!eq || eq == arg) {
        rl_cfg_err(c, &at, NULL, "'%s': expected key=value (e.g. optim.lr=1e-4)", q);
        return;
    }
    size_t klen = (size_t)(eq - arg);
    char *key = malloc(klen + 1);
    if (!key) {
        c->oom = 1;
        return;
    }
    memcpy(key, arg, klen);
    key[klen] = '\0';
    char shown[128];
    rl_cfg_quote_short(key, shown, sizeof shown);
    char *parts[16];
    int np = s_split_key(key, parts, 16);
    if (np < 0) {
        rl_cfg_err(c, &at, shown, "malformed key; write section.key (e.g. optim.lr)");
        free(key);
        return;
    }
    rl_yaml_node_t *val = NULL;
    char e[1024];
    const char *text = eq + 1;
    int rc = rl_yaml_parse(text, strlen(text), fname, (int)klen + 1, &val, e, sizeof e);
    if (rc) {
        if (rc == RL_ENOMEM) {
            c->oom = 1;
        } else {
            // e already reads "<override N>:line:col: ..."
            rl_cfg_push(c, fname, 1, 0, strdup(e));
        }
        free(key);
        return;
    }
    if (!val) {
        val = rl_yaml_node_new(RL_YAML_SCALAR, fname, 1, (int)klen + 2, "", 1);
        if (!val) {
            c->oom = 1;
            free(key);
            return;
        }
    }
    rl_yaml_node_t *node = root;
    for (int i = 0; i < np; i++) {
        int last = i == np - 1, idx;
        if (node->kind == RL_YAML_SEQ) {
            if (!s_is_index(parts[i], &idx) || idx >= node->n) {
                rl_cfg_err(c, &at, shown, "'%s' is not an index of this list (it has %d entries)",
                           parts[i], node->n);
                break;
            }
            if (last) {
                rl_yaml_destroy(&node->kids[idx]);
                node->kids[idx] = val;
                val = NULL;
                break;
            }
            node = node->kids[idx];
            continue;
        }
        if (node->kind != RL_YAML_MAP) {
            rl_cfg_err(c, &at, shown, "cannot set a key inside a value that is not a map");
            break;
        }
        rl_yaml_node_t *kn = NULL;
        rl_yaml_node_t *child = rl_yaml_map_get(node, parts[i], &kn);
        if (child && last) {
            for (int j = 0; j < node->n; j++) {
                if (node->kids[2 * j] == kn) {
                    rl_yaml_destroy(&node->kids[2 * j + 1]);
                    node->kids[2 * j + 1] = val;
                }
            }
            kn->file = fname; // the key now lives on the command line
            kn->line = 1;
            kn->col = 1;
            val = NULL;
            break;
        }
        if (child && rl_cfg_is_null(child)) { // "lora:" left empty, then lora.r=8
            rl_yaml_node_t *m = rl_yaml_node_new(RL_YAML_MAP, fname, 1, 1, NULL, 0);
            if (!m) {
                c->oom = 1;
                break;
            }
            for (int j = 0; j < node->n; j++) {
                if (node->kids[2 * j] == kn) {
                    rl_yaml_destroy(&node->kids[2 * j + 1]);
                    node->kids[2 * j + 1] = m;
                }
            }
            node = m;
            continue;
        }
        if (child) {
            node = child;
            continue;
        }
        if (node->n >= RL_YAML_MAX_MAP_KEYS) {
            rl_cfg_err(c, &at, shown, "too many keys");
            break;
        }
        rl_yaml_node_t *nk = rl_yaml_node_new(RL_YAML_SCALAR, fname, 1, 1, parts[i], 1);
        rl_yaml_node_t *nv = last ? val : rl_yaml_node_new(RL_YAML_MAP, fname, 1, 1, NULL, 0);
        if (!nk || !nv || rl_yaml_append(node, nk, nv)) {
            rl_yaml_destroy(&nk);
            if (!last) {
                rl_yaml_destroy(&nv);
            }
            c->oom = 1;
            break;
        }
        if (last) {
            val = NULL;
            break;
        }
        node = nv;
    }
    rl_yaml_destroy(&val);
    free(key);
}
