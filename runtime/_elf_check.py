"""Whether a cached object file or shared library is whole: an ELF file whose headers and every
part they point to lie inside the file.

The cache keeps libraries under content-derived names and trusts a name that exists. A file cut
short (a copy of the cache interrupted, a crash before the data reached the disk, a full disk
on another machine's writer) would otherwise be opened as it is: ``dlopen`` maps segments past
the end of the file and the process dies of SIGBUS at the first touch, or every later build of
that kernel fails to load it. A cached file that is not whole is treated as a miss and rebuilt.
Only the headers are checked: a flipped bit inside the code is not seen.
"""

from __future__ import annotations

import struct
from pathlib import Path

_MAGIC = b"\x7fELF"
_SHT_NOBITS = 8  # .bss: takes no bytes in the file
_PT_LOAD = 1

# (header, program header, section header) layouts after e_ident, for ELFCLASS32 and 64
_LAYOUTS = {
    1: ("HHIIIIIHHHHHH", "IIIIIIII", "IIIIIIIIII"),
    2: ("HHIQQQIHHHHHH", "IIQQQQQQ", "IIQQQQIIQQ"),
}


def is_whole_elf(path: Path) -> bool:
    """True when ``path`` is an ELF file that its own headers say is complete."""
    try:
        data = path.read_bytes()
    except OSError:
        return False
    return _is_whole(data)


def _is_whole(data: bytes) -> bool:
    if len(data) < 16 or data[:4] != _MAGIC or data[4] not in _LAYOUTS or data[5] not in (1, 2):
        return False
    order = "<" if data[5] == 1 else ">"
    header, phdr, shdr = (order + f for f in _LAYOUTS[data[4]])
    try:
        (_, _, _, _, phoff, shoff, _, _, phentsize, phnum, shentsize, shnum,
         _) = struct.unpack_from(header, data, 16)
        if (phnum and phentsize < struct.calcsize(phdr)) or (
                shnum and shentsize < struct.calcsize(shdr)):
            return False
        for k in range(phnum):
            p = struct.unpack_from(phdr, data, phoff + k * phentsize)
            offset, filesz = (p[1], p[4]) if data[4] == 1 else (p[2], p[5])
            if p[0] == _PT_LOAD and offset + filesz > len(data):
                return False
        for k in range(shnum):
            s = struct.unpack_from(shdr, data, shoff + k * shentsize)
            if s[1] != _SHT_NOBITS and s[4] + s[5] > len(data):
                return False
    except struct.error:  # a header table that runs past the end of the file
        return False
    return True
