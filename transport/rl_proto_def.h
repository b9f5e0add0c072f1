// rl_proto_def — the role protocol defined once (CZMQ's zproto habit, as X-macros): every verb,
// every message and each message's fields in wire order, with a one-line meaning. Everything else
// is made from these lists: rl_proto.h's verb enum, structs and codec prototypes, rl_proto.c's
// field tables (one table-driven encoder and decoder), and the field tables of docs/protocol.md
// (rl_proto_doc; the suite roles.proto_doc fails when the doc and these lists disagree). Not the
// C API's manual for the calls (rl_proto.h) and not the bytes of values (docs/protocol.md).
//
// RL_PROTO_VERBS(V): V(VERB, op, served_by, answer) — RL_PROTO_<VERB>, its op string, who serves
//   it, and what answers it when it has no reply message (NULL when it has one).
// RL_PROTO_MESSAGES(M): M(name, verb, side, st, fields, own) — rl_proto_<name>_encode/_decode on
//   rl_proto_<st>_t; side REQUEST (op = the verb) or REPLY (op "reply", with ok = true); fields
//   names the list RL_PROTO_F_<fields>; own is OWN when this message's list makes the struct,
//   USE when it shares one that another list makes (save sends load's struct but for
//   model_train_step; load's reply is save's).
// RL_PROTO_F_<list>(X, S): the fields, in the order they go on the wire. Each entry is
//   X##_KIND(S, ...), S the struct type (for offsetof); the wire kinds and their arguments:
//     INT, FLOAT, BOOL, STR (name, presence, meaning)   int64_t, double, int, const char *
//     STRN (name, presence, len, meaning)               a string whose length is in `len`
//     STRS (name, presence, count, meaning)             a string list of `count` strings
//     STRSN (name, presence, lens, count, meaning)      and their lengths in `lens` (size_t
//                                                       each; NULL to encode NUL-terminated ones)
//     T1 (name, presence, DTYPE, d0, meaning)           a tensor [d0] of DTYPE (F32 F64 I32 I64 U8)
//     T2 (name, presence, DTYPE, d0, d1, meaning)       a tensor [d0,d1]
//   presence: REQ (required), OPT (optional: absent = NULL), DEF(v) (optional scalar: absent = v).
//   Tensors that name the same dimension must agree; the struct members that only hold sizes:
//     DIM (name)    int64_t, a tensor dimension (absent optional tensors leave it 0)
//     COUNT (name)  int, a string list's count (also a dimension: train reply's stats [n_stats])
//     LENS (name)   const size_t *, a string list's lengths
//     SIZE (name)   size_t, a STRN's length (0 on encode: strlen)
//   An entry's place in its list is also its member's place in the struct: callers initialize
//   some structs by position, so the size members sit where they always have.
#ifndef RL_PROTO_DEF_H
#define RL_PROTO_DEF_H

// clang-format off

#define RL_PROTO_VERBS(V)                                                                      \
    V(HELLO, hello, "(sent by every worker)", "`welcome` (no fields)")                        \
    V(HB, hb, "(sent by every worker)", "none")                                                \
    V(CONFIGURE, configure, "every worker", "—")                                               \
    V(SHUTDOWN, shutdown, "every worker", "—")                                                 \
    V(LOAD_WEIGHTS, load_weights, "sampler", NULL)                                             \
    V(GENERATE, generate, "sampler", NULL)                                                     \
    V(LOGPROBS, logprobs, "actor, reference", NULL)                                            \
    V(TRAIN, train, "actor, critic", NULL)                                                     \
    V(EXPORT_WEIGHTS, export_weights, "actor", NULL)                                           \
    V(PUBLISH_WEIGHTS, publish_weights, "actor (on a GPU)", NULL)                              \
    V(SAVE, save, "actor, critic", NULL)                                                       \
    V(LOAD, load, "actor, critic", NULL)                                                       \
    V(SAVE_FINAL, save_final, "actor, critic", "—")                                            \
    V(SCORE, score, "reward", NULL)                                                            \
    V(VALUES, values, "critic (or the actor holding it; the actor of a reward model)", NULL)   \
    V(ATTACH, attach, "remote sampler", NULL)                                                  \
    V(MODEL_FILE, model_file, "remote sampler (that needs the model)", "—")

#define RL_PROTO_MESSAGES(M)                                                                   \
    M(hello, hello, REQUEST, hello, hello, OWN)                                                \
    M(hb, hb, REQUEST, hb, hb, OWN)                                                            \
    M(configure, configure, REQUEST, configure, configure, OWN)                                \
    M(load_weights, load_weights, REQUEST, load_weights, load_weights, OWN)                    \
    M(load_weights_reply, load_weights, REPLY, load_weights_reply, load_weights_reply, OWN)    \
    M(generate, generate, REQUEST, generate, generate, OWN)                                    \
    M(generate_reply, generate, REPLY, generate_reply, generate_reply, OWN)                    \
    M(logprobs, logprobs, REQUEST, logprobs, logprobs, OWN)                                    \
    M(logprobs_reply, logprobs, REPLY, logprobs_reply, logprobs_reply, OWN)                    \
    M(train, train, REQUEST, train, train, OWN)                                                \
    M(train_reply, train, REPLY, train_reply, train_reply, OWN)                                \
    M(export_weights_reply, export_weights, REPLY, export_weights_reply,                       \
      export_weights_reply, OWN)                                                               \
    M(publish_weights_reply, publish_weights, REPLY, publish_weights_reply,                    \
      publish_weights_reply, OWN)                                                              \
    M(save, save, REQUEST, save, save, USE)                                                    \
    M(save_reply, save, REPLY, save_reply, save_reply, OWN)                                    \
    M(load, load, REQUEST, save, load, OWN)                                                    \
    M(load_reply, load, REPLY, save_reply, save_reply, USE)                                    \
    M(save_final, save_final, REQUEST, save_final, save_final, OWN)                            \
    M(score, score, REQUEST, score, score, OWN)                                                \
    M(score_reply, score, REPLY, score_reply, score_reply, OWN)                                \
    M(values, values, REQUEST, values, values, OWN)                                            \
    M(values_reply, values, REPLY, values_reply, values_reply, OWN)                            \
    M(attach, attach, REQUEST, attach, attach, OWN)                                            \
    M(attach_reply, attach, REPLY, attach_reply, attach_reply, OWN)                            \
    M(model_file, model_file, REQUEST, model_file, model_file, OWN)

// ---- hello, hb, configure ---------------------------------------------------------------------

#define RL_PROTO_F_hello(X, S)                                                                 \
    X##_STR(S, role, REQ, "`\"actor\"`, `\"sampler\"`, `\"reward\"`, `\"reference\"`, "        \
            "`\"critic\"`")                                                                    \
    X##_INT(S, rank, REQ, "the rank within the role")                                          \
    X##_INT(S, pid, REQ, "the worker's process id")                                            \
    X##_STR(S, token, REQ, "the run's token from the worker's secret (empty from a rank "      \
            "across hosts)")                                                                   \
    X##_STRS(S, caps, REQ, n_caps, "the verbs it serves: its role's verb table "               \
             "(roles/rl_role_*.c) and `shutdown`")                                             \
    X##_COUNT(S, n_caps)                                                                       \
    X##_STR(S, error, OPT, "set when the worker cannot serve at all (an unknown role, a "      \
            "failed setup)")                                                                   \
    X##_STR(S, host, OPT, "its host name: a rank of a mesh across hosts, which the "           \
            "placement prints")

#define RL_PROTO_F_hb(X, S)                                                                    \
    X##_STR(S, token, REQ, "the run's token, as in `hello`")

#define RL_PROTO_F_configure(X, S)                                                             \
    X##_STRN(S, recipe, REQ, recipe_len, "the resolved recipe as YAML (what `rlctl validate` " \
             "prints: every key, absolute paths)")                                             \
    X##_SIZE(S, recipe_len)                                                                    \
    X##_INT(S, threads, REQ, "the worker's compute threads (0 = every core)")

// ---- remote samplers (rlctl sampler serve) ----------------------------------------------------

#define RL_PROTO_F_attach(X, S)                                                                \
    X##_STR(S, session, REQ, "the run's session token: 64 hex digits from `getrandom` "        \
            "(never the local workers' token)")                                                \
    X##_STR(S, model_hash, REQ, "the fingerprint of the run's `model.path` "                   \
            "(`rl_refcache_hash_model`, 16 hex digits; below)")                                \
    X##_STR(S, run, REQ, "a label for the sampler's log: `run <run.name> of <host> (pid N)`")

#define RL_PROTO_F_attach_reply(X, S)                                                          \
    X##_STR(S, session, REQ, "the request's token")                                            \
    X##_INT(S, pid, REQ, "the sampler's process id")                                           \
    X##_STR(S, host, REQ, "its host name")                                                     \
    X##_INT(S, threads, REQ, "its compute threads (0 = every core)")                           \
    X##_BOOL(S, needs_model, DEF(0), "the sampler was started without `--model` and has no "   \
             "copy of this fingerprint: the controller sends the folder with `model_file` "    \
             "before `configure`")

#define RL_PROTO_F_model_file(X, S)                                                            \
    X##_STR(S, name, REQ, "a plain file name of the model folder's top level (no `/`, not "    \
            "starting with `.`, 1..255 printable bytes)")                                      \
    X##_INT(S, offset, REQ, "where `data` starts in the file")                                 \
    X##_INT(S, total, REQ, "the file's size")                                                  \
    X##_T1(S, data, REQ, U8, n, "up to 64 MiB of it (an extra frame when large)")              \
    X##_DIM(S, n)                                                                              \
    X##_BOOL(S, last, DEF(0), "the transfer's final message: the sampler then checks the "     \
             "folder's fingerprint against `model_hash`")

// ---- sampler ----------------------------------------------------------------------------------

#define RL_PROTO_F_load_weights(X, S)                                                          \
    X##_INT(S, version, REQ, "the policy version these weights are")                           \
    X##_STR(S, kind, REQ, "`\"lora\"` (every A and B, rl_lora.h's flat layout) or `\"full\"` " \
            "(every parameter); informational: the sampler does not read it")                  \
    X##_T1(S, weights, REQ, F32, n, "`rl_policy_weights`' flat array (an extra frame when "    \
           "large), or one bucket of it")                                                      \
    X##_DIM(S, n)                                                                              \
    X##_INT(S, offset, DEF(0), "where this bucket starts in the flat array")                   \
    X##_INT(S, total, DEF(-1), "the flat array's size (-1 or 0: n); the version is held once " \
            "the bucket that ends at `total` has landed (below)")                              \
    X##_T1(S, ipc, OPT, U8, n_ipc, "instead of `weights` (then empty): the handle "            \
           "`publish_weights` gave (64 bytes); a sampler on a GPU of the actor's machine "      \
           "copies the actor's device array over its own, device to device (CUDA IPC)")        \
    X##_DIM(S, n_ipc)                                                                          \
    X##_T1(S, ipc_array, OPT, I64, n_ipc_array, "with `ipc`: `publish_weights`' `layout` and " \
           "`floats`, in that order (2 values)")                                               \
    X##_DIM(S, n_ipc_array)

#define RL_PROTO_F_load_weights_reply(X, S)                                                    \
    X##_INT(S, version, REQ, "the version now held (-1 while a bucketed load is incomplete)")

#define RL_PROTO_F_generate(X, S)                                                              \
    X##_INT(S, version, REQ, "the policy version to sample with; must be the one held")        \
    X##_T1(S, prompts, REQ, I32, n_prompt_ids, "every prompt's token ids, concatenated")       \
    X##_DIM(S, n_prompt_ids)                                                                   \
    X##_T1(S, prompt_lens, REQ, I32, P, "their lengths, each ≥ 1 (sum ≤ `n_prompt_ids`)")      \
    X##_T1(S, prompt_index, REQ, I64, P, "each prompt's RNG identity (its row in the "         \
           "dataset), so a prompt's samples do not depend on how prompts are split across "    \
           "samplers")                                                                         \
    X##_T1(S, sessions, OPT, I64, P, "an episode's turns: each prompt's session key (0: "     \
           "none); sample s is kept under key + s, and a prompt whose key holds a kept "      \
           "sequence that begins it prefills only the rest")                                   \
    X##_DIM(S, P)                                                                              \
    X##_INT(S, n, REQ, "completions per prompt, 1..4096")                                      \
    X##_INT(S, max_new_tokens, REQ, "1..1,048,576")                                            \
    X##_FLOAT(S, temperature, REQ, "0 = greedy")                                               \
    X##_FLOAT(S, top_p, REQ, "1 = off (the controller sends 1 when greedy)")                   \
    X##_INT(S, top_k, REQ, "0 = off (the controller sends 0 when greedy)")                     \
    X##_INT(S, seed, REQ, "the sampling seed of this call (non-negative)")                     \
    X##_T1(S, stop_ids, OPT, I32, n_stop, "more token ids that end a completion, besides the " \
           "model config's eos ids")                                                           \
    X##_DIM(S, n_stop)

#define RL_PROTO_F_generate_reply(X, S)                                                        \
    X##_T1(S, lens, REQ, I32, n_res, "completion lengths, prompt-major: P·n of them (prompt "  \
           "p's samples at p*n .. p*n+n-1)")                                                   \
    X##_DIM(S, n_res)                                                                          \
    X##_T1(S, ids, REQ, I32, n_ids, "the completions' token ids, concatenated in that order "   \
           "(`n_ids` = the sum of `lens`); a stop token, when one ended the completion, is "   \
           "its last id")                                                                      \
    X##_T1(S, logprobs, REQ, F32, n_ids, "the sampler's logprob of each generated token "      \
           "(DESIGN.md §4)")                                                                   \
    X##_DIM(S, n_ids)                                                                          \
    X##_T1(S, finish, REQ, U8, n_res, "0 = a stop id ended it, 1 = max_new_tokens")            \
    X##_INT(S, prefill_tokens, REQ, "prompt tokens prefilled by this call")                    \
    X##_INT(S, decode_tokens, REQ, "tokens decoded by this call")

// ---- actor and reference ----------------------------------------------------------------------

#define RL_PROTO_F_logprobs(X, S)                                                              \
    X##_T2(S, tokens, REQ, I32, B, T, "B rows of T tokens, right-padded")                      \
    X##_T1(S, lengths, REQ, I32, B, "each row's real length, 1..T")                            \
    X##_DIM(S, B)                                                                              \
    X##_DIM(S, T)                                                                              \
    X##_BOOL(S, adapter, DEF(1), "the policy; false: the reference (LoRA: the actor with "     \
             "adapters disabled; full tuning: a frozen copy of `model.path`, loaded on first "  \
             "use)")                                                                           \
    X##_FLOAT(S, temperature, REQ, "logprobs of logits / temperature (GRPO: "                  \
              "`sampling.temperature`; SFT's eval loss: 1)")

#define RL_PROTO_F_logprobs_reply(X, S)                                                        \
    X##_T2(S, logp, REQ, F32, B, T, "column t scores token t (rl_model_forward's layout; "     \
           "column 0 is 0)")                                                                   \
    X##_DIM(S, B)                                                                              \
    X##_DIM(S, T)

#define RL_PROTO_F_train(X, S)                                                                 \
    X##_STR(S, loss, REQ, "a loss of the registry (`trainer/rl_loss.h`; table below): what "   \
            "it trains, which of the optional fields it needs, whether rows come in pairs")    \
    X##_INT(S, step, DEF(0), "the training step (names the step in SFT's loss errors)")        \
    X##_FLOAT(S, lr, REQ, "the learning rate for this step")                                   \
    X##_FLOAT(S, temperature, REQ, "the forward's: `sampling.temperature` for GRPO, 1 for "    \
              "SFT")                                                                           \
    X##_T2(S, tokens, REQ, I32, B, T, "B rows of T tokens, right-padded")                      \
    X##_T1(S, lengths, REQ, I32, B, "each row's real length, 1..T")                            \
    X##_T2(S, mask, REQ, U8, B, T, "1 on the tokens the loss looks at")                        \
    X##_T1(S, adv, OPT, F64, B, "sequence advantages (`grpo` needs this or `token_adv`; not "  \
           "sent for `sft`)")                                                                  \
    X##_T2(S, token_adv, OPT, F32, B, T, "per-token advantages (PPO's GAE form); each token "  \
           "then uses its own in place of its row's")                                          \
    X##_T2(S, mu_logp, OPT, F32, B, T, "the sampler's logprobs, logprob-aligned (for TIS and " \
           "the gap); the controller always sends it")                                         \
    X##_T2(S, ref_logp, OPT, F32, B, T, "reference logprobs; the controller sends them when "  \
           "`algorithm.beta` > 0")                                                             \
    X##_T2(S, old_logp, OPT, F32, B, T, "`ppo`: the rollout policy's logprobs, logπ_old of "   \
           "every pass (the reply echoes them)")                                               \
    X##_T2(S, values, OPT, F32, B, T, "`value`: the critic's values at rollout time (the "     \
           "clip's centre)")                                                                   \
    X##_T2(S, returns, OPT, F32, B, T, "`value`: GAE's returns, the value loss's targets")      \
    X##_T1(S, ref_sum, OPT, F64, B, "`dpo`: the reference's summed completion logprobs of "    \
           "each row (rows in pairs: chosen, rejected)")                                       \
    X##_T1(S, margin, OPT, F64, B, "`rm`: each pair's margin (TRL's column), on both of its "  \
           "rows")                                                                             \
    X##_DIM(S, B)                                                                              \
    X##_DIM(S, T)                                                                              \
    X##_FLOAT(S, denom, REQ, "the loss aggregation's divisor for the whole global batch "      \
              "(`rl_grpo_batch_t.denom`; SFT: the step's loss tokens)")                        \
    X##_INT(S, micro_batch, REQ, "sequences per forward/backward (values below 1 mean 1)")     \
    X##_INT(S, iterations, REQ, "updates over the batch, `algorithm.num_iterations` (values "  \
            "below 1 mean 1; SFT: 1)")                                                         \
    X##_BOOL(S, want_weights, DEF(1), "the reply carries the updated weights (SFT sends "      \
             "false)")

#define RL_PROTO_F_train_reply(X, S)                                                           \
    X##_T2(S, old_logp, REQ, F32, B, T, "the first iteration's logprobs (logπ_old); zeros "    \
           "for a loss without one")                                                           \
    X##_DIM(S, B)                                                                              \
    X##_DIM(S, T)                                                                              \
    X##_STRSN(S, stat_names, REQ, stat_lens, n_stats, "the loss's statistics, in its order: "   \
             "at most 32 names, each 1..48 bytes of `[a-z0-9_]`, none twice")                  \
    X##_LENS(S, stat_lens)                                                                     \
    X##_COUNT(S, n_stats)                                                                      \
    X##_T1(S, stats, REQ, F64, n_stats, "their values")                                        \
    X##_INT(S, iterations, REQ, "the iterations run")                                          \
    X##_T1(S, weights, OPT, F32, n, "unless `want_weights` is false: the trainable weights "   \
           "after the update, as `export_weights` gives them: the controller syncs the "       \
           "samplers from this reply without another round trip")                              \
    X##_DIM(S, n)

#define RL_PROTO_F_export_weights_reply(X, S)                                                  \
    X##_STR(S, kind, REQ, "`\"lora\"` or `\"full\"`")                                          \
    X##_T1(S, weights, REQ, F32, n, "the trainable weights, as `load_weights` takes them")     \
    X##_DIM(S, n)

#define RL_PROTO_F_publish_weights_reply(X, S)                                                 \
    X##_T1(S, handle, REQ, U8, n_handle, "the CUDA IPC handle (64 bytes: cudaIpcMemHandle_t) "  \
           "of the device array of the actor's trainable parameters, current when it "         \
           "replies; the array stays at its address for the actor's life")                     \
    X##_DIM(S, n_handle)                                                                       \
    X##_INT(S, layout, REQ, "a fingerprint of the array's layout (its tensors' offsets and "   \
            "sizes; a sampler laid out otherwise refuses the load)")                           \
    X##_INT(S, floats, REQ, "the array's floats (its tensors with the gaps between them)")

// save and load: one struct, load's list (save sends no model_train_step)
#define RL_PROTO_F_save(X, S)                                                                  \
    X##_STR(S, dir, REQ, "the folder to write: `checkpoints/step-<N>.tmp`")                    \
    X##_STR(S, part, OPT, "`\"policy\"` (the default) or `\"critic\"`: which model of a "      \
            "worker that holds both")

#define RL_PROTO_F_load(X, S)                                                                  \
    X##_STR(S, dir, REQ, "the checkpoint folder to restore")                                   \
    X##_INT(S, model_train_step, DEF(0), "the model's count of training forwards to restore "  \
            "(it seeds the LoRA dropout masks)")                                               \
    X##_STR(S, part, OPT, "`\"policy\"` (the default) or `\"critic\"`, as `save`'s")

#define RL_PROTO_F_save_reply(X, S)                                                            \
    X##_INT(S, model_train_step, REQ, "the model's count of training forwards")                \
    X##_INT(S, n_trainable, REQ, "the size of its trainable flat view (kept in state.json)")

#define RL_PROTO_F_save_final(X, S)                                                            \
    X##_STR(S, dir, REQ, "the folder to write: `final.tmp`")                                   \
    X##_BOOL(S, bf16, DEF(0), "full tuning: write BF16 (else F32)")                            \
    X##_STR(S, part, OPT, "`\"policy\"` (the default) or `\"critic\"`, as `save`'s")           \
    X##_INT(S, pad_token_id, DEF(-1), "a model with a head: the pad id its "                   \
            "sequence-classification config.json names (-1: null)")

// ---- critic -----------------------------------------------------------------------------------

#define RL_PROTO_F_values(X, S)                                                                \
    X##_T2(S, tokens, REQ, I32, B, T, "B rows of T tokens, right-padded")                      \
    X##_T1(S, lengths, REQ, I32, B, "each row's real length, 1..T")                            \
    X##_DIM(S, B)                                                                              \
    X##_DIM(S, T)                                                                              \
    X##_BOOL(S, scores, DEF(0), "each row's score instead (the head at its last real token): " \
             "the reply's `values` is [B,1]")

#define RL_PROTO_F_values_reply(X, S)                                                          \
    X##_T2(S, values, REQ, F32, B, T, "column t: the value of the state before token t; 0 at " \
           "column 0 and at padding (with `scores`: T = 1, each row's score)")                 \
    X##_DIM(S, B)                                                                              \
    X##_DIM(S, T)

// ---- reward -----------------------------------------------------------------------------------

#define RL_PROTO_F_score(X, S)                                                                 \
    X##_INT(S, reward, REQ, "index into the recipe's `rewards` list")                          \
    X##_STRSN(S, prompts, REQ, prompt_lens, n, "the prompt texts")                              \
    X##_STRSN(S, completions, REQ, completion_lens, n, "the completion texts (without the "     \
             "stop token's text)")                                                             \
    X##_STRSN(S, rows, REQ, row_lens, n, "the dataset rows, as JSON text")                      \
    X##_LENS(S, prompt_lens)                                                                   \
    X##_LENS(S, completion_lens)                                                               \
    X##_LENS(S, row_lens)                                                                      \
    X##_COUNT(S, n)                                                                            \
    X##_T1(S, ids, REQ, I32, n_ids, "every completion's token ids, concatenated (the stop "    \
           "token included)")                                                                  \
    X##_DIM(S, n_ids)                                                                          \
    X##_T1(S, lens, REQ, I32, n, "their lengths")

#define RL_PROTO_F_score_reply(X, S)                                                           \
    X##_T1(S, scores, REQ, F64, n, "one score per completion; NaN = unscorable")               \
    X##_DIM(S, n)

// clang-format on

#endif
