"""Reads an 8-bit RGB or RGBA PNG (what headless Chromium writes) with the
standard library only: png_pixels(path) -> (width, height, channels, rows),
rows being one bytes object per scanline with the filters undone."""
import struct
import zlib


def _paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def _add_bytes(x, y, n):
    """Bytewise (x + y) mod 256 of two n-byte strings, as one big-int operation."""
    a, b = int.from_bytes(x, "big"), int.from_bytes(y, "big")
    low, high = int.from_bytes(b"\x7f" * n, "big"), int.from_bytes(b"\x80" * n, "big")
    return (((a & low) + (b & low)) ^ ((a ^ b) & high)).to_bytes(n, "big")


def png_pixels(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path}: not a PNG file")
    pos, idat, width = 8, [], None
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or color not in (2, 6) or interlace:
                raise ValueError(f"{path}: depth {depth} colour type {color} interlace {interlace} not supported")
        elif kind == b"IDAT":
            idat.append(body)
    if width is None:
        raise ValueError(f"{path}: no IHDR chunk")
    raw = zlib.decompress(b"".join(idat))
    bpp = 3 if color == 2 else 4
    stride = width * bpp
    prev = bytes(stride)
    rows = []
    for y in range(height):
        start = y * (stride + 1)
        ftype, line = raw[start], raw[start + 1:start + 1 + stride]
        if ftype == 0:
            out = line
        elif ftype == 2:
            out = _add_bytes(line, prev, stride)
        else:
            cur = bytearray(line)
            for i in range(stride):
                a = cur[i - bpp] if i >= bpp else 0
                if ftype == 1:
                    cur[i] = (cur[i] + a) & 0xFF
                elif ftype == 3:
                    cur[i] = (cur[i] + ((a + prev[i]) >> 1)) & 0xFF
                elif ftype == 4:
                    c = prev[i - bpp] if i >= bpp else 0
                    cur[i] = (cur[i] + _paeth(a, prev[i], c)) & 0xFF
                else:
                    raise ValueError(f"{path}: row {y} has filter type {ftype}")
            out = bytes(cur)
        rows.append(out)
        prev = out
    return width, height, bpp, rows


def png_colors(path):
    """Distinct colours of the image: {(r, g, b): pixel count}."""
    width, height, bpp, rows = png_pixels(path)
    counts = {}
    for row in rows:
        for x in range(0, width * bpp, bpp):
            key = row[x:x + 3]
            counts[key] = counts.get(key, 0) + 1
    return {tuple(k): v for k, v in counts.items()}
