#!/usr/bin/env python3
"""Split a single-file safetensors checkpoint into Hugging Face-style shards.

    python3 shard_safetensors.py SRC_DIR OUT_DIR [--shards N]

Writes model-0000i-of-0000{N-1}.safetensors and model.safetensors.index.json (weight_map, total
size) and copies the other files of SRC_DIR. Pure Python (no numpy): used to check that the
engine loads sharded checkpoints exactly like single-file ones.
"""
import argparse
import json
import os
import shutil
import struct


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--shards", type=int, default=3)
    a = ap.parse_args()
    with open(os.path.join(a.src, "model.safetensors"), "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    meta = header.pop("__metadata__", None)
    names = sorted(header, key=lambda k: header[k]["data_offsets"][0])
    total = sum(header[k]["data_offsets"][1] - header[k]["data_offsets"][0] for k in names)
    os.makedirs(a.out, exist_ok=True)
    per = total / a.shards
    groups, cur, size = [], [], 0
    for k in names:
        cur.append(k)
        size += header[k]["data_offsets"][1] - header[k]["data_offsets"][0]
        if size >= per * (len(groups) + 1) and len(groups) < a.shards - 1:
            groups.append(cur)
            cur = []
    if cur:
        groups.append(cur)
    weight_map = {}
    last = len(groups) - 1
    for i, g in enumerate(groups):
        fname = f"model-{i:05d}-of-{last:05d}.safetensors"
        h, chunks, off = {}, [], 0
        if meta is not None:
            h["__metadata__"] = meta
        for k in g:
            b, e = header[k]["data_offsets"]
            h[k] = {"dtype": header[k]["dtype"], "shape": header[k]["shape"],
                    "data_offsets": [off, off + e - b]}
            chunks.append(data[b:e])
            off += e - b
            weight_map[k] = fname
        hb = json.dumps(h, separators=(",", ":")).encode()
        hb += b" " * (-len(hb) % 8)
        with open(os.path.join(a.out, fname), "wb") as f:
            f.write(struct.pack("<Q", len(hb)))
            f.write(hb)
            for c in chunks:
                f.write(c)
    with open(os.path.join(a.out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    for name in os.listdir(a.src):
        if name != "model.safetensors" and os.path.isfile(os.path.join(a.src, name)):
            shutil.copy(os.path.join(a.src, name), os.path.join(a.out, name))


if __name__ == "__main__":
    main()
