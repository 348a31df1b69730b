"""The authenticating front of the embedded cluster's Prometheus: a bearer token, then a proxy.

Prometheus' own web configuration (`--web.config.file`) knows TLS and basic auth, not bearer
tokens, while the descheduler's Prometheus client sends `Authorization: Bearer <token>` (the
token its `authToken.secretReference` Secret holds; v0.36.0 pkg/descheduler/client). In a real
cluster a proxy beside Prometheus checks it (kube-rbac-proxy, oauth-proxy). This is that
proxy, kept to its job: a request whose token is neither the lab's token (`D/token`) nor a
ServiceAccount token the API server authenticates (a TokenReview, as kube-rbac-proxy does; the
descheduler's in-cluster token when the policy names no `authToken`) gets 401 and never
reaches Prometheus; one with it is forwarded to Prometheus on loopback, answer unchanged.

It runs as a process of the cluster (its command line names the cluster's folder, so a
deletion or the reaper stops it with the rest). It logs method, path and status only: never
a header, so never the token. Run: `python -m pytest_desched.providers.embedded.prometheus_front
--dir D --listen PORT --upstream PORT` (the token is read from `D/token`, mode 0600).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import hmac
import http.client
import json
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade"}


class TokenReviewer:
    """Ask the API server whether a bearer token is a ServiceAccount's (TokenReview), with the
    admin client certificate of the cluster's pki/; positive answers kept a minute by digest."""

    def __init__(self, apiserver: str, pki: Path) -> None:
        host, _, port = apiserver.removeprefix("https://").partition(":")
        self.host, self.port = host, int(port or 443)
        self.ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        self.ctx.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
        self.cache: dict[str, float] = {}
        self.lock = threading.Lock()

    def service_account(self, token: bytes) -> bool:
        key = hashlib.sha256(token).hexdigest()
        with self.lock:
            if self.cache.get(key, 0) > time.monotonic():
                return True
        body = json.dumps(
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenReview",
                "spec": {"token": token.decode(errors="replace")},
            }
        )
        conn = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=10)
        try:
            conn.request(
                "POST",
                "/apis/authentication.k8s.io/v1/tokenreviews",
                body=body,
                headers={"Content-Type": "application/json"},
            )
            status = json.loads(conn.getresponse().read()).get("status") or {}
        except (OSError, ValueError):
            return False
        finally:
            conn.close()
        user = str((status.get("user") or {}).get("username", ""))
        ok = bool(status.get("authenticated")) and user.startswith("system:serviceaccount:")
        if ok:
            with self.lock:
                self.cache[key] = time.monotonic() + 60
        return ok


def handler_for(
    token: bytes, upstream: int, reviewer: TokenReviewer | None = None
) -> type[BaseHTTPRequestHandler]:
    """A request handler that checks the token and forwards to 127.0.0.1:`upstream`."""
    expected = b"Bearer " + token

    class Front(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            # The request line only (method, path, status): headers, and so the token, never.
            sys.stderr.write(f"{self.command} {self.path.split('?')[0]} {args[1:2]}\n")

        def _authorized(self) -> bool:
            got = (self.headers.get("Authorization") or "").encode()
            if hmac.compare_digest(got, expected):
                return True
            bearer = got.removeprefix(b"Bearer ")
            return reviewer is not None and bearer != got and reviewer.service_account(bearer)

        def _forward(self) -> None:
            if not self._authorized():
                body = b'{"status":"error","error":"unauthorized"}'
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Bearer realm="prometheus"')
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            length = int(self.headers.get("Content-Length") or 0)
            data = self.rfile.read(length) if length else None
            headers = {
                k: v
                for k, v in self.headers.items()
                if k.lower() not in HOP_BY_HOP and k.lower() not in ("authorization", "host")
            }
            conn = http.client.HTTPConnection("127.0.0.1", upstream, timeout=30)
            try:
                conn.request(self.command, self.path, body=data, headers=headers)
                resp = conn.getresponse()
                payload = resp.read()
            except OSError as exc:  # Prometheus is down: what a proxy in front of it says
                payload = f'{{"status":"error","error":"upstream: {exc}"}}'.encode()
                self.send_response(502)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                return
            finally:
                conn.close()
            self.send_response(resp.status)
            for k, v in resp.getheaders():
                if k.lower() not in HOP_BY_HOP and k.lower() != "content-length":
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = _forward
        do_POST = _forward

    return Front


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="prometheus_front", description=__doc__)
    ap.add_argument("--dir", type=Path, required=True, help="the cluster's Prometheus folder")
    ap.add_argument("--listen", type=int, required=True)
    ap.add_argument("--upstream", type=int, required=True)
    ap.add_argument("--apiserver", default="", help="https://HOST:PORT for TokenReviews")
    ap.add_argument("--pki", type=Path, help="the cluster's pki/ (ca.crt, admin.crt/.key)")
    args = ap.parse_args(argv)
    token = (args.dir / "token").read_bytes().strip()
    if not token:
        sys.stderr.write(f"{args.dir / 'token'} is empty: no token to check\n")
        return 2
    reviewer = TokenReviewer(args.apiserver, args.pki) if args.apiserver and args.pki else None
    server = ThreadingHTTPServer(
        ("127.0.0.1", args.listen), handler_for(token, args.upstream, reviewer)
    )
    server.daemon_threads = True
    sys.stderr.write(f"listening on 127.0.0.1:{args.listen}, forwarding to :{args.upstream}\n")
    sys.stderr.flush()
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
