"""The command's arguments: bad values refused before anything is read."""

from __future__ import annotations

from kubectl_compactor import cli as preview_cli


def test_a_negative_request_timeout_or_chunk_size_is_refused_before_anything_is_read() -> None:
    code, out, errors = preview_cli.run(["plan", "--request-timeout", "-1"])
    assert (code, out, errors) == (2, "", ["--request-timeout: must be >= 0"])
    code, out, errors = preview_cli.run(["plan", "--chunk-size", "-1"])
    assert (code, out, errors) == (2, "", ["--chunk-size: must be >= 0"])
