"""Issue 32's hostile inputs, as a table: each is exit 2, one line, no traceback, in < 5 s,
before any cluster (a session would fail the test) and nothing written outside the run's tmp.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_desched import cli
from pytest_desched.session import DeschedSession

POLICY = "apiVersion: descheduler/v1alpha2\nkind: DeschedulerPolicy\nprofiles: []\n"
BOMB = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]\n" for i in range(8)
)
NODE = {"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "4", "memory": "8Gi"}}}


def _snap(objects: dict[str, Any], header: dict[str, Any] | None = None) -> str:
    import json

    from pytest_desched.replay.capture.format import API_VERSION, KIND

    head = {"takenAt": "2026-11-30T00:00:00Z", **(header or {})}
    return json.dumps({"apiVersion": API_VERSION, "kind": KIND, "header": head, "objects": objects})


def _pod(**over: Any) -> dict[str, Any]:
    pod: dict[str, Any] = {
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "x"}]},
    }
    pod.update(over)
    return pod


# (case id, argv with {f} for the planted file, file content (str/bytes/None), stderr words)
CASES: list[tuple[str, list[str], Any, str]] = [
    ("lint-alias-bomb", ["lint", "{f}"], POLICY + BOMB, "aliases expand"),
    ("lint-values-bomb", ["lint", "{f}"], "deschedulerPolicy: {}\n" + BOMB, "aliases expand"),
    ("lint-deep", ["lint", "{f}"], "a: " + "[" * 10_000 + "]" * 10_000, "nest"),
    ("lint-deep-block", ["lint", "{f}"], "".join(" " * i + "a:\n" for i in range(200)), "deeper"),
    ("lint-5000-digit-int", ["lint", "{f}"], POLICY + "x: " + "9" * 5000, "5000 digits"),
    ("lint-utf16", ["lint", "{f}"], POLICY.encode("utf-16"), "UTF-16"),
    ("lint-binary", ["lint", "{f}"], os.urandom(64) + b"\x00", "binary"),
    ("lint-latin1", ["lint", "{f}"], POLICY.encode() + b"# caf\xe9\n", "not UTF-8"),
    ("lint-directory", ["lint", "{d}"], None, "is a directory"),
    # issue 43: no mapping at all is unreadable input too (was a DL000 finding, exit 1)
    ("lint-empty", ["lint", "{f}"], "", "holds no YAML document"),
    ("lint-comments-only", ["lint", "{f}"], "# a comment\n# another\n", "holds no YAML document"),
    ("lint-bare-scalar", ["lint", "{f}"], "hello\n", "is the bare str 'hello', not a mapping"),
    ("lint-list", ["lint", "{f}"], "- a\n- b\n", "is a list, not a mapping"),
    ("lint-duplicate-key", ["lint", "{f}"], POLICY + "profiles: []\n", "duplicate key 'profiles'"),
    ("lint-deployment", ["lint", "{f}"], "apiVersion: apps/v1\nkind: Deployment\n", "nothing lint"),
    ("lint-values-list", ["lint", "--values", "{f}"], "- a\n", "is a list, not a mapping"),
    ("lint-fifo", ["lint", "{fifo}"], None, "FIFO"),
    ("lint-too-big", ["lint", "{f}"], POLICY + "#" * (2 * 1024 * 1024) + "\n", "limit"),
    (
        "lint-version-escape",
        ["lint", "{f}", "--descheduler", "../../../../tmp/x"],
        POLICY,
        "version",
    ),
    ("lint-output-missing-dir", ["lint", "{f}", "--output-file", "{d}/no/x"], POLICY, "folder"),
    ("lint-output-dev-full", ["lint", "{f}", "--output-file", "/dev/full"], POLICY, "regular"),
    ("run-variant-escape", ["run", "--variant", "../../x"], None, "--variant"),
    ("run-release-space", ["run", "--release", "a b"], None, "release"),
    ("run-release-shell", ["run", "--release", "x;rm -rf ~"], None, "release"),
    ("run-namespace-escape", ["run", "--namespace", "../.."], None, "namespace"),
    ("run-version-absolute", ["run", "--descheduler", "/etc/passwd"], None, "version"),
    ("replay-bomb", ["replay", "{f}"], "apiVersion: x\n" + BOMB, "aliases expand"),
    ("replay-fifo", ["replay", "{fifo}"], None, "FIFO"),
    ("replay-deep", ["replay", "{f}"], "[" * 100_000 + "]" * 100_000, "nest"),
    ("replay-empty", ["replay", "{f}"], _snap({}), "no nodes"),
    ("replay-zero-nodes", ["replay", "{f}"], _snap({"pods": [_pod()]}), "no nodes"),
    (
        "replay-lowercase-kind",
        ["replay", "{f}"],
        _snap({"nodes": [NODE], "pods": [_pod(kind="secret")]}),
        "'secret' is not Pod",
    ),
    (
        "replay-nodename-list",
        ["replay", "{f}"],
        _snap({"nodes": [NODE], "pods": [_pod(spec={"nodeName": ["a", "b"]})]}),
        "spec.nodeName",
    ),
    (
        "replay-metadata-oops",
        ["replay", "{f}"],
        _snap({"nodes": [NODE, {"metadata": "oops"}]}),
        "metadata",
    ),
    (
        "replay-priority-high",
        ["replay", "{f}"],
        _snap({"nodes": [NODE], "priorityClasses": [{"metadata": {"name": "p"}, "value": "high"}]}),
        "not an integer",
    ),
    (
        "replay-created-yesterday",
        ["replay", "{f}"],
        _snap(
            {
                "nodes": [NODE],
                "pods": [
                    _pod(
                        metadata={"name": "p", "namespace": "ns", "creationTimestamp": "yesterday"}
                    )
                ],
            }
        ),
        "RFC 3339",
    ),
    (
        "replay-namespace-escape",
        ["replay", "{f}"],
        _snap({"nodes": [NODE], "pods": [_pod(metadata={"name": "p", "namespace": "../.."})]}),
        "not a label",
    ),
    (
        "replay-header-version-escape",
        ["replay", "{f}"],
        _snap({"nodes": [NODE]}, {"descheduler": {"version": "../../../../tmp/x"}}),
        "tag or commit",
    ),
    (
        "replay-pod-on-missing-node",
        ["replay", "{f}"],
        _snap({"nodes": [NODE], "pods": [_pod(spec={"nodeName": "gone"})]}),
        "lacks",
    ),
    # issue 43: a wrong type anywhere is the path of the field (the snapshot's JSON Schema)
    ("replay-section-number", ["replay", "{f}"], _snap({"nodes": 1}), "objects.nodes: is 1"),
    (
        "replay-policy-mapping",
        ["replay", "{f}"],
        _snap({"nodes": [NODE]}).replace('"header"', '"policy": {"a": 1}, "header"'),
        "policy: is a mapping, not a string",
    ),
    (
        "replay-header-string",
        ["replay", "{f}"],
        _snap({"nodes": [NODE]}).replace('"header": {', '"header": "oops", "h": {'),
        "header: is 'oops' (a string)",
    ),
    ("from-log-random-bytes", ["replay", "--from-log", "{f}"], os.urandom(256), "log"),
    # issue 43: lines of the wrong types, and a log line given as a round record
    (
        "from-log-pod-number",
        ["replay", "--from-log", "{f}"],
        '{"msg": "Evicted pod", "pod": 5, "v": 0}\n',
        ":1: pod is 5 (a number), not a string or a mapping",
    ),
    (
        "from-log-msg-list",
        ["replay", "--from-log", "{f}"],
        '{"v": 0, "msg": ["Evicted pod"]}\n',
        "msg is a list, not a string",
    ),
    (
        "from-record-log-line",
        ["replay", "--from-record", "{f}"],
        '{"msg": "Evicted pod", "pod": {"name": "p", "namespace": "ns"}}\n',
        "is a descheduler log line, not a round record",
    ),
    (
        "from-record-decisions-string",
        ["replay", "--from-record", "{f}"],
        '{"experiment": "e", "round_name": "r", "decisions": "all"}\n',
        "decisions: is 'all' (a string), not a list",
    ),
    ("from-log-empty", ["replay", "--from-log", "{f}"], "", "no descheduler JSON log line"),
    (
        "from-log-deep-line",
        ["replay", "--from-log", "{f}"],
        '{"msg":' + "[" * 50_000 + "]" * 50_000 + "}\n",
        "deeper",
    ),
    (
        "from-log-huge-int",
        ["replay", "--from-log", "{f}"],
        '{"msg": "x", "n": ' + "9" * 5000 + "}\n",
        "digits",
    ),
    ("replay-policy-bomb", ["replay", "--from-log", "{f}", "--policy", "{f}"], POLICY + BOMB, ""),
    (
        "canary-expect-bomb",
        ["canary", "--candidate", "version:v0.36.0", "--expect", "{f}", "--static-only"],
        "changes: []\n" + BOMB,
        "aliases expand",
    ),
]


@pytest.mark.parametrize(
    ("argv", "content", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_hostile_input_is_one_line_exit_2_before_anything(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    content: Any,
    words: str,
) -> None:
    _refused(tmp_path, monkeypatch, capsys, argv, content, words)


def _refused(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    content: Any,
    words: str,
) -> str:
    """Run `desched argv`: exit 2, one line holding `words`, < 5 s, no session, no write."""

    def no_session(*a: object, **k: object) -> None:
        raise AssertionError("a session (a cluster) was started for bad input")

    monkeypatch.setattr(DeschedSession, "__init__", no_session)
    monkeypatch.delenv("DESCHED_DEBUG", raising=False)
    monkeypatch.setenv("DESCHED_MAX_INPUT_BYTES", str(1024 * 1024))  # the stated limit, set
    cache, arts, work = tmp_path / "cache", tmp_path / "arts", tmp_path / "work"
    for d in (cache, arts, work):
        d.mkdir()
    monkeypatch.setenv("DESCHED_CACHE_DIR", str(cache))
    monkeypatch.setenv("DESCHED_ARTIFACTS", str(arts))
    monkeypatch.chdir(work)
    f = tmp_path / "input.yaml"
    if isinstance(content, bytes):
        f.write_bytes(content)
    elif content is not None:
        f.write_text(content)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    args = [a.format(f=f, d=tmp_path, fifo=fifo) for a in argv]
    before = {p for p in tmp_path.rglob("*")}
    t0 = time.monotonic()
    rc = cli.main(args)
    took = time.monotonic() - t0
    err = capsys.readouterr().err
    assert rc == cli.EXIT_USAGE, err
    assert took < 5.0, f"{took:.1f}s: {err}"
    assert err.count("\n") == 1, err  # one line
    assert "Traceback" not in err
    assert words in err, err
    written = {p for p in tmp_path.rglob("*")} - before
    assert not [p for p in written if not p.is_relative_to(cache)], sorted(written)
    assert not list(work.iterdir())  # nothing in the working folder
    return err


@pytest.mark.parametrize(
    "planted",
    ["https://ghp_Plant3dT0ken@hooks.example.com/x", "Basic dXNlcjpwbGFudGVkU2VjcmV0"],
)
def test_credentials_refused_in_policies_and_scrubbed_from_text(planted: str) -> None:
    from pytest_desched.descheduler.policy.safety import credential_problems
    from pytest_desched.redaction import scrub_data, scrub_secrets

    assert credential_problems({"metricsProviders": [{"prometheus": {"url": planted}}]})
    secret = planted.split("//")[-1].split("@")[0].split()[-1]
    assert secret not in scrub_secrets(f"error: cannot reach {planted}")
    annotations = {"metadata": {"annotations": {"hook": planted}}}
    assert secret not in str(scrub_data(annotations))


# ----------------------------------------------- embedded policy text: the bounded reader ---

# Each reader gets a policy text with a billion-laughs tail, in a child process with a time
# bound: before the bounded reader, each expanded the alias graph as a tree (a walk, a deep
# diff, canonical JSON) and never returned.
EMBEDDED = {
    "replay.redact.redact_policy": (
        "from pytest_desched.replay.capture.redact import Aliases, redact_policy\n"
        "print(redact_policy(Aliases(), TEXT))",
        "withheld",
    ),
    "canary.static _policy_data": (
        "from pytest_desched.canary.static.manifests import _policy_data\n"
        "d = _policy_data({'kind': 'ConfigMap', 'data': {'policy.yaml': TEXT}})\n"
        "print('kept as text' if d['data']['policy.yaml'] == TEXT else 'parsed')",
        "kept as text",
    ),
    "evidence.timeline policy_evidence": (
        "from pytest_desched.evidence.timeline import policy_evidence\n"
        "print(policy_evidence(TEXT, 'v0.36.0')['policy_lint'])",
        "aliases expand",
    ),
}


@pytest.mark.parametrize("reader", list(EMBEDDED))
def test_embedded_policy_text_goes_through_the_bounded_reader(reader: str) -> None:
    import subprocess
    import sys

    code, words = EMBEDDED[reader]
    script = f"TEXT = {POLICY + BOMB!r}\n{code}\n"
    t0 = time.monotonic()
    try:
        proc = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=30
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{reader} did not return within 30 s on an alias bomb (expanded it)")
    took = time.monotonic() - t0
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert words in proc.stdout, proc.stdout[-2000:]
    assert took < 10, f"{reader}: {took:.1f} s"


# ------------------------------------------ raw file names cannot forge lines; SARIF uri ---

FORGING = ["p\nSAFE\x1b[2K.yaml", "a\rerror: forged\u2028x.yaml", "tab\there\u202e.yaml"]


@pytest.mark.parametrize("name", FORGING, ids=["newline-esc", "cr-u2028", "tab-bidi"])
def test_a_raw_file_name_cannot_forge_a_line_in_lint_output(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    name: str,
) -> None:
    import json
    from urllib.parse import unquote

    from pytest_desched.render import printable

    monkeypatch.chdir(tmp_path)
    Path(name).write_text(POLICY)
    shown = printable(name)
    assert "\n" not in shown and "\x1b" not in shown and shown != name
    for fmt in ("text", "md"):
        cli.main(["lint", name, "-o", fmt])
        out = capsys.readouterr().out
        lines = out.splitlines()
        findings = [ln for ln in lines if shown in ln]
        assert findings, out
        # every line is a finding naming the whole (escaped) file, its fix, a table rule or
        # the summary: none starts with a fragment of the name
        for ln in lines:
            ok = (
                shown in ln
                or ln.startswith(("    fix:", "|--", "| FILE", "FILE", "---"))
                or "error(s)" in ln
                or ln.startswith(("SAFE", "UNSAFE"))
            )
            assert ok, f"{fmt}: a line forged by the file name: {ln!r}"
        assert not any(c in out for c in "\r\x1b\u2028\u202e"), repr(out)
    cli.main(["lint", name, "-o", "sarif"])
    sarif = json.loads(capsys.readouterr().out)
    uris = {
        loc["physicalLocation"]["artifactLocation"]["uri"]
        for r in sarif["runs"][0]["results"]
        for loc in r["locations"]
    }
    assert len(uris) == 1, uris
    (uri,) = uris
    assert unquote(uri) == name  # the same file, read back
    assert all(c.isascii() and c.isprintable() and c not in " #?" for c in uri), uri
    cli.main(["lint", name + ".missing"])
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and shown in err, repr(err)


def test_sarif_uri_percent_encodes_and_absolute_paths_are_file_uris() -> None:
    from pytest_desched.descheduler.policy.lint_output import sarif_uri

    assert sarif_uri("dir/a b#1?%:c.yaml") == "dir/a%20b%231%3F%25%3Ac.yaml"
    assert sarif_uri("/tmp/x y/p.yaml") == "file:///tmp/x%20y/p.yaml"
    assert sarif_uri("policies/plain-1.yaml") == "policies/plain-1.yaml"


# ------------------------------------------- every name that becomes a path, at the door ---

HOSTILE_NAMES = {
    "dotdot": "../../../../tmp/h32-escape",
    "absolute": "/etc/passwd",
    "nul": "v0.36.0\x00x",
    "semicolon": "x;rm -rf ~",
    "subshell": "$(id)",
    "backtick": "`id`",
    "pipe": "a|b",
    "space": "a b",
    "newline": "a\nb",
    "glob": "*",
}
# (kind, argv with {v} for the name, {f} for a valid input file, {d} for a folder; words)
NAME_DOORS: list[tuple[str, list[str], str]] = [
    ("version/run", ["run", "--descheduler", "{v}"], "version"),
    ("version/lint", ["lint", "{f}", "--descheduler", "{v}"], "version"),
    ("version/replay", ["replay", "{s}", "--descheduler", "{v}"], ""),
    ("version/tools", ["tools", "descheduler", "--descheduler", "{v}"], "version"),
    ("release/run", ["run", "--release", "{v}"], "release"),
    ("namespace/run", ["run", "--namespace", "{v}"], "namespace"),
    ("variant/run", ["run", "--variant", "{v}"], "--variant"),
    ("experiment/run", ["run", "{v}"], ""),
    (
        "experiment/canary",
        ["canary", "--candidate", "version:v0.36.0", "--static-only", "--experiment", "{v}"],
        "",
    ),
    ("candidate-label/version", ["canary", "--candidate", "version:{v}", "--static-only"], ""),
    ("candidate-label/source", ["canary", "--candidate", "source:{d}@{v}", "--static-only"], ""),
    (
        "candidate-chart",
        ["canary", "--candidate", "version:v0.36.0", "--candidate-chart", "{v}", "--static-only"],
        "",
    ),
]


@pytest.mark.parametrize("value", list(HOSTILE_NAMES.values()), ids=list(HOSTILE_NAMES))
@pytest.mark.parametrize(
    ("argv", "words"), [d[1:] for d in NAME_DOORS], ids=[d[0] for d in NAME_DOORS]
)
def test_a_hostile_name_is_refused_at_the_front_door(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    words: str,
    value: str,
) -> None:
    snap = tmp_path / "snap.json"
    snap.write_text(_snap({"nodes": [NODE]}))
    (tmp_path / "src").mkdir()
    args = [a.replace("{v}", value).replace("{s}", str(snap)) for a in argv]
    args = [a.replace("{d}", str(tmp_path / "src")) for a in args]
    err = _refused(tmp_path, monkeypatch, capsys, args, POLICY, words)
    assert "\x00" not in err and (value == "*" or value not in err or "\n" not in value)
    assert not Path("/tmp/h32-escape").exists()


@pytest.mark.parametrize("value", ["out\x00.json", "{d}/no-such-folder/x.json", "{d}"])
def test_a_hostile_output_file_is_refused_before_any_work(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    value: str,
) -> None:
    path = value.replace("{d}", str(tmp_path))
    _refused(tmp_path, monkeypatch, capsys, ["lint", "{f}", "--output-file", path], POLICY, "")


def test_shell_metacharacters_in_an_output_file_name_are_only_a_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`-o` is the user's own path: written verbatim, never through a shell."""
    monkeypatch.chdir(tmp_path)
    Path("p.yaml").write_text(POLICY)
    name = "r;touch pwned$(id)`id`|x.json"
    assert cli.main(["lint", "p.yaml", "-o", "json", "--output-file", name]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["p.yaml", name])


@pytest.mark.parametrize("parts", [("..", "x"), ("/etc", "passwd"), ("a\x00b",), ("a/../../x",)])
def test_inside_refuses_a_path_that_leaves_its_folder(tmp_path: Path, parts: tuple[str]) -> None:
    from pytest_desched.errors import InputError
    from pytest_desched.names import inside

    with pytest.raises(InputError):
        inside(tmp_path, *parts)
    assert inside(tmp_path, "bin", "v0.36.0") == tmp_path / "bin" / "v0.36.0"


# ------------------------------------------------ snapshots beyond what the machine holds ---


@pytest.mark.parametrize(
    ("env", "words"),
    [
        ({"DESCHED_REPLAY_MEMORY_MIB": "1"}, "11 objects need about 1.0 GiB to restore (1.0 GiB"),
        ({"DESCHED_REPLAY_KIB_PER_OBJECT": str(64 * 1024 * 1024)}, "than the"),
        ({"DESCHED_REPLAY_KIB_PER_OBJECT": "lots"}, "not a number"),
        ({"DESCHED_REPLAY_MEMORY_MIB": "-5"}, "not positive"),
    ],
    ids=["small-budget", "per-object-measured-elsewhere", "bad-rate", "bad-budget"],
)
def test_a_snapshot_the_machine_cannot_restore_is_refused_before_anything(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    env: dict[str, str],
    words: str,
) -> None:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    nodes = [{**NODE, "metadata": {"name": f"n{i}"}} for i in range(10)]
    err = _refused(
        tmp_path,
        monkeypatch,
        capsys,
        ["replay", "{f}"],
        _snap({"nodes": nodes, "pods": [_pod(spec={"nodeName": "n1"})]}),
        words,
    )
    if "need about" in err:
        assert "KiB per object, measured: bench/RESULTS.md)" in err and "available" in err


def test_the_estimate_is_the_measured_base_plus_the_rate_times_the_objects(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pytest_desched.replay.capture.format import Snapshot
    from pytest_desched.replay.rebuild.capacity import (
        BASE_MIB,
        KIB_PER_OBJECT,
        available_bytes,
        check_capacity,
        estimate_bytes,
    )

    for name in ("KIB_PER_OBJECT", "MEMORY_MIB", "BASE_MIB"):
        monkeypatch.delenv(f"DESCHED_REPLAY_{name}", raising=False)
    snap = Snapshot(header={}, policy=None, objects={"nodes": [NODE] * 3, "pods": [_pod()] * 7})
    assert estimate_bytes(snap) == (10, (BASE_MIB * 1024 + 10 * KIB_PER_OBJECT) * 1024)
    # Keep it the measurement (bench/RESULTS.md): within 10% above the summed peaks at both
    # sizes, 2,343 MiB at 15,482 objects and 13,460 MiB at 156,206, and never under them.
    for objects, peak_mib in ((15_482, 2_343), (156_206, 13_460)):
        est_mib = BASE_MIB + objects * KIB_PER_OBJECT / 1024
        assert peak_mib <= est_mib <= 1.15 * peak_mib
    check_capacity(snap, "small")  # a small snapshot fits any machine that runs the tests
    assert available_bytes() > estimate_bytes(snap)[1]
    monkeypatch.setenv("DESCHED_REPLAY_MEMORY_MIB", "0.001")
    with pytest.raises(Exception, match="10 objects need about"):
        check_capacity(snap, "small")
    monkeypatch.setenv("DESCHED_REPLAY_MEMORY_MIB", "1500")
    monkeypatch.setenv("DESCHED_REPLAY_BASE_MIB", "2000")  # another machine's base
    with pytest.raises(Exception, match=r"need about 2\.0 GiB to restore \(2\.0 GiB \+ 92 KiB"):
        check_capacity(snap, "small")


# ------------------------------------------ planted credentials: refused, never written ---

PLANTED = {
    "url-token": "ghp_Plant3dUrlT0kenQq",
    "url-password": "S3cretHookPassw0rdZz",
    "bearer": "plantedBearerTok3nXyz",
    "basic": "dXNlcjpwbGFudGVkQmFzaWNTZWNyZXQ",  # base64("user:plantedBasicSecret")
}
CRED_VALUES = {
    "hook": f"https://hookuser:{PLANTED['url-password']}@hooks.example.com/notify",
    "token-url": f"https://{PLANTED['url-token']}@git.example.com/x",
    "auth": f"Authorization: Bearer {PLANTED['bearer']}",
    "basic": f"Basic {PLANTED['basic']}",
}
CRED_POLICY = (
    POLICY.replace("profiles: []\n", "")
    + "metricsProviders:\n- source: Prometheus\n  prometheus:\n"
    + f"    url: {CRED_VALUES['token-url']}\n"
    + "profiles:\n- name: p\n  pluginConfig:\n  - name: DefaultEvictor\n"
    + "    args: {nodeFit: true}\n"
    + f"  - name: X\n    args: {{note: '{CRED_VALUES['auth']}', hook: '{CRED_VALUES['hook']}',"
    + f" basic: '{CRED_VALUES['basic']}'}}\n"
    + "  plugins:\n    balance: {enabled: [RemoveDuplicates]}\n"
)
CRED_HELM_VALUES = "podAnnotations:\n" + "".join(f"  {k}: '{v}'\n" for k, v in CRED_VALUES.items())


def _cred_snapshot() -> str:
    pod = _pod()
    pod["metadata"]["annotations"] = dict(CRED_VALUES)
    node = {**NODE, "metadata": {"name": "n1", "annotations": dict(CRED_VALUES)}}
    return _snap({"nodes": [node], "pods": [pod]})


# (id, argv; {pol} {vals} {snap} {log} {out} are planted files / an output path; exit code)
CRED_RUNS: list[tuple[str, list[str], int]] = [
    ("run-policy", ["run", "--policy", "{pol}"], 2),
    ("run-values", ["run", "--values", "{vals}"], 2),
    ("up-values", ["up", "--values", "{vals}"], 2),
    (
        "canary-values",
        ["canary", "--candidate", "version:v0.36.0", "--static-only", "--values", "{vals}"],
        2,
    ),
    ("replay-policy", ["replay", "{snap}", "--policy", "{pol}"], 2),
    ("replay-values", ["replay", "{snap}", "--values", "{vals}"], 2),
    ("lint-text", ["lint", "{pol}", "--output-file", "{out}"], 1),
    ("lint-json", ["lint", "{pol}", "-o", "json", "--output-file", "{out}"], 1),
    ("lint-sarif", ["lint", "{pol}", "-o", "sarif", "--output-file", "{out}"], 1),
    ("lint-values", ["lint", "{vals}", "-o", "json"], None),
    ("from-log", ["replay", "--from-log", "{log}", "-o", "json", "--output-file", "{out}"], 0),
]


@pytest.mark.parametrize(("argv", "rc"), [c[1:] for c in CRED_RUNS], ids=[c[0] for c in CRED_RUNS])
def test_planted_credentials_never_reach_output_or_any_written_file(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    rc: int | None,
) -> None:
    import json

    from pytest_desched.providers.embedded.cluster import EmbeddedProvider
    from pytest_desched.tools.toolchain import default_cache_dir

    def no_cluster(self: object) -> None:
        raise AssertionError("a cluster was started")

    monkeypatch.setattr(EmbeddedProvider, "start", no_cluster)
    monkeypatch.delenv("DESCHED_DEBUG", raising=False)
    arts, work, inputs = (tmp_path / d for d in ("arts", "work", "in"))
    for d in (arts, work, inputs):
        d.mkdir()
    monkeypatch.setenv("DESCHED_ARTIFACTS", str(arts))
    cache_logs = default_cache_dir() / "logs"  # the real cache (its built helpers): its logs
    t0 = time.time()
    monkeypatch.chdir(work)
    files = {
        "pol": (inputs / "pol.yaml", CRED_POLICY),
        "vals": (inputs / "vals.yaml", CRED_HELM_VALUES),
        "snap": (inputs / "snap.json", _cred_snapshot()),
        "log": (
            inputs / "incident.log",
            "".join(
                json.dumps(
                    {
                        "msg": "Evicted pod",
                        "pod": {"name": "p", "namespace": "ns"},
                        "reason": v,
                        "strategy": "RemoveDuplicates",
                    }
                )
                + "\n"
                for v in CRED_VALUES.values()
            ),
        ),
    }
    for path, text in files.values():
        path.write_text(text)
    out = tmp_path / "result.out"
    args = [a.format(out=out, **{k: p for k, (p, _) in files.items()}) for a in argv]
    got = cli.main(args)
    cap = capsys.readouterr()
    if rc is not None:
        assert got == rc, cap.err
    if rc == 2:
        assert cap.err.strip().splitlines()[-1].startswith("[desched] error:"), cap.err
        assert "credential" in cap.err or "DL004" in cap.err, cap.err
    written = [p for p in tmp_path.rglob("*") if p.is_file() and not p.is_relative_to(inputs)]
    written += [p for p in cache_logs.rglob("*") if p.is_file() and p.stat().st_mtime >= t0]
    assert out in written or rc == 2 or "--output-file" not in argv
    for name, secret in PLANTED.items():
        assert secret not in cap.out and secret not in cap.err, f"{name} printed: {cap}"
        for p in written:
            assert secret not in p.read_text(errors="replace"), f"{name} written to {p}"


@pytest.mark.parametrize("redact", [False, True], ids=["plain", "redact"])
def test_snapshot_annotations_lose_the_credential_part_with_or_without_redact(
    tmp_path: Path, redact: bool
) -> None:
    """What `desched snapshot` writes (assemble -> trim -> scrub; --redact on top)."""
    from pytest_desched.replay.capture.format import Snapshot
    from pytest_desched.replay.capture.redact import redact_snapshot
    from pytest_desched.replay.capture.snapshot import assemble

    ann = {f"example.com/{k}": v for k, v in CRED_VALUES.items()}
    raw = [
        {"kind": "Node", **{**NODE, "metadata": {"name": "n1", "annotations": dict(ann)}}},
        {"kind": "Pod", **_pod(metadata={"name": "p", "namespace": "ns", "annotations": ann})},
        {
            "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "ns", "annotations": dict(ann)},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"a": "b"}},
                "template": {"metadata": {"annotations": dict(ann)}, "spec": _pod()["spec"]},
            },
        },
    ]
    objects, _ = assemble(raw, None, [])
    snap = Snapshot(header={"takenAt": "2026-11-30T00:00:00Z"}, policy=None, objects=objects)
    if redact:
        snap = redact_snapshot(snap)
    out = snap.write(tmp_path / "snap.yaml")
    text = Path(out).read_text()
    for name, secret in PLANTED.items():
        assert secret not in text, (
            f"{name} kept in the snapshot ({'--redact' if redact else 'plain'})"
        )
    if not redact:  # only the credential part goes: the rest of each value is kept
        assert "hooks.example.com/notify" in text and "git.example.com/x" in text, text
        assert text.count("<redacted>") >= 4 * 2, text
