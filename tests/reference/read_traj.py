#!/usr/bin/python3
"""An independent reader of rlctl's trajectory store, written from docs/trajectories.md alone.

    /usr/bin/python3 tests/reference/read_traj.py RUN/trajectories.lmdb [--step N]

Prints one JSON line {"meta": {...}} and then one JSON line per record in key order, every
field decoded (bins as lists of numbers, nil as null, NaN as null). Exits 1, naming the key,
when anything breaks a rule the page states. tests/test_traj_cli.c compares the output with
the records it wrote through the C API. Needs python3-lmdb and python3-msgpack.
"""
import json
import math
import struct
import sys

import lmdb
import msgpack

FIELDS = ["v", "step", "prompt_index", "sample_index", "data_index", "policy_version",
          "prompt_ids", "completion_ids", "mask", "sampler_logprobs", "old_logprobs",
          "ref_logprobs", "values", "advantages", "rewards", "reward", "advantage", "finish"]
OPTIONAL = ["old_logprobs", "ref_logprobs", "values", "advantages"]
EXTRA = ["token_rewards"]  # keys a record may leave out


def fail(what):
    print(f"read_traj: {what}", file=sys.stderr)
    sys.exit(1)


def num(x):
    return None if isinstance(x, float) and not math.isfinite(x) else x


def uint(value, bits, where):
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 1 << bits:
        fail(f"{where}: not a u{bits}")
    return value


def bin_of(value, size, where):
    if not isinstance(value, bytes) or len(value) % size:
        fail(f"{where}: not a bin of a multiple of {size} bytes")
    return value


def record(key, value):
    if len(key) != 16:
        fail(f"key {key.hex()}: not 16 bytes")
    step, prompt_index, sample_index = struct.unpack(">QII", key)
    where = f"step {step}, prompt {prompt_index}, sample {sample_index}"
    r = msgpack.unpackb(value, raw=False, strict_map_key=True)
    if not isinstance(r, dict):
        fail(f"{where}: not a map")
    missing = [f for f in FIELDS if f not in r]
    if missing:
        fail(f"{where}: missing {missing}")
    if uint(r["v"], 32, where) != 1:
        fail(f"{where}: record version {r['v']}")
    if (uint(r["step"], 64, where), uint(r["prompt_index"], 32, where),
            uint(r["sample_index"], 32, where)) != (step, prompt_index, sample_index):
        fail(f"{where}: fields disagree with the key")
    n_prompt = len(bin_of(r["prompt_ids"], 4, where)) // 4
    n = len(bin_of(r["completion_ids"], 4, where)) // 4
    out = {
        "step": step, "prompt_index": prompt_index, "sample_index": sample_index,
        "data_index": r["data_index"], "policy_version": uint(r["policy_version"], 64, where),
        "prompt_ids": list(struct.unpack(f"<{n_prompt}i", r["prompt_ids"])),
        "completion_ids": list(struct.unpack(f"<{n}i", r["completion_ids"])),
    }
    if not isinstance(r["mask"], bytes) or len(r["mask"]) != n or any(b > 1 for b in r["mask"]):
        fail(f"{where}: mask is not {n} bytes of 0/1")
    out["mask"] = list(r["mask"])
    for f in ["sampler_logprobs"] + OPTIONAL:
        if r[f] is None and f in OPTIONAL:
            out[f] = None
            continue
        if not isinstance(r[f], bytes) or len(r[f]) != 4 * n:
            fail(f"{where}: {f} is not {4 * n} bytes")
        out[f] = [num(x) for x in struct.unpack(f"<{n}f", r[f])]
    if not isinstance(r["rewards"], dict) or len(r["rewards"]) > 64:
        fail(f"{where}: rewards is not a map of at most 64")
    out["rewards"] = {k: num(float(x)) for k, x in r["rewards"].items()}
    out["reward"] = num(float(r["reward"]))
    out["advantage"] = num(float(r["advantage"]))
    if r["finish"] not in ("stop", "length"):
        fail(f"{where}: finish {r['finish']!r}")
    out["finish"] = r["finish"]
    # optional keys (absent or nil: none), output only when stored
    for f in EXTRA:
        if f in r and r[f] is not None:
            if not isinstance(r[f], bytes) or len(r[f]) != 4 * n:
                fail(f"{where}: {f} is not {4 * n} bytes")
            out[f] = [num(x) for x in struct.unpack(f"<{n}f", r[f])]
    if "episode" in r:  # a multi-turn episode (docs/trajectories.md)
        e = r["episode"]
        if not isinstance(e, dict) or not {"turns", "turn_rewards", "end"} <= set(e):
            fail(f"{where}: episode is not a map with turns, turn_rewards and end")
        turns = e["turns"]
        if (not isinstance(turns, list) or not turns or turns[0] != 0 or
                any(uint(t, 32, where) >= n for t in turns) or
                any(b <= a for a, b in zip(turns, turns[1:]))):
            fail(f"{where}: episode.turns do not start at 0 and increase within the completion")
        if not isinstance(e["turn_rewards"], list) or len(e["turn_rewards"]) != len(turns):
            fail(f"{where}: episode.turn_rewards is not one number per turn")
        if e["end"] not in ("done", "truncated"):
            fail(f"{where}: episode.end {e['end']!r}")
        conv = e.get("conversation")
        out["episode"] = {
            "turns": turns, "turn_rewards": [num(float(x)) for x in e["turn_rewards"]],
            "end": e["end"], "tool_calls": uint(e.get("tool_calls", 0), 32, where),
            "parse_errors": uint(e.get("parse_errors", 0), 32, where),
            "conversation": json.loads(conv) if conv is not None else None,
        }
    if any(i < 0 for i in out["prompt_ids"] + out["completion_ids"]):
        fail(f"{where}: a negative id")
    return out


def main():
    if len(sys.argv) not in (2, 4) or (len(sys.argv) == 4 and sys.argv[2] != "--step"):
        fail("usage: read_traj.py STORE [--step N]")
    only = int(sys.argv[3]) if len(sys.argv) == 4 else None
    env = lmdb.open(sys.argv[1], readonly=True, max_dbs=2)
    traj = env.open_db(b"traj", create=False)
    meta = env.open_db(b"meta", create=False)
    with env.begin() as txn:
        version = txn.get(b"schema_version", db=meta)
        if version is None or msgpack.unpackb(version) != 1:
            fail(f"schema_version {version!r}, this reader knows 1")
        last = txn.get(b"last_step", db=meta)
        info = {"schema_version": 1, "last_step": msgpack.unpackb(last) if last else 0}
        print(json.dumps({"meta": info}))
        cursor = txn.cursor(db=traj)
        start = cursor.set_range(struct.pack(">QII", only, 0, 0)) if only else cursor.first()
        if start:
            for key, value in cursor:
                if only is not None and struct.unpack(">Q", key[:8])[0] != only:
                    break
                print(json.dumps(record(key, value), allow_nan=False))
    env.close()


if __name__ == "__main__":
    main()
