"""Host replay: a snapshot replayed on an existing cluster's control plane, kwok nodes in.

`replay` (`replay_on_host()`, a `Replay` on the host's session), `plan` (the snapshot
rewritten into the replay's own namespaces and nodes), `policy` (the host's descheduler and
the narrowed policy), `kwok` (kwok's objects) and `teardown` (this run's objects, by label).
"""
