"""Capture: the two files a replay starts from and how each is taken.

`format` (the snapshot file) and `schema` (its shape), `timeline` (a recorded window: the
snapshot at its start and the changes after it), `trim` (what an object keeps), `redact`
(consistent renaming), `snapshot` (taking one, read-only), `record` (watching a window) and
`audit_changes` (a window from an audit log). The file models live here, beside their
writers, because every later stage reads them and none writes them.
"""
