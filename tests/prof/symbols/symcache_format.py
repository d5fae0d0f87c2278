#!/usr/bin/env python3
"""symcache_format.py FILE... - an independent reader of symbol-cache files,
format 5, written from docs/pprof-format.md "Symbol cache" (not from
ptp_symcache.c): checks the layout (file header, each segment's header,
index, parts and padding, back to back to the file's end), the header
checksum (over the header's first 28 bytes: the limits of a "not whole"
mark included) and every block's checksum with a software CRC-32C (the
three lanes of src/prof/cache/ptp_crc.h folded as that header defines),
that each block of intervals starts at the lo its index gives, and that a
segment without the "not whole" flag (16) records no limits. Prints the
last segment's flags and, with the mark, its limits. Exit 1 with the
first mismatch. Used by tests/prof/symcache_test.sh (part 6)."""
import struct, sys

POLY = 0x82F63B78
TAB = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ POLY if c & 1 else c >> 1
    TAB.append(c)

def crc32c(data, crc=0):
    c = crc ^ 0xFFFFFFFF
    for b in data:
        c = TAB[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF

def c3_block(data, crc=0):
    n = len(data)
    if n == 0:
        return crc
    l = (n // 3) & ~7
    lanes = [crc32c(data[0:l]), crc32c(data[l:2 * l]), crc32c(data[2 * l:])]
    return crc32c(struct.pack('<3I', *lanes), crc)

def c3_blocks(data, crc=0, block=16384):
    for off in range(0, len(data), block):
        crc = c3_block(data[off:off + block], crc)
    return crc

def check(path):
    d = open(path, 'rb').read()
    magic, ver, algo = d[:8], *struct.unpack_from('<II', d, 8)
    assert magic == b'PTPSYMC\n' and ver == 5 and algo == 3, (magic, ver, algo)
    off, segs, nblocks, nivals, last = 152, 0, 0, 0, None
    while off < len(d):
        mg, flags, niv, nfr, sb, nw_points, nw_file, crc = struct.unpack_from('<8I', d, off)
        assert mg == 0x35474553, hex(mg)
        assert flags & 16 or (nw_points, nw_file) == (0, 0), 'limits without the mark'
        last = (flags, nw_points, nw_file)
        nbiv, nbfr, nbs = -(-niv // 170), -(-nfr // 170), -(-sb // 4096)
        nb = nbiv + nbfr + nbs
        idx = off + 32
        blo = struct.unpack_from('<%dQ' % nbiv, d, idx)
        bcrc = struct.unpack_from('<%dI' % nb, d, idx + 8 * nbiv)
        h = c3_blocks(d[off:off + 28])
        h = c3_blocks(d[idx:idx + 8 * nbiv], h)
        h = c3_blocks(d[idx + 8 * nbiv:idx + 8 * nbiv + 4 * nb], h)
        assert h == crc, 'header crc %x != %x' % (h, crc)
        body = idx + ((8 * nbiv + 4 * nb + 7) & ~7)
        parts = [(body, niv * 24, 170 * 24), (body + niv * 24, nfr * 24, 170 * 24),
                 (body + niv * 24 + nfr * 24, sb, 4096)]
        b = 0
        for start, ln, bs in parts:
            for o in range(0, ln, bs):
                got = c3_block(d[start + o:start + min(o + bs, ln)])
                assert got == bcrc[b], 'block %d crc %x != %x' % (b, got, bcrc[b])
                b += 1
        for k in range(nbiv):
            lo, = struct.unpack_from('<Q', d, body + k * 170 * 24)
            assert lo == blo[k]
        off = body + niv * 24 + nfr * 24 + ((sb + 7) & ~7)
        segs += 1
        nblocks += nb
        nivals += niv
    assert off == len(d), (off, len(d))
    return segs, nblocks, nivals, last

if __name__ == '__main__':
    for p in sys.argv[1:]:
        try:
            s, b, n, (fl, pts, fmax) = check(p)
        except (AssertionError, struct.error) as e:
            print('%s: not a valid format-5 file: %s' % (p, e), file=sys.stderr)
            sys.exit(1)
        mark = ', not whole under %d points, %d bytes' % (pts, fmax) if fl & 16 else ''
        print('%s: %d segments, %d intervals, %d blocks, flags %d%s, every checksum right'
              % (p.split('/')[-1], s, n, b, fl, mark))
