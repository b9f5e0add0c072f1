// rl_fault — RLCTL_FAULT points (see rl_fault.h).
#include "rl_fault.h"

#include <stdlib.h>
#include <string.h>

#define S_MAX_POINTS 16

typedef struct {
    char name[48];
    long at;    // fires on this arrival (1-based)
    long count; // arrivals so far
} s_point_t;

static int s_loaded;
static int s_n;
static s_point_t s_points[S_MAX_POINTS];

static void s_load(void) {
    s_loaded = 1;
    const char *env = getenv("RLCTL_FAULT");
    while (env && *env && s_n < S_MAX_POINTS) {
        size_t len = strcspn(env, ",");
        size_t name_len = strcspn(env, ",@");
        s_point_t *p = &s_points[s_n];
        if (name_len > 0 && name_len < sizeof p->name) {
            memcpy(p->name, env, name_len);
            p->name[name_len] = '\0';
            p->at = name_len < len ? strtol(env + name_len + 1, NULL, 10) : 1;
            p->count = 0;
            s_n += p->at >= 1;
        }
        env += len + (env[len] == ',');
    }
}

int rl_fault(const char *name) {
    if (!s_loaded) {
        s_load();
    }
    for (int i = 0; i < s_n; i++) {
        if (strcmp(s_points[i].name, name) == 0 && ++s_points[i].count == s_points[i].at) {
            return 1;
        }
    }
    return 0;
}
