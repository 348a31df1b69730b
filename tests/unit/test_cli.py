"""The `desched` command without a cluster: help, option mapping, refusals and exit codes.

Every refusal is shown to change nothing: the cache directory (where tools, charts and
embedded clusters live) is a fresh temp folder and must stay empty. Where a test needs an
experiment's outcome, the session is a double that returns a real `ExperimentResult`.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_desched import cli
from pytest_desched.config import OPTIONS, commands_of, config_from_args
from pytest_desched.errors import ConfigError, PolicyError, ProviderError, ToolError
from pytest_desched.experiments import REGISTRY, ExperimentResult

SUBCOMMANDS = ("tools", "up", "down", "run")
DESCHED_SCRIPT = Path(sys.executable).with_name("desched")


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh DESCHED_CACHE_DIR (not created), no other DESCHED_* variable, temp files here."""
    for key in list(os.environ):
        if key.startswith("DESCHED_"):
            monkeypatch.delenv(key)
    d = tmp_path / "cache"
    monkeypatch.setenv("DESCHED_CACHE_DIR", str(d))
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))  # build_config's run_dir lands here
    yield d


def _help(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as ei:
        cli.main([*argv, "--help"])
    assert ei.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: desched {' '.join(argv)}".rstrip()), out[:200]
    return out


def _files_under(d: Path) -> list[str]:
    return sorted(str(p.relative_to(d)) for p in d.rglob("*")) if d.exists() else []


# -- help ----------------------------------------------------------------------------------
def test_console_script_prints_help_with_subcommands_and_exit_codes() -> None:
    proc = subprocess.run(
        [str(DESCHED_SCRIPT), "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: desched ")
    for sub in SUBCOMMANDS:
        assert re.search(rf"^\s+{sub}\s+\S", proc.stdout, re.M), f"{sub} not listed"
    flat = " ".join(proc.stdout.split())
    for code in ("0 success", "1 a verdict", "2 bad input", "3 the tool", "70 an internal", "130"):
        assert code in flat


def test_no_subcommand_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    """Bare `desched` prints the whole help (on stderr: stdout stays for output) and exits 2."""
    with pytest.raises(SystemExit) as ei:
        cli.main([])
    assert ei.value.code == 2
    o, err = capsys.readouterr()
    assert o == "" and err.startswith("usage: desched ")
    assert "Exit codes" in err and err.rstrip().endswith("give a subcommand (listed above)")


@pytest.mark.parametrize("sub", SUBCOMMANDS)
def test_each_subcommand_has_help(sub: str, capsys: pytest.CaptureFixture[str]) -> None:
    out = _help(capsys, sub)
    assert "-h, --help" in out
    expected = {
        "tools": ["--descheduler", "--cache-dir", "tools"],
        "up": ["--workers", "--provider"],
        "down": ["--all", "--cache-dir", "names"],
        "run": ["--variant", "--descheduler", "experiments"],
    }[sub]
    for word in expected:
        assert word in out, f"{word} missing from `desched {sub} --help`"


@pytest.mark.parametrize("sub", ["up", "run", "canary", "replay"])
def test_each_plugin_option_is_there_without_its_prefix_only_where_it_applies(
    sub: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each subcommand lists the plugin options it takes (config.commands_of), and no other:
    no `--candidate` on run, no `--keep` on up (it always keeps)."""
    out = _help(capsys, sub)
    for flag, env, _ in OPTIONS:
        short = "--" + flag.removeprefix("--desched-")
        listed = re.search(rf"(^|\s|\[){re.escape(short)}(\s|\]|$)", out, re.M)
        if sub in commands_of(flag):
            assert listed, f"{short} (plugin {flag}) missing from `desched {sub} --help`"
            if (sub, short) != ("replay", "--policy"):  # replay's own --policy (the snapshot's)
                assert env in out, f"{env} not named in `desched {sub} --help`"
        elif short not in ("--descheduler", "--policy", "--cache-dir"):  # the command's own
            assert not listed, f"{short} (plugin {flag}) listed on `desched {sub} --help`"


@pytest.mark.parametrize("sub", ["up", "run"])
def test_help_never_shows_the_plugin_prefix(sub: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Regression (run, fixed): the `--descheduler` alias has no metavar, so argparse shows its dest,
    `--DESCHED-DESCHEDULER-VERSION`, in the usage and the option list."""
    out = _help(capsys, sub)
    leaks = [line.strip() for line in out.splitlines() if re.search("--desched-", line, re.I)]
    assert not leaks, f"`desched {sub} --help` shows the plugin prefix: {leaks}"


# -- options resolve like the plugin's -----------------------------------------------------
def _config(argv: list[str]) -> Any:
    args = cli.parser().parse_args(argv)
    return config_from_args(args)


def test_options_map_onto_the_plugin_config(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the lab namespace gains the xdist worker's id under `make test` (config.py); not here
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    c = _config(
        [
            "run",
            "--provider",
            "embedded",
            "--workers",
            "4",
            "--namespace",
            "lab-cli",
            "--keep",
            "on-failure",
            "--redact",
            "--artifacts",
            str(tmp_path / "art"),
            "--release",
            "desched-cli",
            "--chart-source",
            "module",
            "--descheduler",
            "v0.37.0",
        ]
    )
    assert (c.provider, c.workers, c.namespace, c.keep) == ("embedded", 4, "lab-cli", "on-failure")
    assert c.redact is True
    assert c.artifacts == tmp_path / "art"
    assert (c.release, c.chart_source) == ("desched-cli", "module")
    assert c.descheduler_version == "v0.37.0"
    assert c.cache_dir == cache  # from DESCHED_CACHE_DIR


def test_explicit_option_beats_environment_beats_default(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _config(["run"]).workers == 3
    monkeypatch.setenv("DESCHED_WORKERS", "5")
    assert _config(["run"]).workers == 5
    assert _config(["run", "--workers", "4"]).workers == 4


def test_keep_choices_are_enforced_by_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ei:
        cli.main(["run", "--keep", "sometimes"])
    assert ei.value.code == 2
    assert "invalid choice: 'sometimes'" in capsys.readouterr().err


# -- refusals change nothing ---------------------------------------------------------------
def test_run_unknown_experiment_exits_2_naming_the_known_ones(
    cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    art = tmp_path / "art"
    assert cli.main(["run", "nosuch", "--provider", "embedded", "--artifacts", str(art)]) == 2
    err = capsys.readouterr().err
    assert "unknown experiment 'nosuch'" in err
    for name in ("positive", "nodefit", "pdb", "minpodage"):
        assert repr(name) in err
    assert str(sorted(REGISTRY)) in err
    assert _files_under(cache) == []  # no tools, no cluster dir, no owner record
    assert not art.exists()
    assert _files_under(tmp_path / "tmp") == []  # not even a run directory


def test_run_with_too_few_workers_exits_2_before_anything(
    cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["run", "positive", "--workers", "1", "--artifacts", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert "--workers / DESCHED_WORKERS must be an integer >= 2, got 1" in err
    assert "--desched-" not in err  # the flag the user typed, not the plugin's
    assert _files_under(cache) == []
    assert not (tmp_path / "a").exists()


def test_run_with_an_unknown_provider_is_bad_input(
    cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression (fixed): exit codes say 2 is "bad input (nothing was changed)"; an unknown provider name
    changes nothing (refused before any tool or cluster), but is a ProviderError -> exit 3,
    which the docstring reserves for "could not give a cluster"."""
    code = cli.main(["run", "positive", "--provider", "nosuch"])
    err = capsys.readouterr().err
    assert "unknown provider 'nosuch'" in err
    assert _files_under(cache) == []
    assert code == 2, f"exit {code}: {err}"


def _kept(cache: Path, name: str, keep: bool = True) -> Path:
    owners = cache / "clusters" / "owners"
    owners.mkdir(parents=True, exist_ok=True)
    rec = owners / f"{name}.json"
    rec.write_text(json.dumps({"pid": 1, "start": "x", "created": 0, "keep": keep}))
    return rec


def test_down_without_kept_clusters_says_so(
    cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["down"]) == 0
    assert capsys.readouterr().out.strip() == "no kept clusters"
    assert _files_under(cache) == []


def test_down_lists_only_kept_clusters(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _kept(cache, "desched-kept-b")
    _kept(cache, "desched-kept-a")
    _kept(cache, "desched-running-c", keep=False)  # a live run's cluster: not ours to list
    assert cli.main(["down"]) == 0
    assert capsys.readouterr().out.split() == ["desched-kept-a", "desched-kept-b"]


def test_down_unknown_name_exits_2_and_deletes_nothing(
    cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rec = _kept(cache, "desched-kept-a")
    before = _files_under(cache)
    assert cli.main(["down", "desched-kept-a", "unknown-name"]) == 2
    err = capsys.readouterr().err
    assert "not a kept cluster: ['unknown-name']" in err
    assert "desched-kept-a" in err  # names what is kept
    assert rec.is_file()  # the known one was not deleted either: all names checked first
    assert _files_under(cache) == before


def test_down_cache_dir_option_is_honoured(
    cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other-cache"
    _kept(other, "desched-elsewhere")
    assert cli.main(["down", "--cache-dir", str(other)]) == 0
    assert capsys.readouterr().out.split() == ["desched-elsewhere"]


def _kept_up(cache: Path, name: str, provider: str = "kind", created: bool = True) -> Path:
    """A finished `desched up`'s folder on a cluster the embedded records do not know."""
    from pytest_desched.providers.embedded.owners import write_up_kept

    run = cache / "up" / f"run-{name}"
    (run / "kind").mkdir(parents=True)
    (run / "kind" / "kubeconfig").write_text("")
    (run / "cluster-name").write_text(name)
    (run / "owner.json").write_text(json.dumps({"pid": 1, "start": "gone"}))  # up has ended
    write_up_kept(run, provider, name, created)
    return run


class _KindCli:
    """Records the deletions `desched down` asks kind for (the real one runs on kind)."""

    deleted: list[tuple[str, Path]] = []

    def __init__(self, name: str, workdir: Path, kind_path: Path, kubectl_path: Path) -> None:
        self.name, self.workdir = name, workdir

    def delete(self) -> None:
        assert (self.workdir / "kubeconfig").is_file()  # kind is told the cluster's own file
        _KindCli.deleted.append((self.name, self.workdir))


@pytest.fixture
def kind_cli(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Path]]:
    from pytest_desched.providers import kind
    from pytest_desched.tools.toolchain import Toolchain

    _KindCli.deleted = []
    monkeypatch.setattr(kind, "KindCli", _KindCli)
    monkeypatch.setattr(kind, "docker_available", lambda: True)
    monkeypatch.setattr(Toolchain, "path", lambda self, tool: Path(f"/nonexistent/{tool}"))
    return _KindCli.deleted


def test_a_kind_cluster_desched_up_kept_is_listed_and_its_folder_outlives_other_downs(
    cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before, a later `desched down` took the folder for an interrupted up's (its owner had
    exited, no embedded record named it) and removed the kind cluster's kubeconfig."""
    _kept(cache, "desched-kept-a")
    run = _kept_up(cache, "desched-kind-b")
    assert cli.main(["down"]) == 0
    assert capsys.readouterr().out.splitlines() == ["desched-kept-a", "desched-kind-b (kind)"]
    assert (run / "kind" / "kubeconfig").is_file()
    assert cli.main(["down", "--output", "json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["kept"] == ["desched-kept-a"]
    assert listed["kept_up"]["desched-kind-b"]["provider"] == "kind"


def test_down_deletes_the_kind_cluster_desched_up_made(
    cache: Path, kind_cli: list[tuple[str, Path]], capsys: pytest.CaptureFixture[str]
) -> None:
    run = _kept_up(cache, "desched-kind-b")
    assert cli.main(["down", "desched-kind-b"]) == 0
    assert kind_cli == [("desched-kind-b", run / "kind")]
    assert not run.exists()
    assert "deleted kind cluster desched-kind-b" in capsys.readouterr().err


def test_down_never_deletes_a_kind_cluster_up_did_not_make(
    cache: Path, kind_cli: list[tuple[str, Path]], capsys: pytest.CaptureFixture[str]
) -> None:
    run = _kept_up(cache, "mine", created=False)  # desched up --kind-cluster mine
    assert cli.main(["down", "mine"]) == 0
    assert kind_cli == [] and not run.exists()
    assert "yours, not made by desched up, so left as it is" in capsys.readouterr().err


def test_down_refuses_a_kept_mark_naming_no_provider_and_keeps_its_folder(
    cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _kept_up(cache, "odd", provider="../../etc")  # a hand-edited or hostile mark
    assert cli.main(["down", "odd"]) == 2
    assert "unknown provider '../../etc'" in capsys.readouterr().err
    assert run.is_dir()


def test_down_lists_past_a_kept_mark_that_is_not_a_record(
    cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _kept_up(cache, "odd")
    (run / "kept.json").write_text("[1, 2]")
    assert cli.main(["down"]) == 0
    assert capsys.readouterr().out.strip() == "no kept clusters"
    assert not run.exists()  # an ended up's folder with no mark that holds: swept as stale


def test_down_without_docker_keeps_the_kind_cluster_and_says_how(
    cache: Path,
    kind_cli: list[tuple[str, Path]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from pytest_desched.providers import kind

    monkeypatch.setattr(kind, "docker_available", lambda: False)
    run = _kept_up(cache, "desched-kind-b")
    assert cli.main(["down", "desched-kind-b"]) == 3
    assert kind_cli == [] and (run / "kind" / "kubeconfig").is_file()
    assert "set DOCKER_HOST" in capsys.readouterr().err


# -- exit codes ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (ConfigError("bad option"), 2),
        (PolicyError(["profiles: bad; fix it"]), 2),
        (ToolError("kwokctl could not be built"), 3),
        (ProviderError("no cluster for you"), 3),
        (KeyboardInterrupt(), 130),
    ],
    ids=["ConfigError", "PolicyError", "ToolError", "ProviderError", "KeyboardInterrupt"],
)
@pytest.mark.parametrize("sub", ["run", "up", "down", "tools"])
def test_errors_map_to_exit_codes(
    sub: str,
    exc: BaseException,
    code: int,
    cache: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    seen: list[argparse.Namespace] = []

    def boom(args: argparse.Namespace) -> int:
        seen.append(args)
        raise exc

    monkeypatch.setattr(f"pytest_desched.commands.{sub}.cmd_{sub}", boom)
    assert cli.main([sub]) == code
    assert len(seen) == 1
    err = capsys.readouterr().err
    if code == 130:
        assert "interrupted" in err
    else:
        assert f"error: {str(exc).splitlines()[0]}" in err


def test_other_exceptions_are_one_line_unless_debug(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bug is exit 70 (not 1, the code of a failed experiment and of UNSAFE: issue 40) and one
    line naming it (issue 32: no traceback for the user); --debug (or DESCHED_DEBUG=1) lets it
    through with its traceback."""

    def boom(args: argparse.Namespace) -> int:
        raise RuntimeError("a bug, not an outcome")

    monkeypatch.setattr("pytest_desched.commands.run.cmd_run", boom)
    monkeypatch.delenv("DESCHED_DEBUG", raising=False)
    assert cli.main(["run"]) == cli.EXIT_INTERNAL == 70
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error: RuntimeError: a bug, not an outcome" in err
    assert "Traceback" not in err and "--debug" in err
    with pytest.raises(RuntimeError, match="a bug"):
        cli.main(["--debug", "run"])


def test_sigterm_unwinds_like_ctrl_c_and_the_handler_is_restored(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    reached: list[str] = []

    def terminated(args: argparse.Namespace) -> int:
        os.kill(os.getpid(), signal.SIGTERM)  # what CI's cancel or `timeout` sends
        reached.append("after kill")  # never: the signal raised KeyboardInterrupt
        return 0

    before = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr("pytest_desched.commands.run.cmd_run", terminated)
    assert cli.main(["run"]) == 130
    assert reached == []
    assert "interrupted" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGTERM) is before


# -- run: the exit code follows the experiments' outcomes ----------------------------------
class FakeSession:
    """Stands in for DeschedSession: returns one fixed outcome per experiment, records use."""

    instances: list[FakeSession] = []
    outcome: str = "pass"

    def __init__(self, config: Any, report: Callable[[str], None]) -> None:
        self.config = config
        self.failed = False
        self.ran: list[tuple[str, str | None]] = []
        self.closed_failed: bool | None = None
        self.metrics: list[tuple[tuple[str, ...], bool]] = []  # (sources, asked before enter)
        self.entered = False
        FakeSession.instances.append(self)

    def need_metrics(self, sources: tuple[str, ...], why: str) -> None:
        self.metrics.append((tuple(sources), not self.entered))

    def __enter__(self) -> FakeSession:
        self.entered = True
        return self

    def __exit__(self, *exc: object) -> None:
        self.closed_failed = self.failed

    def run(
        self,
        experiment: str,
        variant: str | None = None,
        on_record: Callable[[dict[str, Any]], None] | None = None,
    ) -> ExperimentResult:
        self.ran.append((experiment, variant))
        variant = variant or "runbook"
        if on_record is not None:
            on_record({"evictions": 1, "caps": {"total": 2}, "deciding_layer": "evicted"})
        title = REGISTRY[experiment].title  # what the real Runner names its result
        message = "" if self.outcome == "pass" else f"{title}[{variant}] failed 1 check(s)"
        return ExperimentResult(title, variant, outcome=self.outcome, message=message)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("outcome", "code", "shown"),
    [("pass", 0, "PASSED"), ("xfail", 0, "XFAIL"), ("fail", 1, "FAILED"), ("error", 1, "ERROR")],
)
def test_run_exit_code_follows_the_outcomes(
    outcome: str,
    code: int,
    shown: str,
    cache: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Regression (fail, error, fixed): cmd_run collects `{**entry, **result.summary()}`, so each outcome
    is the result's own `fail`/`error`, then looks for `FAILED`/`ERROR`: never found, so
    `desched run` exits 0 when an experiment failed (the docstring says 1)."""
    import pytest_desched.session

    FakeSession.instances, FakeSession.outcome = [], outcome
    monkeypatch.setattr(pytest_desched.session, "DeschedSession", FakeSession)
    art = tmp_path / "art"
    got = cli.main(
        ["run", "positive", "pdb", "--variant", "pdb-lister-workaround", "--artifacts", str(art)]
    )
    out, err = capsys.readouterr()
    (session,) = FakeSession.instances
    assert session.ran == [("positive", "pdb-lister-workaround"), ("pdb", "pdb-lister-workaround")]
    lines = out.splitlines()
    assert lines[0].startswith(f"positive[pdb-lister-workaround]  {shown}  evictions=1/2"), out
    assert lines[1].startswith(f"pdb[pdb-lister-workaround]  {shown}"), out
    summary = json.loads((art / "run-summary.json").read_text())
    assert [(s["name"], s["variant"], s["outcome"]) for s in summary] == [
        (REGISTRY["positive"].title, "pdb-lister-workaround", outcome),
        (REGISTRY["pdb"].title, "pdb-lister-workaround", outcome),
    ]
    failing = outcome in ("fail", "error")
    assert session.closed_failed is failing  # keep=on-failure keeps exactly these
    if failing:
        assert "failed 1 check(s)" in err
    assert got == code, f"`desched run` exited {got} although every experiment was {outcome!r}"


def test_run_starts_the_cluster_with_the_metrics_source_an_experiment_reads(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`desched run utilization` asks for metrics-server before the cluster comes up (the
    session brings it up as it enters); the runbook's experiments ask for nothing."""
    import pytest_desched.session

    FakeSession.instances, FakeSession.outcome = [], "pass"
    monkeypatch.setattr(pytest_desched.session, "DeschedSession", FakeSession)
    assert cli.main(["run", "positive", "utilization", "--artifacts", str(tmp_path / "a")]) == 0
    [s] = FakeSession.instances
    assert s.metrics == [(("KubernetesMetrics",), True)]


def test_run_defaults_to_the_three_runbook_experiments(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pytest_desched.session

    FakeSession.instances, FakeSession.outcome = [], "pass"
    monkeypatch.setattr(pytest_desched.session, "DeschedSession", FakeSession)
    assert cli.main(["run", "--artifacts", str(tmp_path / "art")]) == 0
    assert FakeSession.instances[0].ran == [("positive", None), ("nodefit", None), ("pdb", None)]


# -- the packaging ---------------------------------------------------------------------------
@pytest.mark.parametrize("script", ["desched", "desched-tools"])
def test_console_script_entry_points_load(script: str) -> None:
    """Regression (desched-tools, fixed): pyproject points it at `pytest_desched.toolchain:main`, a module
    that no longer exists (it is `pytest_desched.tools.toolchain`): the script dies with
    ModuleNotFoundError."""
    (ep,) = [
        e for e in importlib.metadata.entry_points(group="console_scripts") if e.name == script
    ]
    assert callable(ep.load())


def test_a_provider_error_naming_a_url_with_a_token_is_scrubbed(
    cache: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An API server's URL in the named error (kube.api_health) may carry a token as user."""
    token = "s3cr3tT0kenValue1234567890"

    def boom(args: argparse.Namespace) -> int:
        raise ProviderError(f"kube-apiserver https://{token}@10.0.0.1:6443 is unreachable")

    monkeypatch.setattr("pytest_desched.commands.run.cmd_run", boom)
    assert cli.main(["run"]) == 3
    err = capsys.readouterr().err
    assert token not in err and "https://<redacted>@10.0.0.1:6443" in err, err
