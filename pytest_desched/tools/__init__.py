"""The binaries: pinned versions (one file), resolution, and Go builds cached by version."""
