// rl_head — the scalar head of a critic (PPO value model) or reward model: a Linear hidden -> 1
// without bias on the decoder's final norm output (rl_model_hidden), HF's `score.weight` [1, C]
// of `<Arch>ForSequenceClassification` (num_labels 1; REFERENCE.md §1 "Reward model", "PPO
// with a critic"). Pure functions, forward and backward (STYLE.md §6 argument order); the
// weight w (C) and its gradient belong to the caller. This module is not the decoder (rl_model
// runs it and its backward from dhidden), not a loss (value loss, Bradley-Terry) and does no
// I/O.
//
// Layout: hidden (B*T, C) row-major, row b*T + t = position t of sequence b; tokens right
// padded, lengths[b] in [1, T] real tokens at positions 0..lengths[b]-1 (rl_model_forward's).
//
// Two readings of the same per-position score w . hidden[b,t]:
//   values (critic), aligned like rl_model_forward's logp: v[b,t] = w . hidden[b, t-1] for
//     1 <= t < lengths[b], 0 elsewhere. Column t is the value of the state *before* token t is
//     generated, the state in which logp[b,t] was sampled, so advantages, returns and logp line
//     up column by column. This is TRL's PPO alignment, values = full_value[:, context_length
//     - 1 : -1]: the value of response token i is read at the position that precedes it. The
//     state after the last token (row lengths[b]-1) has no value column (GAE's V_{T+1} = 0).
//   score (reward model): s[b] = w . hidden[b, lengths[b]-1], the last real token, as HF's
//     sequence classifier pools at the last non-padding token.
//
// Precision: every dot product w . hidden accumulates in double and rounds once to float;
// dw sums its B*T terms in double per element before the one float add into dw; dhidden = dv *
// w is one float product per element (exact to 0.5 ulp), so it needs no wider type.
#ifndef RL_HEAD_H
#define RL_HEAD_H

#ifdef __cplusplus
extern "C" {
#endif

// v (B,T) = the values above (writes every element: 0 at t = 0 and at padding).
// hidden (B*T,C), w (C), lengths (B).
void rl_head_values_forward(float *v, const float *hidden, const float *w, const int *lengths,
                            int B, int T, int C);
// Backward of rl_head_values_forward for dv (B,T) = dL/dv (read only at 1 <= t < lengths[b]):
// dhidden (B*T,C) is SET: row b*T+t-1 = dv[b,t] * w for 1 <= t < lengths[b], every other row 0
// (the last real row and padding included). dw (C) ACCUMULATES (+=) sum_bt dv[b,t] *
// hidden[b,t-1]. dhidden or dw NULL skips that gradient.
void rl_head_values_backward(float *dhidden, float *dw, const float *dv, const float *hidden,
                             const float *w, const int *lengths, int B, int T, int C);

// s (B): s[b] = w . hidden[b, lengths[b]-1].
void rl_head_score_forward(float *s, const float *hidden, const float *w, const int *lengths, int B,
                           int T, int C);
// Backward of rl_head_score_forward for ds (B) = dL/ds: dhidden (B*T,C) is SET: row
// b*T + lengths[b]-1 = ds[b] * w, every other row 0. dw (C) ACCUMULATES (+=) sum_b ds[b] *
// hidden[b, lengths[b]-1]. dhidden or dw NULL skips that gradient.
void rl_head_score_backward(float *dhidden, float *dw, const float *ds, const float *hidden,
                            const float *w, const int *lengths, int B, int T, int C);

#ifdef __cplusplus
}
#endif
#endif
