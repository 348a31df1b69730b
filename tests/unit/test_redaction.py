"""Issue 43: a token a tool echoes back in its own error text is scrubbed like the URL forms.

A token put where a duration goes reached the output through the descheduler's own words
(`time: invalid duration "FAKEtok3n..."`), since only keyed and URL forms were scrubbed. Now
`scrub_secrets` also takes a quoted token-like value, and every line said (`log.say`) and
every result printed or written (`render.emit`) passes through it, as do tool errors.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pytest_desched import cli, render
from pytest_desched.errors import CommandError
from pytest_desched.log import say
from pytest_desched.providers.jobs import error_lines
from pytest_desched.redaction import scrub_secrets

TOKEN = "FAKEtok3nAbCdEfGh1234567890XyZ"
GO_ERRORS = [
    f'time: invalid duration "{TOKEN}"',
    f'invalid argument "{TOKEN}" for "--descheduling-interval" flag: time: invalid duration',
    f'strconv.ParseInt: parsing "{TOKEN}": invalid syntax',
    f"error: unknown flag '{TOKEN}'",
]


@pytest.mark.parametrize("text", GO_ERRORS)
def test_a_quoted_token_in_a_tools_error_is_scrubbed(text: str) -> None:
    assert TOKEN not in scrub_secrets(text)
    assert "<redacted>" in scrub_secrets(text)


@pytest.mark.parametrize(
    "kept",
    [
        '"RemovePodsViolatingNodeAffinity"',  # a plugin name: no digit
        '"7d2b28bf2b6a12810317936d909af0270ff38fa3"',  # a commit: lowercase hex
        '"web-7d9f8c6b5-x2x4p"',  # a pod name
        '"/tmp/Tok3nLike/Policy2026.yaml"',  # a path (a dot)
        '"registry.k8s.io/descheduler/descheduler:v0.36.0"',
        '"5f6c6d7b-078e-58f3-3e9d-42bc4f4071a7"',  # a UID
    ],
)
def test_what_only_looks_a_little_like_a_token_is_kept(kept: str) -> None:
    assert scrub_secrets(f"x {kept} y") == f"x {kept} y"


def test_every_path_that_prints_a_tools_output_scrubs_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    proc = subprocess.CompletedProcess(["helm"], 1, "", f"Error: {GO_ERRORS[0]}")
    assert TOKEN not in str(CommandError(["helm", "template", "x"], proc))
    log = '{"msg":"failed","err":"' + GO_ERRORS[1].replace('"', '\\"') + '"}\n'
    log += f"Error: {GO_ERRORS[1]}\n"
    assert error_lines(log) and TOKEN not in "\n".join(error_lines(log))
    say(f"descheduler said: {GO_ERRORS[0]}")  # the progress/error line gate
    render.emit(f"result: {GO_ERRORS[2]}")  # the result gate
    out = capsys.readouterr()
    assert TOKEN not in out.err and "<redacted>" in out.err
    assert TOKEN not in out.out and "<redacted>" in out.out


POLICY = """apiVersion: descheduler/v1alpha2
kind: DeschedulerPolicy
profiles:
- name: p
  pluginConfig:
  - name: DefaultEvictor
    args: {{minPodAge: {token}, nodeFit: true}}
  plugins:
    deschedule: {{enabled: [RemovePodsViolatingNodeAffinity]}}
"""


@pytest.mark.policycheck
@pytest.mark.parametrize("argv", [["lint", "{f}"], ["run", "--policy", "{f}"]], ids=["lint", "run"])
def test_a_token_in_a_duration_field_never_reaches_the_output(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
) -> None:
    """Through the descheduler's own decoder (policycheck): it refuses the duration and quotes it."""
    from pytest_desched.providers.embedded.cluster import EmbeddedProvider

    def no_cluster(self: object) -> None:
        raise AssertionError("a cluster was started")

    monkeypatch.setattr(EmbeddedProvider, "start", no_cluster)
    f = tmp_path / "policy.yaml"
    f.write_text(POLICY.format(token=TOKEN))
    rc = cli.main([a.format(f=f) for a in argv])
    out = capsys.readouterr()
    assert rc in (cli.EXIT_FAILED, cli.EXIT_USAGE), out.err
    assert "invalid duration" in out.out + out.err  # the descheduler's words are still shown
    assert TOKEN not in out.out + out.err


def test_a_repeated_short_string_is_scrubbed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 42: a 10,000-pod ledger repeats a few thousand strings a million times; scrubbing
    each anew took most of the ~97 s its files took. The same string is scrubbed once, and a
    secret in it is still gone every time (long text is scrubbed each time, never kept)."""
    from pytest_desched import redaction

    seen: list[str] = []
    real = redaction._JWT

    class Counted:
        def sub(self, repl: str, text: str) -> str:
            seen.append(text)
            return real.sub(repl, text)

    monkeypatch.setattr(redaction, "_JWT", Counted())
    keyed = f"token={TOKEN} on node-1 #42"
    out = redaction.scrub_data({"rows": [{"detail": keyed, "node": "node-1 #42"}] * 1000})
    assert all(TOKEN not in r["detail"] and "<redacted>" in r["detail"] for r in out["rows"])
    assert seen.count(keyed) == 1 and seen.count("node-1 #42") == 1
    long = f"token={TOKEN} " + "x" * redaction.SCRUB_CACHE_LEN
    assert [TOKEN in scrub_secrets(long) for _ in range(2)] == [False, False]
    assert seen.count(long) == 2
