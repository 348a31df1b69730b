"""Which release a descheduler source tree is, read from the tree's own release markers.

A release tag's `charts/descheduler/Chart.yaml` holds the *previous* chart (v0.35.0's says
0.34.0, v0.33.0's 0.32.0): the chart is bumped after the tag. So the chart alone never names
the release. The markers, in the order they are read (the first that settles it wins):

1. a label the user gives (`source:PATH@LABEL`; handled by the caller) always wins;
2. a non-empty default `version` in pkg/version/version.go (upstream leaves it empty);
3. the git tag at a clean checkout's HEAD (`git describe --tags --exact-match`);
4. the tree's content: the image tag of its `kubernetes/` manifests
   (`registry.k8s.io/descheduler/descheduler:vX.Y.Z`), which docs/user-guide.md's image table
   (bumped with them) must not contradict; the README's install line is read only without
   manifests (its example lags: v0.32.2's says v0.31.0). A patch release does not bump them
   (v0.35.1's say v0.35.0, v0.32.2's v0.32.1), and master after a release still names it;
5. the name of the tree's top directory (`git archive --prefix=descheduler-vX.Y.Z/`, GitHub's
   release tarballs `descheduler-X.Y.Z/`), accepted only where the content allows it: the same
   minor, a patch no lower (a later patch of that release), and not a tree whose chart was
   already bumped to that very release (such a tree is past the tag);
6. without a prefix, the content's version is the release when the chart is still the
   previous one (the state of a release tag); a chart bumped to the content's own version means
   the tree is past that release (master): a build label, `vX.Y.Z-g<commit>`, as before;
7. no markers at all: the chart's appVersion + commit, as before.

Where markers disagree, the tree gets a build label and the reason says which markers
disagreed; the reason always names where the label came from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["ReleaseMarkers", "read_markers", "release_from_markers"]

_IMAGE_TAG = re.compile(r"registry\.k8s\.io/descheduler/descheduler:(v\d+\.\d+\.\d+)\b")
_XYZ = re.compile(r"v?(\d+)\.(\d+)\.(\d+)")
_PREFIX = re.compile(r"^[A-Za-z][\w.-]*?-v?(\d+\.\d+\.\d+)$")


@dataclass(frozen=True)
class ReleaseMarkers:
    """What a tree says about its release, each marker as found (None/empty: absent)."""

    manifests: tuple[str, ...] = ()  # distinct image tags in kubernetes/**.yaml
    readme: str | None = None  # the README's first descheduler image tag
    user_guide: str | None = None  # docs/user-guide.md's first (newest) image row
    top_dir: str = ""  # the tree's top directory name (tarball prefix or checkout dir)
    git_tag: str | None = None  # exact tag at a clean checkout's HEAD
    chart_app_version: str | None = None  # charts/descheduler/Chart.yaml appVersion


def _first_tag(text: str | None) -> str | None:
    m = _IMAGE_TAG.search(text or "")
    return m.group(1) if m else None


def read_markers(
    files: dict[str, str | None],
    top_dir: str = "",
    git_tag: str | None = None,
    chart_app_version: str | None = None,
) -> ReleaseMarkers:
    """The markers from a tree's files (relative path -> text; kubernetes/ yaml, README.md,
    docs/user-guide.md), the top directory's name and a checkout's tag."""
    tags = sorted(
        {
            m.group(1)
            for rel, text in files.items()
            if rel.startswith("kubernetes/") and text
            for m in _IMAGE_TAG.finditer(text)
        },
        key=_key,
    )
    return ReleaseMarkers(
        manifests=tuple(tags),
        readme=_first_tag(files.get("README.md")),
        user_guide=_first_tag(files.get("docs/user-guide.md")),
        top_dir=top_dir,
        git_tag=git_tag,
        chart_app_version=chart_app_version,
    )


def _key(version: str) -> tuple[int, int, int]:
    m = _XYZ.match(version)
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else (-1, -1, -1)


def release_from_markers(m: ReleaseMarkers) -> tuple[str | None, str]:
    """(release label, where it came from) per the module doc's steps 3-6; (None, why) when
    the markers do not name a release: the caller then derives a build label and shows why."""
    if m.git_tag and _XYZ.fullmatch(m.git_tag.lstrip("v")):
        return "v" + m.git_tag.lstrip("v"), f"git tag {m.git_tag} at the checkout's HEAD"
    if not m.manifests and not m.readme:
        return None, "no release markers (kubernetes/ manifests, README install line)"
    if len(m.manifests) > 1:
        return None, f"markers disagree: kubernetes/ manifests name {', '.join(m.manifests)}"
    content = m.manifests[0] if m.manifests else m.readme
    assert content is not None
    where = "kubernetes/ manifests' image tag" if m.manifests else "README install line"
    if m.manifests and m.user_guide is not None and m.user_guide != content:
        return None, (
            f"markers disagree: {where} says {content}, docs/user-guide.md's newest image "
            f"{m.user_guide}"
        )
    # The README's install example lags (v0.32.2's still says v0.31.0): noted, never decisive.
    if m.manifests and m.readme is not None and m.readme != content:
        lag = f"; the README's example still says {m.readme}"
    else:
        lag = ""
    chart = m.chart_app_version
    bumped = chart is not None and _key(chart) == _key(content)
    prefix = _PREFIX.match(m.top_dir)
    if prefix:
        named = "v" + prefix.group(1)
        c, p = _key(content), _key(named)
        if p[:2] != c[:2] or p[2] < c[2]:
            return None, (
                f"markers disagree: the top directory {m.top_dir}/ names {named}, the {where} "
                f"{content}"
            )
        if p == c and bumped:
            return None, (
                f"markers disagree: the top directory {m.top_dir}/ names {named}, but "
                f"charts/descheduler was already bumped to {chart} (a tree past that tag)"
            )
        if p == c:
            return named, f"{where} {content} (top directory {m.top_dir}/ agrees{lag})"
        return named, (
            f"top directory {m.top_dir}/ ({where} says {content}: a patch release does not "
            f"bump it{lag})"
        )
    if chart is None:
        return content, f"{where} {content} (no chart to tell a tag from a later build{lag})"
    if bumped:
        return None, (
            f"{where} says {content} and charts/descheduler was already bumped to {chart}: "
            "a build past that release"
        )
    if _key(chart) > _key(content):
        return None, f"markers disagree: {where} says {content}, charts/descheduler {chart}"
    return content, (
        f"{where} {content} (charts/descheduler holds the previous chart, {chart}{lag})"
    )
