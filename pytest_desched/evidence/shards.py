"""One run split over N CI jobs: which tests each shard runs, and the record each shard leaves.

The split is pure and deterministic: the same test ids (in pytest's collection order), the same
recorded durations and the same N give the same shards on every machine, so N jobs that never
talk to each other still run each test exactly once. Tests are placed longest first on the
least-loaded shard (LPT), weighted by the seconds the project recorded for them
(`desched-durations.json`, written by `desched merge`); a test with no recorded figure weighs
the mean of those that have one (1 s when none has). Each shard's `shard.json` says which
shard of which run it was, so `desched merge` can refuse a missing, duplicated or foreign one.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_desched.errors import ConfigError

SHARD_FILE = "shard.json"  # in each shard's evidence folder
DURATIONS_FILE = "desched-durations.json"  # {test id: seconds}; the default beside the rootdir
FORMAT = 1
_SPEC = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")


@dataclass(frozen=True)
class Shard:
    """Shard `k` of `n` (1-based, as people and CI matrices count)."""

    k: int
    n: int

    def __str__(self) -> str:
        return f"{self.k}/{self.n}"


def parse_shard(text: object, flag: str = "--desched-shard") -> Shard:
    """`K/N` with 1 <= K <= N; a ConfigError naming the flag and the fix otherwise."""
    m = _SPEC.fullmatch(str(text))
    if m is None or not 1 <= int(m[1]) <= int(m[2]):
        raise ConfigError(
            f"{flag} {text!r}: use K/N with 1 <= K <= N (e.g. 2/3: the second of three shards)"
        )
    return Shard(int(m[1]), int(m[2]))


def load_durations(path: Path, flag: str = "--desched-shard-durations") -> dict[str, float]:
    """The recorded seconds per test id; a ConfigError naming the file when it is not one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(
            f"{flag} {path}: cannot read it ({exc.strerror}); check the path"
        ) from None
    except ValueError as exc:
        raise ConfigError(
            f"{flag} {path}: not JSON ({exc}); write it with `desched merge`"
        ) from None
    if not isinstance(data, dict) or not all(
        isinstance(v, int | float) and v >= 0 for v in data.values()
    ):
        raise ConfigError(
            f"{flag} {path}: must map each test id to its seconds (>= 0), as `desched merge` "
            "writes it"
        )
    return {str(k): float(v) for k, v in data.items()}


def weights(tests: Sequence[str], durations: Mapping[str, float]) -> list[float]:
    """Each test's weight: its recorded seconds, else the mean of the recorded ones (else 1)."""
    known = [durations[t] for t in tests if t in durations]
    fallback = sum(known) / len(known) if known else 1.0
    return [durations.get(t, fallback) for t in tests]


def split(tests: Sequence[str], n: int, durations: Mapping[str, float]) -> list[list[str]]:
    """The N shards' tests, each in collection order: longest first onto the lightest shard.

    Ties go to the earlier test and the lower shard, so the result depends on nothing but the
    inputs. LPT keeps the heaviest shard within 4/3 of the best possible split.
    """
    w = weights(tests, durations)
    load = [0.0] * n
    placed: list[list[int]] = [[] for _ in range(n)]
    for i in sorted(range(len(tests)), key=lambda i: (-w[i], i)):
        k = min(range(n), key=lambda k: (load[k], k))
        load[k] += w[i]
        placed[k].append(i)
    return [[tests[i] for i in sorted(p)] for p in placed]


def plan_digest(tests: Sequence[str]) -> str:
    """What every shard of one run must agree on: the whole selection, in order."""
    return hashlib.sha256("\n".join(tests).encode()).hexdigest()[:16]


def read_shard(folder: Path) -> dict[str, Any]:
    """A shard's record from its evidence folder; a ConfigError naming the folder if unusable."""
    path = folder / SHARD_FILE
    if not folder.is_dir():
        raise ConfigError(f"{folder}: not a folder; give each shard's evidence folder")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(
            f"{folder}: no {SHARD_FILE}; not a shard's evidence folder (run pytest with "
            "--desched-shard K/N), or that shard did not finish (see its job's log)"
        ) from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: unreadable ({exc}); rerun that shard") from None
    need = {"format", "run_id", "shard", "of", "plan", "tests", "exit_status"}
    if not isinstance(data, dict) or not need <= set(data) or data["format"] != FORMAT:
        raise ConfigError(
            f"{path}: not a shard record of format {FORMAT} (needs {', '.join(sorted(need))}); "
            "rerun that shard with this version of pytest-desched"
        )
    return data
