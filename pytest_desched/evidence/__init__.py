"""What a reviewer audits: round records, redaction, summaries, the writer, the audit log."""

from __future__ import annotations

from pytest_desched.evidence.record import RoundRecord
from pytest_desched.evidence.summary import junit_properties, summary_line, summary_text
from pytest_desched.evidence.writer import EvidenceWriter
from pytest_desched.redaction import Redactor, scrub_data, scrub_secrets

__all__ = [
    "EvidenceWriter",
    "Redactor",
    "RoundRecord",
    "junit_properties",
    "scrub_data",
    "scrub_secrets",
    "summary_line",
    "summary_text",
]
