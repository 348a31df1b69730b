"""Generated inputs: realistic clusters and change windows, seeded.

`genbase` (nodes, pools, zones), `generator` (`generate(Shape(...))`), `incidents` (the two
incidents), `timeline_gen` (seeded churn windows over a generated cluster). Named `gen`, not
`generate`: `pytest_desched.replay.generate` is the public function.
"""
