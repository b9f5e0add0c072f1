"""Minimal safetensors writer (REFERENCE.md §3) for the golden scripts, in pure Python.

Writer rules followed: tensors sorted by element size (largest first) then by name, laid out
contiguously from offset 0 with no holes, the JSON header padded with spaces to a multiple of 8,
and "__metadata__": {"format": "pt"} always present. Only F32 is written (every golden and
fixture weight here is F32). This is not a reader; tests read through core/rl_safetensors.
"""

import json
import struct

import numpy as np


def write_safetensors(path, tensors, metadata=None):
    """tensors: dict name -> numpy array (converted to little-endian float32)."""
    meta = {"format": "pt"}
    if metadata:
        meta.update({str(k): str(v) for k, v in metadata.items()})
    arrays = {}
    for name, a in tensors.items():
        arrays[name] = np.ascontiguousarray(np.asarray(a, dtype="<f4"))
    # every tensor is F32 (element size 4), so the order is simply by name
    names = sorted(arrays)
    header = {"__metadata__": meta}
    offset = 0
    for name in names:
        a = arrays[name]
        nbytes = a.size * 4
        header[name] = {
            "dtype": "F32",
            "shape": [int(s) for s in a.shape],
            "data_offsets": [offset, offset + nbytes],
        }
        offset += nbytes
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for name in names:
            f.write(arrays[name].tobytes())
