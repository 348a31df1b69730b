"""Upgrade canary: a candidate descheduler and chart against the pinned baseline (issue 11)."""
