#!/usr/bin/env bash
# Unpacks the carried Debian packages (.gpu-deps/*.deb, from prepare-packages.sh) into a
# private prefix on a machine where we cannot install them (a bare GPU host: no network,
# and unpacking over / would break its image). Never touches /.
#
# Usage: scripts/gpu-check/unpack-packages.sh [--deps DIR] [--env-file FILE]
#                                            [--with dpkg|python] PREFIX
#
# Then does what dpkg's maintainer scripts would have done that the build needs:
#  - the `update-alternatives --install` links of the packages' postinst scripts (the
#    libblas.so.3 / liblapack.so.3 links OpenCV's core resolves), made inside PREFIX;
#  - absolute symbolic links (/usr/...) rewritten to relative ones inside PREFIX;
#  - CMake package files checked for hard-coded /usr paths, which are rewritten to PREFIX.
# and prints the environment that makes CMake, the compiler, the linker and the programs
# use the prefix (also written, as sourceable `export` lines, to --env-file):
#   CMAKE_PREFIX_PATH  PREFIX/usr (find_package configs, headers, libraries)
#   LD_LIBRARY_PATH    PREFIX/usr/lib/x86_64-linux-gnu (+ blas/, lapack/): the loader at
#                      run time, and GNU ld resolving the libraries' own DT_NEEDED entries
#                      (libGLX, liblapack, ... of libopencv_core) at link time
#   PATH               PREFIX/usr/bin (protoc)
#   C_INCLUDE_PATH, CPLUS_INCLUDE_PATH  PREFIX/usr/include/x86_64-linux-gnu and
#                      PREFIX/usr/include, LIBRARY_PATH PREFIX/usr/lib/x86_64-linux-gnu:
#                      the default search paths /usr's are on Debian
# Idempotent: if PREFIX already holds exactly these packages, only the environment is
# printed. `--with python` forces the dpkg-less path (deb_extract.py), which is otherwise
# used only when dpkg-deb is missing.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)

deps=$top/.gpu-deps
env_file=
with=${MRCNN_UNPACK_WITH:-}
prefix=
while (($#)); do
  case $1 in
    --deps) deps=$2; shift 2 ;;
    --env-file) env_file=$2; shift 2 ;;
    --with) with=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    -*) echo "unpack-packages: unknown option $1" >&2; exit 2 ;;
    *) [[ -z $prefix ]] || { echo "unpack-packages: one PREFIX only" >&2; exit 2; }; prefix=$1; shift ;;
  esac
done
[[ -n $prefix ]] || { echo "usage: unpack-packages.sh [--deps DIR] [--env-file FILE] [--with dpkg|python] PREFIX" >&2; exit 2; }

log() { printf '[unpack-packages] %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

if [[ -z $with ]]; then
  if command -v dpkg-deb >/dev/null; then with=dpkg; else with=python; fi
fi
case $with in dpkg|python) ;; *) die "--with takes dpkg or python, not '$with'" ;; esac
py=$(command -v python3 || true)
[[ $with == dpkg || -n $py ]] || die "neither dpkg-deb nor python3 is available"

shopt -s nullglob
debs=("$deps"/*.deb)
((${#debs[@]})) || die "no .deb files in $deps (run scripts/gpu-check/prepare-packages.sh where apt works)"

mkdir -p "$prefix"
prefix=$(cd "$prefix" && pwd)
[[ $prefix != / ]] || die "refusing to unpack into /"
marker=$prefix/.mrcnn-gpu-deps
# What this prefix must hold: each package file's name and size.
want=$(for d in "${debs[@]}"; do printf '%s %s\n' "$(basename "$d")" "$(stat -c %s "$d")"; done | sort)
multiarch=x86_64-linux-gnu
libdir=$prefix/usr/lib/$multiarch

if [[ -f $marker ]] && [[ $(cat "$marker") == "$want" ]]; then
  log "$prefix already holds these ${#debs[@]} packages"
else
  # Start from an empty prefix, but delete only a prefix we made (our marker in it).
  if [[ -n $(ls -A "$prefix") ]]; then
    [[ -f $marker ]] || die "$prefix is not empty and was not made by this script; choose another prefix"
    find "$prefix" -mindepth 1 -delete
  fi
  # The carried files against prepare-packages.sh's manifest: a transfer that lost or cut
  # a file fails here, by name, rather than as a missing header twenty minutes later.
  if [[ -f $deps/MANIFEST.tsv ]]; then
    listed=$(awk -F'\t' 'NR > 1 { print $6 }' "$deps/MANIFEST.tsv" | sort)
    present=$(for d in "${debs[@]}"; do basename "$d"; done | sort)
    [[ $listed == "$present" ]] ||
      die "$deps does not hold what MANIFEST.tsv lists: $(diff <(echo "$listed") <(echo "$present") | grep '^[<>]' | head -n 5 | tr '\n' ' ')"
    awk -F'\t' -v d="$deps" 'NR > 1 { print $5 "  " d "/" $6 }' "$deps/MANIFEST.tsv" | sha256sum --quiet -c - >&2 ||
      die "some carried .debs differ from MANIFEST.tsv (cut short in transfer?)"
  fi
  # Marked as ours before anything is unpacked, so that a run cut short is redone (the
  # marker's content only matches once everything below has finished).
  echo incomplete > "$marker"
  log "unpacking ${#debs[@]} packages into $prefix (with $with)"
  for d in "${debs[@]}"; do
    if [[ $with == dpkg ]]; then
      dpkg-deb -x "$d" "$prefix" || die "dpkg-deb -x failed on $(basename "$d")"
    else
      "$py" "$here/deb_extract.py" data "$d" "$prefix" || die "deb_extract.py failed on $(basename "$d")"
    fi
  done

  # update-alternatives links from the postinst scripts (shell continuation lines joined):
  #   update-alternatives --install LINK NAME PATH PRIORITY
  # The highest priority wins, as update-alternatives' automatic mode picks it.
  declare -A alt_link=() alt_path=() alt_prio=()
  for d in "${debs[@]}"; do
    if [[ $with == dpkg ]]; then
      postinst=$(dpkg-deb --ctrl-tarfile "$d" | tar -xOf - ./postinst 2>/dev/null || true)
    else
      postinst=$("$py" "$here/deb_extract.py" control "$d" postinst)
    fi
    [[ $postinst == *update-alternatives* ]] || continue
    while read -r link name path prio; do
      if [[ -z ${alt_prio[$name]:-} ]] || ((prio > alt_prio[$name])); then
        alt_link[$name]=$link alt_path[$name]=$path alt_prio[$name]=$prio
      fi
    done < <(sed -e ':a' -e '/\\$/N; s/\\\n//; ta' <<<"$postinst" |
             awk '{ for (i = 1; i <= NF; i++) if ($i == "update-alternatives" && $(i + 1) == "--install") {
                      print $(i + 2), $(i + 3), $(i + 4), $(i + 5); break } }')
  done
  for name in "${!alt_link[@]}"; do
    link=$prefix${alt_link[$name]} target=$prefix${alt_path[$name]}
    [[ -e $target ]] || die "alternative $name: ${alt_path[$name]} is not in the packages"
    mkdir -p "$(dirname "$link")"
    ln -sfn "$(realpath --relative-to="$(dirname "$link")" "$target")" "$link"
    log "alternative $name: ${alt_link[$name]} -> ${alt_path[$name]}"
  done

  # Absolute symbolic links point at the real /; inside the prefix they must point at the
  # prefix's copy. A target the packages do not ship is the base system's: kept when this
  # machine has it; a development link to a versioned library this machine has in another
  # version (zlib1g-dev's libz.so -> /lib/x86_64-linux-gnu/libz.so.1.2.13, where Ubuntu
  # ships libz.so.1.3) is pointed at the library's soname link (libz.so.1) the loader knows.
  while IFS= read -r -d '' l; do
    t=$(readlink "$l")
    [[ $t == /* ]] || continue
    if [[ -e $prefix$t || -L $prefix$t ]]; then
      ln -sfn "$(realpath -m --relative-to="$(dirname "$l")" "$prefix$t")" "$l"
    elif [[ ! -e $t ]]; then
      name=$(basename "$t") found=
      while [[ $name == *.so.* ]]; do
        for dir in "$(dirname "$t")" "/lib/$multiarch" "/usr/lib/$multiarch"; do
          [[ -e $dir/$name ]] && { found=$dir/$name; break 2; }
        done
        name=${name%.*}
      done
      if [[ -n $found ]]; then
        log "${l#"$prefix"} -> $t: not on this machine, pointed at $found"
        ln -sfn "$found" "$l"
      else
        log "warning: ${l#"$prefix"} -> $t: not in the packages nor on this machine"
      fi
    fi
  done < <(find "$prefix" -type l -print0)

  # CMake package files: Debian's locate themselves relative to their own folder. The one
  # /usr path they do name is CMake's "/usr move" guard (used only when the file's real path
  # IS /usr/lib/...: never inside a prefix), so that idiom is skipped, as are comments.
  # Anything else naming /usr/{include,lib,share,bin} would reach the real /usr (absent or
  # another version on the GPU host) and is rewritten into the prefix.
  checked=0
  while IFS= read -r -d '' f; do
    checked=$((checked + 1))
    # mawk (Ubuntu's and Debian's default awk) has no gensub: splice by hand.
    awk -v P="$prefix" '
      function fix(s,   out, m, i) {
        out = ""
        while (match(s, /(^|[^A-Za-z0-9_.\/-])\/usr\/(include|lib|share|bin)/)) {
          m = substr(s, RSTART, RLENGTH); i = index(m, "/usr/")
          out = out substr(s, 1, RSTART - 1) substr(m, 1, i - 1) P substr(m, i)
          s = substr(s, RSTART + RLENGTH)
        }
        return out s
      }
      /^[ \t]*#/ { print; next }
      /_realOrig/ { if ($0 ~ /^[ \t]*if\(/) guard = 1; print; next }
      guard { if ($0 ~ /^[ \t]*endif\(/) guard = 0; print; next }
      { print fix($0) }' "$f" > "$f.mrcnn-new"
    if cmp -s "$f" "$f.mrcnn-new"; then
      rm -f "$f.mrcnn-new"
    else
      log "rewrote hard-coded /usr paths in ${f#"$prefix"}:"
      diff "$f" "$f.mrcnn-new" | grep '^>' | head -n 3 >&2 || true
      cat "$f.mrcnn-new" > "$f" && rm -f "$f.mrcnn-new"
    fi
  done < <(find "$prefix/usr/lib" "$prefix/usr/share" -path '*/cmake/*' -name '*.cmake' -type f -print0 2>/dev/null)
  log "checked $checked CMake package files for hard-coded /usr paths"

  printf '%s\n' "$want" > "$marker"
fi

# Libraries of the prefix that the loader would otherwise take from the system: with
# LD_LIBRARY_PATH set, the prefix's older Debian copy wins for every program started.
if command -v ldconfig >/dev/null; then
  system_sonames=$(ldconfig -p 2>/dev/null | awk 'NR > 1 { print $1 }' | sort -u)
  shadowed=$(find "$libdir" -maxdepth 1 -name 'lib*.so.*' -printf '%f\n' 2>/dev/null | sort -u | comm -12 - <(echo "$system_sonames") | tr '\n' ' ')
  [[ -z $shadowed ]] || log "note: the prefix shadows these system libraries: $shadowed"
fi

lib_path=$libdir
for sub in blas lapack; do [[ -d $libdir/$sub ]] && lib_path+=:$libdir/$sub; done
# The compiler's and linker's default search paths, as /usr's are on Debian: headers that
# no CMake target names an include directory for (jpeglib.h's jconfig.h in the multiarch
# folder; protobuf's, which trainer/engine uses through protoc's output) are found there.
# As C_INCLUDE_PATH/CPLUS_INCLUDE_PATH they are system folders (no warnings from them,
# searched after every -I/-isystem, like /usr/include). nvcc's host compiler sees them too.
inc_path=$prefix/usr/include/$multiarch:$prefix/usr/include
env_lines=$(
  printf 'export CMAKE_PREFIX_PATH=%q\n' "$prefix/usr${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
  printf 'export LD_LIBRARY_PATH=%q\n' "$lib_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  printf 'export PATH=%q\n' "$prefix/usr/bin:$PATH"
  printf 'export C_INCLUDE_PATH=%q\n' "$inc_path${C_INCLUDE_PATH:+:$C_INCLUDE_PATH}"
  printf 'export CPLUS_INCLUDE_PATH=%q\n' "$inc_path${CPLUS_INCLUDE_PATH:+:$CPLUS_INCLUDE_PATH}"
  printf 'export LIBRARY_PATH=%q\n' "$libdir${LIBRARY_PATH:+:$LIBRARY_PATH}"
)
[[ -z $env_file ]] || printf '%s\n' "$env_lines" > "$env_file"
printf '%s\n' "$env_lines"
