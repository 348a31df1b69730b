"""The user's --policy / --values: refused before any cluster change (exit 2, file and line),
coalesced by the pinned helm (never a Python merge), shown and recorded by digest.

The helm and chart here are the real pinned ones (the tool cache); no cluster is started: the
provider factory is replaced by one that fails the test if anything asks for a cluster.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_desched import cli
from pytest_desched.config import build_config
from pytest_desched.descheduler.chart import private_file
from pytest_desched.descheduler.inputs import (
    check_user_inputs,
    lab_set_flags,
    read_input,
    unsafe_value_lines,
)
from pytest_desched.descheduler.render_checks import find
from pytest_desched.errors import ConfigError
from pytest_desched.experiments import lab_policy
from pytest_desched.session import DeschedSession
from tests.unit import REPO

pytest_plugins = ["pytester"]

RUNBOOK = (REPO / "manifests" / "policy-safe-rebalance.yaml").read_text()
# A user's policy that differs from the runbook's: other caps and an extra protection.
USER_POLICY = RUNBOOK.replace("maxNoOfPodsToEvictTotal: 2", "maxNoOfPodsToEvictTotal: 1").replace(
    "      minReplicas: 2\n",
    "      minReplicas: 2\n      priorityThreshold:\n        value: 1000\n",
)
PROD_VALUES = """\
resources:
  requests:
    cpu: 100m
    memory: 64Mi
priorityClassName: system-node-critical
cmdOptions:
  v: 5
"""


@pytest.fixture
def no_cluster(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Any attempt to get a cluster fails the test (and is listed)."""
    asked: list[str] = []

    def refuse(*a: Any, **k: Any) -> Any:
        asked.append("make_provider")
        raise AssertionError("a cluster was asked for before the inputs were refused")

    monkeypatch.setattr("pytest_desched.providers.make_provider", refuse)
    return asked


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def _run(tmp_path: Path, *argv: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = cli.main(
        ["run", "positive", "--provider", "embedded", "--artifacts", str(tmp_path / "a"), *argv]
    )
    return code, capsys.readouterr().err


# -- config: the flags, the env fallbacks --------------------------------------------------
def test_values_repeat_in_helms_order_and_env_is_comma_separated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b, p = (_write(tmp_path, n, "x: 1\n") for n in ("a.yaml", "b.yaml", "p.yaml"))
    c = build_config({"--desched-values": [str(b), str(a)], "--desched-policy": str(p)})
    assert c.values == (b, a) and c.policy == p
    monkeypatch.setenv("DESCHED_VALUES", f"{a},{b}")
    monkeypatch.setenv("DESCHED_POLICY", str(p))
    c = build_config()
    assert c.values == (a, b) and c.policy == p
    assert build_config({"--desched-values": [str(b)]}).values == (b,)  # the flag wins


@pytest.mark.parametrize("flag", ["--policy", "--values"])
def test_missing_file_exits_2_naming_it(
    tmp_path: Path, flag: str, no_cluster: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = _run(tmp_path, flag, str(tmp_path / "nope.yaml"), capsys=capsys)
    assert code == cli.EXIT_USAGE
    # config names the option as the plugin spells it; the CLI may show its own spelling
    name = flag.removeprefix("--")
    assert re.search(rf"--(desched-)?{name} {tmp_path / 'nope.yaml'}: no such file", err), err
    assert no_cluster == []


def test_directory_is_not_a_values_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run(tmp_path, "--values", str(tmp_path), capsys=capsys)
    assert code == cli.EXIT_USAGE and "not a regular file" in err


def test_yaml_error_names_file_and_line(tmp_path: Path) -> None:
    bad = _write(tmp_path, "v.yaml", "resources:\n  requests: {cpu: 1\nx: [\n")
    with pytest.raises(ConfigError, match=rf"--values {bad}:\d+: not valid YAML"):
        read_input("--values", bad)
    with pytest.raises(ConfigError, match="is a list, not a mapping"):
        read_input("--values", _write(tmp_path, "l.yaml", "- a\n"))


# -- the runbook's safety flags cannot be turned off by values ---------------------------------
def test_values_turning_suspend_or_dry_run_off_are_named_with_their_line(tmp_path: Path) -> None:
    a = read_input(
        "--values", _write(tmp_path, "a.yaml", "schedule: '*/5 * * * *'\nsuspend: false\n")
    )
    b = read_input(
        "--values", _write(tmp_path, "b.yaml", "cmdOptions:\n  v: 2\n  dry-run: false\n")
    )
    fixed = read_input("--values", _write(tmp_path, "c.yaml", "suspend: true\n"))
    out = unsafe_value_lines([a, b])
    assert len(out) == 2
    assert out[0].startswith(f"--values {a.path}:2: suspend: false turns it off")
    assert out[1].startswith(f"--values {b.path}:3: cmdOptions.dry-run: false turns it off")
    assert unsafe_value_lines([a, fixed]) == []  # helm's order: the last file that sets it wins
    assert unsafe_value_lines([fixed, a])[0].startswith(f"--values {a.path}:2")


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("suspend: false\n", r"v\.yaml:1: suspend: false turns it off"),
        ("cmdOptions:\n  dry-run: false\n", r"v\.yaml:2: cmdOptions\.dry-run: false"),
        ("image: registry.example/descheduler\n", "helm refuses these values .*image"),
        ("kind: Deployment\n", "no single CronJob"),
        (
            "deschedulerPolicy:\n  maxNoOfPodsToEvictPerNod: 1\n  profiles: []\n",
            r"v\.yaml:2: deschedulerPolicy\.maxNoOfPodsToEvictPerNod: DL002",
        ),
    ],
    ids=["suspend-off", "dry-run-off", "helm-refuses", "deployment", "policy-lint-error"],
)
def test_bad_values_exit_2_before_any_cluster(
    tmp_path: Path,
    text: str,
    match: str,
    no_cluster: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    v = _write(tmp_path, "v.yaml", text)
    code, err = _run(tmp_path, "--values", str(v), capsys=capsys)
    assert code == cli.EXIT_USAGE, err
    assert no_cluster == []
    assert re.search(match, err, re.S), err


def test_policy_failing_the_lint_exits_2_with_its_line(
    tmp_path: Path, no_cluster: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    bad = RUNBOOK.replace("      nodeFit: true\n", "      nodeFit: true\n      nodFit: true\n")
    p = _write(tmp_path, "my.yaml", bad)
    code, err = _run(tmp_path, "--policy", str(p), capsys=capsys)
    assert code == cli.EXIT_USAGE and no_cluster == []
    line = bad.splitlines().index("      nodFit: true") + 1
    assert f"{p}:{line}: profiles[0].pluginConfig[0].args.nodFit: DL002" in err, err


# -- helm coalesces; the lab's flags go on top and are shown -------------------------------------
def _session(tmp_path: Path, **opts: Any) -> DeschedSession:
    values = {"--desched-provider": "embedded", **opts}
    return DeschedSession(build_config(values, run_dir=tmp_path / "run"), report=lambda _m: None)


def test_user_policy_and_values_are_checked_and_recorded_by_digest(
    tmp_path: Path, no_cluster: list[str]
) -> None:
    pol = _write(tmp_path, "my.yaml", USER_POLICY)
    val = _write(tmp_path, "prod-values.yaml", PROD_VALUES)
    s = _session(tmp_path, **{"--desched-policy": str(pol), "--desched-values": [str(val)]})
    inp = s.inputs
    ev = inp.evidence()
    assert ev["policy"] == {
        "file": "my.yaml",
        "sha256": "sha256:" + hashlib.sha256(pol.read_bytes()).hexdigest(),
    }
    assert ev["values"] == [
        {
            "file": "prod-values.yaml",
            "sha256": "sha256:" + hashlib.sha256(val.read_bytes()).hexdigest(),
        }
    ]
    assert "cpu" not in str(ev)  # names and digests, never contents
    assert inp.policy is not None and inp.policy.limits["total"] == 1
    # the user's v=5 is kept (>= the lab's 4); the JSON log format goes on top and is shown
    assert inp.set_flags == ("--set", "cmdOptions.logging-format=json")
    assert any(o.startswith("suspend=true") for o in ev["on_top"])
    assert any(o.startswith("cmdOptions.logging-format=json") for o in ev["on_top"])
    # the lab's deviations apply to the user's policy too, each recorded
    lab = lab_policy("pdb-lister-workaround", base=inp.policy)
    assert [o["path"].rsplit(".", 1)[-1] for o in lab.overrides] == ["minPodAge", "extraEnabled"]
    assert lab.evictor_args(0)["priorityThreshold"] == {"value": 1000}
    assert no_cluster == []


def test_values_deschedulerpolicy_is_the_policy_helm_renders(tmp_path: Path) -> None:
    """Only caps in the values: helm keeps the chart's default profile (not 'nothing enabled')."""
    val = _write(
        tmp_path,
        "caps.yaml",
        "deschedulerPolicy:\n  maxNoOfPodsToEvictPerNode: 1\n  maxNoOfPodsToEvictTotal: 1\n",
    )
    inp = _session(tmp_path, **{"--desched-values": [str(val)]}).inputs
    assert inp.policy is not None
    assert inp.policy.limits == {"node": 1, "namespace": None, "total": 1}
    assert "LowNodeUtilization" in str(inp.policy.to_dict())  # the chart's default profile
    assert inp.policy_from.startswith("--values caps.yaml (deschedulerPolicy")


def test_lower_verbosity_is_raised_and_shown(tmp_path: Path) -> None:
    docs = [
        {
            "kind": "CronJob",
            "metadata": {"name": "d"},
            "spec": {
                "jobTemplate": {
                    "spec": {"template": {"spec": {"containers": [{"args": ["--v=2"]}]}}}
                }
            },
        }
    ]
    flags, shown = lab_set_flags(docs)
    assert flags == ["--set", "cmdOptions.v=4", "--set", "cmdOptions.logging-format=json"]
    assert shown[0].startswith("cmdOptions.v=4 (was 2")


def test_release_passes_values_as_f_files_and_policy_replaces_theirs(tmp_path: Path) -> None:
    """The release's render: the user's -f files, then `deschedulerPolicy: null`, then ours;
    the real helm then renders exactly our policy (no key of the values' policy leaks in)."""
    from pytest_desched.descheduler.chart_source import obtain_chart
    from pytest_desched.descheduler.policy import Policy
    from pytest_desched.descheduler.render_checks import parse_manifests
    from pytest_desched.proc import helm_env, run
    from pytest_desched.tools.toolchain import Toolchain

    tc = Toolchain()
    chart = obtain_chart(tc, tc.versions, report=lambda _m: None)
    val = _write(
        tmp_path,
        "v.yaml",
        PROD_VALUES + "deschedulerPolicy:\n  nodeSelector: a=b\n  maxNoOfPodsToEvictTotal: 9\n",
    )
    ours = Policy.from_yaml(USER_POLICY)
    with (
        private_file("deschedulerPolicy: null\n") as reset,
        private_file(yaml.safe_dump(ours.chart_values())) as mine,
    ):
        files = [a for f in (val, reset, mine) for a in ("-f", str(f))]
        out = run(
            [str(tc.path("helm")), "template", "d", str(chart.path), *files],
            env=helm_env(tmp_path / "h"),
        ).stdout
    docs = parse_manifests(out)
    (cm,) = [d for d in find(docs, "ConfigMap") if "policy.yaml" in d["data"]]
    assert ours.matches_rendered(cm["data"]["policy.yaml"])
    (cj,) = find(docs, "CronJob")
    pod = cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["priorityClassName"] == "system-node-critical"
    assert pod["containers"][0]["resources"]["requests"] == {"cpu": "100m", "memory": "64Mi"}


def test_check_user_inputs_names_the_flag_on_helms_refusal(tmp_path: Path) -> None:
    def render(files: Any) -> Any:
        raise ConfigError(f"{files[0].path}: helm refuses these values (boom)")

    v = _write(tmp_path, "v.yaml", "x: 1\n")
    with pytest.raises(ConfigError, match=f"--values {v}: helm refuses these values \\(boom\\)"):
        check_user_inputs(None, [v], render, lambda *a: None)


def test_policy_flag_takes_a_policy_not_values(tmp_path: Path) -> None:
    v = _write(tmp_path, "v.yaml", PROD_VALUES)
    with pytest.raises(ConfigError, match=r"kind is None, not DeschedulerPolicy.*--values"):
        check_user_inputs(v, [], lambda f: None, lambda *a: None)  # type: ignore[arg-type,return-value]


# -- the pytest plugin: --desched-policy / --desched-values and their env fallbacks ----------
def test_plugin_options_reach_the_settings(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    for env in ("DESCHED_POLICY", "DESCHED_VALUES"):
        monkeypatch.delenv(env, raising=False)
    pol = _write(pytester.path, "my.yaml", USER_POLICY)
    a = _write(pytester.path, "a.yaml", PROD_VALUES)
    b = _write(pytester.path, "b.yaml", "cmdOptions:\n  v: 6\n")
    pytester.makepyfile(
        f"""
        from pathlib import Path
        def test_settings(desched_settings):
            assert desched_settings.policy == Path({str(pol)!r})
            assert desched_settings.values == (Path({str(a)!r}), Path({str(b)!r}))
        """
    )
    res = pytester.runpytest(
        "-p", "no:cacheprovider", f"--desched-policy={pol}",
        f"--desched-values={a}", f"--desched-values={b}",
    )  # fmt: skip
    res.assert_outcomes(passed=1)
    monkeypatch.setenv("DESCHED_POLICY", str(pol))
    monkeypatch.setenv("DESCHED_VALUES", f"{a},{b}")
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)


def test_plugin_refuses_a_bad_values_file_at_configure_time(pytester: pytest.Pytester) -> None:
    bad = _write(pytester.path, "v.yaml", "a: [\n")
    pytester.makepyfile("def test_settings(desched_settings):\n    pass\n")
    res = pytester.runpytest("-p", "no:cacheprovider", f"--desched-values={bad}")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    res.stderr.fnmatch_lines([f"*--desched-values {bad}:2: not valid YAML*"])


def test_plugin_ini_keys_take_a_policy_and_a_list_of_values(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    for env in ("DESCHED_POLICY", "DESCHED_VALUES"):
        monkeypatch.delenv(env, raising=False)
    pol = _write(pytester.path, "my.yaml", USER_POLICY)
    a = _write(pytester.path, "a.yaml", PROD_VALUES)
    b = _write(pytester.path, "b.yaml", "cmdOptions:\n  v: 6\n")
    pytester.makepyprojecttoml(
        f"""
        [tool.pytest.ini_options]
        desched_policy = {str(pol)!r}
        desched_values = [{str(a)!r}, {str(b)!r}]
        """
    )
    pytester.makepyfile(
        f"""
        from pathlib import Path
        def test_settings(desched_settings):
            assert desched_settings.policy == Path({str(pol)!r})
            assert desched_settings.values == (Path({str(a)!r}), Path({str(b)!r}))
        """
    )
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)
