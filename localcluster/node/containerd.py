"""containerd for the real node: its configuration, the images it is given, and its shims.

Everything it keeps (root, state, sockets, the Pods' network namespaces) lives under the
node's work directory, so a run leaves nothing in the host's containerd paths.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

# containerd's own default sandbox image (internal/cri/config, DefaultSandboxImage), which
# the images build tags pause with; pinned so image garbage collection never removes it.
SANDBOX_IMAGE = "registry.k8s.io/pause:3.10.2"
NAMESPACE = "k8s.io"  # the CRI plugin's containerd namespace


@dataclass(frozen=True)
class ContainerdPaths:
    base: Path
    bin_dir: Path
    cni_bin_dir: Path
    cni_conf_dir: Path

    @property
    def socket(self) -> Path:
        return self.base / "containerd.sock"

    @property
    def config(self) -> Path:
        return self.base / "config.toml"


def config(paths: ContainerdPaths) -> str:
    """containerd's configuration (version 3): runc by path, cgroupfs (as the kubelet), the
    harness's CNI configuration, no NRI, no debug or metrics listener."""
    b = paths.base
    return f"""\
version = 3
root = "{b / 'root'}"
state = "{b / 'state'}"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
                    "io.containerd.snapshotter.v1.devmapper",
                    "io.containerd.snapshotter.v1.blockfile", "io.containerd.nri.v1.nri",
                    "io.containerd.tracing.processor.v1.otlp",
                    "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{paths.socket}"

[ttrpc]
  address = "{paths.socket}.ttrpc"

[plugins.'io.containerd.internal.v1.opt']
  path = "{b / 'opt'}"

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "{SANDBOX_IMAGE}"

[plugins.'io.containerd.cri.v1.runtime']
  netns_mounts_under_state_dir = true
  # Lowering an OOM score needs CAP_SYS_RESOURCE, which a sandboxed machine may lack:
  # containers get no lower a score than containerd itself.
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["{paths.cni_bin_dir}"]
    conf_dir = "{paths.cni_conf_dir}"
    max_conf_num = 1
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "{paths.bin_dir / 'runc'}"
        SystemdCgroup = false

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
"""


def environment(paths: ContainerdPaths) -> dict[str, str]:
    """containerd finds its shim on PATH: ours first."""
    return {**os.environ, "PATH": f"{paths.bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"}


def import_image(paths: ContainerdPaths, archive: Path) -> str:
    """Import one OCI or docker archive into the CRI namespace (as kind loads images)."""
    out = subprocess.run(
        [str(paths.bin_dir / "ctr"), f"--address={paths.socket}", f"--namespace={NAMESPACE}",
         "images", "import", "--all-platforms", str(archive)],
        check=False, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"ctr images import {archive.name} failed: {out.stderr.strip()}")
    return out.stdout


def add_digest_references(paths: ContainerdPaths) -> dict[str, str]:
    """Each imported image also under ``<repository>@<digest>``, as the CRI plugin names an image
    it pulls from a registry: a Pod can then ask for it by digest (an import names it by its tag
    alone, and the CRI plugin resolves only names it holds). Returns tag -> digest reference."""
    listing = subprocess.run(
        [str(paths.bin_dir / "ctr"), f"--address={paths.socket}", f"--namespace={NAMESPACE}",
         "images", "ls"], check=True, capture_output=True, text=True).stdout
    made = {}
    for line in listing.splitlines()[1:]:  # REF TYPE DIGEST SIZE PLATFORMS LABELS
        ref, _, digest = line.split()[:3]
        name = ref.split("@", 1)[0]
        if "@" in ref or ref.startswith("sha256:") or name.rfind(":") < name.rfind("/"):
            continue
        made[ref] = f"{name[:name.rfind(':')]}@{digest}"
    for ref, by_digest in made.items():
        subprocess.run(
            [str(paths.bin_dir / "ctr"), f"--address={paths.socket}", f"--namespace={NAMESPACE}",
             "images", "tag", "--force", ref, by_digest],
            check=True, capture_output=True, text=True)
    return made


def images(paths: ContainerdPaths) -> list[str]:
    out = subprocess.run(
        [str(paths.bin_dir / "ctr"), f"--address={paths.socket}", f"--namespace={NAMESPACE}",
         "images", "ls", "--quiet"], check=True, capture_output=True, text=True)
    return out.stdout.split()


def shims(paths: ContainerdPaths) -> list[int]:
    """The PIDs of the shims this containerd started: they name its socket in their argv."""
    address = str(paths.socket)
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"containerd-shim-runc-v2") and address.encode() in argv:
            found.append(int(entry.name))
    return found
