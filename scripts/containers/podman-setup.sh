#!/usr/bin/env bash
# Rootful podman on a Debian 12 development machine, and a local Debian base image made
# with debootstrap (no registry is reachable from here, only Debian's archive and PyPI).
#
# Run it (`scripts/containers/podman-setup.sh [--arm64]`) or source it and call `podman_setup`
# (and `podman_arm64_setup`: qemu-user and an arm64 base image, below).
# Idempotent: with everything in place it only re-checks (a second or two).
#
# What it does, and why:
#  1. apt-get installs podman, buildah, runc, debootstrap and the dnsname CNI plugin if
#     missing. runc rather than crun: crun fails on this kind of host's hybrid cgroup v1/v2
#     layout. dnsname (golang-github-containernetworking-plugin-dnsname): podman 4.3 here
#     uses CNI, whose bridge networks resolve no container names without it; with it, every
#     network podman creates (`podman network create`, and docker-compose's through podman's
#     Docker API) runs a dnsmasq that answers the containers' names and network aliases, as
#     Docker's embedded DNS does. SageMaker local mode with instance_count > 1 needs that:
#     each host finds the others by the names in resourceconfig.json (algo-1-xxxxx, ...).
#     Networks made before the plugin was installed keep having no DNS.
#  2. Writes our containers.conf drop-in (never the main file): runtime runc; cgroupfs and
#     file event logging when systemd is not PID 1; default ulimits no higher than what
#     root may set here (podman's defaults for open files and processes exceed it and
#     every `podman run` then fails).
#  2b. Storage: the overlay driver, said in /etc/containers/storage.conf (podman otherwise
#     guesses, and on a fresh machine here it chose vfs, which copies whole layers at every
#     build step: the training image's build then filled 80 GB and died). A clear error when
#     the kernel has no overlay filesystem; storage that another driver already holds is
#     reset (its images and containers are removed, said in the log). podman_need_disk
#     MIB WHAT checks the free disk under the storage root before a build.
#  3. Builds $MRCNN_BASE_IMAGE (localhost/debian:bookworm-slim) with
#     `debootstrap --variant=minbase` from the Debian mirror this machine's apt uses, with
#     this machine's apt sources and CA bundle inside (pip in a container build needs the
#     latter), then `podman import`s it. Skipped when the image exists.
#
# Knobs (environment): MRCNN_BASE_IMAGE, MRCNN_DEBIAN_SUITE (default: this machine's
# codename), MRCNN_DEBIAN_MIRROR (default: read from /etc/apt/sources.list*),
# MRCNN_PODMAN_CONF (the drop-in's path), MRCNN_NPROC_LIMIT (default 32768), MRCNN_BASE_ALIAS
# (empty: no alias).

: "${MRCNN_BASE_IMAGE:=localhost/debian:bookworm-slim}"
: "${MRCNN_BASE_ALIAS:=docker.io/library/debian:bookworm-slim}"
: "${MRCNN_PODMAN_CONF:=/etc/containers/containers.conf.d/50-mrcnn.conf}"

podman_log() { printf '[podman-setup] %s\n' "$*" >&2; }
: "${MRCNN_STORAGE_CONF:=/etc/containers/storage.conf}"

# podman_apt_install PACKAGE...: apt-get installs those not installed yet, saying which
# (--no-install-recommends; the package lists are fetched only when there are none).
podman_apt_install() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  podman_log "installing ${missing[*]}"
  [[ -n $(find /var/lib/apt/lists -maxdepth 1 -name '*_Packages*' -print -quit) ]] || apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# The storage driver podman uses now, and where its storage root is ("DRIVER ROOT").
podman_storage() { podman info --format '{{.Store.GraphDriverName}} {{.Store.GraphRoot}}'; }

# podman_need_disk MIB WHAT: fails, saying what needs how much, when the storage root's
# file system has less than MIB MiB free.
podman_need_disk() {
  local need=$1 what=$2 root avail
  root=$(podman info --format '{{.Store.GraphRoot}}')
  mkdir -p "$root"
  avail=$(df -Pm "$root" | awk 'NR == 2 { print $4 }')
  if ((avail < need)); then
    podman_log "FAILED: $what needs about $need MiB free under $root ($(df -Ph "$root" | awk 'NR == 2 { print $6 }')); $avail MiB are free: free some (podman system prune -a removes unused images) and run again"
    return 1
  fi
  podman_log "disk: $avail MiB free under $root; $what needs about $need MiB"
}

# Overlay storage, written down (step 2b above).
podman_overlay_storage() {
  local conf=$MRCNN_STORAGE_CONF driver root current
  if ! grep -qw overlay /proc/filesystems && ! modprobe overlay 2>/dev/null; then
    podman_log "FAILED: this kernel has no overlay file system (not in /proc/filesystems, modprobe overlay failed): podman's overlay storage driver needs it (vfs, the fallback, copies every layer and fills the disk building our images); load the overlay module or use a kernel with it"
    return 1
  fi
  driver=$(awk -F'"' '/^[[:space:]]*driver[[:space:]]*=/ { print $2; exit }' "$conf" 2>/dev/null || true)
  if [[ $driver != overlay ]]; then
    if [[ -f $conf ]]; then
      cp -p "$conf" "$conf.mrcnn-backup"
      podman_log "setting driver = \"overlay\" in $conf (it said \"${driver:-nothing}\"; the old file is $conf.mrcnn-backup)"
      if [[ -n $driver ]]; then
        sed -i 's/^\([[:space:]]*driver[[:space:]]*=\).*/\1 "overlay"/' "$conf"
      elif grep -q '^\[storage\]' "$conf"; then
        sed -i '/^\[storage\]/a driver = "overlay"' "$conf"
      else
        printf '\n[storage]\ndriver = "overlay"\n' >> "$conf"
      fi
    else
      podman_log "writing $conf (driver overlay)"
      mkdir -p "$(dirname "$conf")"
      printf '%s\n' "# Written by scripts/containers/podman-setup.sh (mrcnn-toolkit): podman's own guess" \
        "# was vfs on a fresh machine, which copies whole layers and fills the disk." \
        "[storage]" 'driver = "overlay"' 'runroot = "/run/containers/storage"' \
        'graphroot = "/var/lib/containers/storage"' > "$conf"
    fi
  fi
  # Storage made by another driver: podman refuses it or keeps using it; reset it.
  if ! current=$(podman_storage 2>&1) || [[ ${current%% *} != overlay ]]; then
    podman_log "the container storage is held by another driver (${current%% *}): resetting it, which removes every image and container (podman system reset)"
    podman system reset --force >/dev/null 2>&1 || true
    current=$(podman_storage) || { podman_log "FAILED: podman info after the reset"; return 1; }
    [[ ${current%% *} == overlay ]] || { podman_log "FAILED: podman still uses ${current%% *} after the reset ($conf says overlay)"; return 1; }
  fi
  root=${current#* }
  podman_log "storage: driver ${current%% *}, root $root, $(df -Pm "$root" 2>/dev/null | awk 'NR == 2 { print $4 " MiB free" }')"
}

# This machine's Debian apt entries as one-line "deb URI SUITE COMPONENTS..." lines, from
# both formats (sources.list and deb822 .sources). Only entries of our release's suites
# (bookworm, bookworm-updates, bookworm-security) over http(s): third-party repositories
# and disabled files stay out.
podman_debian_sources() {
  local codename=$1 f
  {
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
      [[ -f $f ]] && awk '$1 == "deb" && $2 !~ /^\[/ { print } $1 == "deb" && $2 ~ /^\[/ { $2 = ""; print }' "$f"
    done
    for f in /etc/apt/sources.list.d/*.sources; do
      [[ -f $f ]] || continue
      # deb822: paragraphs separated by blank lines; Enabled: no switches one off.
      awk 'function flush() { if (types ~ /(^| )deb( |$)/ && enabled != "no")
                                for (i = 1; i <= nu; i++) for (j = 1; j <= ns; j++)
                                  print "deb", u[i], s[j], comps
                              types = ""; enabled = ""; nu = 0; ns = 0; comps = "" }
           /^[ \t]*$/ { flush(); next }
           /^#/ { next }
           tolower($1) == "types:" { $1 = ""; types = $0 }
           tolower($1) == "uris:" { for (i = 2; i <= NF; i++) u[++nu] = $i }
           tolower($1) == "suites:" { for (i = 2; i <= NF; i++) s[++ns] = $i }
           tolower($1) == "components:" { $1 = ""; comps = substr($0, 2) }
           tolower($1) == "enabled:" { enabled = tolower($2) }
           END { flush() }' "$f"
    done
  } | awk -v c="$codename" '$2 ~ /^https?:\/\// && ($3 == c || index($3, c "-") == 1)' | awk '!seen[$0]++'
}

podman_setup() (
  set -euo pipefail
  if [[ $(id -u) -ne 0 ]]; then
    podman_log "needs root (rootful podman, apt-get, debootstrap)"
    exit 1
  fi
  # shellcheck source=/dev/null
  codename=${MRCNN_DEBIAN_SUITE:-$(. /etc/os-release && echo "${VERSION_CODENAME:-}")}
  [[ -n $codename ]] || { podman_log "cannot tell the Debian codename; set MRCNN_DEBIAN_SUITE"; exit 1; }

  # 1. Packages. --no-install-recommends keeps crun (podman recommends it through
  # "crun | runc") and the rootless helpers out; naming runc satisfies podman's runtime
  # dependency.
  podman_apt_install podman buildah runc debootstrap golang-github-containernetworking-plugin-dnsname

  # 2. containers.conf drop-in. Limits: the hard limits root has here (podman's defaults
  # of 1048576 open files and 4194304 processes are refused); nproc below the hard limit
  # because runc refused it at the hard limit itself on this host.
  nofile=$(ulimit -Hn)
  [[ $nofile == unlimited ]] && nofile=1048576
  nproc_hard=$(ulimit -Hu)
  nproc=${MRCNN_NPROC_LIMIT:-32768}
  if [[ $nproc_hard != unlimited ]] && ((nproc_hard - 1 < nproc)); then nproc=$((nproc_hard - 1)); fi
  conf=$(
    echo "# Written by scripts/containers/podman-setup.sh (mrcnn-toolkit); re-run it to refresh."
    echo "[containers]"
    echo "default_ulimits = [\"nofile=$nofile:$nofile\", \"nproc=$nproc:$nproc\"]"
    echo "[engine]"
    echo "runtime = \"runc\""
    if [[ $(cat /proc/1/comm 2>/dev/null) != systemd ]]; then
      # No systemd: no systemd cgroup manager and no journald to log events to.
      echo "cgroup_manager = \"cgroupfs\""
      echo "events_logger = \"file\""
    fi
  )
  if [[ ! -f $MRCNN_PODMAN_CONF ]] || [[ $(cat "$MRCNN_PODMAN_CONF") != "$conf" ]]; then
    podman_log "writing $MRCNN_PODMAN_CONF"
    mkdir -p "$(dirname "$MRCNN_PODMAN_CONF")"
    printf '%s\n' "$conf" > "$MRCNN_PODMAN_CONF"
  fi

  # 2b. Overlay storage.
  podman_overlay_storage
  # 3. The base image (4. its alias).
  alias_base() {
    if [[ -n $MRCNN_BASE_ALIAS ]] && [[ $(podman image inspect -f '{{.Id}}' "$MRCNN_BASE_ALIAS" 2>/dev/null || true) != \
          "$(podman image inspect -f '{{.Id}}' "$MRCNN_BASE_IMAGE")" ]]; then
      podman_log "tagging $MRCNN_BASE_IMAGE as $MRCNN_BASE_ALIAS"
      podman tag "$MRCNN_BASE_IMAGE" "$MRCNN_BASE_ALIAS"
    fi
  }
  if podman image exists "$MRCNN_BASE_IMAGE"; then
    alias_base
    exit 0
  fi
  podman_debian_image "$codename" amd64 "$MRCNN_BASE_IMAGE"
  alias_base
)

# podman_debian_image CODENAME ARCH IMAGE: a minbase Debian of ARCH, imported as IMAGE (step 3).
# A foreign ARCH is bootstrapped in two stages, the second run in a chroot through qemu-user
# (podman_arm64_setup registers it with binfmt_misc first).
podman_debian_image() (
  set -euo pipefail
  local codename=$1 arch=$2 image=$3 sources mirror rootfs foreign=()
  [[ $arch == "$(dpkg --print-architecture)" ]] || foreign=(--foreign --arch="$arch")
  sources=$(podman_debian_sources "$codename")
  mirror=${MRCNN_DEBIAN_MIRROR:-$(awk -v c="$codename" '$3 == c { print $2; exit }' <<<"$sources")}
  [[ -n $mirror ]] || { podman_log "no apt entry for suite $codename found; set MRCNN_DEBIAN_MIRROR"; exit 1; }
  rootfs=$(mktemp -d /var/tmp/mrcnn-debootstrap.XXXXXX)
  trap 'rm -rf "$rootfs" "$rootfs.log"' EXIT
  podman_log "debootstrap --variant=minbase ${foreign[*]} $codename from $mirror (a few minutes)"
  if ! debootstrap --variant=minbase "${foreign[@]}" "$codename" "$rootfs" "$mirror" >"$rootfs.log" 2>&1; then
    tail -n 30 "$rootfs.log" >&2
    exit 1
  fi
  if ((${#foreign[@]})); then
    podman_log "debootstrap second stage for $arch under qemu-user (several minutes)"
    if ! chroot "$rootfs" /debootstrap/debootstrap --second-stage >"$rootfs.log" 2>&1; then
      tail -n 30 "$rootfs.log" >&2
      tail -n 30 "$rootfs/debootstrap/debootstrap.log" >&2 2>/dev/null || true
      exit 1
    fi
  fi
  # apt inside sees what apt here sees (same suites, security updates included); this
  # machine's CA bundle, since TLS to PyPI may need a CA that Debian's bundle lacks.
  rm -f "$rootfs/etc/apt/sources.list.d/"*
  if [[ -n $sources ]]; then printf '%s\n' "$sources" > "$rootfs/etc/apt/sources.list"; fi
  # The copy under /usr/local/share/ca-certificates survives Debian's ca-certificates
  # being installed later (its update-ca-certificates rebuilds the bundle from there).
  if [[ -f /etc/ssl/certs/ca-certificates.crt ]]; then
    mkdir -p "$rootfs/etc/ssl/certs" "$rootfs/usr/local/share/ca-certificates"
    cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/ca-certificates.crt"
    cp /etc/ssl/certs/ca-certificates.crt "$rootfs/usr/local/share/ca-certificates/host-bundle.crt"
  fi
  # A slim image: no package cache, no downloaded lists (a build runs apt-get update).
  rm -rf "$rootfs/var/cache/apt/archives/"*.deb "$rootfs/var/lib/apt/lists/"* "$rootfs/debootstrap"
  podman_log "importing $image ($arch)"
  tar -C "$rootfs" -c . | podman import --quiet --os linux --arch "$arch" - "$image" >/dev/null
)

# podman_arm64_setup: what building and running arm64 images here needs (the arm64 CPU
# serving image, Dockerfile.serving DEVICE=cpu-arm64): qemu-user-static (and file), its aarch64 entry
# in binfmt_misc with the F flag (the interpreter is opened when registering, so it runs in
# containers and chroots that do not have it), and $MRCNN_ARM64_BASE_IMAGE, an arm64 minbase
# Debian made like the amd64 one. Idempotent; the image is made once (~5 min under qemu).
: "${MRCNN_ARM64_BASE_IMAGE:=localhost/debian-arm64:bookworm-slim}"
podman_arm64_setup() (
  set -euo pipefail
  local codename conf=/usr/lib/binfmt.d/qemu-aarch64.conf
  codename=${MRCNN_DEBIAN_SUITE:-$(. /etc/os-release && echo "${VERSION_CODENAME:-}")}
  # file: scripts/test-containers.sh asks it what the arm64 image's binaries are.
  podman_apt_install qemu-user-static file
  if [[ ! -e /proc/sys/fs/binfmt_misc/register ]]; then
    mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc || {
      podman_log "FAILED: cannot mount binfmt_misc on /proc/sys/fs/binfmt_misc: arm64 programs cannot run here"
      exit 1
    }
  fi
  if [[ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]]; then
    [[ -f $conf ]] || { podman_log "FAILED: qemu-user-static installed no $conf"; exit 1; }
    podman_log "registering qemu-aarch64 with binfmt_misc ($conf)"
    cat "$conf" > /proc/sys/fs/binfmt_misc/register
  fi
  grep -q '^flags: .*F' /proc/sys/fs/binfmt_misc/qemu-aarch64 || {
    podman_log "FAILED: binfmt_misc's qemu-aarch64 entry lacks the F flag (containers would not find the interpreter): echo -1 > /proc/sys/fs/binfmt_misc/qemu-aarch64 and run again"
    exit 1
  }
  if ! podman image exists "$MRCNN_ARM64_BASE_IMAGE"; then
    podman_debian_image "$codename" arm64 "$MRCNN_ARM64_BASE_IMAGE"
  fi
  [[ $(podman image inspect -f '{{.Architecture}}' "$MRCNN_ARM64_BASE_IMAGE") == arm64 ]] ||
    { podman_log "FAILED: $MRCNN_ARM64_BASE_IMAGE is not an arm64 image: podman rmi it and run again"; exit 1; }
  # (podman warns on stderr that the image is not for this machine: expected.)
  [[ $(podman run --rm --network none "$MRCNN_ARM64_BASE_IMAGE" uname -m 2>/dev/null) == aarch64 ]] ||
    { podman_log "FAILED: $MRCNN_ARM64_BASE_IMAGE does not run as aarch64 under qemu"; exit 1; }
  podman_log "arm64: qemu-aarch64 in binfmt_misc, $MRCNN_ARM64_BASE_IMAGE runs (uname -m: aarch64)"
)

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  set -euo pipefail
  podman_setup
  if [[ ${1:-} == --arm64 ]]; then podman_arm64_setup; fi
fi
