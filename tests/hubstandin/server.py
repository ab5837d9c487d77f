"""A local stand-in for the Hugging Face hub: a stdlib HTTP server in a thread that speaks the part of
the hub's HTTP API that `huggingface_hub`, `transformers` (`from_pretrained`) and `datasets`
(`load_dataset` of parquet repos) use.

Served routes (`{kind}` is `models` or `datasets`; model URLs carry no prefix, dataset URLs `/datasets/`):

* `HEAD|GET /[datasets/]{repo}/resolve/{rev}/{path}` — the file, with `ETag`, `X-Repo-Commit`,
  `Content-Length` (as the hub sends for small, non-LFS files); a missing file answers 404 with
  `X-Error-Code: EntryNotFound`, an unknown repo 404 with `X-Error-Code: RepoNotFound`;
* `GET /api/{kind}/{repo}` and `/api/{kind}/{repo}/revision/{rev}` — repo info (`id`, `sha`, `siblings`);
* `GET /api/{kind}/{repo}/tree/{rev}[/{path}]` (`recursive`, `expand`) and
  `POST /api/{kind}/{repo}/paths-info/{rev}` — the file listing.

Anything else answers 404 with `X-Error-Code: StandInUnknownRoute` and is recorded in `unknown` (and
printed to stderr), so a library asking for something the stand-in does not serve fails loudly.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlparse


@dataclass
class Repo:
    """One repository: its files (path -> bytes) and a commit sha derived from them."""

    repo_id: str
    kind: str                         # "model" | "dataset"
    files: dict[str, bytes] = field(default_factory=dict)

    @property
    def sha(self) -> str:
        h = hashlib.sha1(self.repo_id.encode())
        for path in sorted(self.files):
            h.update(path.encode() + b"\0" + hashlib.sha1(self.files[path]).digest())
        return h.hexdigest()

    @staticmethod
    def oid(data: bytes) -> str:
        """git blob sha1, as the hub reports for non-LFS files."""
        return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()

    def entries(self, prefix: str = "", recursive: bool = False) -> list[dict]:
        prefix = prefix.strip("/")
        out, folders = [], set()
        for path in sorted(self.files):
            if prefix and not path.startswith(prefix + "/"):
                continue
            rest = path[len(prefix) + 1:] if prefix else path
            parts = rest.split("/")
            for i in range(1, len(parts)):
                folder = "/".join(([prefix] if prefix else []) + parts[:i])
                if (recursive or i == 1) and folder not in folders:
                    folders.add(folder)
                    out.append({"type": "directory", "oid": hashlib.sha1(folder.encode()).hexdigest(),
                                "size": 0, "path": folder})
            if recursive or len(parts) == 1:
                out.append(self.file_entry(path))
        return out

    def file_entry(self, path: str) -> dict:
        data = self.files[path]
        return {"type": "file", "oid": self.oid(data), "size": len(data), "path": path}


class Hub:
    """The repositories served, and a log of the requests (`requests`) and of unknown ones (`unknown`)."""

    def __init__(self) -> None:
        self.repos: dict[tuple[str, str], Repo] = {}
        self.requests: list[str] = []
        self.unknown: list[str] = []
        self._server: ThreadingHTTPServer | None = None

    def add(self, repo: Repo) -> None:
        self.repos[(repo.kind, repo.repo_id)] = repo

    def get(self, kind: str, repo_id: str) -> Repo | None:
        return self.repos.get((kind, repo_id))

    @property
    def url(self) -> str:
        assert self._server is not None, "not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> Hub:
        hub = self

        class Handler(_Handler):
            pass

        Handler.hub = hub
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True, name="hub-stand-in").start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


_RESOLVE = re.compile(r"^/(?:(?P<ds>datasets)/)?(?P<repo>[^/]+(?:/[^/]+)?)/resolve/(?P<rev>[^/]+)/(?P<path>.+)$")
_API = re.compile(r"^/api/(?P<kind>models|datasets)/(?P<rest>.+)$")


class _Handler(BaseHTTPRequestHandler):
    hub: Hub
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # noqa: D102 - quiet; requests are kept in hub.requests
        pass

    # -- answers ---------------------------------------------------------------------------------
    def _send(self, code: int, body: bytes = b"", headers: dict | None = None, ctype="application/json"):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, obj, headers=None):
        self._send(200, json.dumps(obj).encode(), headers)

    def _error(self, code: int, error_code: str, message: str):
        self._send(code, json.dumps({"error": message}).encode(),
                   {"X-Error-Code": error_code, "X-Error-Message": message})

    def _unknown(self):
        line = f"{self.command} {self.path}"
        self.hub.unknown.append(line)
        print(f"[hub stand-in] UNKNOWN REQUEST: {line}", file=sys.stderr, flush=True)
        self._error(404, "StandInUnknownRoute", f"the hub stand-in does not serve {line}")

    # -- routes ----------------------------------------------------------------------------------
    def _route(self):
        self.hub.requests.append(f"{self.command} {self.path}")
        url = urlparse(self.path)
        path = unquote(url.path)
        query = parse_qs(url.query)
        m = _RESOLVE.match(path)
        if m and self.command in ("GET", "HEAD"):
            return self._resolve("dataset" if m["ds"] else "model", m["repo"], m["rev"], m["path"])
        m = _API.match(path)
        if m:
            return self._api(m["kind"][:-1], m["rest"], query)
        return self._unknown()

    def _repo(self, kind: str, repo_id: str) -> Repo | None:
        repo = self.hub.get(kind, repo_id)
        if repo is None:
            self._error(404, "RepoNotFound", f"Repository Not Found for url: {self.path}. ({kind} {repo_id})")
        return repo

    def _rev_ok(self, repo: Repo, rev: str) -> bool:
        if unquote(rev) in ("main", repo.sha):
            return True
        self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
        return False

    def _resolve(self, kind, repo_id, rev, path):
        repo = self._repo(kind, repo_id)
        if repo is None or not self._rev_ok(repo, rev):
            return
        if path not in repo.files:
            return self._error(404, "EntryNotFound", f"Entry not found: {path} in {repo_id}")
        data = repo.files[path]
        headers = {"ETag": f'"{repo.oid(data)}"', "X-Repo-Commit": repo.sha, "Accept-Ranges": "bytes"}
        rng = self.headers.get("Range")
        if rng and self.command == "GET":
            m = re.match(r"bytes=(\d*)-(\d*)", rng)
            if m:
                start = int(m[1]) if m[1] else max(0, len(data) - int(m[2]))
                end = int(m[2]) if m[1] and m[2] else len(data) - 1
                end = min(end, len(data) - 1)
                headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
                return self._send(206, data[start:end + 1], headers, "application/octet-stream")
        self._send(200, data, headers, "application/octet-stream")

    def _api(self, kind, rest, query):
        # longest repo-id match first: ids have one or no slash
        for repo_id, tail in _split_repo(rest):
            repo = self.hub.get(kind, repo_id)
            if repo is None:
                continue
            if tail == "" or re.fullmatch(r"revision/[^/]+", tail):
                rev = tail.split("/", 1)[1] if tail else "main"
                if self._rev_ok(repo, rev):
                    self._json(_info(repo))
                return
            m = re.fullmatch(r"tree/(?P<rev>[^/]+)(?:/(?P<path>.*))?", tail)
            if m and self.command == "GET":
                if self._rev_ok(repo, m["rev"]):
                    prefix = m["path"] or ""
                    if prefix and not any(p.startswith(prefix.strip("/") + "/") for p in repo.files):
                        return self._error(404, "EntryNotFound", f"{prefix} does not exist in {repo_id}")
                    rec = query.get("recursive", ["false"])[0].lower() in ("true", "1")
                    self._json(repo.entries(prefix, rec))
                return
            m = re.fullmatch(r"paths-info/(?P<rev>[^/]+)", tail)
            if m and self.command == "POST":
                if self._rev_ok(repo, m["rev"]):
                    n = int(self.headers.get("Content-Length") or 0)
                    body = self.rfile.read(n).decode()
                    form = (json.loads(body) if self.headers.get("Content-Type", "").startswith("application/json")
                            else parse_qs(body))
                    paths = form.get("paths", [])
                    paths = [paths] if isinstance(paths, str) else paths
                    out = []
                    for p in paths:
                        p = p.strip("/")
                        if p in repo.files:
                            out.append(repo.file_entry(p))
                        elif any(f.startswith(p + "/") for f in repo.files):
                            out.append({"type": "directory", "oid": hashlib.sha1(p.encode()).hexdigest(),
                                        "size": 0, "path": p})
                    self._json(out)
                return
            return self._unknown()
        if rest.count("/") <= 3 and any(w in rest for w in ("revision", "tree", "paths-info")) or "/" not in rest \
                or rest.count("/") == 1:
            repo_id = rest.split("/revision/")[0].split("/tree/")[0].split("/paths-info/")[0]
            return self._error(404, "RepoNotFound", f"Repository Not Found ({kind} {repo_id})")
        return self._unknown()

    def do_GET(self):  # noqa: N802
        self._route()

    def do_HEAD(self):  # noqa: N802
        self._route()

    def do_POST(self):  # noqa: N802
        self._route()


def _split_repo(rest: str):
    parts = rest.split("/")
    for k in (2, 1):
        if len(parts) >= k:
            yield "/".join(parts[:k]), "/".join(parts[k:])


def _info(repo: Repo) -> dict:
    info = {"id": repo.repo_id, "_id": hashlib.md5(repo.repo_id.encode()).hexdigest()[:24], "sha": repo.sha,
            "private": False, "gated": False, "disabled": False, "downloads": 0, "likes": 0, "tags": [],
            "lastModified": "2024-01-01T00:00:00.000Z", "createdAt": "2024-01-01T00:00:00.000Z",
            "siblings": [{"rfilename": p} for p in sorted(repo.files)]}
    if repo.kind == "model":
        info["modelId"] = repo.repo_id
        info["library_name"] = "transformers"
        if "config.json" in repo.files:
            cfg = json.loads(repo.files["config.json"])
            info["config"] = {k: cfg[k] for k in ("architectures", "model_type") if k in cfg}
    else:
        info["cardData"] = {}
    return info
