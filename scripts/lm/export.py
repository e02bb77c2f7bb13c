"""Writes a trained float checkpoint as the engine's weights (format FLM1,
docs/fabric-contract.md section 10): int8 weights with one scale a row, Q16
norm gains, the rotary and GELU tables, the identity. Rust reads it back
(fabric_model::lm::Weights) and runs the integer definition; nothing here
runs the model.
"""

import argparse
import hashlib
import math

import numpy as np
import torch

MAGIC = 0x464C4D31
ENGINE = 2 | (1 << 16)  # the transformer, version 1
HEADER = 16
SCALE_BITS = 30
PHI_ENTRIES = 2048


def matrix(w):
    """A [rows, cols] float matrix as its rows' scales and int8 weights."""
    w = w.double().numpy()
    absmax = np.abs(w).max(axis=1)
    scales = np.round(absmax / 127.0 * 2**SCALE_BITS).astype(np.int64)
    assert (scales < 2**30).all(), "a row's step past 1.0"
    step = np.where(scales > 0, scales, 1).astype(np.float64) / 2**SCALE_BITS
    q = np.clip(np.round(w / step[:, None]), -127, 127).astype(np.int8)
    q[scales == 0] = 0
    return np.concatenate([scales.astype(np.uint32), q.reshape(-1).view(np.uint32)])


def gains(g):
    return np.round(g.double().numpy() * 65536).astype(np.int64).astype(np.int32).view(np.uint32)


def tables(shape):
    hd = shape["dim"] // shape["heads"]
    pairs = []
    for pos in range(shape["context"]):
        for i in range(hd // 2):
            ang = pos * shape["rope_theta"] ** (-(2 * i) / hd)
            c = int(round(math.cos(ang) * 2**14)) & 0xFFFF
            s = int(round(math.sin(ang) * 2**14)) & 0xFFFF
            pairs.append(c | (s << 16))
    phi = [round(0.5 * (1 + math.erf((-8 + (i + 0.5) / 128) / math.sqrt(2))) * 2**15) for i in range(PHI_ENTRIES)]
    phi_words = [phi[i] | (phi[i + 1] << 16) for i in range(0, PHI_ENTRIES, 2)]
    return np.array(pairs + phi_words, dtype=np.uint32)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    ck = torch.load(args.checkpoint, map_location="cpu")
    shape, st = ck["shape"], ck["state"]
    parts = [tables(shape), matrix(st["embed.weight"])]
    for l in range(shape["layers"]):
        p = f"blocks.{l}."
        parts.append(gains(st[p + "norm1.gain"]))
        for m in ("wq", "wk", "wv", "wo"):
            parts.append(matrix(st[p + m + ".weight"]))
        parts.append(gains(st[p + "norm2.gain"]))
        parts.append(matrix(st[p + "w1.weight"]))
        parts.append(matrix(st[p + "w2.weight"]))
    parts.append(gains(st["norm.gain"]))
    body = np.concatenate(parts).astype("<u4")
    header = np.zeros(HEADER, dtype="<u4")
    header[:8] = [
        MAGIC, ENGINE, HEADER + len(body), shape["vocab"], shape["dim"],
        shape["layers"] | (shape["heads"] << 8), shape["hidden"], shape["context"],
    ]
    digest = hashlib.sha256(body.tobytes()).digest()
    header[8:] = np.frombuffer(digest, dtype=">u4")
    with open(args.out, "wb") as f:
        f.write(header.tobytes())
        f.write(body.tobytes())
    print(f"export: {args.out}: {HEADER + len(body)} words, identity {digest.hex()}")


if __name__ == "__main__":
    main()
