"""mkdocs hooks for the docs site (mkdocs.yml): the pages generated at build time.

- `index.md`: the repository's README, its `docs/X.md` links made site-relative and its links
  to other files of the checkout (examples/, action.yml) made absolute on the project host, so
  the README stays the one text and `--strict` still checks every link;
- `reference/cli.md`: `desched --help` and every subcommand's `--help`, from the real parser;
- `reference/plugin.md`: the plugin's fixtures and markers, from its registration.
Nothing generated is committed; a page in docs/ linking `../examples/x` is rewritten the same way.
"""

from __future__ import annotations

import argparse
import inspect
import io
import re
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

REPO = Path(__file__).resolve().parents[1]
_LINK = re.compile(r"\]\((?![a-zA-Z][a-zA-Z0-9+.-]*:|#)([^)\s]+)\)")


def _project_url() -> str:
    from pytest_desched import PROJECT_URL

    return PROJECT_URL


def readme_page() -> str:
    """README.md with its links re-pointed for a page at the site's root."""
    base = f"{_project_url()}/blob/main/"

    def fix(m: re.Match[str]) -> str:
        target = m.group(1)
        if target.startswith("docs/"):
            return f"]({target.removeprefix('docs/')})"
        return f"]({base}{target})"

    return _LINK.sub(fix, (REPO / "README.md").read_text(encoding="utf-8"))


def _help(p: argparse.ArgumentParser) -> str:
    buf = io.StringIO()
    with redirect_stdout(buf):
        p.print_help()
    return buf.getvalue()


def subcommands(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The subcommands `desched --help` lists, in its order."""
    for action in p._actions:  # argparse keeps no public accessor
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices.items())
    return {}


def cli_page() -> str:
    """`desched --help` and each subcommand's `--help`, as the installed parser prints them."""
    from pytest_desched.commands import parser

    p = parser()
    out = [
        "# desched --help (generated)\n",
        "Generated at build time from the real parser (`pytest_desched.commands.parser`); "
        "the prose guide is [the CLI page](../cli.md).\n",
        f"```text\n{_help(p)}```\n",
    ]
    for name, sub in subcommands(p).items():
        out.append(f"## desched {name}\n\n```text\n{_help(sub)}```\n")
    return "\n".join(out)


def plugin_page() -> str:
    """The markers (`options.MARKERS`, what `pytest --markers` lists) and the fixtures the
    plugin registers (`plugin.fixtures`, what `pytest --fixtures` lists), with their docstrings."""
    from pytest_desched.plugin import fixtures
    from pytest_desched.plugin.options import MARKERS

    lines = [
        "# Fixtures and markers (generated)\n",
        "Generated at build time from the plugin's registration (`pytest_desched.plugin`).\n",
        "## Markers\n",
    ]
    lines += [f"- `@pytest.mark.{name}`: {doc}" for name, doc in MARKERS.items()]
    lines.append("\n## Fixtures\n")
    for name in sorted(fixtures.__all__):
        obj = getattr(fixtures, name)
        fn = getattr(obj, "__wrapped__", obj)  # the function under pytest's wrapper
        scope = getattr(getattr(obj, "_fixture_function_marker", None), "scope", "function")
        lines.append(f"### `{name}` ({scope} scope)\n\n{inspect.getdoc(fn) or ''}\n")
    return "\n".join(lines)


_GENERATED = {
    "index.md": readme_page,
    "reference/cli.md": cli_page,
    "reference/plugin.md": plugin_page,
}


def on_files(files: Files, config: Any) -> Files:
    """Add the generated pages (never written into docs/)."""
    for path, make in _GENERATED.items():
        files.append(File.generated(config, path, content=make()))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """A docs page's `../X` link (a file of the checkout outside docs/) goes to the project host."""
    base = f"{_project_url()}/blob/main/"
    return re.sub(r"\]\(\.\./([^)\s]+)\)", lambda m: f"]({base}{m.group(1)})", markdown)
