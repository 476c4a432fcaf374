#!/usr/bin/env bash
# Tests unpack-packages.sh's two unpackers (dpkg-deb and the dpkg-less deb_extract.py) and
# its fix-ups, on a made-up package with each case in it, and, when .gpu-deps/ holds
# packages, on those too: both unpackers must give identical trees.
# Needs dpkg-deb (to build the made-up package) and python3. Prints "N passed, M failed".
#
# Usage: scripts/gpu-check/test-unpack.sh [--no-real]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
real=1
[[ ${1:-} == --no-real ]] && real=0

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
check() {  # check DESCRIPTION COMMAND...
  local what=$1; shift
  if "$@"; then passed=$((passed + 1)); echo "ok   $what"
  else failed=$((failed + 1)); echo "FAIL $what"; fi
}

# A tree listing that two unpackers must agree on: type, mode, link target, content hash,
# with the prefix's own path (which rewritten links and CMake files name) as PREFIX.
listing() {
  python3 - "$1" <<'PY'
import hashlib, os, stat, sys
root = sys.argv[1]
for d, dirs, files in os.walk(root):
    dirs.sort()
    for n in sorted(dirs + files):
        p = os.path.join(d, n)
        st = os.lstat(p)
        rel = os.path.relpath(p, root)
        if stat.S_ISLNK(st.st_mode):
            print(rel, "link", os.readlink(p).replace(root, "PREFIX"))
        elif stat.S_ISDIR(st.st_mode):
            print(rel, "dir", oct(st.st_mode & 0o7777))
        else:
            with open(p, "rb") as f:
                h = hashlib.sha256(f.read().replace(root.encode(), b"PREFIX")).hexdigest()
            print(rel, "file", oct(st.st_mode & 0o7777), h)
PY
}

# ---- the made-up package ----------------------------------------------------------------
multiarch=x86_64-linux-gnu
pkg=$tmp/pkg
lib=$pkg/usr/lib/$multiarch
mkdir -p "$pkg/DEBIAN" "$lib/blas" "$lib/cmake/foo" "$pkg/usr/include/foo"
printf 'Package: mrcnn-test-foo\nVersion: 1:1.0+ds-1~x\nArchitecture: amd64\nMaintainer: test <test@example.invalid>\nDescription: test package\n' > "$pkg/DEBIAN/control"
# update-alternatives with continuation lines, as libblas3's postinst has it.
cat > "$pkg/DEBIAN/postinst" <<'EOF'
#!/bin/sh
set -e
update-alternatives --install /usr/lib/x86_64-linux-gnu/libfoo.so.3 \
                    libfoo.so.3-x86_64-linux-gnu \
                    /usr/lib/x86_64-linux-gnu/blas/libfoo.so.3 10
EOF
chmod 755 "$pkg/DEBIAN/postinst"
echo 'not really a library' > "$lib/blas/libfoo.so.3"
echo '#pragma once' > "$pkg/usr/include/foo/foo.h"
# Absolute link to a file the package ships: becomes relative inside the prefix.
ln -s /usr/include/foo/foo.h "$pkg/usr/include/foo.h"
# Absolute link to a base-system library in a version this machine lacks: re-pointed at
# the soname link the loader knows (here zlib's, which every Debian/Ubuntu has).
ln -s "/lib/$multiarch/libz.so.1.2.99" "$lib/libzz.so"
# A CMake config with CMake's own "/usr move" guard (harmless, left alone) and a
# hard-coded include directory (rewritten into the prefix).
cat > "$lib/cmake/foo/foo-config.cmake" <<'EOF'
# cross-prefix symbolic link such as /lib -> /usr/lib.
get_filename_component(_realCurr "${CMAKE_CURRENT_LIST_DIR}" REALPATH)
get_filename_component(_realOrig "/usr/lib/x86_64-linux-gnu/cmake/foo" REALPATH)
if(_realCurr STREQUAL _realOrig)
  set(PACKAGE_PREFIX_DIR "/usr")
endif()
set(FOO_INCLUDE_DIRS "/usr/include/foo")
EOF
mkdir -p "$tmp/debs"
dpkg-deb -Zxz --root-owner-group -b "$pkg" "$tmp/debs/mrcnn-test-foo_1-1.0-ds-1-x_amd64.deb" >/dev/null

for with in dpkg python; do
  p=$tmp/prefix-$with
  "$here/unpack-packages.sh" --deps "$tmp/debs" --with "$with" --env-file "$tmp/env-$with" "$p" > "$tmp/out-$with" 2> "$tmp/err-$with" ||
    { cat "$tmp/err-$with"; check "$with: unpack-packages.sh ran" false; continue; }
  check "$with: header unpacked" test -f "$p/usr/include/foo/foo.h"
  check "$with: alternative link made, relative" test "$(readlink "$p/usr/lib/$multiarch/libfoo.so.3")" = blas/libfoo.so.3
  check "$with: absolute link made relative" test "$(readlink "$p/usr/include/foo.h")" = foo/foo.h
  zz=$(readlink "$p/usr/lib/$multiarch/libzz.so")
  check "$with: link to a missing library version re-pointed at its soname ($zz)" \
    bash -c '[[ $1 == */libz.so.1 && -e $1 ]]' _ "$zz"
  cfg=$p/usr/lib/$multiarch/cmake/foo/foo-config.cmake
  check "$with: hard-coded include dir rewritten" grep -qF "set(FOO_INCLUDE_DIRS \"$p/usr/include/foo\")" "$cfg"
  check "$with: CMake's /usr-move guard left alone" grep -qF 'get_filename_component(_realOrig "/usr/lib/x86_64-linux-gnu/cmake/foo" REALPATH)' "$cfg"
  check "$with: comment left alone" grep -qF '# cross-prefix symbolic link such as /lib -> /usr/lib.' "$cfg"
  check "$with: env file names the prefix" grep -qF "export CMAKE_PREFIX_PATH=$p/usr" "$tmp/env-$with"
  # A second run with the same packages does nothing.
  "$here/unpack-packages.sh" --deps "$tmp/debs" --with "$with" "$p" >/dev/null 2> "$tmp/err2-$with"
  check "$with: second run is a no-op" grep -q 'already holds these 1 packages' "$tmp/err2-$with"
done
check "dpkg and python unpack the made-up package identically" \
  diff <(listing "$tmp/prefix-dpkg") <(listing "$tmp/prefix-python")

# Refuses a non-empty folder it did not make, and /.
mkdir -p "$tmp/foreign" && touch "$tmp/foreign/keep-me"
if "$here/unpack-packages.sh" --deps "$tmp/debs" "$tmp/foreign" >/dev/null 2>&1; then r=1; else r=0; fi
check "refuses a non-empty folder it did not make" test $r = 0 -a -f "$tmp/foreign/keep-me"
if "$here/unpack-packages.sh" --deps "$tmp/debs" / >/dev/null 2>&1; then r=1; else r=0; fi
check "refuses /" test $r = 0

# ---- the real carried packages ----------------------------------------------------------
if ((real)) && compgen -G "$top/.gpu-deps/*.deb" >/dev/null; then
  for with in dpkg python; do
    "$here/unpack-packages.sh" --with "$with" "$tmp/real-$with" >/dev/null 2>"$tmp/real-err-$with" ||
      { cat "$tmp/real-err-$with"; check "$with: real packages unpack" false; }
  done
  check "dpkg and python unpack .gpu-deps identically" \
    diff <(listing "$tmp/real-dpkg") <(listing "$tmp/real-python")
  check "real: libblas.so.3 and liblapack.so.3 alternatives resolve" \
    test -f "$tmp/real-dpkg/usr/lib/$multiarch/libblas.so.3" -a -f "$tmp/real-dpkg/usr/lib/$multiarch/liblapack.so.3"
  abs=$(find "$tmp/real-dpkg" -type l -lname '/usr/*' | head -n 5)
  check "real: no absolute link into /usr is left${abs:+ ($abs)}" test -z "$abs"
fi

echo "$passed passed, $failed failed"
((failed == 0))
