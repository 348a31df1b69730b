"""The descheduler under test: its chart and release, policy, rounds, and what its logs mean.

`decisions` holds the one rule for the deciding layer; `known_bugs` the upstream bugs by
version; `cleanup` the emergency stop and ordered release cleanup.
"""
