#!/usr/bin/env python3
"""reward_command.py MODE [ARG]: a `command:` reward that misbehaves on purpose, one way per
MODE, for the tests of command rewards (rewards.command, rewards.run). Every mode answers
requests with 1.0 per item until its moment comes:

    ok                score every item 1.0 (the middle one null, when there are 3 or more)
    exit N            exit with status 3 on request N (1 = the first)
    garbage           reply a line that is not JSON
    wrong_count       reply one score fewer than the items
    infinite          reply Infinity for the first item (Python's json writes it so)
    error             reply {"error": "backend unavailable (N items)"}
    hang PIDFILE      start a child that sleeps forever (its pid into PIDFILE), then never reply
    hang_setsid PIDFILE  as hang, but the child runs in a session of its own (setsid, out of the
                      process group a reward worker kills) and ignores SIGTERM
    setsid PIDFILE    on the first request, start such a child, then score as ok
    spew MIB          write MIB MiB to stderr per request, then 'spew: end of request N', and
                      score as ok
    chatty            reply two lines per request
    nan               reply NaN (Python's json word) and null
    huge              reply the largest doubles, 1.7e308 and -1.7e308, alternating
"""
import json
import os
import subprocess
import sys
import time

mode = sys.argv[1]
arg = sys.argv[2] if len(sys.argv) > 2 else None


def reply(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def write_pid(pidfile, pid):
    with open(pidfile + ".tmp", "w") as f:
        f.write("%d\n" % pid)
    os.rename(pidfile + ".tmp", pidfile)


def escapee(pidfile):
    # a process that leaves our process group (what a reward worker kills) and ignores SIGTERM
    child = subprocess.Popen(["sh", "-c", "trap '' TERM; exec sleep 1000"],
                             start_new_session=True)
    write_pid(pidfile, child.pid)


n_req = 0
for line in sys.stdin:
    n_req += 1
    n = len(json.loads(line)["items"])
    if mode == "exit" and n_req == int(arg):
        print("reward_command: exiting on request %d as asked" % n_req, file=sys.stderr)
        sys.exit(3)
    if mode == "garbage":
        sys.stdout.write("this is not json\n")
        sys.stdout.flush()
    elif mode == "wrong_count":
        reply({"scores": [1.0] * (n - 1)})
    elif mode == "infinite":
        reply({"scores": [float("inf")] + [1.0] * (n - 1)})
    elif mode == "error":
        reply({"error": "backend unavailable (%d items)" % n})
    elif mode == "hang":
        child = subprocess.Popen(["sleep", "1000"])
        write_pid(arg, child.pid)
        time.sleep(1000)
    elif mode == "hang_setsid":
        escapee(arg)
        time.sleep(1000)
    elif mode == "setsid":
        if n_req == 1:
            escapee(arg)
        reply({"scores": [1.0] * n})
    elif mode == "chatty":
        reply({"scores": [1.0] * n})
        reply({"scores": [1.0] * n})
    elif mode == "huge":
        reply({"scores": [1.7e308 if i % 2 == 0 else -1.7e308 for i in range(n)]})
    elif mode == "spew":
        line = ("x" * 1023 + "\n").encode()
        for _ in range(int(arg) * 1024):
            sys.stderr.buffer.write(line)
        sys.stderr.buffer.write(b"spew: end of request %d\n" % n_req)
        sys.stderr.flush()
        reply({"scores": [1.0] * n})
    elif mode == "nan":
        reply({"scores": [float("nan")] + [None] * (n - 1)})
    else:
        reply({"scores": [None if n >= 3 and i == n // 2 else 1.0 for i in range(n)]})
