"""Rebuild: a snapshot restored onto a fresh cluster, ages kept.

`plan` (what to write, pure), `capacity` (whether this machine can hold it), `restore` (the
driver) with `etcd_restore` (bulk writes into etcd, `etcd`) and `api_restore` (through the
API), `writes` (creates and waits) and `settled` (statuses written as controllers leave
them). Named `rebuild`, not `restore`: `pytest_desched.replay.restore` is the public
function, and a subpackage of that name would shadow it once imported.
"""
