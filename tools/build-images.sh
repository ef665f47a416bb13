#!/usr/bin/env bash
# Builds the images the real node runs, with no registry and no daemon, into archives that
# `ctr -n k8s.io images import` takes:
#   - the base image the Dockerfile's FROM names, made with debootstrap from Debian's packages
#     (python3, venv, ca-certificates), tagged docker.io/library/python:3.11-slim-bookworm in a
#     buildah store of our own (so it never shadows the public image anywhere else);
#   - Compactor's image, `buildah bud` of the Dockerfile as it is, tagged compactor:<content key>;
#   - kube-scheduler and the descheduler from the binaries tools/build.sh builds, laid out and
#     tagged as upstream's images are and as the controller renders them;
#   - pause (the CRI sandbox image) from k8s.io/kubernetes's build/pause/linux/pause.c.
# The engine is Debian's buildah (chroot isolation: no runtime, no daemon), pinned with
# debootstrap in versions.env and installed by apt-get when missing.
# Prints the directory holding one docker-archive per image and images.txt ("<file> <tag>").
# Each image is cached by a key of its inputs: an unchanged tree rebuilds nothing.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
# shellcheck source=versions.env
source "$here/versions.env"

cache="${COMPACTOR_IMAGES_CACHE:-$root/.cache/images}"
archives="$cache/archives"
log="$cache/build.log"
mkdir -p "$archives"
# One build at a time per cache (the store, the archives and the out directory are shared).
exec 9>"$cache/lock"
flock 9
: >"$log"

fail() { echo "error: $*" >&2; exit 2; }
step() { printf '  %-44s %s\n' "$1" "$2" >&2; }

# --- the engine --------------------------------------------------------------------------------
deb_install() { # deb_install <package> <version>: installs the pinned version unless present
  local have
  have="$(dpkg-query -W -f='${Version}' "$1" 2>/dev/null || true)"
  [[ "$have" == "$2" ]] && return 0
  [[ $EUID == 0 ]] || fail "$1 $2 is not installed and only root can install it (apt-get install $1=$2)"
  echo "installing $1=$2 from Debian's packages" >&2
  if ! apt-get install -y -q --no-install-recommends --allow-downgrades "$1=$2" >>"$log" 2>&1; then
    apt-get update -q >>"$log" 2>&1 || true
    apt-get install -y -q --no-install-recommends --allow-downgrades "$1=$2" >>"$log" 2>&1 ||
      { tail -20 "$log" >&2; fail "apt-get cannot install $1=$2 (pinned in tools/versions.env)"; }
  fi
}
[[ $EUID == 0 ]] || fail "building images needs root (buildah's chroot isolation and its store)"
command -v dpkg-query >/dev/null || fail "not a Debian system: install buildah $BUILDAH_DEB_VERSION and debootstrap by hand"
deb_install buildah "$BUILDAH_DEB_VERSION"
deb_install debootstrap "$DEBOOTSTRAP_DEB_VERSION"
command -v gcc >/dev/null || fail "pause is compiled with gcc: install gcc and libc6-dev"
[[ -f "$(gcc -print-file-name=libc.a)" ]] || fail "pause links statically: install libc6-dev (libc.a)"
command -v python3 >/dev/null || fail "python3 is needed (the context key)"

# Our own store: what is tagged here (the stand-in for the public base image above all) stays here.
bah() { buildah --root "$cache/storage" --runroot "$cache/run" --storage-driver overlay "$@"; }
has_image() { bah inspect --type image "$1" >/dev/null 2>&1; }
export BUILDAH_ISOLATION=chroot
bah rm --all >/dev/null 2>&1 || true # working containers an interrupted run left
check_run() { # check_run <image> <user> <command...>: runs it in the image, or fails the build
  local image="$1" user="$2" c out
  shift 2
  c="$(bah from --pull-never "$image" 2>>"$log")" || fail "cannot open $image (log: $log)"
  if ! out="$(bah run --isolation=chroot --user "$user" "$c" -- "$@" 2>&1)"; then
    bah rm "$c" >/dev/null 2>&1 || true
    bah rmi --force "$image" >/dev/null 2>&1 || true # so that the next run builds it again
    echo "$out" >&2
    fail "$image does not run \`$*\` as $user"
  fi
  bah rm "$c" >/dev/null 2>&1 || true
  echo "    $* -> $(echo "$out" | tail -1)" >&2
}

sha() { sha256sum | cut -c1-16; }
declare -A key tag file
start=$SECONDS

# --- the base image ----------------------------------------------------------------------------
base_suite=bookworm
base_packages=python3,python3-venv,python-is-python3,ca-certificates
base_name="$(sed -n 's/^FROM[[:space:]]\+\([^[:space:]]\+\).*/\1/p' "$root/Dockerfile" | head -1)"
[[ -n "$base_name" ]] || fail "no FROM line in the Dockerfile"
[[ "$base_name" == */* ]] || base_name="docker.io/library/$base_name"

base_rootfs() { # base_rootfs <dir> <mirror>: a minimal Debian with the interpreter the FROM promises
  debootstrap --variant=minbase --include="$base_packages" "$base_suite" "$1" "$2" >>"$log" 2>&1 ||
    { tail -20 "$log" >&2; fail "debootstrap of Debian $base_suite failed (log: $log)"; }
  # No package lists, caches, docs or locales (as the slim images), and no apt source: the
  # mirror debootstrap used is this machine's, not the image's.
  rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/* "$1"/var/cache/debconf/*-old \
    "$1"/usr/share/doc/* "$1"/usr/share/man/* "$1"/usr/share/info/* "$1"/usr/share/locale/* \
    "$1"/var/log/* "$1"/etc/apt/sources.list "$1"/root/.bash_history
  : >"$1/etc/hostname"
}
key[base]="$({ declare -f base_rootfs; echo "$base_suite $base_packages $base_name $DEBOOTSTRAP_DEB_VERSION"; } | sha)"
base_cached="localhost/compactor-base:${key[base]}"
if ! has_image "$base_cached"; then
  t0=$SECONDS
  mirror="$(cd "$root" && python3 -m localcluster.image_build mirror "$base_suite")" ||
    fail "no apt source for Debian $base_suite on this machine; debootstrap needs a mirror"
  tmp="$(mktemp -d "$cache/rootfs.XXXXXX")"
  # debootstrap mounts proc and sys in the target while it configures packages: an
  # interrupted run leaves them, so unmount before removing.
  trap 'awk -v t="$tmp/" "index(\$2, t) == 1 {print \$2}" /proc/mounts | sort -r | xargs -r umount -l; rm -rf "$tmp"' EXIT
  base_rootfs "$tmp/rootfs" "$mirror"
  ctr_id="$(bah from scratch)"
  mnt="$(bah mount "$ctr_id")"
  tar -C "$tmp/rootfs" --numeric-owner -cf - . | tar -C "$mnt" --numeric-owner -xpf -
  bah umount "$ctr_id" >/dev/null
  bah config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --env LANG=C.UTF-8 --cmd python3 --label "dev.compactor.base-key=${key[base]}" "$ctr_id"
  bah commit --quiet --rm "$ctr_id" "$base_cached" >>"$log" 2>&1
  rm -rf "$tmp"
  trap - EXIT
  step "base (debootstrap $base_suite)" "built in $((SECONDS - t0)) s"
fi
bah tag "$base_cached" "$base_name"

# --- Compactor's image -------------------------------------------------------------------------
key[compactor]="$(cd "$root" && python3 -m localcluster.image_build hash . "base=${key[base]}" | cut -c1-16)"
tag[compactor]="compactor:${key[compactor]}"
file[compactor]="compactor-${key[compactor]}.tar"
if ! has_image "localhost/${tag[compactor]}" || [[ ! -f "$archives/${file[compactor]}" ]]; then
  t0=$SECONDS
  # pip inside the build uses this machine's pip configuration and CA bundle, mounted read-only
  # for the RUN steps alone (nothing of them lands in a layer).
  mounts=()
  while read -r conf; do
    [[ -f "$conf" ]] && mounts+=(--volume "$conf:$conf:ro")
  done < <(python3 -m pip config debug 2>/dev/null | sed -n 's/^ *\(\/[^,]*\), exists: True$/\1/p')
  while read -r cert; do
    [[ -f "$cert" ]] && mounts+=(--volume "$cert:$cert:ro")
  done < <(python3 -m pip config list 2>/dev/null | sed -n "s/^[^=]*\.cert='\(.*\)'$/\1/p" | sort -u)
  bah bud --pull=never --network=host --isolation=chroot "${mounts[@]}" \
    --tag "${tag[compactor]}" --file "$root/Dockerfile" "$root" >>"$log" 2>&1 ||
    { tail -30 "$log" >&2; fail "building Compactor's image failed (log: $log)"; }
  step "compactor (buildah bud)" "built in $((SECONDS - t0)) s"
  # As the Deployments run it: the image's own user, both entry points on its PATH.
  check_run "localhost/${tag[compactor]}" 65532:65532 sh -c \
    'command -v compactor-webhook compactor-controller >/dev/null && python -c "import webhook, controller, certs, compaction; import os; print(\"imports as\", os.getuid())"'
fi

# --- kube-scheduler, descheduler, pause --------------------------------------------------------
bin="$(bash "$here/build.sh")" || fail "tools/build.sh failed: the scheduler images need its binaries"
for b in kube-scheduler descheduler; do
  [[ -x "$bin/$b" ]] || fail "tools/build.sh left no $b in $bin"
done
grep -q "registry.k8s.io/descheduler/descheduler:$DESCHEDULER_VERSION" "$root/controller/components/pod_settings.py" ||
  fail "controller/components/pod_settings.py renders another descheduler image than $DESCHEDULER_VERSION (versions.env)"

export GOFLAGS="${GOFLAGS:-} -mod=mod -buildvcs=false"
gomod_dir() { # gomod_dir <module@version>: its directory in the module cache
  (cd "$cache" && go mod download -json "$1" 2>>"$log" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
}

# Upstream's kube-scheduler image: the binary in /usr/local/bin, kube-log-runner as /go-runner
# (the entry point), on a distroless base; here FROM scratch with the PATH and /tmp it gives.
runner="$cache/go-runner/go-runner-$KUBERNETES_STAGING_VERSION"
if [[ ! -x "$runner" ]]; then
  command -v go >/dev/null || fail "Go is needed to build kube-log-runner"
  mkdir -p "$cache/go-runner/src"
  printf 'module compactor.dev/tools/go-runner\n\ngo 1.26.0\n\nrequire k8s.io/component-base %s\n' \
    "$KUBERNETES_STAGING_VERSION" >"$cache/go-runner/src/go.mod"
  (cd "$cache/go-runner/src" && go get "k8s.io/component-base/logs/kube-log-runner@$KUBERNETES_STAGING_VERSION" &&
    CGO_ENABLED=0 go build -trimpath -ldflags=-s -o "$runner.tmp" k8s.io/component-base/logs/kube-log-runner) \
    >>"$log" 2>&1 || { tail -20 "$log" >&2; fail "building kube-log-runner failed (log: $log)"; }
  mv "$runner.tmp" "$runner"
fi

# Pause, as k8s.io/kubernetes's build/pause builds it; its tag is containerd's CRI default
# sandbox image (internal/cri/config of containerd, checked by versions.env's comment).
pause_bin="$cache/pause/pause-$KUBERNETES_VERSION-$PAUSE_VERSION"
if [[ ! -x "$pause_bin" ]]; then
  command -v go >/dev/null || fail "Go is needed to download k8s.io/kubernetes (pause.c)"
  kdir="$(gomod_dir "k8s.io/kubernetes@$KUBERNETES_VERSION")"
  [[ -f "$kdir/build/pause/linux/pause.c" ]] || fail "no build/pause/linux/pause.c in k8s.io/kubernetes@$KUBERNETES_VERSION"
  ptag="$(sed -n 's/^TAG ?= *//p' "$kdir/build/pause/Makefile")"
  [[ "$ptag" == "$PAUSE_VERSION" ]] ||
    fail "k8s.io/kubernetes@$KUBERNETES_VERSION builds pause $ptag, versions.env pins PAUSE_VERSION=$PAUSE_VERSION"
  mkdir -p "$cache/pause"
  gcc -Os -Wall -Werror -static -DVERSION="v$PAUSE_VERSION-$KUBERNETES_VERSION" \
    -o "$pause_bin.tmp" "$kdir/build/pause/linux/pause.c" >>"$log" 2>&1 ||
    { tail -20 "$log" >&2; fail "compiling pause.c failed (log: $log)"; }
  strip "$pause_bin.tmp"
  mv "$pause_bin.tmp" "$pause_bin"
fi

# scratch_image <name> <tag> <Containerfile> <files...>: a FROM scratch image of static binaries
scratch_image() {
  local name="$1" ref="$2" recipe="$3" ctx
  shift 3
  key[$name]="$({ echo "$recipe"; sha256sum "$@" | cut -d' ' -f1; } | sha)"
  tag[$name]="$ref"
  file[$name]="$name-${key[$name]}.tar"
  if has_image "$ref" && [[ "$(bah inspect --type image --format '{{index .OCIv1.Config.Labels "dev.compactor.key"}}' "$ref")" == "${key[$name]}" ]] &&
    [[ -f "$archives/${file[$name]}" ]]; then
    return 0
  fi
  local t0=$SECONDS
  ctx="$(mktemp -d "$cache/ctx.XXXXXX")"
  cp "$@" "$ctx/"
  mkdir -p "$ctx/tmp" && chmod 1777 "$ctx/tmp" && tar -C "$ctx" --owner=0 --group=0 -cf "$ctx/tmp.tar" tmp
  printf '%s\nLABEL dev.compactor.key=%s\n' "$recipe" "${key[$name]}" >"$ctx/Containerfile"
  bah bud --pull=never --isolation=chroot --tag "$ref" --file "$ctx/Containerfile" "$ctx" >>"$log" 2>&1 ||
    { rm -rf "$ctx"; tail -20 "$log" >&2; fail "building $ref failed (log: $log)"; }
  rm -rf "$ctx"
  step "$name (FROM scratch)" "built in $((SECONDS - t0)) s"
  scratch_built=1
}
# The commands the controller renders must exist in the images: its Pods give them as `command`.
rendered_command() { # rendered_command <file>: the first word of the container's command there
  sed -n 's/.*"command": \["\([^"]*\)".*/\1/p' "$root/controller/$1" | head -1
}
sched_cmd="$(rendered_command components/scheduler.py)"
desched_cmd="$(rendered_command components/descheduler.py)"
[[ -n "$sched_cmd" && -n "$desched_cmd" ]] || fail "cannot find the commands the controller renders"
path_env='ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
scratch_image kube-scheduler "registry.k8s.io/kube-scheduler:$KUBERNETES_VERSION" "FROM scratch
$path_env
ADD tmp.tar /
COPY --chmod=755 kube-scheduler /usr/local/bin/kube-scheduler
COPY --chmod=755 go-runner-$KUBERNETES_STAGING_VERSION /go-runner
ENTRYPOINT [\"/go-runner\"]" "$bin/kube-scheduler" "$runner"
if [[ ${scratch_built:-0} == 1 ]]; then
  check_run "${tag[kube-scheduler]}" 65532:65532 "$sched_cmd" --version
  scratch_built=0
fi
# Upstream's descheduler image: FROM scratch, /bin/descheduler, USER 1000, CMD --help.
scratch_image descheduler "registry.k8s.io/descheduler/descheduler:$DESCHEDULER_VERSION" "FROM scratch
COPY --chmod=755 descheduler /bin/descheduler
USER 1000
CMD [\"/bin/descheduler\", \"--help\"]" "$bin/descheduler"
if [[ ${scratch_built:-0} == 1 ]]; then
  check_run "${tag[descheduler]}" 65532:65532 "$desched_cmd" version
  scratch_built=0
fi
# Upstream's pause image: /pause as the entry point, USER 65535.
scratch_image pause "registry.k8s.io/pause:$PAUSE_VERSION" "FROM scratch
COPY --chmod=755 pause-$KUBERNETES_VERSION-$PAUSE_VERSION /pause
USER 65535:65535
ENTRYPOINT [\"/pause\"]" "$pause_bin"
if [[ ${scratch_built:-0} == 1 ]]; then
  check_run "${tag[pause]}" 65535:65535 /pause -v
  scratch_built=0
fi

# --- archives ----------------------------------------------------------------------------------
names=(compactor kube-scheduler descheduler pause)
for n in "${names[@]}"; do
  [[ -f "$archives/${file[$n]}" ]] && continue
  src="${tag[$n]}"
  [[ $n == compactor ]] && src="localhost/$src"
  rm -f "$archives/${file[$n]}.tmp"
  bah push --quiet "$src" "docker-archive:$archives/${file[$n]}.tmp:${tag[$n]}" >>"$log" 2>&1 ||
    { tail -20 "$log" >&2; fail "writing the archive of ${tag[$n]} failed (log: $log)"; }
  mv "$archives/${file[$n]}.tmp" "$archives/${file[$n]}"
done

# One directory per set of keys, holding the archives (hard links) and images.txt.
set_key="$(for n in "${names[@]}"; do echo "${file[$n]} ${tag[$n]}"; done | sha)"
out="$cache/out/$set_key"
if [[ ! -f "$out/images.txt" ]]; then
  rm -rf "$out"
  mkdir -p "$out"
  for n in "${names[@]}"; do
    ln "$archives/${file[$n]}" "$out/${file[$n]}"
    echo "${file[$n]} ${tag[$n]}"
  done >"$out/images.txt.tmp"
  mv "$out/images.txt.tmp" "$out/images.txt"
fi
# Older sets, archives and Compactor images are dropped: only this tree's are kept.
for d in "$cache/out"/*; do [[ "$d" == "$out" ]] || rm -rf "$d"; done
for a in "$archives"/*.tar; do
  keep=0
  for n in "${names[@]}"; do [[ "$a" == "$archives/${file[$n]}" ]] && keep=1; done
  [[ $keep == 1 ]] || rm -f "$a"
done
while read -r old; do
  [[ "$old" == "localhost/${tag[compactor]}" ]] || bah rmi "$old" >/dev/null 2>&1 || true
done < <(bah images --format '{{.Name}}:{{.Tag}}' 2>/dev/null | grep '^localhost/compactor:' || true)

bah rmi --prune >/dev/null 2>&1 || true
step "images ready in $((SECONDS - start)) s" "Compactor's is ${tag[compactor]}"
echo "$out"
