"""A tarball a user hands us (a candidate's source, a packaged chart), checked before any use.

Refused with one line naming the member and why (a ConfigError: exit 2, nothing built or
unpacked): anything that is not a regular file with a tarball inside it (a FIFO would block
`tarfile.open` forever), and any member Python's `tarfile.data_filter` refuses (a path or a
link leading out of the tree, a device or FIFO) plus what that filter would silently change:
an absolute name, a `..` component, or a setuid/setgid/sticky bit. `git archive` and
`helm package` write none of these, so a tarball that holds one was not made by them.
"""

from __future__ import annotations

import stat
import tarfile
from pathlib import Path, PurePosixPath

from pytest_desched.errors import ConfigError, InputError
from pytest_desched.inputs_safe import check_file

_DEST = "/desched-tarball-check"  # a destination that does not exist: checks stay lexical
_HIGH_BITS = stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX


def member_problem(member: tarfile.TarInfo) -> str | None:
    """Why `member` must not be unpacked, or None when it is safe."""
    name = member.name
    if name.startswith("/"):
        return "an absolute path"
    if ".." in PurePosixPath(name).parts:
        return "a '..' path component"
    if member.mode & _HIGH_BITS:
        bits = [
            n for b, n in ((stat.S_ISUID, "setuid"), (stat.S_ISGID, "setgid")) if member.mode & b
        ]
        return f"a {'/'.join(bits) or 'sticky'} bit (mode {member.mode:o})"
    try:
        tarfile.data_filter(member, _DEST)
    except tarfile.SpecialFileError:
        return "a device or FIFO, not a file or directory"
    except tarfile.AbsoluteLinkError:
        return f"a link to the absolute path {member.linkname!r}"
    except tarfile.LinkOutsideDestinationError:
        return f"a link to {member.linkname!r}, outside the tree"
    except tarfile.FilterError as exc:
        return f"refused by tarfile's data filter ({type(exc).__name__})"
    return None


def open_checked(path: Path, label: str, fix: str) -> tarfile.TarFile:
    """The tarball at `path`, opened once it is known to be a regular file within the bulk
    size limit; else ConfigError naming `label` (the flag or spec) and `fix`."""
    try:
        check_file(path, kind="bulk", what="tarball")
    except InputError as exc:
        raise ConfigError(f"{label}: {path} {exc.problem}; {fix}") from None
    try:
        return tarfile.open(path)
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise ConfigError(
            f"{label}: cannot read the tarball ({type(exc).__name__}: {exc}); {fix}"
        ) from None


def check_member(member: tarfile.TarInfo, label: str, fix: str) -> None:
    """ConfigError naming the member and why, when it must not be unpacked (`member_problem`)."""
    problem = member_problem(member)
    if problem is not None:
        raise ConfigError(
            f"{label}: the tarball holds {member.name!r}, {problem}; refused before anything "
            f"is unpacked or built; {fix}"
        )


def check_tarball(path: Path, label: str, fix: str) -> list[tarfile.TarInfo]:
    """Every member of the tarball at `path`, each checked (`open_checked`, `check_member`)."""
    try:
        with open_checked(path, label, fix) as tf:
            members = []
            for m in tf:
                check_member(m, label, fix)
                members.append(m)
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise ConfigError(
            f"{label}: cannot read the tarball ({type(exc).__name__}: {exc}); {fix}"
        ) from None
    return members


def extract(path: Path, dest: Path, label: str, fix: str) -> list[str]:
    """Unpack the (checked) tarball into `dest` through tarfile's data filter; its member names.

    The filter also sees links the extraction itself made (a lexical check cannot), so a
    refusal here is the same ConfigError as one before."""
    try:
        with open_checked(path, label, fix) as tf:
            names = tf.getnames()
            tf.extractall(dest, filter="data")
    except tarfile.FilterError as exc:
        raise ConfigError(
            f"{label}: the tarball holds a member tarfile refuses ({exc}); {fix}"
        ) from None
    return names
