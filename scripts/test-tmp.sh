# Sourced by scripts/test.sh and scripts/test-sanitizers.sh, which run CTest with TMPDIR set to
# a folder of its own. left_in_tmp DIR: fails, naming them, when the tests left anything in DIR
# (a test that leaves its files fills CI's disk run after run: before this check, each run left
# about 350 MB under /tmp). Removes DIR when it is empty.
left_in_tmp() {
  local dir=$1 left
  left=$(find "$dir" -mindepth 1 -maxdepth 1 -printf '%f\n' | sort)
  if [[ -n $left ]]; then
    echo "[test] FAILED: the tests left these in their temp dir $dir (TMPDIR), a test's files must go at its end:"
    printf '%s\n' "$left" | head -n 20 | sed 's/^/  /'
    return 1
  fi
  rmdir "$dir"
}
