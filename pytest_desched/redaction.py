"""Secret scrubbing and name redaction: the one gate every evidence byte passes through.

Scrubbing (`scrub_secrets`, `scrub_data`) removes tokens, keys, passwords and certificates
and is always on, because a credential in an artifact is never acceptable; `Redactor` adds
consistent pseudonyms for node, namespace and other names when artifacts are shared outside
the team. Kept apart from the record and the writer so the chart, policy and error code can
scrub their own messages without pulling in the evidence format.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from typing import Any

REDACTED = "<redacted>"

# ---------------------------------------------------------------------------------------------
# Secret scrubbing: always on, independent of name redaction.

_SENSITIVE = (
    r"token|passw(?:or)?d|secret|api[_-]?key|private[_-]?key"
    r"|client-key-data|client-certificate-data|certificate-authority-data"
)
_SENSITIVE_KEY = re.compile(_SENSITIVE, re.I)
# A key *ending* in a sensitive word holds the secret itself ("token", "clientSecret");
# one merely containing it ("secretName", "tokenExpirationSeconds") only if the value looks secret.
_STRONG_KEY = re.compile(rf"(?:{_SENSITIVE})$", re.I)
_HARMLESS_VALUE = re.compile(r"(?i)(?:|true|false|null|none|~|<redacted>)")
_HEX = re.compile(r"[A-Fa-f0-9]{16,}")
_B64 = re.compile(r"[A-Za-z0-9+/_-]{20,}={0,2}")
_DNS_LIKE = re.compile(r"[a-z0-9.-]+")

_PEM = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----.*?-----END \1-----", re.S)
_JWT = re.compile(r"eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*")
_BEARER = re.compile(r"(?i)\b(bearer)\s+(?!<redacted>)[A-Za-z0-9._~+/-]+=*")
_BASIC = re.compile(r"(?i)(authorization\s*[:=]\s*[\"']?basic\s+)[A-Za-z0-9+/]+=*")
# Any user-info in a URL: `user:password@` and a token written as the user name (`TOKEN@`).
_URL_USERINFO = re.compile(r"(?<=://)(?!<redacted>@)[^/\s@?#]+@")
# A bare `Basic <base64>` value (an Authorization header's credential, without its key).
_BASIC_BARE = re.compile(
    r"\b([Bb]asic\s+)(?=[A-Za-z0-9+/]*[A-Z])(?=[A-Za-z0-9+/]*[a-z])[A-Za-z0-9+/]{12,}={0,2}"
)
# Credentials in a URL's query string: `?bearer=...`, `&access_token=...`, `?api_key=...`.
_URL_QUERY = re.compile(
    r"(?i)([?&;](?:bearer|access[_-]?token|id[_-]?token|refresh[_-]?token|token|auth"
    r"|authorization|api[_-]?key|apikey|key|password|passwd|pwd|secret|client[_-]?secret"
    r"|sig|signature|x-amz-signature|x-amz-security-token|x-goog-signature)=)"
    r"(?!<redacted>)[^&#\s\"'<>]+"
)
# A token echoed back in quotes by a tool that refused it as some other kind of value (Go's
# `time: invalid duration "..."`, `invalid argument "..." for "--flag"`, strconv's `parsing
# "..."`): mixed case and a digit, 20+ characters of a token's alphabet, no space or dot (so
# plugin names, paths, versions, DNS names and lowercase commit/UID hex stay).
_QUOTED_TOKEN = re.compile(
    r"""(?P<q>["'])(?=[^"'\s]*[0-9])(?=[^"'\s]*[a-z])(?=[^"'\s]*[A-Z])[A-Za-z0-9+/_=-]{20,}(?P=q)"""
)
_KEYED = re.compile(
    rf"""(?P<key>["']?[A-Za-z0-9_.-]*(?:{_SENSITIVE})[A-Za-z0-9_.-]*["']?)(?P<sep>\s*[:=]\s*)
    (?:"(?P<dq>[^"\n]*)"|'(?P<sq>[^'\n]*)'|(?P<bare>[^\s"',;}}\])]+))""",
    re.I | re.X,
)


def _looks_secret(value: str) -> bool:
    """Long hex, or base64 that is not just a lowercase DNS-ish name."""
    if _HEX.fullmatch(value):
        return True
    return bool(_B64.fullmatch(value)) and not _DNS_LIKE.fullmatch(value)


def _secret_value(key: str, value: str) -> bool:
    key = key.strip("\"'")
    if not _SENSITIVE_KEY.search(key) or _HARMLESS_VALUE.fullmatch(value):
        return False
    return bool(_STRONG_KEY.search(key)) or _looks_secret(value)


def _keyed(m: re.Match[str]) -> str:
    for group, quote in (("dq", '"'), ("sq", "'"), ("bare", "")):
        value = m.group(group)
        if value is not None:
            if not _secret_value(m.group("key"), value):
                return m.group(0)
            return f"{m.group('key')}{m.group('sep')}{quote}{REDACTED}{quote}"
    return m.group(0)


# Strings up to this length are scrubbed once and remembered: a replay's ledger repeats the same
# few thousand strings (fate details, node and owner names) a million times, and scrubbing each
# anew took most of the 97 s a 10,000-pod ledger spent being written (issue 42). The result is
# a pure function of the text, so a remembered one is the one scrubbing would give; longer text
# (a log line, a message) is rarely repeated; the bound keeps the cache under ~30 MB.
SCRUB_CACHE_LEN = 256


def scrub_secrets(text: str) -> str:
    """Replace tokens, keys and passwords in free text with `<redacted>`."""
    if len(text) <= SCRUB_CACHE_LEN:
        return _scrub_remembered(text)
    return _scrub(text)


@functools.lru_cache(maxsize=1 << 16)
def _scrub_remembered(text: str) -> str:
    return _scrub(text)


def _scrub(text: str) -> str:
    text = _PEM.sub(REDACTED, text)
    text = _JWT.sub(REDACTED, text)
    text = _BEARER.sub(rf"\1 {REDACTED}", text)
    text = _BASIC.sub(rf"\1{REDACTED}", text)
    text = _URL_USERINFO.sub(f"{REDACTED}@", text)
    text = _BASIC_BARE.sub(rf"\1{REDACTED}", text)
    text = _URL_QUERY.sub(rf"\1{REDACTED}", text)
    text = _QUOTED_TOKEN.sub(rf"\g<q>{REDACTED}\g<q>", text)
    return _KEYED.sub(_keyed, text)


def scrub_data(obj: Any) -> Any:
    """`scrub_secrets` over str/dict/list, also catching values whose *key* marks them secret."""
    if isinstance(obj, str):
        return scrub_secrets(obj)
    if isinstance(obj, Mapping):
        env_name = obj.get("name")
        env_secret = isinstance(env_name, str) and bool(_SENSITIVE_KEY.search(env_name))
        k8s_secret = obj.get("kind") == "Secret"
        out: dict[Any, Any] = {}
        for k, v in obj.items():
            if isinstance(v, str) and (
                (isinstance(k, str) and _secret_value(k, v))
                or (env_secret and k == "value" and not _HARMLESS_VALUE.fullmatch(v))
            ):
                out[scrub_data(k)] = REDACTED
            elif k8s_secret and k in ("data", "stringData") and isinstance(v, Mapping):
                out[k] = dict.fromkeys(v, REDACTED)
            else:
                out[scrub_data(k)] = scrub_data(v)
        return out
    if isinstance(obj, list | tuple):
        return [scrub_data(v) for v in obj]
    return obj


# ---------------------------------------------------------------------------------------------
# Name redaction.


class Redactor:
    """Consistent pseudonyms (`node-1`, `ns-1`, `redacted-1`) for sharing outside the team.

    Aliases follow first registration, so they are stable within a run and the same node
    reads the same in every artifact. Secrets are scrubbed even by `disabled()`.
    """

    _WORD = "A-Za-z0-9"  # '-', '.', '/' separate words: `worker-1` must not match `worker-10`

    def __init__(
        self,
        node_names: Iterable[str] = (),
        namespaces: Iterable[str] = (),
        extra: Iterable[str] = (),
        *,
        enabled: bool = True,
    ) -> None:
        self.enabled = enabled
        self._aliases: dict[str, str] = {}
        self._counts: dict[str, int] = {}
        self._pattern: re.Pattern[str] | None = None
        for n in node_names:
            self.register_node(n)
        for ns in namespaces:
            self.register_namespace(ns)
        for s in extra:
            self.register(s)

    @classmethod
    def disabled(cls) -> Redactor:
        """No name mapping (the default for in-team runs); secrets are still scrubbed."""
        return cls(enabled=False)

    @property
    def mapping(self) -> dict[str, str]:
        """original -> alias; the key to read shared artifacts back. Never written by the writer."""
        return dict(self._aliases)

    def register_node(self, name: str) -> str:
        return self._register(name, "node")

    def register_namespace(self, name: str) -> str:
        return self._register(name, "ns")

    def register(self, literal: str) -> str:
        """Any other literal to hide (cluster name, user, IP)."""
        return self._register(literal, "redacted")

    def _register(self, name: str, kind: str) -> str:
        if not self.enabled or not name:
            return name
        if name not in self._aliases:
            self._counts[kind] = self._counts.get(kind, 0) + 1
            self._aliases[name] = f"{kind}-{self._counts[kind]}"
            self._pattern = None
        return self._aliases[name]

    def _names(self, text: str) -> str:
        if not self._aliases:
            return text
        if self._pattern is None:
            # Longest first: the alternation takes the first branch that matches at a position.
            alts = "|".join(re.escape(n) for n in sorted(self._aliases, key=len, reverse=True))
            w = self._WORD
            self._pattern = re.compile(rf"(?<![{w}])(?:{alts})(?![{w}])")
        return self._pattern.sub(lambda m: self._aliases[m.group(0)], text)

    def redact(self, obj: Any) -> Any:
        """Scrub secrets, then map names in strings and dict keys, recursively."""
        obj = scrub_data(obj)
        return self._walk(obj) if self.enabled else obj

    __call__ = redact

    def _walk(self, obj: Any) -> Any:
        if isinstance(obj, str):
            return self._names(obj)
        if isinstance(obj, Mapping):
            return {self._walk(k): self._walk(v) for k, v in obj.items()}
        if isinstance(obj, list | tuple):
            return [self._walk(v) for v in obj]
        return obj
