# libFuzzer on what command and http rewards read from another program: the JSON reply decoder
# and the HTTP/1.1 reply parser (rewards/rl_reward_json, rl_reward_http); the input's first two
# bytes pick the decoder, the form, the item count and the piece size (see fuzz_reward_reply.c).
# Seeds in fuzz/corpus/reward_reply/ (hand-written: replies of both forms, Python's NaN and
# Infinity, an error reply, HTTP replies by Content-Length, chunks and the close, a 100 Continue).
rl_add_fuzz(reward_reply fuzz_reward_reply.c rl_rewards)
