#!/usr/bin/env python3
"""reward_server.py: a reward server for the tests of `http:` rewards (rewards.http,
rewards.run), standard library only. It scores with cookbook/plugins/math_reward.py, the
built-in math_answer's rule, so a run against it must log what a run with the built-in logs.

    reward_server.py PORT_FILE [--format rlctl|openrlhf] [--chunked] [--fail-first N]
                     [--status CODE] [--count FILE] [--reply TEXT]

Binds 127.0.0.1 on a free port and writes the port to PORT_FILE once it listens. Every POST
(any path) is appended to --count FILE as a line; the first --fail-first requests get a 500;
--status answers every request with CODE and a short text body; --reply answers every request
with TEXT as its body (status 200). --chunked sends replies in chunks of 7 bytes with chunk
extensions and a trailer. Runs until killed.

The openrlhf form (OpenRLHF's remote reward model, openrlhf/utils/agent.py): the request is
{"query": [prompt + completion], "prompts": [prompt], "labels": [label]}, the reply
{"rewards": [...]}; the completion is the query after its prompt, the label the reference.
"""
import json
import os
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cookbook",
                                "plugins"))
import math_reward  # noqa: E402

args = sys.argv[1:]
port_file = args[0]


def opt(name, default=None):
    return args[args.index(name) + 1] if name in args else default


fmt = opt("--format", "rlctl")
chunked = "--chunked" in args
fail_first = int(opt("--fail-first", "0"))
status = int(opt("--status", "0"))
count_file = opt("--count")
fixed_reply = opt("--reply")
served = 0


def scores(req):
    if fmt == "openrlhf":
        out = []
        for q, p, label in zip(req["query"], req["prompts"], req["labels"]):
            ref = math_reward.reference(label)
            out.append(None if ref is None else float(math_reward.correct(q[len(p):], ref)))
        return {"rewards": out}
    return {"scores": [math_reward.score(item) for item in req["items"]]}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send(self, code, body, ctype="application/json"):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Connection", "close")
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(0, len(body), 7):
                part = body[i:i + 7]
                self.wfile.write(b"%x;ext=1\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\nX-Trailer: yes\r\n\r\n")
        else:
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        self.close_connection = True

    def do_POST(self):
        global served
        served += 1
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if count_file:
            with open(count_file, "a") as f:
                f.write("%s %s %d\n" % (self.path, self.headers.get("Content-Type"), len(body)))
        if served <= fail_first:
            return self.send(500, b"overloaded", "text/plain")
        if status:
            return self.send(status, b"no such reward", "text/plain")
        if fixed_reply is not None:
            return self.send(200, fixed_reply.encode())
        try:
            reply = scores(json.loads(body))
        except Exception as e:
            reply = {"error": "%s: %s" % (type(e).__name__, e)}
        self.send(200, json.dumps(reply).encode())


server = HTTPServer(("127.0.0.1", 0), Handler)
with open(port_file + ".tmp", "w") as f:
    f.write("%d\n" % server.server_address[1])
os.rename(port_file + ".tmp", port_file)
server.serve_forever()
