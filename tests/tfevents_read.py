#!/usr/bin/python3
# Reads a TensorBoard event file with a hand-written protobuf parser (no tensorboard or
# protobuf package needed), checks every record's masked CRC-32C, and prints one JSON line per
# event: {"wall_time", "step", "file_version"} or {"wall_time", "step", "scalars": {tag: v}}.
# Used by tests/test_metrics.c as an implementation independent of rl_metrics.c.
import json, struct, sys

def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF

def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF

def varint(buf, i):
    shift = v = 0
    while True:
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, i

def fields(buf):
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            v, i = varint(buf, i)
        elif wire == 1:
            v, i = buf[i:i + 8], i + 8
        elif wire == 5:
            v, i = buf[i:i + 4], i + 4
        elif wire == 2:
            n, i = varint(buf, i)
            v, i = buf[i:i + n], i + n
        else:
            raise ValueError("wire type %d" % wire)
        yield field, wire, v

def main(path):
    data = open(path, "rb").read()
    i = 0
    while i < len(data):
        hdr = data[i:i + 8]
        (n,) = struct.unpack("<Q", hdr)
        (c,) = struct.unpack("<I", data[i + 8:i + 12])
        assert c == masked(hdr), "length crc"
        body = data[i + 12:i + 12 + n]
        (c,) = struct.unpack("<I", data[i + 12 + n:i + 16 + n])
        assert c == masked(body), "data crc"
        i += 16 + n
        ev = {}
        for f, w, v in fields(body):
            if f == 1 and w == 1:
                ev["wall_time"] = struct.unpack("<d", v)[0]
            elif f == 2 and w == 0:
                ev["step"] = v
            elif f == 3 and w == 2:
                ev["file_version"] = v.decode()
            elif f == 5 and w == 2:
                sc = {}
                for f2, w2, val in fields(v):
                    assert f2 == 1 and w2 == 2
                    tag, x = None, None
                    for f3, w3, v3 in fields(val):
                        if f3 == 1:
                            tag = v3.decode()
                        elif f3 == 2 and w3 == 5:
                            x = struct.unpack("<f", v3)[0]
                    sc[tag] = x
                ev["scalars"] = sc
        print(json.dumps(ev, sort_keys=True))

if __name__ == "__main__":
    main(sys.argv[1])
