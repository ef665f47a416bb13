"""What the image would hold, without a container engine: the Dockerfile's build stage run by
hand. Its COPY sources are copied as the stage copies them, built into a wheel the way its
`pip install .` builds one (isolated, from pyproject's build requirements), and the wheel's
packages must import on their own and provide the entry points the manifests run."""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from controller.components.pod_settings import PodRuntime
from controller.components.scheduler import scheduler_deployment

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "Dockerfile").read_text()


def _stages() -> list[list[str]]:
    stages: list[list[str]] = []
    for line in DOCKERFILE.splitlines():
        line = line.strip()
        if line.startswith("FROM "):
            stages.append([])
        if line and not line.startswith("#") and stages:
            stages[-1].append(line)
    return stages


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    build = _stages()[0]
    src = tmp_path_factory.mktemp("src")
    for line in build:
        if line.startswith("COPY ") and "--from" not in line:
            *sources, dest = line.split()[1:]
            for name in sources:
                origin = ROOT / name
                target = src / dest / name if dest.endswith("/") else src / dest
                if origin.is_dir():
                    shutil.copytree(origin, target,
                                    ignore=shutil.ignore_patterns("__pycache__"))
                else:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy(origin, target)
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir",
         str(out), str(src)], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    (built,) = out.glob("compactor-*.whl")
    return built


def test_the_final_stage_is_slim_non_root_and_only_copies_the_built_venv() -> None:
    build, final = _stages()
    assert final[0].startswith("FROM python:3.11-slim")
    assert any(line.startswith("RUN ") and "pip install" in line for line in build)
    assert not [line for line in final if line.startswith("RUN ")]  # no build tools, no pip
    copies = [line for line in final if line.startswith("COPY ")]
    assert copies == ["COPY --from=build /opt/compactor /opt/compactor"]
    user = next(line for line in final if line.startswith("USER ")).split()[1]
    assert user.split(":")[0].isdigit() and user.split(":")[0] != "0"


def test_the_wheel_holds_exactly_the_shipped_packages_and_its_entry_points(
        wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        entry_points = next(n for n in names if n.endswith("entry_points.txt"))
        parser = configparser.ConfigParser()
        parser.read_string(z.read(entry_points).decode())
    assert {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")} == {
        "compaction", "webhook", "controller", "kubectl_compactor", "certs"}
    assert dict(parser["console_scripts"]) == {
        "compactor-webhook": "webhook.server:main",
        "compactor-controller": "controller.process.manager:main",
        "compactor-extender": "webhook.extender_server:main",
        "kubectl-compactor": "kubectl_compactor.cli:main"}
    commands = set()
    for manifest in ("webhook/deployment.yaml", "controller/deployment.yaml"):
        doc = yaml.safe_load((ROOT / "deploy" / manifest).read_text())
        commands |= {c["command"][0] for c in doc["spec"]["template"]["spec"]["containers"]}
    scheduler = scheduler_deployment(PodRuntime("kube-scheduler"), "kube-scheduler:v1", "h",
                                     extender_image="compactor:0.1.0")
    commands |= {c["command"][0] for c in scheduler["spec"]["template"]["spec"]["containers"]}
    # Each Deployment runs one of them (the controller renders the compaction scheduler's,
    # whose extender is one); the kubectl plugin runs on a person's machine.
    assert commands == set(parser["console_scripts"]) - {"kubectl-compactor"} | {
        "kube-scheduler"}


def test_the_wheel_alone_imports_the_services_and_the_plugin(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    # Every module of ours that the services load must come from the wheel, not from
    # the checkout (which the test environment also has installed, editable).
    probe = ("import importlib, sys\n"
             "for name in ('webhook.server', 'webhook.extender_server',\n"
             "             'controller.process.manager', 'kubectl_compactor.cli'):\n"
             "    importlib.import_module(name)\n"
             "ours = [m for n, m in sys.modules.items() if n.split('.')[0] in\n"
             "        ('compaction', 'webhook', 'controller', 'kubectl_compactor', 'certs',\n"
             "                               'localcluster')]\n"
             "assert len(ours) > 20, len(ours)\n"
             "wrong = [m.__name__ for m in ours\n"
             "         if not (m.__file__ or '').startswith(sys.argv[1])]\n"
             "assert not wrong, wrong\n")
    done = subprocess.run([sys.executable, "-c", probe, str(site)], cwd=tmp_path,
                          env={**os.environ, "PYTHONPATH": str(site)}, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
