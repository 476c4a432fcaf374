# python_venv DEST REQUIREMENTS: a Python venv at DEST with REQUIREMENTS installed, made again
# when that file's content changes. Sourced by scripts/setup.sh (.venv) and
# scripts/test-containers.sh (.venv-sagemaker); returns non-zero when pip fails.
#
# MRCNN_VENV_CACHE=DIR (.ci/run sets it): each venv is made once per requirements content, in
# DIR, and DEST becomes a symbolic link to it. CI runs every commit in a clean clone, which
# made both venvs again each time from pip's cache: ~6 GB of wheels unpacked, about 2 min for
# .venv alone on 2 cores, 3-4 min beside other work (bench/RESULTS.md, issue 42). Python keeps the
# link's path (sys.prefix is DEST, not the cache), so torch's headers stay under the checkout
# and ccache's keys for the compiles that include them do not change. The two most recently
# used venvs per name are kept; older ones are removed. Without MRCNN_VENV_CACHE, DEST is a
# real folder, as before.
python_venv() {
  local dest=$1 requirements=$2 want
  want=$(sha256sum "$requirements" | cut -d' ' -f1)
  if [[ -z ${MRCNN_VENV_CACHE:-} ]]; then
    [[ ! -L $dest ]] || rm -f "$dest"
    python_venv_ready "$dest" "$want" || python_venv_install "$dest" "$requirements" "$want"
    return
  fi
  local cache name target lock fd
  cache=$(mkdir -p "$MRCNN_VENV_CACHE" && cd "$MRCNN_VENV_CACHE" && pwd) || return 1
  name=$(basename "$dest")
  target=$cache/$name-${want:0:16}
  lock=$cache/$name.lock
  # One maker at a time per name: a second clone waits for the first one's venv, then links it.
  exec {fd}>"$lock"
  flock "$fd"
  if ! python_venv_ready "$target" "$want"; then
    python_venv_install "$target" "$requirements" "$want" || { exec {fd}>&-; return 1; }
  fi
  touch "$target/.last-used"
  # Older venvs of this name, beyond the two used last, go (each is several GB).
  local old
  while IFS= read -r old; do
    [[ -n $old && $old != "$target" ]] || continue
    printf '[python-venv] removing %s (not among the two %s venvs used last)\n' "$old" "$name"
    rm -rf "$old"
  done < <(ls -1t "$cache/$name"-*/.last-used 2>/dev/null | tail -n +3 | xargs -r -n 1 dirname)
  exec {fd}>&-
  if [[ -d $dest && ! -L $dest ]]; then rm -rf "$dest"; fi
  ln -sfn "$target" "$dest"
  printf '[python-venv] %s is a link to %s\n' "$dest" "$target"
}

# python_venv_ready DIR SHA: DIR is a venv made from requirements whose sha256 is SHA.
python_venv_ready() {
  [[ -x $1/bin/python && $(cat "$1/.requirements.sha256" 2>/dev/null) == "$2" ]]
}

# python_venv_install DIR REQUIREMENTS SHA: makes DIR from nothing; the stamp is written last,
# so a venv whose install was interrupted is made again.
python_venv_install() {
  local dir=$1 requirements=$2 want=$3
  printf '[python-venv] creating %s from %s\n' "$dir" "${requirements#"$PWD"/}"
  rm -rf "$dir"
  python3 -m venv "$dir" &&
    "$dir/bin/pip" install -q --upgrade pip &&
    "$dir/bin/pip" install -q -r "$requirements" &&
    echo "$want" >"$dir/.requirements.sha256"
}
