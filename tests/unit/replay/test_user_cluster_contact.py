"""A user's cluster that does not answer, or a kubeconfig whose server URL does not parse:
`desched snapshot` and `desched record` say so in one line naming the context and the fix,
exit 3 and exit 2 (issue 54: both exited 70, "internal error: MaxRetryError ...")."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import yaml

from pytest_desched import cli


def _kubeconfig(tmp_path: Path, server: str) -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "not-a-real-token"}}],
        "contexts": [{"name": "prod", "context": {"cluster": "c", "user": "u"}}],
    }
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    return path


def _refused_port() -> int:
    """A local port nothing listens on (bound, then closed): the connection is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = cli.main(args)
    return code, capsys.readouterr().err.strip().splitlines()


@pytest.mark.parametrize("command", ["snapshot", "record"])
def test_a_cluster_that_refuses_the_connection_is_exit_3(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kc = _kubeconfig(tmp_path, f"https://127.0.0.1:{_refused_port()}")
    extra = ["--until", "1s"] if command == "record" else []
    out = tmp_path / "out.yaml"
    code, err = _run(
        [command, "--kubeconfig", str(kc), "--context", "prod", "--output-file", str(out), *extra],
        capsys,
    )
    assert code == 3, err
    assert len(err) == 1 and "'prod'" in err[0] and "connection refused" in err[0], err
    assert "internal error" not in err[0] and "MaxRetryError" not in err[0], err
    assert not out.exists()


@pytest.mark.parametrize(
    "server", ["https://exa mple:6443", "https://127.0.0.1:99999", "https://[::1:6443", "foo"]
)
@pytest.mark.parametrize("command", ["snapshot", "record"])
def test_a_server_url_that_does_not_parse_is_exit_2(
    command: str, server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kc = _kubeconfig(tmp_path, server)
    extra = ["--until", "1s"] if command == "record" else []
    out = tmp_path / "out.yaml"
    code, err = _run(
        [command, "--kubeconfig", str(kc), "--context", "prod", "--output-file", str(out), *extra],
        capsys,
    )
    assert code == 2, err
    assert len(err) == 1 and "'prod'" in err[0] and "server" in err[0], err
    assert "LocationParseError" not in err[0] and "internal error" not in err[0], err
    assert not out.exists()
