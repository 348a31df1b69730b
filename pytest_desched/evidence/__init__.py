"""What a reviewer audits: round records, redaction, summaries, the writer, the audit log."""

from __future__ import annotations

from pytest_desched.evidence.record import (
    EvidenceWriter,
    Redactor,
    RoundRecord,
    junit_properties,
    scrub_data,
    scrub_secrets,
    summary_line,
    summary_text,
)

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
