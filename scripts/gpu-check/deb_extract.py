#!/usr/bin/env python3
"""Reads Debian packages without dpkg (a GPU host's image may lack it).

A .deb is an `ar` archive: debian-binary, control.tar.{xz,gz,zst,...}, data.tar.{...}.

  deb_extract.py data DEB DEST       unpack the package's files under DEST (like dpkg -x)
  deb_extract.py control DEB NAME    print one control file (e.g. postinst), nothing if absent

Python's tarfile reads xz, gz and bz2 (bookworm's packages use xz); zstd members need the
`zstd` program.
"""
import io
import os
import shutil
import subprocess
import sys
import tarfile


def ar_members(path):
    """Yields (name, bytes) for each member of an ar archive."""
    with open(path, "rb") as f:
        if f.read(8) != b"!<arch>\n":
            raise ValueError(f"{path}: not an ar archive")
        while True:
            header = f.read(60)
            if not header:
                return
            if len(header) != 60 or header[58:60] != b"`\n":
                raise ValueError(f"{path}: bad ar member header")
            name = header[0:16].decode().strip().rstrip("/")
            size = int(header[48:58].decode().strip())
            data = f.read(size)
            if size % 2:
                f.read(1)  # members are 2-byte aligned
            yield name, data


def open_member_tar(path, prefix):
    """The tar archive in member PREFIX.tar[.*] of the .deb."""
    for name, data in ar_members(path):
        if name == prefix + ".tar" or name.startswith(prefix + ".tar."):
            if name.endswith(".zst"):
                if not shutil.which("zstd"):
                    raise RuntimeError(f"{path}: {name} is zstd-compressed and no zstd program is installed")
                data = subprocess.run(["zstd", "-dc"], input=data, stdout=subprocess.PIPE, check=True).stdout
                return tarfile.open(fileobj=io.BytesIO(data), mode="r:")
            return tarfile.open(fileobj=io.BytesIO(data), mode="r:*")
    raise ValueError(f"{path}: no {prefix}.tar member")


def safe_name(name):
    """Packages list their files as ./usr/...; refuse anything that could leave DEST."""
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if name.startswith("/") or ".." in parts:
        raise ValueError(f"refusing member {name!r}")
    return "/".join(parts)


def extract_data(deb, dest):
    with open_member_tar(deb, "data") as tar:
        members = []
        for m in tar.getmembers():
            m.name = safe_name(m.name)
            if m.islnk():  # hard links name another member of the same archive
                m.linkname = safe_name(m.linkname)
            if m.name:
                members.append(m)
        # The packages come from Debian's signed archive (prepare-packages.sh checks their
        # SHA-256): symbolic links to absolute paths are legitimate in them and are fixed
        # up by unpack-packages.sh, so no link filtering here.
        kwargs = {"filter": "fully_trusted"} if hasattr(tarfile, "fully_trusted_filter") else {}
        tar.extractall(dest, members=members, numeric_owner=True, **kwargs)


def print_control(deb, wanted):
    with open_member_tar(deb, "control") as tar:
        for m in tar.getmembers():
            if safe_name(m.name) == wanted and m.isfile():
                sys.stdout.buffer.write(tar.extractfile(m).read())
                return


def main(argv):
    if len(argv) == 4 and argv[1] == "data":
        os.makedirs(argv[3], exist_ok=True)
        extract_data(argv[2], argv[3])
    elif len(argv) == 4 and argv[1] == "control":
        print_control(argv[2], argv[3])
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
