"""Development tooling, kept out of the wheel a user installs (pyproject: only pytest_desched).

`python -m dev.kind_node` builds the kind node image offline (`make kind-image`), and
`python -m dev.lint_wheel` the pytest-desched-lint-bin wheel (`make wheel-lint`). Run from the
checkout's root, with pytest-desched installed (`make venv`).
"""
