#!/usr/bin/env python3
"""Compares the machine code of two sets of cubins kernel by kernel, byte for byte: every .text.<kernel>
section, and the sections that carry a kernel's resources (.nv.info.<kernel>: registers, barriers, parameter
layout; .nv.constant0.<kernel>; .nv.shared.<kernel>: its static shared-memory size). A refactor of device code
whose cubins compare equal is proven not to change what runs on the GPU, without a GPU.
Usage: tools/cubin_diff.py DIR_A DIR_B   (the same *.cubin names in both; tools/cubin_diff.sh makes them)
CUBIN_DIFF_RENAME_B="REGEX=>REPLACEMENT" renames B's sections first (a kernel that only gained a template parameter:
"ELb0EEEvNS=>EEEvNS"); then B's kernels with no match in A are listed as NEW, not as differences.
Exit 0 when every section is equal, 1 when any differs or a cubin is missing, 2 on bad input."""
import os
import re
import struct
import sys

KEEP = ('.text.', '.nv.shared.', '.nv.constant0.', '.nv.info.')


def sections(path):
    """{section name: bytes} of the ELF64 cubin at path; NOBITS sections (shared memory) as their size."""
    d = open(path, 'rb').read()
    if d[:4] != b'\x7fELF' or d[4] != 2:
        raise ValueError(f'{path}: not an ELF64 file (expected a cubin from nvcc -cubin)')
    shoff, = struct.unpack_from('<Q', d, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from('<HHH', d, 0x3a)
    hdr = [struct.unpack_from('<IIQQQQIIQQ', d, shoff + i * shentsize) for i in range(shnum)]
    stro = hdr[shstrndx][4]

    def name(o):
        return d[stro + o: d.index(b'\0', stro + o)].decode()

    SHT_NOBITS = 8
    # Names in an anonymous namespace carry a hash of the source's path (_GLOBAL__N__<hash>_): the same kernel
    # built from another checkout must still pair up.
    return {re.sub(r'_GLOBAL__N__[0-9a-f]+_', '_GLOBAL__N__', name(h[0])): (('nobits', h[5]) if h[1] == SHT_NOBITS else d[h[4]:h[4] + h[5]])
            for h in hdr if name(h[0]).startswith(KEEP)}


def main():
    if len(sys.argv) != 3 or not all(os.path.isdir(a) for a in sys.argv[1:]):
        print(__doc__.splitlines()[-2], file=sys.stderr)
        return 2
    a, b = sys.argv[1], sys.argv[2]
    names = sorted(f for f in set(os.listdir(a)) | set(os.listdir(b)) if f.endswith('.cubin'))
    kernels = differ = 0
    for f in names:
        if not (os.path.exists(os.path.join(a, f)) and os.path.exists(os.path.join(b, f))):
            print(f'MISSING {f}')
            differ += 1
            continue
        try:
            sa, sb = sections(os.path.join(a, f)), sections(os.path.join(b, f))
        except ValueError as e:
            print(f'cubin_diff: {e}', file=sys.stderr)
            return 2
        rename = os.environ.get('CUBIN_DIFF_RENAME_B', '')
        if rename:
            if '=>' not in rename:
                print('cubin_diff: CUBIN_DIFF_RENAME_B must read REGEX=>REPLACEMENT', file=sys.stderr)
                return 2
            pat, repl = rename.split('=>', 1)
            sb = {re.sub(pat, repl, k): v for k, v in sb.items()}
            for k in sorted(set(sb) - set(sa)):
                if k.startswith('.text.'):
                    print(f'NEW {f} {k}')
            sb = {k: v for k, v in sb.items() if k in sa}
        for k in sorted(set(sa) | set(sb)):
            kernels += k.startswith('.text.')
            if sa.get(k) != sb.get(k):
                print(f'DIFF {f} {k}')
                differ += 1
    print(f'{len(names)} cubins, {kernels} kernels compared, {differ} sections differ')
    return 1 if differ else 0


if __name__ == '__main__':
    sys.exit(main())
