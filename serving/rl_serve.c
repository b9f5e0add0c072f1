// rl_serve — a remote sampler: CURVE server, sessions, the sampler role's verbs (see rl_serve.h).
#define _XOPEN_SOURCE 700 // realpath
#include "rl_serve.h"

#include "rl_chan.h"
#include "rl_config.h"
#include "rl_curve.h"
#include "rl_group.h"
#include "rl_err.h"
#include "rl_http.h"
#include "rl_log.h"
#include "rl_proto.h"
#include "rl_refcache.h"
#include "rl_role.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static volatile sig_atomic_t s_stop, s_hup;

static void s_on_signal(int sig) {
    if (sig == SIGHUP) {
        s_hup = 1;
    } else {
        s_stop = 1;
    }
}

typedef struct {
    const rl_serve_opts_t *o;
    rl_chan_t *chan;
    const rl_role_t *role;
    char model[PATH_MAX]; // --model, absolute
    char model_hash[17];
    char host[256];
    // the session (active = 0: none)
    int active;
    char session[72];
    char peer[256];                 // the controller's routing identity
    char key[RL_CURVE_Z85_LEN + 1]; // its public key
    int64_t conn;                   // its connection
    char run[256];
    void *state; // the sampler role's, after configure
    rl_recipe_t *recipe;
    int done; // sessions ended
    // models received from controllers (no --model): <cache>/<fingerprint>/, arriving in
    // <cache>/<fingerprint>.part/
    char cache[PATH_MAX];
    int cache_ours;                  // 1: a fresh folder of this process, removed at exit
    char sess_model[PATH_MAX + 400]; // the session's model folder ("": not there yet)
    char sess_hash[17];
    int receiving; // a model transfer is open
    int fd;        // the file being written (-1: none)
    char fname[256];
    int64_t fpos, ftotal;
    rl_group_t *grp;     // samplers > 1: the session's sampler workers (local processes)
    char logs[PATH_MAX]; // their logs
    pthread_mutex_t mu;  // held while a request is served (the HTTP thread takes it too)
    rl_tokenizer_t *tok; // --model's tokenizer (with --http)
    char http_name[300];
} s_serve_t;

// The HTTP front's backend: the session's model, under the protocol loop's lock.
static int s_http_acquire(void *ctx, rl_model_t **model, rl_tokenizer_t **tok, char *why,
                          size_t why_len) {
    s_serve_t *s = ctx;
    pthread_mutex_lock(&s->mu);
    rl_model_t *m = s->active && s->state ? rl_role_sampler_model(s->state) : NULL;
    if (!m) {
        pthread_mutex_unlock(&s->mu);
        snprintf(why, why_len,
                 "no run in progress: this sampler answers with the policy of the "
                 "run it serves");
        return 1;
    }
    *model = m;
    *tok = s->tok;
    return 0;
}

static void s_http_release(void *ctx) {
    s_serve_t *s = ctx;
    pthread_mutex_unlock(&s->mu);
}

// A model folder's fingerprint as 16 hex digits: rl_refcache_hash_model (config.json, the
// safetensors index and every *.safetensors file: what a sampler loads), as the controller's.
static int s_fingerprint(const char *dir, char out[17], char *err, size_t err_len) {
    uint64_t h = 0;
    int rc = rl_refcache_hash_model(dir, RL_REFCACHE_HASH_INIT, &h, err, err_len);
    snprintf(out, 17, "%016llx", (unsigned long long)h);
    return rc;
}

// Removes a folder of plain files (a received model), then the folder.
static void s_rm_flat(const char *dir) {
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            char p[PATH_MAX + 300];
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
    }
    if (d) {
        closedir(d);
    }
    rmdir(dir);
}

static void s_close_file(s_serve_t *s) {
    if (s->fd >= 0) {
        close(s->fd);
        s->fd = -1;
    }
}

static void s_end_session(s_serve_t *s, const char *why) {
    if (!s->active) {
        return;
    }
    if (s->state) {
        s->role->teardown(&s->state);
    }
    rl_recipe_destroy(&s->recipe);
    rl_group_destroy(&s->grp, 5.0);
    s_close_file(s);
    if (s->receiving) { // an unfinished transfer is dropped
        char part[PATH_MAX + 32];
        snprintf(part, sizeof part, "%s/%s.part", s->cache, s->sess_hash);
        s_rm_flat(part);
        s->receiving = 0;
    }
    s->sess_model[0] = '\0';
    rl_log_info("session of %s ended: %s; ready for the next run", s->run, why);
    memset(s->session, 0, sizeof s->session);
    s->active = 0;
    s->done++;
}

// Sends a reply with the session's token (the one the request named) to peer.
static void s_reply(s_serve_t *s, const char *peer, const char *session, rl_msg_t **out) {
    char err[512];
    if (session && rl_proto_session_set(*out, session) != 0) {
        rl_msg_free(out);
        return;
    }
    if (rl_chan_send(s->chan, peer, out, err, sizeof err) != 0) {
        rl_log_warn("reply to %s: %s", peer, err);
    }
}

static void s_fail(s_serve_t *s, const char *peer, const rl_msg_t *req, const char *session,
                   const char *why) {
    rl_msg_t *out = NULL;
    if (rl_proto_fail(rl_msg_id(req), why, &out) == 0) {
        s_reply(s, peer, session, &out);
    }
}

// The socket's connection events so far: a session ends when its controller's connection
// closes. Drained before a session records its connection, so that the close of an earlier
// connection with the same descriptor number is never taken for the new one's.
static void s_events(s_serve_t *s) {
    int64_t v;
    for (rl_chan_event_t ev; (ev = rl_chan_event(s->chan, &v)) != RL_CHAN_EV_NONE;) {
        if (ev == RL_CHAN_EV_DOWN && s->active && v == s->conn) {
            s_end_session(s, "the controller's connection closed");
        }
    }
}

// attach: opens a session for this controller when none is live.
static void s_attach(s_serve_t *s, const rl_msg_t *req, const char *peer, const char *key) {
    rl_proto_attach_t q;
    char err[1024];
    if (rl_proto_attach_decode(req, &q, err, sizeof err) != 0) {
        s_fail(s, peer, req, NULL, err);
        return;
    }
    if (strlen(q.session) < 32 || strlen(q.session) >= sizeof s->session) {
        s_fail(s, peer, req, q.session, "attach: a session token of 32 to 71 characters");
        return;
    }
    int64_t conn = rl_chan_peer_conn(s->chan);
    s_events(s);
    if (s->active && strcmp(s->peer, peer) != 0) {
        snprintf(err, sizeof err, "attach: busy: this sampler serves another run (%.900s)", s->run);
        s_fail(s, peer, req, q.session, err);
        return;
    }
    size_t hl = strlen(q.model_hash);
    int hex = hl == 16;
    for (size_t i = 0; hex && i < hl; i++) {
        hex = (q.model_hash[i] >= '0' && q.model_hash[i] <= '9') ||
              (q.model_hash[i] >= 'a' && q.model_hash[i] <= 'f');
    }
    if (!hex) {
        s_fail(s, peer, req, q.session, "attach: model_hash is not 16 hex digits");
        return;
    }
    if (s->model[0] && strcmp(q.model_hash, s->model_hash) != 0) {
        snprintf(err, sizeof err,
                 "attach: this sampler serves %.800s (fingerprint %s), not the run's model.path "
                 "(fingerprint %.16s): start it with --model pointing at the same model",
                 s->model, s->model_hash, q.model_hash);
        s_fail(s, peer, req, q.session, err);
        return;
    }
    if (s->active) {
        s_end_session(s, "the same controller attached again");
    }
    // the session's model: --model, a copy received earlier, or one to receive now
    int needs = 0;
    snprintf(s->sess_hash, sizeof s->sess_hash, "%s", q.model_hash);
    if (s->model[0]) {
        snprintf(s->sess_model, sizeof s->sess_model, "%s", s->model);
    } else {
        char dir[PATH_MAX + 32];
        struct stat st;
        snprintf(dir, sizeof dir, "%s/%s", s->cache, q.model_hash);
        if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) {
            snprintf(s->sess_model, sizeof s->sess_model, "%s", dir);
        } else {
            snprintf(dir, sizeof dir, "%s/%s.part", s->cache, q.model_hash);
            s_rm_flat(dir);
            if (mkdir(dir, 0700) != 0) {
                snprintf(err, sizeof err, "attach: cannot make %.900s: %s", dir, strerror(errno));
                s_fail(s, peer, req, q.session, err);
                return;
            }
            s->receiving = 1;
            needs = 1;
        }
    }
    s->active = 1;
    snprintf(s->session, sizeof s->session, "%s", q.session);
    snprintf(s->peer, sizeof s->peer, "%s", peer);
    snprintf(s->key, sizeof s->key, "%s", key);
    snprintf(s->run, sizeof s->run, "%s", q.run);
    s->conn = conn;
    rl_log_info("session opened by %s (key %.8s...)", s->run, key);
    if (needs) {
        rl_log_info("the run's model (fingerprint %s) is new here: receiving it", s->sess_hash);
    }
    rl_proto_attach_reply_t r = {q.session, (int64_t)getpid(), s->host, s->o->threads, needs};
    rl_msg_t *out = NULL;
    if (rl_proto_attach_reply_encode(&r, rl_msg_id(req), &out, err, sizeof err) == 0) {
        s_reply(s, peer, NULL, &out);
    }
}

// model_file: a piece of the run's model folder (no --model); the last one checks the folder's
// fingerprint and makes it the session's model (kept for later runs of the same model).
static int s_model_file(s_serve_t *s, const rl_msg_t *req, char *err, size_t err_len) {
    rl_proto_model_file_t q;
    int rc = rl_proto_model_file_decode(req, &q, err, err_len);
    if (rc) {
        return rc;
    }
    if (!s->receiving) {
        return rl_errf(err, err_len, RL_EPROTO,
                       "model_file: no model transfer is open (this "
                       "sampler has the run's model)");
    }
    char part[PATH_MAX + 32], path[PATH_MAX + 300];
    snprintf(part, sizeof part, "%s/%s.part", s->cache, s->sess_hash);
    if (q.offset == 0) {
        s_close_file(s);
        snprintf(path, sizeof path, "%s/%s", part, q.name);
        s->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (s->fd < 0) {
            return rl_errf(err, err_len, errno, "model_file: %s: %s", q.name, strerror(errno));
        }
        snprintf(s->fname, sizeof s->fname, "%s", q.name);
        s->fpos = 0;
        s->ftotal = q.total;
    } else if (s->fd < 0 || strcmp(s->fname, q.name) || q.offset != s->fpos ||
               q.total != s->ftotal) {
        return rl_errf(err, err_len, RL_EPROTO,
                       "model_file: %s at %lld: not where the "
                       "transfer stands (%s at %lld)",
                       q.name, (long long)q.offset, s->fname, (long long)s->fpos);
    }
    for (int64_t done = 0; done < q.n;) {
        ssize_t w = write(s->fd, q.data + done, (size_t)(q.n - done));
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            int e = errno;
            s_close_file(s);
            return rl_errf(err, err_len, e ? e : RL_EIO, "model_file: %s: %s", q.name, strerror(e));
        }
        done += w;
    }
    s->fpos += q.n;
    if (s->fpos == s->ftotal) {
        int c = fsync(s->fd);
        s_close_file(s);
        if (c != 0) {
            return rl_errf(err, err_len, errno, "model_file: %s: %s", q.name, strerror(errno));
        }
    }
    if (!q.last) {
        return 0;
    }
    if (s->fd >= 0) {
        return rl_errf(err, err_len, RL_EPROTO, "model_file: %s is incomplete (%lld of %lld)",
                       s->fname, (long long)s->fpos, (long long)s->ftotal);
    }
    char got[17];
    if ((rc = s_fingerprint(part, got, err, err_len)) != 0) {
        return rc;
    }
    if (strcmp(got, s->sess_hash) != 0) {
        return rl_errf(err, err_len, RL_EINVAL,
                       "model_file: the folder received has "
                       "fingerprint %s, not the run's %s",
                       got, s->sess_hash);
    }
    snprintf(path, sizeof path, "%s/%s", s->cache, s->sess_hash);
    if (rename(part, path) != 0) {
        return rl_errf(err, err_len, errno, "model_file: %s: %s", path, strerror(errno));
    }
    s->receiving = 0;
    snprintf(s->sess_model, sizeof s->sess_model, "%s", path);
    rl_log_info("the run's model arrived: %s", path);
    return 0;
}

// reqs[0..n) (taken) to sampler workers 0..n-1 and their replies (as rl_group_call); rc: an error
// from building the requests, which frees them and is returned as it is.
static int s_workers_call(s_serve_t *s, int rc, int n, rl_msg_t **reqs, rl_msg_t **reps,
                          double timeout_s, char *err, size_t err_len) {
    const char *peers[64];
    char names[64][32];
    for (int i = 0; i < n; i++) {
        snprintf(names[i], sizeof names[i], "sampler/%d", i);
        peers[i] = names[i];
    }
    if (rc) {
        for (int i = 0; i < n; i++) {
            rl_msg_free(&reqs[i]);
        }
        return rc;
    }
    return rl_group_call(s->grp, n, peers, reqs, reps, timeout_s, NULL, err, err_len);
}

// samplers > 1: the session's sampler workers (rl_group, as a controller starts its own), each
// configured with the run's recipe (model.path: the session's model).
static int s_workers_start(s_serve_t *s, char *err, size_t err_len) {
    rl_group_destroy(&s->grp, 5.0);
    int rc = rl_group_new(s->logs, s->o->heartbeat, 0, &s->grp, err, err_len);
    for (int i = 0; !rc && i < s->o->samplers; i++) {
        rc = rl_group_spawn(s->grp, "sampler", i, s->o->threads, rl_role_sampler()->reaps, err,
                            err_len);
    }
    if (!rc) {
        rc = rl_group_wait_ready(s->grp, 600, err, err_len);
    }
    char *yaml = NULL;
    if (!rc && rl_recipe_to_yaml(s->recipe, &yaml) != 0) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    rl_msg_t *reqs[64] = {0}, *reps[64] = {0};
    int n = s->o->samplers;
    for (int i = 0; !rc && i < n; i++) {
        rl_proto_configure_t q = {yaml, 0, s->o->threads};
        rc = rl_proto_configure_encode(&q, rl_group_next_id(s->grp), &reqs[i], err, err_len);
    }
    free(yaml);
    rc = s_workers_call(s, rc, n, reqs, reps, 600, err, err_len);
    for (int i = 0; i < n; i++) {
        rl_msg_free(&reps[i]);
    }
    if (rc) {
        rl_group_destroy(&s->grp, 5.0);
    } else {
        rl_log_info("%d sampler workers ready (logs in %s)", n, s->logs);
    }
    return rc;
}

// samplers > 1, load_weights: the payload (received once) to every worker, over ipc.
static int s_workers_load(s_serve_t *s, const rl_msg_t *req, rl_msg_t **out, char *err,
                          size_t err_len) {
    rl_proto_load_weights_t q;
    int rc = rl_proto_load_weights_decode(req, &q, err, err_len);
    if (rc) {
        return rc;
    }
    if (s->state && (rc = rl_role_dispatch(s->role, s->state, req, out, err, err_len)) != 0) {
        return rc; // the in-process model (HTTP) first: it checks the sizes
    }
    rl_msg_free(out);
    int n = s->o->samplers;
    rl_msg_t *reqs[64] = {0}, *reps[64] = {0};
    for (int i = 0; !rc && i < n; i++) {
        rc = rl_proto_load_weights_encode(&q, rl_group_next_id(s->grp), &reqs[i], err, err_len);
    }
    rc = s_workers_call(s, rc, n, reqs, reps, 600, err, err_len);
    rl_proto_load_weights_reply_t r = {-1};
    char why[256];
    if (!rc && rl_proto_load_weights_reply_decode(reps[0], &r, why, sizeof why) != 0) {
        rc = rl_errf(err, err_len, RL_EPROTO, "load_weights: %s", why);
    }
    for (int i = 0; i < n; i++) {
        rl_msg_free(&reps[i]);
    }
    return rc ? rc : rl_proto_load_weights_reply_encode(&r, rl_msg_id(req), out, err, err_len);
}

// samplers > 1, generate: contiguous shares of the prompts to the workers (as a controller splits
// a step over its samplers), the replies joined in prompt order.
static int s_workers_generate(s_serve_t *s, const rl_msg_t *req, rl_msg_t **out, char *err,
                              size_t err_len) {
    rl_proto_generate_t q;
    int rc = rl_proto_generate_decode(req, &q, err, err_len);
    if (rc) {
        return rc;
    }
    int P = (int)q.P, n = s->o->samplers < P ? s->o->samplers : P;
    rl_msg_t *reqs[64] = {0}, *reps[64] = {0};
    int64_t off = 0;
    for (int i = 0; !rc && i < n; i++) {
        int p0 = (int)((int64_t)P * i / n), p1 = (int)((int64_t)P * (i + 1) / n);
        int64_t len = 0;
        for (int p = p0; p < p1; p++) {
            len += q.prompt_lens[p];
        }
        rl_proto_generate_t g = q;
        g.prompts = q.prompts + off;
        g.n_prompt_ids = len;
        g.prompt_lens = q.prompt_lens + p0;
        g.prompt_index = q.prompt_index + p0;
        g.P = p1 - p0;
        off += len;
        rc = rl_proto_generate_encode(&g, rl_group_next_id(s->grp), &reqs[i], err, err_len);
    }
    rc = s_workers_call(s, rc, n, reqs, reps, 3600, err, err_len);
    rl_proto_generate_reply_t g[64];
    int64_t n_res = 0, n_ids = 0, prefill = 0, decode = 0;
    for (int i = 0; !rc && i < n; i++) {
        char why[512];
        if (rl_proto_generate_reply_decode(reps[i], &g[i], why, sizeof why) != 0) {
            rc = rl_errf(err, err_len, RL_EPROTO, "generate: sampler/%d: %s", i, why);
        } else {
            n_res += g[i].n_res;
            n_ids += g[i].n_ids;
            prefill += g[i].prefill_tokens;
            decode += g[i].decode_tokens;
        }
    }
    int32_t *lens = rc ? NULL : malloc((size_t)(n_res ? n_res : 1) * sizeof *lens);
    int32_t *ids = rc ? NULL : malloc((size_t)(n_ids ? n_ids : 1) * sizeof *ids);
    float *lp = rc ? NULL : malloc((size_t)(n_ids ? n_ids : 1) * sizeof *lp);
    uint8_t *fin = rc ? NULL : malloc((size_t)(n_res ? n_res : 1));
    if (!rc && (!lens || !ids || !lp || !fin)) {
        rc = rl_errf(err, err_len, RL_ENOMEM, "out of memory");
    }
    int64_t r0 = 0, i0 = 0;
    for (int i = 0; !rc && i < n; i++) {
        memcpy(lens + r0, g[i].lens, (size_t)g[i].n_res * sizeof *lens);
        memcpy(fin + r0, g[i].finish, (size_t)g[i].n_res);
        memcpy(ids + i0, g[i].ids, (size_t)g[i].n_ids * sizeof *ids);
        memcpy(lp + i0, g[i].logprobs, (size_t)g[i].n_ids * sizeof *lp);
        r0 += g[i].n_res;
        i0 += g[i].n_ids;
    }
    if (!rc) {
        rl_proto_generate_reply_t all = {.lens = lens,
                                         .n_res = n_res,
                                         .ids = ids,
                                         .logprobs = lp,
                                         .n_ids = n_ids,
                                         .finish = fin,
                                         .prefill_tokens = prefill,
                                         .decode_tokens = decode};
        rc = rl_proto_generate_reply_encode(&all, rl_msg_id(req), out, err, err_len);
    }
    free(lens);
    free(ids);
    free(lp);
    free(fin);
    for (int i = 0; i < n; i++) {
        rl_msg_free(&reps[i]);
    }
    return rc;
}

// configure: the run's recipe with model.path = our model; files we do not read go unchecked.
static int s_configure(s_serve_t *s, const rl_msg_t *req, char *err, size_t err_len) {
    rl_proto_configure_t q;
    int rc = rl_proto_configure_decode(req, &q, err, err_len);
    if (rc) {
        return rc;
    }
    if (!s->sess_model[0]) {
        return rl_errf(err, err_len, RL_EPROTO,
                       "configure: the run's model has not arrived "
                       "(model_file)");
    }
    if (s->state) {
        s->role->teardown(&s->state);
    }
    rl_recipe_destroy(&s->recipe);
    if (s->o->http) { // the session's model's tokenizer, for HTTP
        rl_tokenizer_destroy(&s->tok);
        if (!(s->tok = rl_tokenizer_new_dir(s->sess_model, err, err_len))) {
            return RL_EINVAL;
        }
    }
    char ov[2 * PATH_MAX + 32];
    size_t k = (size_t)snprintf(ov, sizeof ov, "model.path=\"");
    for (const char *p = s->sess_model; *p && k + 4 < sizeof ov; p++) {
        if (*p == '"' || *p == '\\') {
            ov[k++] = '\\';
        }
        ov[k++] = *p;
    }
    snprintf(ov + k, sizeof ov - k, "\"");
    const char *ovs[1] = {ov};
    rc = rl_recipe_load_string(s->o->algos, q.recipe, q.recipe_len, "<configure>", ovs, 1,
                               RL_RECIPE_NO_FILE_CHECKS, &s->recipe, err, err_len);
    // the in-process model samples with one sampler; with several it serves HTTP only
    if (!rc && (s->o->samplers <= 1 || s->o->http)) {
        rl_role_env_t env = {s->o->threads, NULL, 0};
        rc = s->role->setup(s->recipe, &env, &s->state, err, err_len);
    }
    if (!rc && s->o->samplers > 1) {
        rc = s_workers_start(s, err, err_len);
    }
    return rc;
}

static void s_handle(s_serve_t *s, const rl_msg_t *req, const char *peer) {
    char key[RL_CURVE_Z85_LEN + 1] = "";
    // the ZAP handler admitted this connection; its key must still be allowed now
    if (rl_chan_peer_key(s->chan, key) != 0 || !rl_chan_allowed(s->chan, key)) {
        rl_log_warn("dropped '%s' from a connection whose key (%.8s...) is not on the allowlist",
                    rl_msg_op(req), key);
        return;
    }
    int verb = rl_proto_verb_of(rl_msg_op(req));
    if (verb == RL_PROTO_ATTACH) {
        s_attach(s, req, peer, key);
        return;
    }
    if (!s->active || strcmp(peer, s->peer) != 0 || !rl_proto_session_is(req, s->session)) {
        const char *theirs = NULL;
        rl_msg_get_str(req, "session", &theirs, NULL);
        rl_log_warn("refused '%s' from %s: not the session this sampler serves", rl_msg_op(req),
                    peer);
        s_fail(s, peer, req, theirs,
               s->active ? "not the session this sampler serves (another run's request?)"
                         : "no session: attach first");
        return;
    }
    char err[2048] = "";
    rl_msg_t *out = NULL;
    int rc;
    if (verb == RL_PROTO_SHUTDOWN) {
        rc = rl_proto_ok(rl_msg_id(req), &out);
        if (!rc) {
            s_reply(s, peer, s->session, &out);
        }
        s_end_session(s, "the run is over (shutdown)");
        return;
    }
    if (verb == RL_PROTO_CONFIGURE || verb == RL_PROTO_MODEL_FILE) {
        rc = verb == RL_PROTO_CONFIGURE ? s_configure(s, req, err, sizeof err)
                                        : s_model_file(s, req, err, sizeof err);
        if (!rc) {
            rc = rl_proto_ok(rl_msg_id(req), &out);
        }
    } else {
        if (s->grp && verb == RL_PROTO_LOAD_WEIGHTS) {
            rc = s_workers_load(s, req, &out, err, sizeof err);
        } else if (s->grp && verb == RL_PROTO_GENERATE) {
            rc = s_workers_generate(s, req, &out, err, sizeof err);
        } else {
            rc = rl_role_dispatch(s->role, s->state, req, &out, err, sizeof err);
        }
    }
    if (rc) {
        rl_msg_free(&out);
        rl_log_warn("%s: %s", rl_msg_op(req), err[0] ? err : rl_strerror(rc));
        if (rl_proto_fail(rl_msg_id(req), err[0] ? err : rl_strerror(rc), &out) != 0) {
            return;
        }
    }
    s_reply(s, peer, s->session, &out);
}

// SIGHUP: the allowlist again; a removed key drops every connection (rebind) and ends its
// session.
static void s_reload(s_serve_t *s) {
    char err[1024];
    char(*keys)[RL_CURVE_Z85_LEN + 1] = NULL;
    int n = 0, removed = 0;
    if (rl_curve_load_allow(s->o->allow, &keys, &n, err, sizeof err) != 0) {
        rl_log_error("SIGHUP: %s; keeping the allowlist as it was", err);
        return;
    }
    rl_chan_allow(s->chan, (const char(*)[RL_CURVE_Z85_LEN + 1]) keys, n, &removed);
    free(keys);
    rl_log_info("SIGHUP: allowlist reloaded from %s: %d key%s (%d removed)", s->o->allow, n,
                n == 1 ? "" : "s", removed);
    if (s->active && !rl_chan_allowed(s->chan, s->key)) {
        s_end_session(s, "its key left the allowlist");
    }
    if (removed > 0 && rl_chan_rebind(s->chan, err, sizeof err) != 0) {
        rl_log_error("SIGHUP: cannot bind again: %s", err);
        s_stop = 1;
    }
}

int rl_serve_main(const rl_serve_opts_t *o) {
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = s_on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    s_serve_t s;
    memset(&s, 0, sizeof s);
    s.o = o;
    s.role = rl_role_sampler();
    pthread_mutex_init(&s.mu, NULL);
    char err[2048];
    rl_curve_key_t key;
    char(*keys)[RL_CURVE_Z85_LEN + 1] = NULL;
    int n = 0, rc = rl_curve_load_secret(o->key, &key, err, sizeof err);
    if (!rc) {
        rc = rl_curve_load_allow(o->allow, &keys, &n, err, sizeof err);
    }
    s.fd = -1;
    if (!rc && o->model && !realpath(o->model, s.model)) {
        rc = rl_errf(err, sizeof err, RL_EINVAL, "--model %s: %s", o->model, strerror(errno));
    }
    if (!rc && o->model) {
        rc = s_fingerprint(s.model, s.model_hash, err, sizeof err);
    }
    // without --model: received models go to --cache (kept) or a folder of this process
    if (!rc && !o->model && o->cache) {
        if (mkdir(o->cache, 0700) != 0 && errno != EEXIST) {
            rc = rl_errf(err, sizeof err, errno, "--cache %s: %s", o->cache, strerror(errno));
        } else if (!realpath(o->cache, s.cache)) {
            rc = rl_errf(err, sizeof err, errno, "--cache %s: %s", o->cache, strerror(errno));
        }
    } else if (!rc && !o->model) {
        const char *t = getenv("TMPDIR");
        snprintf(s.cache, sizeof s.cache, "%s/rlctl-models-XXXXXX", t && t[0] ? t : "/tmp");
        if (!mkdtemp(s.cache)) {
            rc = rl_errf(err, sizeof err, errno, "%s: %s", s.cache, strerror(errno));
        }
        s.cache_ours = 1;
    }
    if (!rc) {
        rc =
            rl_chan_bind_curve(o->bind, o->max_frame, &key, o->heartbeat, &s.chan, err, sizeof err);
    }
    memset(&key.sec, 0, sizeof key.sec);
    if (!rc) {
        rl_chan_allow(s.chan, (const char(*)[RL_CURVE_Z85_LEN + 1]) keys, n, NULL);
    }
    free(keys);
    if (rc) {
        rl_log_error("sampler serve: %s", err);
        return 1;
    }
    if (!rc && o->samplers > 1 && o->logs) { // the sampler workers' logs
        snprintf(s.logs, sizeof s.logs, "%s", o->logs);
        if (mkdir(s.logs, 0700) != 0 && errno != EEXIST) {
            rl_log_error("sampler serve: --logs %s: %s", s.logs, strerror(errno));
            rl_chan_close(&s.chan, 0);
            return 1;
        }
    } else if (!rc && o->samplers > 1) {
        const char *t = getenv("TMPDIR");
        snprintf(s.logs, sizeof s.logs, "%s/rlctl-serve-logs-XXXXXX", t && t[0] ? t : "/tmp");
        if (!mkdtemp(s.logs)) {
            rl_log_error("sampler serve: %s: %s", s.logs, strerror(errno));
            rl_chan_close(&s.chan, 0);
            return 1;
        }
    }
    gethostname(s.host, sizeof s.host - 1);
    rl_http_t *http = NULL;
    rl_http_backend_t be = {&s, s_http_acquire, s_http_release, s.http_name, NULL};
    rl_http_opts_t ho = {o->http, o->http_token, o->http_max_work, NULL, NULL};
    if (o->http) {
        const char *base = strrchr(s.model, '/');
        snprintf(s.http_name, sizeof s.http_name, "%.200s",
                 !s.model[0] ? "policy"
                 : base      ? base + 1
                             : s.model);
        s.tok = s.model[0] ? rl_tokenizer_new_dir(s.model, err, sizeof err) : NULL;
        if ((s.model[0] && !s.tok) ||
            rl_http_start(&ho, &be, &http, err, sizeof err) != 0) {
            rl_log_error("sampler serve: %s", err);
            rl_tokenizer_destroy(&s.tok);
            rl_chan_close(&s.chan, 0);
            return 1;
        }
    }
    if (s.model[0]) {
        rl_log_info("sampler serving %s (fingerprint %s), %d allowed key%s, public key %.8s...",
                    s.model, s.model_hash, n, n == 1 ? "" : "s", key.pub);
    } else {
        rl_log_info("sampler serving the runs' own models (received into %s), %d allowed "
                    "key%s, public key %.8s...",
                    s.cache, n, n == 1 ? "" : "s", key.pub);
    }
    printf("listening on %s\n", rl_chan_endpoint(s.chan));
    if (http) {
        printf("http on http://%.*s:%d/v1\n", (int)(strrchr(o->http, ':') - o->http), o->http,
               rl_http_port(http));
    }
    fflush(stdout);
    uint64_t refused_logged = 0;
    while (!s_stop && (o->sessions <= 0 || s.done < o->sessions)) {
        pthread_mutex_lock(&s.mu); // a session may end here: not while HTTP holds its model
        if (s_hup) {
            s_hup = 0;
            s_reload(&s);
        }
        s_events(&s);
        pthread_mutex_unlock(&s.mu);
        uint64_t refused = rl_chan_refused(s.chan);
        if (refused > refused_logged) {
            rl_log_warn("refused %llu handshake%s from keys not on the allowlist (%llu so far)",
                        (unsigned long long)(refused - refused_logged),
                        refused - refused_logged == 1 ? "" : "s", (unsigned long long)refused);
            refused_logged = refused;
        }
        rl_msg_t *req = NULL;
        char peer[256];
        rc = rl_chan_recv(s.chan, 200, &req, peer, sizeof peer, err, sizeof err);
        if (rc == RL_ETIMEOUT) {
            continue;
        }
        if (rc) {
            rl_log_warn("%s", err); // a malformed message: dropped, keep serving
            continue;
        }
        pthread_mutex_lock(&s.mu);
        s_handle(&s, req, peer);
        pthread_mutex_unlock(&s.mu);
        rl_msg_free(&req);
    }
    rl_http_stop(&http); // no request holds the model after this
    s_end_session(&s, s_stop ? "stopped by a signal" : "done");
    rl_chan_close(&s.chan, 2000);
    rl_tokenizer_destroy(&s.tok);
    pthread_mutex_destroy(&s.mu);
    if (s.cache_ours) { // the models this process received
        DIR *d = opendir(s.cache);
        for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                char p[2 * PATH_MAX];
                snprintf(p, sizeof p, "%s/%s", s.cache, e->d_name);
                s_rm_flat(p);
            }
        }
        if (d) {
            closedir(d);
        }
        rmdir(s.cache);
    }
    return 0;
}
