#!/usr/bin/env python3
"""roles.http_limits: no client of the OpenAI-compatible endpoint can hold it from the others
(issue 26: Slowloris locked it; one big request blocked every other and ran on after its client
left). Checked from outside with raw sockets, each "client" an address of its own on loopback
(127.0.0.2, 127.0.0.3, ...), against two `rlctl serve --threads 1` of cookbook/models/arith-base:
A with the defaults, B with --http-max-work 1500000 (room for a request of ~40 s here).

  - 64 connections from one address trickling a header line every second: 16 are kept (the
    per-client limit), the rest closed at once; meanwhile another address is answered at once
    (/v1/models and a completion); the 16 are closed by the head deadline (10 s) although they
    never stop sending, and a body trickled a byte a second by the body deadline (20 s after the
    head). Before: the 64 took every connection, and a trickler lived for ever.
  - while a long completion generates, /v1/models is answered at once (the generation has a
    thread of its own; before, it ran on the I/O thread); further completions queue: 3 more from
    the same address are accepted and a 5th is a 429 naming the address (at most 4 waiting or
    running per client); 12 from other addresses fill the queue to 16, and one more is a 429
    (Retry-After, an OpenAI error object); the long request's client leaves: its generation
    stops within a second or two, and every queued completion is answered 200 in order (before,
    the generation ran on to its end).
  - a request whose work (n x the sum of prompt tokens + max_tokens) is over the cap: 400 naming
    max_tokens and the cap (65536 by default, or --http-max-work) before anything is generated.
Exits 1 on any failure, printing what differs."""
import json
import os
import re
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

RLCTL, SRC = sys.argv[1], sys.argv[2]
MODEL = os.path.join(SRC, "cookbook/models/arith-base")
PROMPT = "47*3+512="  # 9 tokens
failed = 0
checks = 0


def check(cond, what):
    global failed, checks
    checks += 1
    if not cond:
        failed += 1
        print("FAIL:", what, flush=True)
    return cond


def connect(src, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    return s


def send(src, port, method, path, body=None):
    """A request sent whole (Connection: close) from address src; returns its socket."""
    s = connect(src, port)
    data = json.dumps(body).encode() if body is not None else b""
    head = ("%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
            "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (method, path,
                                                                                 len(data)))
    s.sendall(head.encode() + data)
    return s


def answer(s, timeout):
    """(status, headers, json body) of the response on s, or None when none came in timeout."""
    s.settimeout(timeout)
    buf = b""
    end = time.time() + timeout
    try:
        while time.time() < end:
            d = s.recv(65536)
            if not d:
                break
            buf += d
    except socket.timeout:
        return None
    except OSError:
        pass
    finally:
        s.close()
    if b"\r\n\r\n" not in buf:
        return None
    head, body = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in
               (ln.split(":", 1) for ln in lines[1:] if ":" in ln)}
    try:
        obj = json.loads(body)
    except ValueError:
        obj = {"raw": body[:200]}
    return int(lines[0].split()[1]), headers, obj


def err(r):
    """The error object of an answer ({} when there is none)."""
    return (r[2].get("error") or {}) if r and isinstance(r[2], dict) else {}


def closed(s):
    """1 when the server has closed s (end of stream or reset)."""
    try:
        return s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def start(extra, log):
    srv = subprocess.Popen([RLCTL, "serve", "--model", MODEL, "--http", "127.0.0.1:0",
                            "--threads", "1"] + extra, stdout=subprocess.PIPE, stderr=log,
                           text=True)
    line = srv.stdout.readline()
    m = re.search(r"http on http://127\.0\.0\.1:(\d+)/v1", line)
    if not m:
        print("FAIL: no endpoint line:", line)
        srv.kill()
        return srv, None
    return srv, int(m.group(1))


class Trickler(threading.Thread):
    """Sends `line` on every socket each second until the server closes it; records when."""

    def __init__(self, socks, line, t0, until):
        super().__init__(daemon=True)
        self.socks, self.line, self.t0, self.until = socks, line, t0, until
        self.closed_at = [None] * len(socks)

    def run(self):
        while time.time() < self.until and None in self.closed_at:
            for i, s in enumerate(self.socks):
                if self.closed_at[i] is None:
                    try:
                        s.send(self.line)
                    except OSError:
                        pass
                    if closed(s):
                        self.closed_at[i] = time.time() - self.t0
            time.sleep(0.2)


def slowloris(port):
    """64 trickling connections from 127.0.0.2; returns the trickler of those kept open."""
    socks = []
    t0 = time.time()
    for _ in range(64):
        s = connect("127.0.0.2", port)
        s.send(b"POST /v1/completions HTTP/1.1\r\n")
        socks.append(s)
    time.sleep(0.7)
    kept = [s for s in socks if not closed(s)]
    for s in socks:
        if s not in kept:
            s.close()
    check(len(kept) == 16, "64 connections from one address: %d kept open, want 16 (the "
          "per-client limit), the others closed at once" % len(kept))
    tr = Trickler(kept, b"X-Slow: 1\r\n", t0, t0 + 14)
    tr.start()
    return tr


def main():
    tmp = tempfile.mkdtemp(prefix="rl_test_http_limits_")
    logs = [open(os.path.join(tmp, n), "w+") for n in ("a.log", "b.log")]
    a, pa = start([], logs[0])
    b, pb = start(["--http-max-work", "1500000"], logs[1])
    try:
        if pa and pb:
            run_checks(pa, pb)
    finally:
        for i, srv in enumerate((a, b)):
            srv.terminate()
            try:
                check(srv.wait(timeout=20) == 0, "server %d did not exit 0 on SIGTERM" % i)
            except subprocess.TimeoutExpired:
                srv.kill()
                check(False, "server %d did not exit on SIGTERM" % i)
        logs[1].seek(0)
        blog = logs[1].read()
        check("a client left; its completion stopped" in blog,
              "B's log does not say the long completion stopped:\n" + blog[-2000:])
    print("%s: %d checks, %d failed" % (os.path.basename(__file__), checks, failed))
    for f in logs:
        f.close()
    if failed:
        print("what the check left is kept in", tmp)
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed else 0


def run_checks(pa, pb):
    # ---- A: Slowloris from 127.0.0.2, and a body trickled from 127.0.0.9
    tr = slowloris(pa)
    body_t0 = time.time()
    bs = connect("127.0.0.9", pa)
    bs.send(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000\r\n\r\n{")
    btr = Trickler([bs], b" ", body_t0, body_t0 + 25)
    btr.start()
    t = time.time()
    r = answer(send("127.0.0.1", pa, "GET", "/v1/models"), 5)
    check(r is not None and r[0] == 200 and time.time() - t < 2,
          "/v1/models from another address during the Slowloris: %r after %.1f s"
          % (r, time.time() - t))
    t = time.time()
    r = answer(send("127.0.0.1", pa, "POST", "/v1/completions",
                    {"prompt": PROMPT, "max_tokens": 40, "temperature": 0}), 10)
    check(r is not None and r[0] == 200 and time.time() - t < 5 and
          r[2]["choices"][0]["text"] == "47*3=141;141+512=653 #### 653",
          "a completion from another address during the Slowloris: %r after %.1f s"
          % (r, time.time() - t))
    # ---- the work cap: A's default, B's flag
    big = {"prompt": [PROMPT] * 256, "n": 64, "max_tokens": 16}
    r = answer(send("127.0.0.1", pa, "POST", "/v1/completions", big), 10)
    check(r is not None and r[0] == 400 and err(r).get("param") == "max_tokens" and
          "at most 65536" in err(r).get("message", "") and
          "256 prompts x n 64 x (max_tokens 16" in err(r).get("message", ""),
          "256 prompts x n 64 x max_tokens 16 over the default cap: %r" % (r,))
    r = answer(send("127.0.0.1", pb, "POST", "/v1/completions", dict(big, max_tokens=100)), 10)
    check(r is not None and r[0] == 400 and "at most 1500000" in err(r).get("message", ""),
          "over --http-max-work 1500000: %r" % (r,))

    # ---- B: a long completion from 127.0.0.3 (256 x 64 x 64 tokens: ~40 s here)
    long_req = send("127.0.0.3", pb, "POST", "/v1/completions",
                    {"prompt": [PROMPT] * 256, "n": 64, "max_tokens": 64, "temperature": 1})
    time.sleep(1.0)
    check(not select.select([long_req], [], [], 0)[0], "the long completion was answered at once")
    t = time.time()
    r = answer(send("127.0.0.1", pb, "GET", "/v1/models"), 10)
    check(r is not None and r[0] == 200 and time.time() - t < 2,
          "/v1/models while a completion generates: %r after %.1f s" % (r, time.time() - t))
    small = {"prompt": PROMPT, "max_tokens": 40, "temperature": 0}
    queued = [send("127.0.0.3", pb, "POST", "/v1/completions", small) for _ in range(3)]
    time.sleep(0.3)
    r = answer(send("127.0.0.3", pb, "POST", "/v1/completions", small), 5)
    check(r is not None and r[0] == 429 and err(r).get("type") == "rate_limit_error" and
          "127.0.0.3 already has 4" in err(r).get("message", "") and
          r[1].get("retry-after") == "1",
          "a 5th completion from one address: %r" % (r,))
    for src in ("127.0.0.4", "127.0.0.5", "127.0.0.6"):
        queued += [send(src, pb, "POST", "/v1/completions", small) for _ in range(4)]
    queued.append(send("127.0.0.7", pb, "POST", "/v1/completions", small))
    time.sleep(0.3)
    r = answer(send("127.0.0.8", pb, "POST", "/v1/completions", small), 5)
    check(r is not None and r[0] == 429 and "16 completions are waiting" in
          err(r).get("message", ""), "a completion past the full queue: %r" % (r,))
    check(not any(select.select(queued, [], [], 0)[0]), "a queued completion was answered "
          "while the long one generates")
    # the long request's client leaves: the model goes to the queue at once
    long_req.close()
    t = time.time()
    first = answer(queued[0], 10)
    took = time.time() - t
    check(first is not None and first[0] == 200 and took < 3,
          "the first queued completion after the long one's client left: %r after %.1f s"
          % (first, took))
    rest = [answer(s, 15) for s in queued[1:]]
    check(first is not None and all(x is not None and x[0] == 200 and x[2]["choices"][0]["text"]
                                    == first[2]["choices"][0]["text"] for x in rest),
          "the queued completions: %r" % ([x and x[0] for x in rest],))

    # ---- the deadlines
    tr.join()
    btr.join()
    got = tr.closed_at
    check(all(c is not None and 9.5 <= c <= 12 for c in got),
          "the 16 trickling connections were closed at %r s; want 10 to 12 (the head deadline)"
          % ([c and round(c, 1) for c in got],))
    c = btr.closed_at[0]
    check(c is not None and 19.5 <= c <= 22,
          "a trickled body was closed at %r s; want 20 to 22 (the body deadline)" % c)


if __name__ == "__main__":
    sys.exit(main())
