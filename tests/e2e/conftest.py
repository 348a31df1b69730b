"""Fixtures shared by the e2e modules that run `desched` as a subprocess (commands.py)."""

from tests.e2e.commands import run_cmd

__all__ = ["run_cmd"]
