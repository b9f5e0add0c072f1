// rl_reaper — a child subreaper that kills what it started (see rl_reaper.h).
#include "rl_reaper.h"

#include "rl_clock.h"
#include "rl_err.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

// ---------------------------------------------------------------------------------------------
// children

// The state, parent pid and process group of /proc/<pid>/stat ("pid (comm) state ppid pgrp ...";
// comm may hold spaces and parentheses, so fields are read after the last ')'). 0, or -1 when
// the process is gone or the file does not parse.
static int s_stat(pid_t pid, char *state_p, pid_t *ppid, pid_t *pgrp) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f) {
        return -1;
    }
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *close = strrchr(buf, ')');
    int pp, pg;
    char state;
    if (!close || sscanf(close + 1, " %c %d %d", &state, &pp, &pg) != 3) {
        return -1;
    }
    *state_p = state;
    *ppid = (pid_t)pp;
    *pgrp = (pid_t)pg;
    return 0;
}

// The pids killed so far (distinct), so that a child killed in one round and not yet a zombie
// in the next is counted once.
typedef struct {
    pid_t *pids;
    int n, cap;
} s_killed_t;

static void s_note(s_killed_t *k, pid_t pid, int *fresh) {
    for (int i = 0; i < k->n; i++) {
        if (k->pids[i] == pid) {
            return;
        }
    }
    (*fresh)++;
    if (k->n == k->cap) {
        int cap = k->cap ? 2 * k->cap : 16;
        pid_t *p = realloc(k->pids, (size_t)cap * sizeof *p);
        if (!p) {
            return; // counted, not remembered: at worst counted again
        }
        k->pids = p;
        k->cap = cap;
    }
    k->pids[k->n++] = pid;
}

// Sends SIGKILL to every living child of this process (and to the group of a child that leads
// one). Returns how many there were (children that are already zombies are not counted: they
// wait to be reaped); *fresh grows by those not killed before. /proc is scanned rather than
// /proc/self/task/*/children, which needs CONFIG_PROC_CHILDREN.
static int s_kill_children(s_killed_t *k, int *fresh) {
    DIR *d = opendir("/proc");
    if (!d) {
        return 0;
    }
    pid_t self = getpid();
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        pid_t pp, pg;
        char state;
        if (*end || pid <= 0 || s_stat((pid_t)pid, &state, &pp, &pg) != 0 || pp != self ||
            state == 'Z') {
            continue;
        }
        if (pg == (pid_t)pid) {
            kill(-(pid_t)pid, SIGKILL);
        }
        kill((pid_t)pid, SIGKILL);
        s_note(k, (pid_t)pid, fresh);
        n++;
    }
    closedir(d);
    return n;
}

int rl_reaper_sweep(double timeout_s) {
    double t0 = rl_clock_now();
    s_killed_t k = {NULL, 0, 0};
    int killed = 0;
    for (;;) {
        int n = s_kill_children(&k, &killed);
        // reap what died (our children, and orphans adopted as their parents died)
        int st;
        while (waitpid(-1, &st, WNOHANG) > 0) {
        }
        if (n == 0 && waitpid(-1, &st, WNOHANG) < 0 && errno == ECHILD) {
            break;
        }
        if (rl_clock_now() - t0 > timeout_s) {
            break;
        }
        struct timespec ts = {0, 2000000}; // 2 ms: a killed process's orphans need a moment
        nanosleep(&ts, NULL);
    }
    free(k.pids);
    return killed;
}

// ---------------------------------------------------------------------------------------------
// the SIGTERM thread

static void *s_guard(void *arg) {
    sigset_t *set = arg;
    int sig = 0;
    while (sigwait(set, &sig) != 0) {
    }
    rl_reaper_sweep(2.0);
    // die of the signal, as without us: the parent sees "killed by signal 15"
    signal(SIGTERM, SIG_DFL);
    pthread_sigmask(SIG_UNBLOCK, set, NULL);
    raise(SIGTERM);
    _exit(128 + SIGTERM); // not reached
    return NULL;
}

int rl_reaper_start(char *err, size_t err_len) {
    static sigset_t set;
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
        int e = errno;
        return rl_errf(err, err_len, e, "cannot become a child subreaper: %s", strerror(e));
    }
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    int rc = pthread_sigmask(SIG_BLOCK, &set, NULL);
    pthread_t t;
    if (!rc && (rc = pthread_create(&t, NULL, s_guard, &set)) == 0) {
        pthread_detach(t);
    }
    if (rc) {
        pthread_sigmask(SIG_UNBLOCK, &set, NULL);
        return rl_errf(err, err_len, rc, "cannot start the reaper thread: %s", strerror(rc));
    }
    // the parent's death (a controller killed with SIGKILL) comes as SIGTERM: swept, then gone
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    return 0;
}
