"""`desched fidelity snapshot.yaml`: one replay snapshot restored twice, real and dry run.

Each half is a replay (replay/run.py) on a fresh embedded cluster restored from the same
snapshot, at the same descheduler version and policy: first for real, then in dry run. Pods
keep their names in both, so a pod's identity is its namespace and owner (else its name) and
round 1's fates are compared by fidelity/compare.py. Refused before any cluster: a snapshot
with no pod in the policy's scope (nothing to compare).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_desched.descheduler.known_bugs import RoundFacts, signatures
from pytest_desched.descheduler.node_selector import node_facts
from pytest_desched.descheduler.policy.scope import evicting_plugins
from pytest_desched.errors import ConfigError
from pytest_desched.fidelity.compare import (
    VERDICT_OF,
    FidelityResult,
    Half,
    Mode,
    Outcome,
    PodRef,
    compare,
    fates_of,
    verdict_summary,
)
from pytest_desched.fidelity.explain import NOT_COMPARABLE, Budget, budgets_of, half_gap
from pytest_desched.fidelity.mirror_probe import (
    LOCAL,
    NOT_PROBED,
    Expect,
    MirrorProbe,
    binary_runs,
    probe,
)
from pytest_desched.outcome.verdict import Verdict
from pytest_desched.replay.inputs import ReplayInputs, check_inputs
from pytest_desched.replay.objects import collection_path
from pytest_desched.replay.run import Replay, ReplayOptions

if TYPE_CHECKING:
    from pytest_desched.config import DeschedConfig
    from pytest_desched.descheduler.policy import Policy


@dataclass
class SnapshotFidelity:
    """The two replays' round 1 compared; `head` is the command's first line."""

    name: str
    comparison: FidelityResult | None
    outcome: Outcome = "pass"
    message: str = ""
    duration_s: float = 0.0
    artifacts: dict[str, str] = field(default_factory=dict)

    @property
    def head(self) -> str:
        return self.name

    @property
    def final_verdict(self) -> Verdict:
        """pass, fail, or no verdict ("error": the halves were not compared, exit 3)."""
        return Verdict(VERDICT_OF[self.outcome], (self.message,) if self.message else ())

    def summary(self) -> dict[str, Any]:
        return {
            **verdict_summary(self.name, self.outcome, self.message, self.comparison),
            "duration_s": round(self.duration_s, 2),
            "artifacts": self.artifacts,
        }


def in_scope(pods: list[dict[str, Any]], policy: Policy) -> list[str]:
    """The snapshot's pods (namespace/name) some evicting plugin of `policy` may act on."""
    scopes = []
    for i, _, name in evicting_plugins(policy.to_dict()):
        try:
            args = policy.plugin_args(name, i)
        except KeyError:
            args = {}
        ns = args.get("namespaces") or {}
        exclude = set(ns.get("exclude") or []) | set(
            (args.get("evictableNamespaces") or {}).get("exclude") or []
        )
        scopes.append((ns.get("include"), exclude))
    out = []
    for p in pods:
        meta = p.get("metadata") or {}
        n = meta.get("namespace") or ""
        if any((inc is None or n in inc) and n not in exc for inc, exc in scopes):
            out.append(f"{n}/{meta.get('name')}")
    return out


def _refs(result: Any, budgets: dict[str, tuple[Budget, ...]]) -> list[PodRef]:
    """The restored snapshot pods, by namespace and owner (names are the same in both), each
    with the PDBs that select it (`budgets`, by namespace/name)."""
    restored = set(result.restored_pods)
    out = []
    for r in result.ledger.rows:
        if r.origin != "snapshot" or r.pod not in restored:
            continue
        ns, name = r.pod.split("/", 1)
        out.append(PodRef(r.pod, f"{ns}/{r.owner or name}", r.node, ns, budgets.get(r.pod, ())))
    return out


def pod_budgets(
    pods: list[dict[str, Any]], pdbs: list[dict[str, Any]]
) -> dict[str, tuple[Budget, ...]]:
    """namespace/name -> the PDBs that select the pod (namespace + selector), each with its
    budget as `pdbs` give it: never the lowest budget of any PDB anywhere."""
    out = {}
    for p in pods:
        meta = p.get("metadata") or {}
        ns = meta.get("namespace") or ""
        out[f"{ns}/{meta.get('name')}"] = budgets_of(ns, meta.get("labels") or {}, pdbs)
    return out


def _expected(pods: list[dict[str, Any]], keys: list[str]) -> dict[str, Any]:
    """The snapshot's word on each pod in scope: its node, and whether it was Ready."""
    want = set(keys)
    out = {}
    for p in pods:
        meta, spec, status = p.get("metadata") or {}, p.get("spec") or {}, p.get("status") or {}
        k = f"{meta.get('namespace') or ''}/{meta.get('name')}"
        if k in want:
            ready = any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in status.get("conditions") or []
            )
            out[k] = Expect(spec.get("nodeName") or None, ready)
    return out


def _probe(
    box: dict[str, Any], real: dict[str, Any], policy: Policy, keys: list[str], pods: list[Any]
) -> Any:
    """The mirror probe on the dry-run half's cluster when its round fell short of the real
    one's (fewer pods decided); None where it is not needed (a MirrorProbe saying why where
    it cannot run)."""
    cluster, rnd, real_rnd = box.get("cluster"), box.get("round"), real.get("round")
    if cluster is None or rnd is None or real_rnd is None:
        return None
    want = len({d.key for d in real_rnd.result.decisions} & set(keys))
    if len({d.key for d in rnd.result.decisions} & set(keys)) >= want:
        return None
    tc = getattr(cluster, "toolchain", None)
    if not cluster.capabilities.runs_local_binary or tc is None:
        gap = cluster.capabilities.local_binary_gap
        return MirrorProbe((), None, f"{NOT_PROBED}: {gap}")
    version = tc.groups["descheduler"].version
    with binary_runs(tc.path("descheduler"), cluster.kubeconfig, policy.to_yaml(), version) as run:
        return probe(run, LOCAL, cluster.core, _expected(pods, keys), want)


def _half(
    mode: Mode,
    result: Any,
    seen: dict[str, Any],
    policy: Policy,
    budgets: dict[str, tuple[Budget, ...]],
) -> Half:
    rows = [r for r in result.ledger.rows if r.origin == "snapshot"]
    refs = _refs(result, budgets)
    pending: dict[str, tuple[str, ...]] = {}
    ident = {ref.key: ref.identity for ref in refs}
    for r in rows:
        if r.pod in ident and r.fates and getattr(r.fates[0], "replacement", None) == "pending":
            pending[ident[r.pod]] = (*pending.get(ident[r.pod], ()), r.pod)
    rnd = seen["round"]
    facts = RoundFacts(
        "replay",
        result.descheduler,
        frozenset(),
        decisions=tuple(rnd.result.decisions),
        log=rnd.logs,
        **seen.get("nodes", {}),
    )
    return Half(
        mode,
        fates_of(refs, rnd.result.decisions, mode),
        caps=dict(policy.limits),
        pending=pending,
        signatures=signatures(facts),
        skipped=rnd.result.skipped,
        user=rnd.user,
    )


def judge_snapshot(c: FidelityResult, halves: dict[str, tuple[Half, Any]]) -> tuple[Outcome, str]:
    """The verdict: an error when a half's round 1 completed no cycle the comparison can stand
    on (explain.half_gap, the lab form's round-not-skipped and job-completed checks), else
    pass when every difference is explained. `halves`: mode -> (its Half, its Round)."""
    gaps = [
        g
        for h, rnd in halves.values()
        if (g := half_gap(h.mode, rnd.result.skipped, rnd.succeeded, rnd.exit_code, h.signatures))
    ]
    if gaps:
        return "error", NOT_COMPARABLE + "; ".join(gaps)
    return ("pass" if c.ok else "fail"), c.line()


class FidelityHalf(Replay):
    """One half's replay: the nodes, the cluster and the restored PDBs before round 1 kept in
    `seen[mode]`; the dry-run half probes the cluster after its round if need be."""

    def __init__(
        self,
        mode: str,
        seen: dict[str, dict[str, Any]],
        inp: ReplayInputs,
        scoped: list[str],
        *args: Any,
        **kw: Any,
    ) -> None:
        super().__init__(*args, **kw)
        self.mode, self.seen, self.inp, self.scoped = mode, seen, inp, scoped
        self.box = seen[mode]

    def before_round(self, i: int, cluster: Any) -> dict[str, Any]:
        # heavy: the kubernetes client, kept out of this module's import
        from pytest_desched.replay.kubeapi import list_all

        self.box["nodes"] = node_facts(cluster.core.list_node().items, self.inp.policy.to_dict())
        self.box["cluster"] = cluster
        if i == 1:  # the restored PDBs' budgets as the round is about to start
            self.box["pdbs"] = list_all(cluster.api_client, collection_path("PodDisruptionBudget"))
        return {}

    def after_round(self, i: int, rnd: Any, fates: dict[str, Any]) -> dict[str, Any]:
        box = self.box
        box.setdefault("round", rnd)
        if self.mode == "dry-run" and i == 1:  # the cluster is still up: probe it if need be
            inp = self.inp
            box["probe"] = _probe(box, self.seen["real"], inp.policy, self.scoped, inp.snap.pods)
        return {"mirror_probe": box["probe"].how} if box.get("probe") else {}


def run_snapshot_fidelity(
    path: str | Path,
    config: DeschedConfig,
    policy: Any = None,
    descheduler: str | None = None,
) -> SnapshotFidelity:
    """Both replays of `path`; ConfigError (exit 2) before any cluster on bad input."""
    t0 = time.monotonic()
    inp = check_inputs(path, descheduler, policy, 1, None)
    scoped = in_scope(inp.snap.pods, inp.policy)
    if not scoped:
        raise ConfigError(
            f"{path}: no pod of the snapshot is in the policy's scope ({inp.policy.source}); "
            "dry run and the real run would both decide nothing: take a snapshot of the "
            "namespaces the policy acts on, or give a policy that includes them"
        )
    out = SnapshotFidelity(f"fidelity-snapshot[{Path(path).name}]", None)
    seen: dict[str, dict[str, Any]] = {"real": {}, "dry-run": {}}
    results = {}
    for mode in ("real", "dry-run"):
        cfg = config.with_(artifacts=config.artifacts / mode)
        options = ReplayOptions(
            descheduler=descheduler, policy=inp.policy, dry_run=mode == "dry-run"
        )
        half = FidelityHalf(mode, seen, inp, scoped, path, options, cfg)
        results[mode] = half.run()
        out.artifacts[mode] = str(cfg.artifacts)
    budgets = {m: pod_budgets(inp.snap.pods, seen[m].get("pdbs") or []) for m in seen}
    dry = _half("dry-run", results["dry-run"], seen["dry-run"], inp.policy, budgets["dry-run"])
    p = seen["dry-run"].get("probe")
    if p is not None:  # probed (settled or not), or could not be: the verdict says which
        rows = _refs(results["dry-run"], budgets["dry-run"])
        settled = fates_of(rows, p.settled.decisions, "dry-run") if p.settled else None
        dry = replace(dry, settled=settled, settled_how=p.how)
    real = _half("real", results["real"], seen["real"], inp.policy, budgets["real"])
    out.comparison = c = compare(dry, real)
    out.outcome, out.message = judge_snapshot(
        c, {h.mode: (h, seen[h.mode]["round"]) for h in (real, dry)}
    )
    out.duration_s = time.monotonic() - t0
    target = config.artifacts / "fidelity.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(out.summary(), indent=1, default=str))
    return out
