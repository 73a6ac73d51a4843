"""The Python side of tests/io/safetensors.test.cpp: Hugging Face's safetensors package reads a
file fluxion wrote, and writes one for fluxion to read.

    python3 safetensors_interop.py read FILE    # checks every tensor and the metadata; exit 0 if equal
    python3 safetensors_interop.py write FILE   # writes the same tensors with safetensors.numpy

The expected values are computed here and, independently, in the C++ test, from the same formulas.
"""
import sys

import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file, save_file


def expected():
    i6 = np.arange(6)
    return {
        "dense/kernel": ((i6 - 2.5) / 4).astype(np.float32).reshape(2, 3),
        "f64": np.arange(4, dtype=np.float64) * 0.1,
        "i32": (np.arange(6, dtype=np.int32) ** 2 - 7).reshape(3, 2),
        "i64": np.arange(2, dtype=np.int64) * 10**12 - 3,
        "mask": np.arange(5) % 3 == 0,
        "scalar": np.array(1.5, dtype=np.float32),
        "empty": np.zeros((0, 3), dtype=np.float32),
    }


METADATA = {"note": 'h\u00e9llo "quoted" \\ back', "step": "42"}


def read(path):
    tensors = load_file(path)
    want = expected()
    if sorted(tensors) != sorted(want):
        sys.exit(f"names differ: file has {sorted(tensors)}, expected {sorted(want)}")
    for name, value in want.items():
        got = tensors[name]
        if got.dtype != value.dtype or got.shape != value.shape:
            sys.exit(f"{name}: {got.dtype}{got.shape} in the file, expected {value.dtype}{value.shape}")
        if got.tobytes() != value.tobytes():
            sys.exit(f"{name}: values differ: {got!r} vs {value!r}")
    with safe_open(path, framework="np") as f:
        metadata = f.metadata() or {}
    for key, value in METADATA.items():
        if metadata.get(key) != value:
            sys.exit(f"metadata {key!r}: {metadata.get(key)!r}, expected {value!r}")
    print("ok")


def write(path):
    save_file(expected(), path, metadata=METADATA)
    print("ok")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("read", "write"):
        sys.exit(__doc__)
    (read if sys.argv[1] == "read" else write)(sys.argv[2])
