"""The pure parts of ``tools/build-images.sh``: the content key of the image's build context,
and the Debian mirror that this machine's apt sources name. Standard library only, so the
script runs it with any ``python3`` (``python3 -m localcluster.image_build hash|mirror``).

The key covers the Dockerfile and every file its ``COPY``/``ADD`` lines take from the context,
less what ``.dockerignore`` leaves out: an unchanged tree keeps its key (and its image), and a
change to any file that reaches the image gives a new one.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import shlex
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path


def copied_sources(dockerfile: str) -> list[str]:
    """The context paths that the Dockerfile's COPY and ADD lines read (not ``--from`` ones)."""
    joined = dockerfile.replace("\\\n", " ")
    sources: list[str] = []
    for raw in joined.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        word, _, rest = line.partition(" ")
        if word.upper() not in ("COPY", "ADD"):
            continue
        rest = rest.strip()
        flags = []
        while rest.startswith("--"):
            flag, _, rest = rest.partition(" ")
            flags.append(flag)
            rest = rest.strip()
        if any(f.startswith("--from") for f in flags):
            continue
        args: list[str] = json.loads(rest) if rest.startswith("[") else shlex.split(rest)
        for src in args[:-1]:
            name = os.path.normpath(src).lstrip("/")
            if name not in sources:
                sources.append(name)
    return sources


def ignore_patterns(dockerignore: str) -> list[str]:
    """``.dockerignore`` globs (``!`` exceptions are not supported, and none are used)."""
    patterns = []
    for raw in dockerignore.splitlines():
        line = raw.strip()
        if line and not line.startswith("#"):
            patterns.append(os.path.normpath(line.lstrip("/")))
    return patterns


def _ignored(rel: Path, patterns: Sequence[str]) -> bool:
    """As the engines read .dockerignore: a pattern is anchored at the context's root and
    leaves out a directory's whole content; ``**/name`` matches name at any depth."""
    parts = rel.parts
    prefixes = ["/".join(parts[:i + 1]) for i in range(len(parts))]
    for p in patterns:
        if p.startswith("**/"):
            if any(fnmatch.fnmatchcase(part, p[3:]) for part in parts):
                return True
        elif any(fnmatch.fnmatchcase(prefix, p) for prefix in prefixes):
            return True
    return False


def context_files(root: Path, sources: Iterable[str], patterns: Sequence[str]) -> list[Path]:
    """Every file under the sources, relative to root, sorted; a missing source is an error."""
    files: set[Path] = set()
    for src in sources:
        matches = sorted(root.glob(src)) if any(c in src for c in "*?[") else [root / src]
        for top in matches:
            if not top.exists():
                raise FileNotFoundError(f"the Dockerfile copies {src}, which is not in {root}")
            walk = [top] if top.is_file() else [p for p in top.rglob("*") if p.is_file()]
            for path in walk:
                rel = path.relative_to(root)
                if not _ignored(rel, patterns):
                    files.add(rel)
    return sorted(files)


def context_key(root: Path, dockerfile: str = "Dockerfile", extra: str = "") -> str:
    """A sha256 of the Dockerfile, .dockerignore, the files the Dockerfile copies (path, exec
    bit, content) and extra."""
    text = (root / dockerfile).read_text()
    ignore = root / ".dockerignore"
    patterns = ignore_patterns(ignore.read_text()) if ignore.is_file() else []
    digest = hashlib.sha256()
    for chunk in (dockerfile, text, ignore.read_text() if ignore.is_file() else "", extra):
        digest.update(chunk.encode() + b"\0")
    for rel in context_files(root, copied_sources(text), patterns):
        path = root / rel
        executable = os.access(path, os.X_OK)
        digest.update(f"{rel.as_posix()}\0{int(executable)}\0{path.stat().st_size}\0".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _deb822_stanzas(text: str) -> list[dict[str, str]]:
    stanzas: list[dict[str, str]] = []
    current: dict[str, str] = {}
    key = ""
    for raw in text.splitlines() + [""]:
        if raw.startswith("#"):
            continue
        if not raw.strip():
            if current:
                stanzas.append(current)
            current, key = {}, ""
        elif raw[0].isspace() and key:
            current[key] += " " + raw.strip()
        else:
            key, _, value = raw.partition(":")
            key = key.strip().lower()
            current[key] = value.strip()
    return stanzas


def debian_mirror(sources: Iterable[tuple[str, str]], suite: str) -> str | None:
    """The first ``deb`` URI that serves ``suite``, from (file name, text) pairs of apt's
    sources (``*.sources`` in deb822 form, ``*.list`` one line each), in apt's order."""
    for name, text in sources:
        if name.endswith(".sources"):
            for stanza in _deb822_stanzas(text):
                if stanza.get("enabled", "yes").lower() == "no":
                    continue
                if ("deb" in stanza.get("types", "").split()
                        and suite in stanza.get("suites", "").split()
                        and stanza.get("uris")):
                    return stanza["uris"].split()[0]
        elif name.endswith(".list"):
            for raw in text.splitlines():
                words = raw.split("#", 1)[0].split()
                if words and words[0] == "deb":
                    words = words[1:]
                    if words and words[0].startswith("["):
                        while words and not words[0].endswith("]"):
                            words = words[1:]
                        words = words[1:]
                    if len(words) >= 2 and words[1] == suite:
                        return words[0]
    return None


def apt_sources(etc: Path = Path("/etc/apt")) -> list[tuple[str, str]]:
    """apt's source files in the order apt reads them: sources.list, then sources.list.d/."""
    files = [etc / "sources.list"]
    parts = etc / "sources.list.d"
    if parts.is_dir():
        files += sorted(parts.iterdir())
    return [(f.name, f.read_text()) for f in files if f.is_file()]


def main(argv: Sequence[str]) -> int:
    if len(argv) >= 2 and argv[0] == "hash":
        print(context_key(Path(argv[1]), extra=" ".join(argv[2:])))
        return 0
    if len(argv) == 2 and argv[0] == "mirror":
        mirror = debian_mirror(apt_sources(), argv[1])
        if mirror is None:
            print(f"error: no apt source serves Debian {argv[1]}", file=sys.stderr)
            return 1
        print(mirror)
        return 0
    print("usage: python3 -m localcluster.image_build hash ROOT [EXTRA...] | mirror SUITE",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
