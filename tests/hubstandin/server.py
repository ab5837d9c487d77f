"""A local stand-in for the Hugging Face hub: a stdlib HTTP server in a thread that speaks the part of
the hub's HTTP API that `huggingface_hub`, `transformers` (`from_pretrained`) and `datasets`
(`load_dataset` of parquet repos) use.

Served routes (`{kind}` is `models` or `datasets`; model URLs carry no prefix, dataset URLs `/datasets/`):

* `HEAD|GET /[datasets/]{repo}/resolve/{rev}/{path}` — a small (git) file inline, with `ETag`, `X-Repo-Commit`,
  `Content-Length`; an LFS file (`Repo.is_lfs`: the hub's default LFS patterns — weights, parquet, archives —
  or above `LFS_ABOVE` bytes) answers 302 to a second server, the "CDN" (another origin, as
  cdn-lfs.huggingface.co is), with the metadata on the redirect itself: `X-Linked-Etag` (the sha256),
  `X-Linked-Size`, `X-Repo-Commit`, `Location`; a missing file answers 404 with
  `X-Error-Code: EntryNotFound`, an unknown repo 404 with `X-Error-Code: RepoNotFound`; a legacy id
  (`bert-base-uncased`) answers 307 to its canonical one (`google-bert/bert-base-uncased`), as the hub does;
* `HEAD|GET {cdn}/lfs/{sha256}` — the CDN: the file's bytes (with `Range`), logged in `cdn_requests`;
* `GET /api/{kind}/{repo}` and `/api/{kind}/{repo}/revision/{rev}` — repo info (`id`, `sha`, `siblings`);
* `GET /api/{kind}/{repo}/tree/{rev}[/{path}]` (`recursive`, `expand`) and
  `POST /api/{kind}/{repo}/paths-info/{rev}` — the file listing.

A `{rev}` is `main`, the repository's commit (`Repo.commit`: `start()` gives each repository the commit
`hub.lock` pins it to, where one is pinned) or an older commit it still serves (`Repo.history`); any other
answers 404 with `X-Error-Code: RevisionNotFound`. `Hub.move` moves `main` to a new commit, keeping the old one
or not (a rewritten history), so a test can plant a moved revision.

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
from fnmatch import fnmatch
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlparse

#: the hub's default `.gitattributes` LFS patterns (the ones the served files can match), and the size above
#: which any other file is stored in LFS too
LFS_PATTERNS = ("*.bin", "*.safetensors", "*.h5", "*.msgpack", "*.pt", "*.pth", "*.ckpt", "*.onnx", "*.parquet",
                "*.arrow", "*.gz", "*.zip", "*.tar.*", "*.npy", "*.npz", "*.model", "*.flac", "*.wav", "*.mp3")
LFS_ABOVE = 10 * 2**20


@dataclass
class Repo:
    """One repository: its files (path -> bytes) at `main`, whose commit is `commit` (default: a sha derived
    from the files), and older commits the hub still serves by their sha (`history`: sha -> files)."""

    repo_id: str
    kind: str                         # "model" | "dataset"
    files: dict[str, bytes] = field(default_factory=dict)
    commit: str | None = None
    history: dict[str, dict[str, bytes]] = field(default_factory=dict)

    @property
    def sha(self) -> str:
        if self.commit:
            return self.commit
        h = hashlib.sha1(self.repo_id.encode())
        for path in sorted(self.files):
            h.update(path.encode() + b"\0" + hashlib.sha1(self.files[path]).digest())
        return h.hexdigest()

    def at(self, rev: str) -> Repo | None:
        """The repository as of `rev` (`main`, its commit, or a commit of `history`), or None."""
        if rev in ("main", self.sha):
            return self
        if rev in self.history:
            return Repo(self.repo_id, self.kind, self.history[rev], commit=rev)
        return None

    @staticmethod
    def oid(data: bytes) -> str:
        """git blob sha1, as the hub reports for non-LFS files."""
        return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()

    def is_lfs(self, path: str) -> bool:
        """Whether the hub keeps `path` in LFS (so that its resolve URL redirects to the CDN)."""
        return any(fnmatch(path.rsplit("/", 1)[-1], p) for p in LFS_PATTERNS) or len(self.files[path]) > LFS_ABOVE

    @staticmethod
    def sha256(data: bytes) -> str:
        return hashlib.sha256(data).hexdigest()

    def pointer(self, path: str) -> bytes:
        """The git LFS pointer file the repository holds in place of an LFS file."""
        data = self.files[path]
        return (f"version https://git-lfs.github.com/spec/v1\noid sha256:{self.sha256(data)}\n"
                f"size {len(data)}\n").encode()

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
        if self.is_lfs(path):
            pointer = self.pointer(path)
            return {"type": "file", "oid": self.oid(pointer), "size": len(data), "path": path,
                    "lfs": {"oid": self.sha256(data), "size": len(data), "pointerSize": len(pointer)}}
        return {"type": "file", "oid": self.oid(data), "size": len(data), "path": path}


class Hub:
    """The repositories served, and a log of the requests (`requests`) and of unknown ones (`unknown`)."""

    def __init__(self, aliases: dict[str, str] | None = None) -> None:
        self.repos: dict[tuple[str, str], Repo] = {}
        self.requests: list[str] = []
        self.unknown: list[str] = []
        self.cdn_requests: list[str] = []
        #: legacy model id -> canonical id (the hub redirects the first to the second)
        self.aliases: dict[str, str] = dict(aliases or {})
        self.blobs: dict[str, bytes] = {}
        self._server: ThreadingHTTPServer | None = None
        self._cdn: ThreadingHTTPServer | None = None

    def add(self, repo: Repo) -> None:
        self.repos[(repo.kind, repo.repo_id)] = repo
        for files in (repo.files, *repo.history.values()):
            for path, data in files.items():
                if repo.is_lfs(path):
                    self.blobs[repo.sha256(data)] = data

    def get(self, kind: str, repo_id: str) -> Repo | None:
        return self.repos.get((kind, repo_id))

    def move(self, kind: str, repo_id: str, commit: str | None = None, keep: bool = False) -> tuple[str, str]:
        """Move `main` of a repository to a new commit (same files; `commit`, default one derived from the old),
        as an upstream fix does; with `keep=False` the old commit is gone (a rewritten history), else the hub
        still serves it by its sha. Returns (old commit, new commit)."""
        repo = self.repos[(kind, repo_id)]
        old = repo.sha
        new = commit or hashlib.sha1(f"{old} moved".encode()).hexdigest()
        if keep:
            repo.history[old] = dict(repo.files)
        repo.commit = new
        return old, new

    @property
    def url(self) -> str:
        assert self._server is not None, "not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def cdn_url(self) -> str:
        assert self._cdn is not None, "not started"
        host, port = self._cdn.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> Hub:
        hub = self

        class Handler(_Handler):
            pass

        class CdnHandler(_CdnHandler):
            pass

        Handler.hub = CdnHandler.hub = hub
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._cdn = ThreadingHTTPServer(("127.0.0.1", 0), CdnHandler)
        for srv, name in ((self._server, "hub-stand-in"), (self._cdn, "hub-stand-in-cdn")):
            srv.daemon_threads = True
            threading.Thread(target=srv.serve_forever, daemon=True, name=name).start()
        return self

    def stop(self) -> None:
        for srv in (self._server, self._cdn):
            if srv is not None:
                srv.shutdown()
                srv.server_close()
        self._server = self._cdn = None


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

    def _at(self, repo: Repo, rev: str) -> Repo | None:
        """The repository at `rev`, or None after answering 404 RevisionNotFound, as the hub does."""
        at = repo.at(unquote(rev))
        if at is None:
            self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
        return at

    def _redirect_alias(self, kind: str, repo_id: str) -> bool:
        """A legacy model id answers 307 to the same URL under its canonical id, as the hub does."""
        new = self.hub.aliases.get(repo_id) if kind == "model" else None
        if new is None or self.hub.get(kind, repo_id) is not None:
            return False
        url = urlparse(self.path)
        target = url.path.replace(f"/{repo_id}/", f"/{new}/", 1) + (f"?{url.query}" if url.query else "")
        self._send(307, b"", {"Location": target})
        return True

    def _resolve(self, kind, repo_id, rev, path):
        if self._redirect_alias(kind, repo_id):
            return
        repo = self._repo(kind, repo_id)
        if repo is None or (repo := self._at(repo, rev)) is None:
            return
        if path not in repo.files:
            return self._error(404, "EntryNotFound", f"Entry not found: {path} in {repo_id}")
        data = repo.files[path]
        if repo.is_lfs(path):                # the hub: 302 to the CDN, the metadata on the redirect itself
            sha = repo.sha256(data)
            return self._send(302, b"", {"Location": f"{self.hub.cdn_url}/lfs/{sha}?expires=0&signature=stand-in",
                                         "ETag": f'"{repo.oid(repo.pointer(path))}"', "X-Linked-Etag": f'"{sha}"',
                                         "X-Linked-Size": str(len(data)), "X-Repo-Commit": repo.sha})
        headers = {"ETag": f'"{repo.oid(data)}"', "X-Repo-Commit": repo.sha, "Accept-Ranges": "bytes"}
        self._send_bytes(data, headers)

    def _send_bytes(self, data: bytes, headers: dict):
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
            if repo is None and self._redirect_alias(kind, repo_id):
                return
            if repo is None:
                continue
            if tail == "" or re.fullmatch(r"revision/[^/]+", tail):
                rev = tail.split("/", 1)[1] if tail else "main"
                if (at := self._at(repo, rev)) is not None:
                    self._json(_info(at))
                return
            m = re.fullmatch(r"tree/(?P<rev>[^/]+)(?:/(?P<path>.*))?", tail)
            if m and self.command == "GET":
                if (repo := self._at(repo, m["rev"])) is not None:
                    prefix = m["path"] or ""
                    if prefix and not any(p.startswith(prefix.strip("/") + "/") for p in repo.files):
                        return self._error(404, "EntryNotFound", f"{prefix} does not exist in {repo_id}")
                    rec = query.get("recursive", ["false"])[0].lower() in ("true", "1")
                    self._json(repo.entries(prefix, rec))
                return
            m = re.fullmatch(r"paths-info/(?P<rev>[^/]+)", tail)
            if m and self.command == "POST":
                if (repo := self._at(repo, m["rev"])) is not None:
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
        if ((rest.count("/") <= 3 and any(w in rest for w in ("revision", "tree", "paths-info")))
                or "/" not in rest or rest.count("/") == 1):
            repo_id = rest.split("/revision/")[0].split("/tree/")[0].split("/paths-info/")[0]
            return self._error(404, "RepoNotFound", f"Repository Not Found ({kind} {repo_id})")
        return self._unknown()

    def do_GET(self):  # noqa: N802
        self._route()

    def do_HEAD(self):  # noqa: N802
        self._route()

    def do_POST(self):  # noqa: N802
        self._route()


class _CdnHandler(_Handler):
    """The CDN the hub redirects LFS files to: `GET|HEAD /lfs/{sha256}` (any query), bytes with `Range`."""

    def _route(self):
        self.hub.cdn_requests.append(f"{self.command} {self.path}")
        m = re.fullmatch(r"/lfs/([0-9a-f]{64})", urlparse(self.path).path)
        data = self.hub.blobs.get(m[1]) if m and self.command in ("GET", "HEAD") else None
        if data is None:
            return self._unknown()
        self._send_bytes(data, {"ETag": f'"{m[1]}"', "Accept-Ranges": "bytes"})


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
