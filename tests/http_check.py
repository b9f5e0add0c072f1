#!/usr/bin/env python3
"""roles.http: the OpenAI-compatible endpoint of `rlctl serve`, checked from outside with the
standard library only (urllib) and with curl.

Starts `rlctl serve --model cookbook/models/arith-base --http 127.0.0.1:0 --http-token FILE`,
then checks: the text_completion object and its fields as OpenAI's legacy completions API
defines them; greedy completions equal `rlctl generate --temperature 0`; the returned logprobs
equal `rlctl logprobs` of the same prompt and completion (1e-6); top_logprobs hold the sampled
token and k others, and sum to at most 1 in probability; n and a list of prompts give
prompt-major choices; stop strings cut the text and finish with "stop"; max_tokens cuts with
"length"; a seed makes sampling repeatable; the errors (401 without or with a wrong token, 400
naming the field, 404, 405, 413); /v1/models; the same request through curl; a non-loopback
address without a token, and a token file others can read, refused at start. The limits
(deadlines, per-client, the queue, the work cap) are roles.http_limits. Exits 1 on any failure, printing what differs."""
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

RLCTL, SRC = sys.argv[1], sys.argv[2]
MODEL = os.path.join(SRC, "cookbook/models/arith-base")
failed = 0
checks = 0


def check(cond, what):
    global failed, checks
    checks += 1
    if not cond:
        failed += 1
        print("FAIL:", what)


def post(url, body, token, raw=None):
    data = raw if raw is not None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="POST")
    req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def main():
    tmp = tempfile.mkdtemp(prefix="rl_test_http_")
    token = "t0ken-" + os.urandom(12).hex()
    tfile = os.path.join(tmp, "token")
    with open(tfile, "w") as f:
        f.write(token + "\n")
    # refused: a non-loopback address without a token
    r = subprocess.run([RLCTL, "serve", "--model", MODEL, "--http", "0.0.0.0:0"],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 2 and "--http-token" in r.stderr, "0.0.0.0 without a token: %r" % r.stderr)
    # refused: a token file others can read (as a secret key file is)
    os.chmod(tfile, 0o644)
    r = subprocess.Popen([RLCTL, "serve", "--model", MODEL, "--http", "127.0.0.1:0",
                          "--http-token", tfile], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        out, err = r.communicate(timeout=20)
    except subprocess.TimeoutExpired:  # it serves: accepted
        r.kill()
        out, err = r.communicate()
    check(r.returncode == 2 and tfile in err and "mode 0644; chmod 600" in err,
          "a token file of mode 0644: exit %d %r %r" % (r.returncode, out, err))
    os.chmod(tfile, 0o600)

    srv = subprocess.Popen([RLCTL, "serve", "--model", MODEL, "--http", "127.0.0.1:0",
                            "--http-token", tfile, "--threads", "1"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    line = srv.stdout.readline()
    m = re.search(r"http on (http://127\.0\.0\.1:\d+/v1)", line)
    if not m:
        print("FAIL: no endpoint line:", line)
        srv.kill()
        return 1
    base = m.group(1)
    try:
        run_checks(base, token)
    finally:
        srv.send_signal(signal.SIGTERM)
        try:
            check(srv.wait(timeout=20) == 0, "rlctl serve did not exit 0 on SIGTERM")
        except subprocess.TimeoutExpired:
            srv.kill()
            check(False, "rlctl serve did not exit on SIGTERM")
    print("%s: %d checks, %d failed" % (os.path.basename(__file__), checks, failed))
    if failed:
        print("what the check left is kept in", tmp)
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed else 0


def run_checks(base, token):
    prompt = "47*3+512="
    # greedy, with logprobs 2
    st, r = post(base + "/completions", {"model": "arith-base", "prompt": prompt,
                                         "max_tokens": 40, "temperature": 0, "logprobs": 2},
                 token)
    check(st == 200, "greedy completion: status %d %r" % (st, r))
    if st != 200:
        return
    check(r["object"] == "text_completion" and r["id"].startswith("cmpl-")
          and r["model"] == "arith-base" and isinstance(r["created"], int), "envelope %r" % r)
    c = r["choices"][0]
    check(c["index"] == 0 and c["finish_reason"] == "stop", "choice %r" % c)
    gen = subprocess.run([RLCTL, "generate", "--model", MODEL, "--prompt", prompt,
                          "--temperature", "0", "--max-new-tokens", "40"],
                         capture_output=True, text=True, timeout=60)
    check(gen.stdout.strip().endswith(c["text"]) or c["text"] in gen.stdout,
          "greedy text %r vs rlctl generate %r" % (c["text"], gen.stdout))
    lp = subprocess.run([RLCTL, "logprobs", "--model", MODEL, "--prompt", prompt,
                         "--completion", c["text"], "--json"],
                        capture_output=True, text=True, timeout=60)
    want = json.loads(lp.stdout)["logprobs"]
    got = c["logprobs"]["token_logprobs"]
    check(len(got) == len(want) and all(abs(a - b) <= 1e-6 for a, b in zip(got, want)),
          "logprobs differ from rlctl logprobs:\n%r\n%r" % (got, want))
    u = r["usage"]
    check(u["completion_tokens"] == len(got) + 1 and u["prompt_tokens"] == len(prompt)
          and u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"],
          "usage %r (the stop token counts, as OpenAI's)" % u)
    tops = c["logprobs"]["top_logprobs"]
    offs = c["logprobs"]["text_offset"]
    check(len(tops) == len(got) and len(offs) == len(got) and offs[0] == 0, "top/offsets")
    for i, t in enumerate(tops):
        tok = c["logprobs"]["tokens"][i]
        check(tok in t and abs(t[tok] - got[i]) <= 1e-6 and 1 <= len(t) <= 3,
              "top_logprobs[%d] %r lacks the sampled %r" % (i, t, tok))
        check(sum(math.exp(v) for v in t.values()) <= 1 + 1e-5, "top probabilities > 1")
    check("".join(c["logprobs"]["tokens"]) == c["text"], "tokens do not join to the text")
    # n, several prompts, seed repeatability, stop, length
    body = {"prompt": [prompt, "12*3+100="], "n": 3, "max_tokens": 30, "temperature": 1.0,
            "seed": 7}
    st, a = post(base + "/completions", body, token)
    st2, b = post(base + "/completions", body, token)
    check(st == 200 and len(a["choices"]) == 6 and [x["index"] for x in a["choices"]] ==
          list(range(6)), "n x prompts: %r" % a)
    check(st2 == 200 and [x["text"] for x in a["choices"]] == [x["text"] for x in b["choices"]],
          "the same seed gave other texts")
    check(all(x["text"].startswith(("47*3", "12*3")) for x in a["choices"][:3] + a["choices"][3:])
          and a["choices"][0]["text"].startswith("47*3") and
          a["choices"][3]["text"].startswith("12*3"), "choices are not prompt-major")
    st, s = post(base + "/completions", {"prompt": prompt, "max_tokens": 40, "temperature": 0,
                                         "stop": [";"]}, token)
    check(st == 200 and s["choices"][0]["text"] == "47*3=141" and
          s["choices"][0]["finish_reason"] == "stop", "stop string: %r" % s)
    st, s = post(base + "/completions", {"prompt": prompt, "max_tokens": 3, "temperature": 0},
                 token)
    check(st == 200 and s["choices"][0]["text"] == "47*" and
          s["choices"][0]["finish_reason"] == "length", "max_tokens: %r" % s)
    # errors
    st, e = post(base + "/completions", {"prompt": prompt}, None)
    check(st == 401 and "error" in e, "no token: %d %r" % (st, e))
    st, e = post(base + "/completions", {"prompt": prompt}, "wrong-token-xxxxxxxxxx")
    check(st == 401, "wrong token: %d" % st)
    st, e = post(base + "/completions", {"prompt": prompt, "max_tokens": "many"}, token)
    check(st == 400 and e["error"]["param"] == "max_tokens", "bad field: %d %r" % (st, e))
    st, e = post(base + "/completions", {"prompt": prompt, "stream": True}, token)
    check(st == 400 and e["error"]["param"] == "stream", "stream: %d %r" % (st, e))
    st, e = post(base + "/completions", {"prompt": prompt, "temprature": 0}, token)
    check(st == 400 and "temprature" in e["error"]["message"], "unknown field: %r" % e)
    st, e = post(base + "/completions", None, token, raw=b"{not json")
    check(st == 400, "not JSON: %d" % st)
    st, e = post(base + "/nothing", {}, token)
    check(st == 404, "404: %d" % st)
    st, e = post(base + "/completions", None, token, raw=b"x" * (2 << 20))
    check(st == 413, "a 2 MiB body: %d" % st)
    req = urllib.request.Request(base + "/models")
    req.add_header("Authorization", "Bearer " + token)
    with urllib.request.urlopen(req, timeout=30) as r:
        mj = json.loads(r.read())
    check(mj["data"][0]["id"] == "arith-base", "/v1/models %r" % mj)
    # the same request with curl, as users would
    cu = subprocess.run(["curl", "-s", "-H", "Authorization: Bearer " + token, "-H",
                         "Content-Type: application/json", "-d",
                         json.dumps({"prompt": prompt, "max_tokens": 40, "temperature": 0}),
                         base + "/completions"], capture_output=True, text=True, timeout=60)
    check(cu.returncode == 0 and json.loads(cu.stdout)["choices"][0]["text"] == c["text"],
          "curl: %r %r" % (cu.returncode, cu.stdout[:300]))


if __name__ == "__main__":
    sys.exit(main())
