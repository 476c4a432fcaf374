"""Removes shared-library dependencies (DT_NEEDED) from an x86-64 or arm64 (aarch64) ELF shared
library, in place.

Why: PyPI's torch wheel is a CUDA build, and even its libtorch_cpu.so names libcudart.so.13
and libcupti.so.13 as dependencies: Kineto, the profiler linked into it, calls 26 of their
functions, but only when a CUDA profiling session is started. The CPU serving image
(Dockerfile.serving, DEVICE=cpu and cpu-arm64; the aarch64 wheel is a CUDA build for Grace
and names the same two) ships libtorch_cpu.so without any CUDA library, so those two
entries are removed here, with what the loader checks alongside them:
  - the DT_NEEDED entries;
  - their version-needed entries (.gnu.version_r): glibc's loader asserts that every one of
    them names a loaded library (patchelf 0.19's --remove-needed leaves them: the loader
    then aborts with "_dl_check_map_versions: Assertion `needed != NULL' failed");
  - the version of each symbol imported from them (.gnu.version) becomes "global", so the
    symbols stay undefined and unversioned.
An undefined symbol is resolved when first called (lazy binding), so the library loads and
works as long as none of those functions is called; a call ends the process with "symbol
lookup error: ... undefined symbol: cuptiSubscribe" (say). The edit is refused, leaving the file
as it was, where that laziness does not hold: the library asks for binding at load time
(DT_BIND_NOW, DF_BIND_NOW, DF_1_NOW), or a symbol of a removed library is used other than
through a PLT call (a data or address relocation, resolved when the library is loaded).
LD_BIND_NOW=1 in the environment would also bind them at load time and make loading fail.

Usage: elf_drop_needed.py FILE LIB [LIB...]   e.g. libtorch_cpu.so libcudart.so.13 libcupti.so.13
Prints, per library removed, how many imported symbols were made unversioned.
"""
import mmap
import struct
import sys

SHT_RELA, SHT_DYNAMIC, SHT_DYNSYM = 4, 6, 11
SHT_GNU_VERNEED, SHT_GNU_VERSYM = 0x6FFFFFFE, 0x6FFFFFFF
DT_NULL, DT_NEEDED, DT_JMPREL, DT_BIND_NOW, DT_FLAGS = 0, 1, 23, 24, 30
DT_FLAGS_1, DT_VERNEEDNUM = 0x6FFFFFFB, 0x6FFFFFFF
DF_BIND_NOW, DF_1_NOW = 0x8, 0x1
# The PLT relocation type of each machine handled (e_machine: EM_X86_64, EM_AARCH64).
JUMP_SLOT = {62: 7, 183: 1026}  # R_X86_64_JUMP_SLOT, R_AARCH64_JUMP_SLOT
VER_NDX_GLOBAL = 1


class Refused(Exception):
    pass


def cstring(buf, offset):
    return bytes(buf[offset:buf.find(b"\0", offset)]).decode()


def drop_needed(path, libs):
    """Edits PATH; returns {lib: number of symbols made unversioned}."""
    with open(path, "r+b") as f, mmap.mmap(f.fileno(), 0) as m:
        if m[:4] != b"\x7fELF" or m[4] != 2 or m[5] != 1:
            raise Refused(f"{path}: not a little-endian 64-bit ELF file")
        (e_machine,) = struct.unpack_from("<H", m, 18)
        if e_machine not in JUMP_SLOT:
            raise Refused(f"{path}: not x86-64 or aarch64 (e_machine {e_machine})")
        jump_slot = JUMP_SLOT[e_machine]
        e_shoff, = struct.unpack_from("<Q", m, 40)
        e_shentsize, e_shnum = struct.unpack_from("<HH", m, 58)
        sections = []
        for i in range(e_shnum):
            (name, stype, flags, addr, offset, size, link, info, align,
             entsize) = struct.unpack_from("<IIQQQQIIQQ", m, e_shoff + i * e_shentsize)
            sections.append(dict(index=i, type=stype, addr=addr, offset=offset, size=size,
                                 link=link, info=info, entsize=entsize))

        def only(stype):
            found = [s for s in sections if s["type"] == stype]
            if len(found) != 1:
                raise Refused(f"{path}: {len(found)} sections of type {stype:#x}, expected one")
            return found[0]

        dynamic, dynsym = only(SHT_DYNAMIC), only(SHT_DYNSYM)
        verneed, versym = only(SHT_GNU_VERNEED), only(SHT_GNU_VERSYM)
        dynstr = sections[dynamic["link"]]["offset"]

        entries = [struct.unpack_from("<qQ", m, dynamic["offset"] + 16 * i)
                   for i in range(dynamic["size"] // 16)]
        end = next(i for i, (tag, _) in enumerate(entries) if tag == DT_NULL)
        entries = entries[:end]
        tags = dict(entries)
        if DT_BIND_NOW in tags or tags.get(DT_FLAGS, 0) & DF_BIND_NOW or tags.get(DT_FLAGS_1, 0) & DF_1_NOW:
            raise Refused(f"{path}: binds every symbol at load time; its undefined symbols would fail to load")
        needed = {cstring(m, dynstr + val): i for i, (tag, val) in enumerate(entries) if tag == DT_NEEDED}
        missing = [lib for lib in libs if lib not in needed]
        if missing:
            raise Refused(f"{path}: does not need {', '.join(missing)} (needs {', '.join(needed)})")

        # The version-needed chain: (offset of the entry, file name, its version indices).
        chain, offset = [], verneed["offset"]
        while True:
            vn_version, vn_cnt, vn_file, vn_aux, vn_next = struct.unpack_from("<HHIII", m, offset)
            indices, aux = [], offset + vn_aux
            for _ in range(vn_cnt):
                _, _, vna_other, _, vna_next = struct.unpack_from("<IHHII", m, aux)
                indices.append(vna_other)
                aux += vna_next
            chain.append(dict(offset=offset, version=vn_version, cnt=vn_cnt, file_offset=vn_file,
                              aux=offset + vn_aux, file=cstring(m, dynstr + vn_file), indices=indices))
            if vn_next == 0:
                break
            offset += vn_next
        dropped_indices = {}
        for entry in chain:
            if entry["file"] in libs:
                for index in entry["indices"]:
                    dropped_indices[index] = entry["file"]

        # The symbols versioned by those entries: undefined, and used through PLT calls only.
        nsyms = dynsym["size"] // 24
        symbols = {}
        for i in range(nsyms):
            (ndx,) = struct.unpack_from("<H", m, versym["offset"] + 2 * i)
            lib = dropped_indices.get(ndx & 0x7FFF)
            if lib is None:
                continue
            st_name, _, _, st_shndx = struct.unpack_from("<IBBH", m, dynsym["offset"] + 24 * i)
            name = cstring(m, sections[dynsym["link"]]["offset"] + st_name)
            if st_shndx != 0:
                raise Refused(f"{path}: {name} is versioned by {lib} but defined here")
            symbols[i] = (name, lib)
        jmprel = tags.get(DT_JMPREL)
        for s in sections:
            if s["type"] != SHT_RELA or s["link"] != dynsym["index"]:
                continue
            plt = s["addr"] == jmprel
            for r in range(s["size"] // 24):
                _, r_info, _ = struct.unpack_from("<QQq", m, s["offset"] + 24 * r)
                sym, rtype = r_info >> 32, r_info & 0xFFFFFFFF
                if sym in symbols and not (plt and rtype == jump_slot):
                    name, lib = symbols[sym]
                    raise Refused(f"{path}: {name} ({lib}) has a relocation of type {rtype} resolved at load time")

        # All checks passed: edit.
        for i in symbols:
            struct.pack_into("<H", m, versym["offset"] + 2 * i, VER_NDX_GLOBAL)
        # The kept entries' headers go into the first header slots, in order (DT_VERNEED points
        # at the first slot, whichever entry was there); their auxiliary lists stay in place.
        kept = [e for e in chain if e["file"] not in libs]
        slots = [e["offset"] for e in chain]
        for j, e in enumerate(kept):
            slot = slots[j]
            vn_next = slots[j + 1] - slot if j + 1 < len(kept) else 0
            struct.pack_into("<HHIII", m, slot, e["version"], e["cnt"], e["file_offset"], e["aux"] - slot, vn_next)
        remaining = [(tag, val) for i, (tag, val) in enumerate(entries)
                     if not (tag == DT_NEEDED and cstring(m, dynstr + val) in libs)]
        remaining = [(tag, len(kept) if tag == DT_VERNEEDNUM else val) for tag, val in remaining]
        for i in range(end + 1):
            tag, val = remaining[i] if i < len(remaining) else (DT_NULL, 0)
            struct.pack_into("<qQ", m, dynamic["offset"] + 16 * i, tag, val)
        # sh_info of .gnu.version_r is the entry count (readelf, binutils read it).
        struct.pack_into("<I", m, e_shoff + verneed["index"] * e_shentsize + 44, len(kept))
        m.flush()
    counts = {lib: 0 for lib in libs}
    for _, lib in symbols.values():
        counts[lib] += 1
    return counts


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        counts = drop_needed(argv[1], argv[2:])
    except Refused as error:
        print(f"elf_drop_needed: {error}", file=sys.stderr)
        return 1
    for lib, n in counts.items():
        print(f"elf_drop_needed: {argv[1]}: removed {lib} ({n} imported symbols now unversioned, bound on first call)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
