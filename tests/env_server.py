#!/usr/bin/env python3
"""env_server.py: tests/env_test.py's environment over HTTP, for the tests of `env: {http: ...}`
(env.run), standard library only. Each POST's body is a request line; the reply's body is the
line env_test.py would print (status 200, application/json), so a run against it must log what
the same run with the command environment logs.

    env_server.py PORT_FILE MODE [N] [--fail-first K] [--count FILE]

MODE and N as env_test.py's; its crash answers that request and every later one with a 500, its
hang never answers. Binds 127.0.0.1 on a free port and writes the port to PORT_FILE once it
listens. The first K POSTs get a 500 ("overloaded") before they are read as requests. Every
POST is appended to --count FILE as a line "PATH CONTENT-TYPE STATUS". Runs until killed.
"""
import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import env_test  # noqa: E402

args = sys.argv[1:]


def opt(name, default=None):
    if name not in args:
        return default
    i = args.index(name)
    v = args[i + 1]
    del args[i:i + 2]
    return v


fail_first = int(opt("--fail-first", "0"))
count_file = opt("--count")
port_file = args[0]
mode = args[1] if len(args) > 1 else "once"
n_turns = int(args[2]) if len(args) > 2 else 2
turn = {}
served = 0
crashed = False


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send(self, code, body, ctype="application/json"):
        if count_file:
            with open(count_file, "a") as f:
                f.write("%s %s %d\n" % (self.path, self.headers.get("Content-Type"), code))
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True

    def do_POST(self):
        global served, crashed
        served += 1
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if served <= fail_first:
            return self.send(500, b"overloaded", "text/plain")
        if crashed:
            return self.send(500, b"the environment crashed", "text/plain")
        r = env_test.reply(mode, n_turns, turn, json.loads(body))
        if r is env_test.CRASH:
            crashed = True
            return self.send(500, b"the environment crashed", "text/plain")
        if r is env_test.HANG:
            time.sleep(3600)
        self.send(200, (r + "\n").encode())


server = HTTPServer(("127.0.0.1", 0), Handler)
with open(port_file + ".tmp", "w") as f:
    f.write("%d\n" % server.server_address[1])
os.rename(port_file + ".tmp", port_file)
server.serve_forever()
