"""Timeline replay: a recorded window's changes applied in window time while rounds run.

`run` (`replay_timeline()`, the `Replay` whose hooks are the window's clock and changes),
`clock` (window time at a speed, with pauses), `apply` (one change onto the replay). The
timeline file itself is `capture/timeline.py`: recording writes it, this replays it.
"""
