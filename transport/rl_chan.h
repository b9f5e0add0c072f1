// rl_chan — ZeroMQ transport of rl_wire messages. The controller binds one ROUTER; each worker
// connects one DEALER whose routing identity is "<role>/<rank>" (e.g. "sampler/1"), so the
// controller addresses a worker by that name and a role as the group of its ranks. Large
// tensors travel as zero-copy frames: sent from the tensor's own storage, and on receipt a frame
// aligned for its dtype becomes the tensor's storage (rl_msg_decode_owned) instead of a copy.
// A frame sequence that does not decode is dropped and reported (RL_EPROTO with the peer's
// name); it never ends the receiving process. One rl_chan per thread (ZeroMQ sockets are not
// thread-safe); each chan owns its own ZeroMQ context.
#ifndef RL_CHAN_H
#define RL_CHAN_H

#include "rl_curve.h"
#include "rl_wire.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct rl_chan rl_chan_t;

#define RL_CHAN_RCV_HWM 16 // messages queued per peer before ZeroMQ stops reading from it

// ROUTER bound at endpoint ("ipc:///path", "tcp://127.0.0.1:0"; a tcp port 0 picks a free one:
// see rl_chan_endpoint). max_frame: the largest frame in bytes a peer may send (0 means
// RL_WIRE_MAX_BYTES); a peer that sends a larger one loses its connection (ZMQ_MAXMSGSIZE), so
// it cannot make us allocate more. The receive queue holds a few messages per peer
// (RL_CHAN_RCV_HWM): a fast sender waits instead of filling our memory. On ipc:// only
// processes of our effective uid may connect (ZMQ_IPC_FILTER_UID, where libzmq has it; callers
// also bind in a folder only we can enter). A DEALER connecting under an identity already in
// use is ignored (no ZMQ_ROUTER_HANDOVER): the first connection keeps the name, so no later
// connection can take a worker's messages. caller owns *out; free with rl_chan_close. Returns
// 0, RL_EINVAL or a positive errno (err says which endpoint and why).
int rl_chan_bind(const char *endpoint, int64_t max_frame, rl_chan_t **out, char *err,
                 size_t err_len);
// DEALER with routing identity `identity` (1..255 bytes, printable: "<role>/<rank>..."),
// connected to endpoint; max_frame as for rl_chan_bind. Connecting succeeds before the peer
// exists; ZeroMQ reconnects by itself.
int rl_chan_connect(const char *endpoint, const char *identity, int64_t max_frame,
                    rl_chan_t **out, char *err, size_t err_len);
// Closes the socket (linger 0 unless messages are still queued: up to linger_ms; -1 waits until
// they are sent) and the context. Never call it in a forked child on a parent's chan.
void rl_chan_close(rl_chan_t **self_p, int linger_ms);
// The endpoint actually bound (tcp port resolved). borrowed; valid until close.
const char *rl_chan_endpoint(const rl_chan_t *self);

// Sends *msg_p and frees it (sets *msg_p to NULL, also on failure). `peer` is the identity to
// route to on a ROUTER; NULL on a DEALER. A ROUTER send to an unknown peer fails with
// RL_ENOTFOUND (ZMQ_ROUTER_MANDATORY) instead of dropping the message. Returns 0 or an error.
int rl_chan_send(rl_chan_t *self, const char *peer, rl_msg_t **msg_p, char *err,
                 size_t err_len);

// Waits up to timeout_ms (-1 = forever, 0 = poll) for one message. On success sets *out
// (caller owns; rl_msg_free) and, on a ROUTER, copies the sender's identity into peer
// (peer_len bytes, NUL-terminated, 256 holds any; may be NULL on a DEALER; a binary identity,
// which none of ours is, comes as "0x<hex>"). Returns 0, RL_ETIMEOUT,
// RL_EPROTO/RL_EVERSION (a message that did not decode: dropped, err names the peer and why;
// peer is filled then too, so the controller can answer a wrong version) or another error.
int rl_chan_recv(rl_chan_t *self, int timeout_ms, rl_msg_t **out, char *peer, size_t peer_len,
                 char *err, size_t err_len);

// The kernel's credentials of the process that sent the message rl_chan_recv last returned
// (SO_PEERCRED, taken when its connection was made; ipc:// only). Returns 0 with *pid and *uid
// set, or RL_ENOTFOUND (no message yet, a message that did not decode, or a transport without
// credentials such as tcp://).
int rl_chan_peer_cred(const rl_chan_t *self, int64_t *pid, int64_t *uid);

// A background thread with its own DEALER and context (identity "<identity>#hb") that sends
// {op: "hb", id: 1, 2, ..., token} at once and then every period_s seconds until stopped, so a
// worker busy in a long computation still shows it is alive. token (may be NULL: none) is the
// run's secret, which the controller checks on every beat as on the hello. A beat that cannot
// be queued (controller gone) is dropped, never blocks. caller owns *out; stop and free with
// rl_chan_heartbeat_stop.
typedef struct rl_heartbeat rl_heartbeat_t;
int rl_chan_heartbeat_start(const char *endpoint, const char *identity, const char *token,
                            double period_s, rl_heartbeat_t **out, char *err, size_t err_len);
// The same over tcp:// as a CURVE client (rl_chan_connect_curve: the key pair `client`,
// trusting only server_pub): a rank of a mesh on another host, which the controller admits by
// its key, not by a token.
int rl_chan_heartbeat_start_curve(const char *endpoint, const char *identity,
                                  const rl_curve_key_t *client, const char *server_pub,
                                  double period_s, rl_heartbeat_t **out, char *err, size_t err_len);
void rl_chan_heartbeat_stop(rl_heartbeat_t **self_p);

// ---- CURVE over tcp:// (remote samplers; docs/protocol.md, "Remote samplers") ----------------
//
// A remote sampler binds a ROUTER as a CURVE server; the controller connects a DEALER as a
// CURVE client that knows the server's public key. Every byte after the handshake is encrypted
// and authenticated. Only clients whose public key is on the server's allowlist complete the
// handshake (a ZAP handler thread in the chan's context answers ZeroMQ for each one); a
// plaintext (NULL mechanism) peer, or a client that expects another server key, never does. Both
// sides send ZMTP heartbeats every heartbeat_s seconds from libzmq's I/O thread (answered even
// while our thread computes): a peer silent for 10 periods loses its connection, which
// rl_chan_event reports.

// ROUTER at endpoint ("tcp://HOST:PORT"; port 0 picks one: rl_chan_endpoint) as a CURVE server
// with `server`'s secret key, with an empty allowlist (rl_chan_allow fills it). max_frame as for
// rl_chan_bind. caller owns *out; free with rl_chan_close.
int rl_chan_bind_curve(const char *endpoint, int64_t max_frame, const rl_curve_key_t *server,
                       double heartbeat_s, rl_chan_t **out, char *err, size_t err_len);
// Replaces a CURVE server's allowlist (keys copied); *removed (may be NULL) gets how many keys
// of the old list are not in the new one. Existing connections are not re-checked: rebind to
// drop them. Returns 0, RL_EINVAL (not a CURVE server) or RL_ENOMEM.
int rl_chan_allow(rl_chan_t *self, const char (*keys)[RL_CURVE_Z85_LEN + 1], int n, int *removed);
// 1 when key is on the server's allowlist now.
int rl_chan_allowed(rl_chan_t *self, const char *key);
// Handshakes the allowlist refused so far.
uint64_t rl_chan_refused(rl_chan_t *self);
// Closes the server's socket and binds a fresh one at the same endpoint: every connection drops;
// clients still on the allowlist reconnect by themselves and pass it again. Returns 0 or an error.
int rl_chan_rebind(rl_chan_t *self, char *err, size_t err_len);

// DEALER with routing identity `identity`, connected to endpoint as a CURVE client with the key
// pair `client`, trusting only the server whose public key is server_pub (Z85). A send waits
// at most 10 heartbeat periods for the connection (then fails: a refused or closed connection
// has nowhere to queue). caller owns *out; free with rl_chan_close.
int rl_chan_connect_curve(const char *endpoint, const char *identity, int64_t max_frame,
                          const rl_curve_key_t *client, const char *server_pub, double heartbeat_s,
                          rl_chan_t **out, char *err, size_t err_len);

// Connection events of a CURVE chan, one per call without waiting (*value: the event's value:
// a file descriptor, or the ZAP status code of an RL_CHAN_EV_AUTH).
typedef enum {
    RL_CHAN_EV_NONE = 0,  // nothing new
    RL_CHAN_EV_UP,        // a handshake succeeded (a peer is connected and authenticated)
    RL_CHAN_EV_DOWN,      // a connection closed (peer gone, heartbeat lost, or refused)
    RL_CHAN_EV_AUTH,      // the handshake was refused by the server's allowlist
    RL_CHAN_EV_HANDSHAKE, // the handshake failed otherwise (wrong server key, not CURVE)
} rl_chan_event_t;
rl_chan_event_t rl_chan_event(rl_chan_t *self, int64_t *value);

// The Z85 public key of the sender of the message rl_chan_recv last returned, on a CURVE server.
// Returns 0, or RL_ENOTFOUND (none: not a CURVE chan, or no message).
int rl_chan_peer_key(const rl_chan_t *self, char out[RL_CURVE_Z85_LEN + 1]);
// The connection (its file descriptor, as RL_CHAN_EV_DOWN's value names it) of that message, or
// -1.
int64_t rl_chan_peer_conn(const rl_chan_t *self);

// The chan's ZeroMQ socket, to poll it beside sockets of one's own (zmq_poll; a benchmark's
// server). Never send or receive on it directly. borrowed; valid until close.
void *rl_chan_socket(rl_chan_t *self);

// How a DEALER's errors name its peer ("from sampler/2: ..."); the default is "controller".
void rl_chan_set_peer_name(rl_chan_t *self, const char *name);

// Waits up to timeout_ms (-1: forever) until one of chans[0..n) (n <= 64) has a message to read;
// ready[i] = 1 for those that do. Returns 0 (also on a timeout: every ready[i] 0) or an errno.
int rl_chan_poll(rl_chan_t *const *chans, int n, int timeout_ms, int *ready);

#ifdef __cplusplus
}
#endif
#endif
