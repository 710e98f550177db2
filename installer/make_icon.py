#!/usr/bin/env python3
"""Writes installer/neural.ico from the geometry of installer/neural.svg (no image tools needed:
a rounded square, three capsule lines and three circles, rasterised with supersampling). The ICO
holds PNG images at 16, 32, 48, 64 and 256 px. Run after changing the SVG:
    python3 installer/make_icon.py"""
import os
import struct
import zlib

BLUE = (0x1F, 0x4F, 0xD1)
WHITE = (255, 255, 255)
NODES = [(128, 72), (72, 184), (184, 184)]
EDGES = [(0, 1), (0, 2), (1, 2)]


def in_rounded_rect(x, y):
    x0, y0, x1, y1, r = 8, 8, 248, 248, 48
    if not (x0 <= x <= x1 and y0 <= y <= y1):
        return False
    cx = min(max(x, x0 + r), x1 - r)
    cy = min(max(y, y0 + r), y1 - r)
    return (x - cx) ** 2 + (y - cy) ** 2 <= r * r


def seg_dist2(px, py, a, b):
    ax, ay = a
    bx, by = b
    dx, dy = bx - ax, by - ay
    t = max(0.0, min(1.0, ((px - ax) * dx + (py - ay) * dy) / (dx * dx + dy * dy)))
    qx, qy = ax + t * dx - px, ay + t * dy - py
    return qx * qx + qy * qy


def colour(x, y):
    """(r, g, b, a) of the SVG at (x, y) in its 256-unit space."""
    for n in NODES:
        if (x - n[0]) ** 2 + (y - n[1]) ** 2 <= 26 * 26:
            return WHITE + (255,)
    for i, j in EDGES:
        if seg_dist2(x, y, NODES[i], NODES[j]) <= 7 * 7:
            return WHITE + (255,)
    if in_rounded_rect(x, y):
        return BLUE + (255,)
    return (0, 0, 0, 0)


def render(size, ss):
    rows = []
    scale = 256.0 / size
    for py in range(size):
        row = bytearray([0])  # PNG filter: none
        for px in range(size):
            acc = [0, 0, 0, 0]
            for sy in range(ss):
                for sx in range(ss):
                    c = colour((px + (sx + 0.5) / ss) * scale, (py + (sy + 0.5) / ss) * scale)
                    for k in range(3):
                        acc[k] += c[k] * c[3]
                    acc[3] += c[3]
            a = acc[3]
            if a == 0:
                row += bytes(4)
            else:
                row += bytes([round(acc[0] / a), round(acc[1] / a), round(acc[2] / a),
                              round(a / (ss * ss))])
        rows.append(bytes(row))
    return png(size, b"".join(rows))


def png(size, raw):
    def chunk(tag, data):
        return (struct.pack(">I", len(data)) + tag + data +
                struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF))
    ihdr = struct.pack(">IIBBBBB", size, size, 8, 6, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw, 9)) +
            chunk(b"IEND", b""))


def main():
    sizes = [16, 32, 48, 64, 256]
    images = [render(s, 4 if s <= 64 else 2) for s in sizes]
    out = bytearray(struct.pack("<HHH", 0, 1, len(images)))
    offset = 6 + 16 * len(images)
    for s, img in zip(sizes, images):
        out += struct.pack("<BBBBHHII", s % 256, s % 256, 0, 0, 1, 32, len(img), offset)
        offset += len(img)
    for img in images:
        out += img
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "neural.ico")
    with open(path, "wb") as f:
        f.write(out)
    print(f"wrote {path} ({len(out)} bytes)")


if __name__ == "__main__":
    main()
