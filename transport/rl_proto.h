// rl_proto — the role protocol's messages as typed structs (docs/protocol.md is the reference
// for the bytes): every verb, its request and its reply fields, with one encode and one decode
// per message. No field name of a message appears outside this module: the controller, the
// algorithms and the workers fill and read these structs. Not the transport (rl_chan), not the
// msgpack codec (rl_wire), not the processes (rl_group).
//
// The protocol is defined once, in rl_proto_def.h: the verbs, each message's fields in wire order
// with their kind, dtype, shape, presence and meaning. This header's verb enum, structs and codec
// prototypes are made from it (a struct rl_proto_<name>_t per message, each field a member of the
// same name: int64_t, double, int (bool), const char *, const char *const * (string list),
// const <dtype> * (tensor), and the size members the definition lists beside them), and so are
// rl_proto.c's field tables and docs/protocol.md's field tables (rl_proto_doc).
//
// train's `loss` names a loss of the registry (trainer/rl_loss.h), which says which of the
// optional inputs it needs: old_logp[B,T]? (the given logπ_old), values[B,T]? returns[B,T]? (a
// critic's), ref_sum[B]? (DPO's reference sums), margin[B]? (a reward model's pair margins, on
// both rows of a pair), and whether rows come in pairs. The reply's statistics are that loss's
// open list: stat_names (k names) and stats (f64 [k]), in its order; the controller merges and
// logs them through the loss's definitions, so no field of this module names them. save, load
// and save_final carry part? ("policy" or "critic": the actor holds the critic with
// roles.critic: actor). A reward model (algorithm rm) is an actor whose policy has a score head:
// values with scores.
//
// A reply is op "reply" with the request's id, `ok` and, when ok is false, `error`; an ok reply
// carries the verb's reply fields. Decoders check every field's presence, type, dtype and rank,
// that tensors sharing a dimension agree (tokens and mask are both [B,T]; a string list's count
// is a dimension too), and each verb's own consistency (prompt_lens add up to at most the
// prompts, lengths within T, ...); they name the verb and the field in err. Absent optional
// fields decode as NULL (strings, tensors; their dimensions 0) or the definition's default
// (scalars). Decoded pointers are views into the message: borrowed; valid until the message is
// freed. Encoders copy every field into the new message; an optional string or tensor that is
// NULL is left out.
#ifndef RL_PROTO_H
#define RL_PROTO_H

#include "rl_loss.h"
#include "rl_proto_def.h"
#include "rl_wire.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RL_PROTO_VERB_ENUM(VERB, op, served_by, answer) RL_PROTO_##VERB,
typedef enum { RL_PROTO_VERBS(RL_PROTO_VERB_ENUM) RL_PROTO_N_VERBS } rl_proto_verb_t;
#undef RL_PROTO_VERB_ENUM

// The op string of a verb ("generate"). borrowed; valid until program exit.
const char *rl_proto_verb_name(rl_proto_verb_t verb);
// The verb of an op string, or -1 when it is none of ours.
int rl_proto_verb_of(const char *op);

// ---- the messages' structs ------------------------------------------------------------------
// One per list of rl_proto_def.h that makes one (own = OWN): rl_proto_hello_t,
// rl_proto_generate_t, rl_proto_generate_reply_t, ... save and load share rl_proto_save_t, their
// replies rl_proto_save_reply_t. The meaning of each member is its field's in rl_proto_def.h.

#define RL_PROTO_MEMBER_INT(S, name, p, doc) int64_t name;
#define RL_PROTO_MEMBER_FLOAT(S, name, p, doc) double name;
#define RL_PROTO_MEMBER_BOOL(S, name, p, doc) int name;
#define RL_PROTO_MEMBER_STR(S, name, p, doc) const char *name;
#define RL_PROTO_MEMBER_STRN(S, name, p, len, doc) const char *name;
#define RL_PROTO_MEMBER_STRS(S, name, p, count, doc) const char *const *name;
#define RL_PROTO_MEMBER_STRSN(S, name, p, lens, count, doc) const char *const *name;
#define RL_PROTO_MEMBER_T1(S, name, p, dt, d0, doc) const RL_PROTO_CTYPE_##dt *name;
#define RL_PROTO_MEMBER_T2(S, name, p, dt, d0, d1, doc) const RL_PROTO_CTYPE_##dt *name;
#define RL_PROTO_MEMBER_DIM(S, name) int64_t name;
#define RL_PROTO_MEMBER_COUNT(S, name) int name;
#define RL_PROTO_MEMBER_LENS(S, name) const size_t *name;
#define RL_PROTO_MEMBER_SIZE(S, name) size_t name;
#define RL_PROTO_CTYPE_F32 float
#define RL_PROTO_CTYPE_F64 double
#define RL_PROTO_CTYPE_I32 int32_t
#define RL_PROTO_CTYPE_I64 int64_t
#define RL_PROTO_CTYPE_U8 uint8_t
#define RL_PROTO_STRUCT_OWN(st, fields)                                                         \
    typedef struct {                                                                           \
        RL_PROTO_F_##fields(RL_PROTO_MEMBER, ~)                                                \
    } rl_proto_##st##_t;
#define RL_PROTO_STRUCT_USE(st, fields)
#define RL_PROTO_STRUCT(name, verb, side, st, fields, own) RL_PROTO_STRUCT_##own(st, fields)

RL_PROTO_MESSAGES(RL_PROTO_STRUCT)

// ---- remote samplers (rlctl sampler serve) ----------------------------------------------------
// A remote sampler serves one run at a time: the controller's `attach` opens a session; every
// later request and every reply carries the session's token in `session` (rl_proto_session_*);
// `shutdown` ends the session, not the process.

// Adds the session token to a message (a request to, or a reply from, a remote sampler).
// Returns 0 or RL_ENOMEM.
int rl_proto_session_set(rl_msg_t *m, const char *session);
// 1 when m carries `session` equal to the given token (compared in constant time).
int rl_proto_session_is(const rl_msg_t *m, const char *session);

// ---- encode and decode ------------------------------------------------------------------------
// Encoders: a new message of the verb's op (a reply: op "reply", ok = true) with id `id` and the
// struct's fields copied in. caller owns *out; free with rl_msg_free. Return 0, or RL_ENOMEM /
// RL_EINVAL (a field the wire cannot hold) with err filled.
// Decoders: the fields of msg into *out (views into msg) after the checks above. Return 0 or
// RL_EPROTO with err naming the verb and the field ("train: missing tensor 'mask'").

#define RL_PROTO_CODEC(name, type)                                                             \
    int rl_proto_##name##_encode(const type *m, uint64_t id, rl_msg_t **out, char *err,         \
                                 size_t err_len);                                              \
    int rl_proto_##name##_decode(const rl_msg_t *msg, type *out, char *err, size_t err_len);

#define RL_PROTO_CODEC_OF(name, verb, side, st, fields, own) RL_PROTO_CODEC(name, rl_proto_##st##_t)
RL_PROTO_MESSAGES(RL_PROTO_CODEC_OF)

// The statistics of a train reply as a list: names and values borrowed from x (valid until its
// message is freed), updates = 1. x holds at most RL_LOSS_MAX_STATS (the decoder's bound).
void rl_proto_train_reply_stats(const rl_proto_train_reply_t *x, rl_loss_stats_t *out);
// The reply's fields of an update's statistics: x->stat_names, n_stats and stats point into st
// (borrowed; valid as long as st).
void rl_proto_train_reply_set_stats(rl_proto_train_reply_t *x, const rl_loss_stats_t *st);

// A request without fields (shutdown, export_weights): caller owns *out; free with rl_msg_free.
// Returns 0 or RL_ENOMEM.
int rl_proto_request(rl_proto_verb_t verb, uint64_t id, rl_msg_t **out);
// The controller's answer to a hello: op "welcome" with the hello's id.
int rl_proto_welcome(uint64_t id, rl_msg_t **out);
// An ok reply without fields (shutdown, save_final, configure).
int rl_proto_ok(uint64_t id, rl_msg_t **out);
// A failed reply: ok = false, error = `error`. Returns 0 or RL_ENOMEM.
int rl_proto_fail(uint64_t id, const char *error, rl_msg_t **out);
// Reads a reply's envelope: *ok, and on failure *error (borrowed; valid until rl_msg_free; "no
// reason given" when absent). Returns 0, or RL_EPROTO when msg is not a reply with a bool ok.
int rl_proto_reply_status(const rl_msg_t *msg, int *ok, const char **error);

// ---- the doc's tables -------------------------------------------------------------------------
// Writes the markdown table `name` of docs/protocol.md as rl_proto_def.h makes it (a header row,
// then one line a row, each ending in '\n'): "verbs", the summary (verb, served by, request and
// reply fields, `?` after an optional one), or a message's name ("generate", "generate_reply"):
// its fields in wire order with type, presence and meaning. Returns 0, RL_ENOTFOUND for a name
// that is neither, RL_EINVAL when a message's verb is not in the definition's verb list (the
// summary could not show it), or RL_EIO when writing to out fails.
int rl_proto_doc(FILE *out, const char *name);
// The names rl_proto_doc knows, i = 0, 1, ...: "verbs", then every message in the definition's
// order; NULL past the last. borrowed; valid until program exit.
const char *rl_proto_doc_name(int i);

#ifdef __cplusplus
}
#endif
#endif
