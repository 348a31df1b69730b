"""The pinned descheduler chart, installed the runbook's way: suspended, dry-run, checked first.

Every install and upgrade is preceded by `helm template` with the same values and a
fail-closed check of the render; nothing reaches the cluster when a check fails.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from pytest_desched.descheduler.policy import Policy, check_policy_scope, digest_of_rendered
from pytest_desched.errors import ConfigError, UnsafeRender
from pytest_desched.log import Reporter, say
from pytest_desched.redaction import scrub_secrets
from pytest_desched.tools.versions import descheduler_image

if TYPE_CHECKING:
    from pytest_desched.providers.base import Cluster
    from pytest_desched.tools.toolchain import Toolchain
    from pytest_desched.tools.versions import Versions

from pytest_desched.descheduler.chart_shape import shape, validation_flags
from pytest_desched.descheduler.chart_source import ChartRef
from pytest_desched.descheduler.ownership import helm_evidence
from pytest_desched.descheduler.policy.lint import lint_or_refuse
from pytest_desched.descheduler.preflight import run_preflight
from pytest_desched.descheduler.render_checks import (
    RELEASE_TAG,
    check_render,
    parse_manifests,
)

# Lab values on top of `helm show values`: JSON logs at -v=4 so every filter decision
# is visible (the runbook's "find out why from the descheduler's own output").
LAB_CMD_OPTIONS = {"v": 4, "logging-format": "json"}


@contextlib.contextmanager
def private_file(text: str, suffix: str = ".yaml") -> Iterator[Path]:
    """`text` in a 0600 temp file that is removed when the block ends.

    helm and kubectl need the real values and render; the release work dir keeps only
    scrubbed copies, so a credential that slipped past validation never stays on disk.
    """
    fd, name = tempfile.mkstemp(prefix="desched-private-", suffix=suffix)  # mode 0600
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        yield Path(name)
    finally:
        Path(name).unlink(missing_ok=True)


def _write_scrubbed(path: Path, text: str) -> Path:
    path.write_text(scrub_secrets(text))
    return path


def check_runs_here(
    cluster: Cluster,
    versions: Versions,
    version: str,
    image_ref: str | None = None,
    image_published: bool | None = None,
) -> None:
    """A non-pinned version must really run: on kubelet clusters only as a published image.

    Asked before a release is built (and so before its binary is built): an image candidate
    on a cluster that runs no images is refused first.
    """
    caps = cluster.capabilities
    if image_ref:
        why = caps.image_refusal(f"image {image_ref}")
        if why:
            raise ConfigError(why)
        return
    if version == versions.descheduler.version or caps.runs_local_binary:
        return  # the embedded stand-in kubelet runs the binary built for this version
    if image_published is False:
        raise ConfigError(
            f"descheduler {version} is a local build and has no published "
            f"image, and {caps.local_binary_gap}: "
            "run this candidate on the embedded provider (it runs the binary), or give an "
            "image of it with --desched-candidate image:REPOSITORY:TAG"
        )
    if image_published is None and not RELEASE_TAG.fullmatch(version):
        raise ConfigError(
            f"descheduler version {version!r} has no published image, and "
            f"{caps.local_binary_gap}: use a "
            "released tag (vX.Y.Z, image "
            f"{versions.descheduler_image.rsplit(':', 1)[0]}:vX.Y.Z) or the embedded "
            "provider, which runs the binary built from that source"
        )


def placement_layers(placement: Mapping[str, Any]) -> tuple[str, str]:
    """Two `-f` layers that set the placement's keys whole: nulls first (helm deletes a key
    set to null, so a user's nodeSelector or affinity is dropped, not merged into ours), then
    the placement itself."""
    nulls = yaml.safe_dump({k: None for k in placement}, sort_keys=False)
    return nulls, yaml.safe_dump(dict(placement), sort_keys=False)


# What a Release learns and changes while it lives; every other field is an input, given whole
# at construction and fixed after it (a different input is a different Release).
LIVE_STATE = frozenset(
    {
        "values",
        "dry_run",
        "policy",
        "history",
        "installed",
        "cronjob_name",
        "configmap_name",
        "preflight",
        "extra_flags",
        "applied_lint",
        "validated_shapes",
    }
)


@dataclass
class Release:
    """The descheduler release in one cluster, moved only along the runbook's steps.

    Built whole: the inputs (cluster, chart, the descheduler under test, its checker, the
    user's values) are given at construction and cannot be set afterwards; the live state
    (LIVE_STATE: what is installed, with which policy, the chart's defaults, the history)
    is the release's own and starts empty.
    """

    cluster: Cluster
    chart: ChartRef
    versions: Versions
    workdir: Path
    name: str = "descheduler"
    namespace: str = "kube-system"
    report: Reporter = say
    # The descheduler under test: its binary (embedded), its image (kind/existing) and the
    # version-keyed rules (known bugs, log table) all follow this one value.
    descheduler_version: str = ""
    binary: Path | None = None  # the descheduler binary of that version (embedded rounds)
    # Whether a kubelet can pull that version's image: None infers it from the tag's form;
    # a canary's source or binary candidate has none (its label looks like a tag).
    image_published: bool | None = None
    image_ref: str | None = None  # an `image:` candidate's own REPOSITORY:TAG
    # The toolchain whose policy checker lints this release's policies, and the version
    # whose rules it applies (a binary candidate without source: the baseline's).
    toolchain: Toolchain | None = None
    policycheck_version: str = ""
    # `target_namespace` is where evictions will happen (the lab), for the pre-flight's
    # can-i and its PDBs.
    target_namespace: str | None = None
    # The user's Helm values files (descheduler.inputs), passed to helm as `-f` in this order,
    # and the lab's `--set` flags over them (None: the lab's log options, LAB_CMD_OPTIONS).
    values_files: tuple[Path, ...] = ()
    set_flags: tuple[str, ...] | None = None
    # Where round pods run (a replay's runner node: replay.rebuild.plan.runner_values): chart values
    # layered over the user's files, each key replacing theirs whole (placement_layers).
    placement: Mapping[str, Any] | None = None

    # -- live state (LIVE_STATE) -----------------------------------------------------------
    values: dict[str, Any] = field(default_factory=dict, init=False)  # the chart's defaults
    dry_run: bool | None = field(default=None, init=False)
    policy: Policy | None = field(default=None, init=False)
    history: list[dict[str, Any]] = field(default_factory=list, init=False)
    installed: bool = field(default=False, init=False)
    cronjob_name: str = field(default="", init=False)
    configmap_name: str = field(default="", init=False)
    # The runbook's pre-flight (descheduler.preflight), run by install_first before any change.
    preflight: dict[str, Any] | None = field(default=None, init=False)
    extra_flags: tuple[str, ...] = field(default=(), init=False)  # add_cmd_options's
    # apply_policy's lint of the live policy, handed down to the round records (by digest):
    # {"digest", "effective_policy", "policy_lint"}; None after the chart's default policy.
    applied_lint: dict[str, Any] | None = field(default=None, init=False)
    # The shapes (chart_shape.shape) of the renders helm validated against the OpenAPI schema
    # on this release: a policy upgrade of the same shape skips that validation.
    validated_shapes: set[str] = field(default_factory=set, init=False)

    def __post_init__(self) -> None:
        if not self.descheduler_version:
            self.descheduler_version = self.versions.descheduler.version
        object.__setattr__(self, "_built", True)

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in LIVE_STATE and self.__dict__.get("_built"):
            raise AttributeError(
                f"Release.{name} is an input, fixed when the release is built; "
                "build the Release with it instead"
            )
        object.__setattr__(self, name, value)

    @property
    def image(self) -> str:
        if self.image_ref:
            return self.image_ref
        return descheduler_image(self.versions, self.descheduler_version)

    @property
    def pinned(self) -> bool:
        return self.descheduler_version == self.versions.descheduler.version

    # -- steps ------------------------------------------------------------
    def show_values(self) -> Path:
        # The chart's values file is part of its .tgz: kept beside it under the .tgz's
        # digest, so a pinned chart's `helm show values` runs once per machine.
        cached = self.chart.path.with_name(f".{self.chart.path.name}.{self.chart.digest}.values")
        if self.chart.path.is_file() and cached.is_file():
            out = cached.read_text()
        else:
            out = self.cluster.helm("show", "values", str(self.chart.path)).stdout
            if self.chart.path.is_file():
                with contextlib.suppress(OSError):  # a read-only chart folder: no cache
                    tmp = cached.with_name(f"{cached.name}.{os.getpid()}.tmp")
                    tmp.write_text(out)
                    tmp.replace(cached)
        p = _write_scrubbed(self.workdir / "descheduler-values.yaml", out)
        self.values = yaml.safe_load(out) or {}
        return p

    @contextlib.contextmanager
    def _values_file(self, policy: Policy | None) -> Iterator[list[Path]]:
        """The `-f` files for helm, in Helm's order; helm alone coalesces them.

        The user's values files (`values_files`) first, then the placement's two layers
        (placement_layers), then with a policy two private files:
        `deschedulerPolicy: null` (so helm drops the values' own policy map instead of
        merging keys into ours) and the policy itself. Scrubbed copies stay in the work dir.
        """
        files = list(self.values_files)
        name = "values-active.yaml" if policy else "values-first-install.yaml"
        with contextlib.ExitStack() as stack:
            if self.placement:
                layers = placement_layers(self.placement)
                _write_scrubbed(self.workdir / "values-placement.yaml", layers[1])
                files += [stack.enter_context(private_file(t)) for t in layers]
            if policy is not None:
                text = yaml.safe_dump(policy.chart_values(), sort_keys=False)
                _write_scrubbed(self.workdir / name, text)
                files.append(stack.enter_context(private_file("deschedulerPolicy: null\n")))
                files.append(stack.enter_context(private_file(text)))
            yield files

    def _set_flags(self) -> list[str]:
        """The lab's `--set` flags over the values (its log options: json, -v=4), then any
        added since (add_cmd_options)."""
        if self.set_flags is not None:
            base = list(self.set_flags)
        else:
            base = [f for k, v in LAB_CMD_OPTIONS.items() for f in ("--set", f"cmdOptions.{k}={v}")]
        return [*base, *self.extra_flags]

    def add_cmd_options(self, options: Mapping[str, Any]) -> None:
        """More descheduler flags (`cmdOptions.KEY=VALUE`) over the lab's, from the next render
        on (a replay's `--client-qps`: the caller records them)."""
        extra = [f for k, v in options.items() for f in ("--set", f"cmdOptions.{k}={v}")]
        self.extra_flags = (*self.extra_flags, *extra)

    def _flags(self, values_files: list[Path], dry_run: bool) -> list[str]:
        flags = ["--namespace", self.namespace]
        for vf in values_files:
            flags += ["-f", str(vf)]
        flags += [
            *self._set_flags(),
            "--set",
            "suspend=true",
            "--set",
            f"cmdOptions.dry-run={'true' if dry_run else 'false'}",
        ]
        if self.image_ref:  # the candidate's own image, repository and tag
            repo, _, tag = self.image_ref.rpartition(":")
            flags += [
                "--set-string",
                f"image.repository={repo}",
                "--set-string",
                f"image.tag={tag}",
            ]
        elif self.values_files:  # the user's values may name another image: the one under test
            repo, _, tag = self.image.rpartition(":")
            flags += [
                "--set-string",
                f"image.repository={repo}",
                "--set-string",
                f"image.tag={tag}",
            ]
        elif not self.pinned:  # the image of the version under test, never silently the pin's
            flags += ["--set-string", f"image.tag={self.descheduler_version}"]
        return flags

    def check_version_runs_here(self) -> None:
        """A non-pinned version must really run: on kubelet clusters only as a published image."""
        check_runs_here(
            self.cluster,
            self.versions,
            self.descheduler_version,
            self.image_ref,
            self.image_published,
        )

    def render(self, dry_run: bool, policy: Policy | None) -> tuple[Path, list[dict]]:
        """`helm template`; returns the scrubbed copy of the render and the real documents."""
        out, docs, _ = self._render(dry_run, policy)
        return out, docs

    def _render(self, dry_run: bool, policy: Policy | None) -> tuple[Path, list[dict], str]:
        with self._values_file(policy) as vf:
            text = self.cluster.helm(
                "template", self.name, str(self.chart.path), *self._flags(vf, dry_run)
            ).stdout
        out = _write_scrubbed(
            self.workdir / f"rendered-{'dry-run' if dry_run else 'active'}.yaml", text
        )
        docs = parse_manifests(text)
        for d in docs:  # the chart's fullname rule decides these; read them, don't guess
            if d["kind"] == "CronJob":
                self.cronjob_name = d["metadata"]["name"]
            if d["kind"] == "ConfigMap" and "policy.yaml" in (d.get("data") or {}):
                self.configmap_name = d["metadata"]["name"]
        return out, docs, text

    def diff(self, rendered: Path | str) -> str:
        """`kubectl diff` of a render (a file, or the render's text) against the live objects.

        Server-side (a dry-run apply; `--force-conflicts`: helm owns the fields, and a dry run
        takes nothing from it): the client-side form fetches and parses the OpenAPI schema on
        every run, 0.4-0.5 s of its 0.5 s here against 0.13 s. Exit 1 just means 'differs'.
        The result is scrubbed: both sides may hold a credential.
        """
        with contextlib.ExitStack() as stack:
            path = (
                stack.enter_context(private_file(rendered))
                if isinstance(rendered, str)
                else rendered
            )
            proc = self.cluster.kubectl(
                "diff", "--server-side", "--force-conflicts", "-f", str(path), check=False
            )
        if proc.returncode not in (0, 1):
            return scrub_secrets(f"(kubectl diff failed: {proc.stderr.strip()[-300:]})")
        return scrub_secrets(proc.stdout)

    def install_first(self) -> list[str]:
        """First install: suspended and dry-run, defaults from `helm show values`."""
        self.check_version_runs_here()
        with ThreadPoolExecutor(1) as pool:  # two independent reads: helm status, show values
            refused = pool.submit(self._refuse_foreign_release)
            self.show_values()
            refused.result()
        rendered, docs, text = self._render(dry_run=True, policy=None)
        checks = check_render(docs, dry_run=True, image=self.image)
        self.run_preflight(docs, text)
        self.report(
            f"chart render checked ({'; '.join(checks)}); installing {self.name} suspended, dry-run"
        )
        with self._values_file(None) as vf:
            self.cluster.helm(
                "upgrade",
                "--install",
                self.name,
                str(self.chart.path),
                *self._flags(vf, True),
                "--wait",
            )
        self.validated_shapes.add(shape(docs))  # helm validated it against the schema
        self.installed = True
        self.dry_run, self.policy = True, None
        runner = self.cluster.job_runner
        if runner is not None:  # Jobs from its CronJob run however they are created
            runner.register(
                self.cluster, self.image, self.binary or self.cluster.toolchain.path("descheduler")
            )
        self.verify_live(dry_run=True, policy=None)
        step = {"step": "first-install", "dry_run": True, "checks": checks, "render": str(rendered)}
        if self.placement:  # a values layer of this release's own: on the record
            step["placement"] = dict(self.placement)
        self.history.append(step)
        return checks

    def run_preflight(self, docs: list[dict], text: str) -> dict[str, Any]:
        """The runbook's pre-flight before the first install; kept on the release and on disk."""
        self.preflight = run_preflight(  # diff: nothing is installed, every object is new
            self.cluster, docs, lambda: self.diff(text), self.namespace, self.target_namespace
        )
        (self.workdir / "preflight.json").write_text(json.dumps(self.preflight, indent=1))
        ans = self.preflight.get("can_i_evict", {}).get("answer")
        self.report(
            f"pre-flight: versions {self.preflight['versions']}, can-i evict: {ans}, "
            f"PDBs: {len(self.preflight.get('pdbs') or [])}, "
            f"install creates {len(self.preflight['diff_objects'])} objects"
        )
        return self.preflight

    def apply_policy(
        self, policy: Policy | Mapping[str, Any] | str | Path | None, *, dry_run: bool = True
    ) -> dict[str, Any]:
        """Write the policy, re-render (suspend kept), diff, upgrade, verify the live digest.

        Dry run stays on unless the caller says `dry_run=False` (keyword only): trying a
        policy never turns the live release's dry run off as a side effect.

        `policy` is anything `Policy.coerce` takes; `None` goes back to the chart's default
        policy (used for dry-run rounds). Everything that can fail (validation, the cluster's
        scope rule, render checks) fails before `helm upgrade`. Work files and the returned
        diff are scrubbed of credentials.
        """
        lint: dict[str, Any] = {}
        applied: dict[str, Any] | None = None
        if policy is not None:
            # Validated by the release's own checker: a policy in its own fields
            # (release_fields: v0.32's EvictionFailureEventNotification) is not the pin's.
            version = self.policycheck_version or self.descheduler_version
            tc = self.toolchain or getattr(self.cluster, "toolchain", None)
            policy = Policy.coerce(policy).validate(version if tc is not None else None, tc)
            # The descheduler's own verdict (policycheck, same version) and the runbook lint.
            findings, res = lint_or_refuse(policy.to_dict(), policy.source, version, tc)
            lint = {
                "effective_policy": res.effective,
                "lint": [f"{f.rule} {f.name}: {f.path}: {f.message}" for f in findings],
            }
            applied = {
                "digest": policy.digest(),
                "effective_policy": res.effective if res.accepted else {},
                "policy_lint": [
                    f"{f.rule} {f.name}: {f.path}: {f.message}; fix: {f.fix}" for f in findings
                ],
            }
        if not dry_run:  # a cluster that is not ours: only a policy scoped to the lab may evict
            check_policy_scope(self.cluster, policy)
        _, docs, text = self._render(dry_run=dry_run, policy=policy)
        checks = check_render(docs, dry_run=dry_run, image=self.image, policy=policy)
        diff = self.diff(text)
        validation = validation_flags(docs, self.validated_shapes)
        with self._values_file(policy) as vf:
            self.cluster.helm(
                "upgrade",
                self.name,
                str(self.chart.path),
                *self._flags(vf, dry_run),
                "--wait",
                *validation,
            )
        if not validation:
            self.validated_shapes.add(shape(docs))
        self.dry_run, self.policy, self.applied_lint = dry_run, policy, applied
        live = self.verify_live(dry_run=dry_run, policy=policy)
        step = {
            "step": "apply-policy",
            "dry_run": dry_run,
            "checks": checks,
            "diff_lines": len(diff.splitlines()),
            "diff": diff,
            # helm's OpenAPI validation: skipped only for the shape of a render it validated
            "openapi_validation": "skipped (same shape as a validated render)"
            if validation
            else "helm",
            **lint,
            **live,
        }
        (self.workdir / f"diff-{len(self.history)}.txt").write_text(diff)
        self.history.append(step)
        return step

    # -- live state -----------------------------------------------------------
    def revision(self) -> int:
        """The helm revision: unchanged proves a refused step changed nothing."""
        import json as _json

        out = self.cluster.helm("status", self.name, "-n", self.namespace, "-o", "json").stdout
        return int(_json.loads(out)["version"])

    def live_cronjob(self) -> Any:
        return self.cluster.batch.read_namespaced_cron_job(self.cronjob_name, self.namespace)

    def helm_evidence(self) -> dict[str, Any]:
        """The Helm that installed the release (version, major, server- or client-side) and
        the field managers of its CronJob and policy ConfigMap (ownership.helm_evidence)."""
        cm = self.cluster.core.read_namespaced_config_map(self.configmap_name, self.namespace)
        return helm_evidence(self.versions.helm.version, self.live_cronjob(), cm)

    def live_policy_yaml(self) -> str:
        cm = self.cluster.core.read_namespaced_config_map(self.configmap_name, self.namespace)
        return cm.data["policy.yaml"]

    def configmap_digest(self, text: str | None = None) -> str:
        """sha256 of the live ConfigMap's policy.yaml (`text`: that, already read)."""
        return hashlib.sha256(
            (self.live_policy_yaml() if text is None else text).encode()
        ).hexdigest()

    def verify_live(self, dry_run: bool, policy: Policy | None) -> dict[str, Any]:
        cj = self.live_cronjob()
        live_yaml = self.live_policy_yaml()  # read once: its sha256 and, with a policy, its digest
        if cj.spec.suspend is not True:
            raise UnsafeRender(f"live CronJob {self.namespace}/{cj.metadata.name} is not suspended")
        args = cj.spec.job_template.spec.template.spec.containers[0].args or []
        want = f"--dry-run={'true' if dry_run else 'false'}"
        if want not in args:
            raise UnsafeRender(f"live CronJob {cj.metadata.name} args {args} lack {want}")
        out: dict[str, Any] = {
            "suspend": True,
            "dry_run": dry_run,
            "configmap_sha256": self.configmap_digest(live_yaml),
        }
        if policy is not None:
            live = digest_of_rendered(live_yaml)
            if live != policy.digest():
                raise UnsafeRender(
                    f"live ConfigMap {self.namespace}/{self.configmap_name} policy.yaml (digest {live[:12]}) "
                    f"differs from the written policy ({policy.digest()[:12]})"
                )
            out["policy_digest"] = live
        return out

    def _refuse_foreign_release(self) -> None:
        """Never take over a descheduler someone else installed (existing clusters)."""
        proc = self.cluster.helm(
            "status", self.name, "-n", self.namespace, "-o", "json", check=False
        )
        if proc.returncode == 0 and not self.cluster.created:
            raise UnsafeRender(
                f"helm release {self.namespace}/{self.name} already exists on this existing cluster; "
                f"pick another --desched-release name or uninstall it yourself"
            )

    def uninstall(self) -> str:
        if not self.installed:
            return ""
        proc = self.cluster.helm(
            "uninstall", self.name, "-n", self.namespace, "--wait", check=False
        )
        self.installed = proc.returncode != 0
        return proc.stdout + proc.stderr
