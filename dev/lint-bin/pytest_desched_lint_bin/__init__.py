"""Prebuilt helm and policy checker for `desched lint`; pytest-desched reads manifest.json.

Nothing here runs: pytest-desched finds this folder without importing it
(`pytest_desched.tools.lint_bin`) and trusts a file only when the manifest's versions match
its pins and the file's sha256 matches the manifest.
"""
