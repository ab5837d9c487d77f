"""`hub.lock`: the commit of every Hugging Face hub model and dataset the `paper` presets read, and what a run
records about where its inputs came from.

The lock (JSON, at the repository root; `$TOKUNI_HUB_LOCK` names another file) maps each hub id to
`{"revision": <40-hex commit> | null, "source": <where the commit was taken from>, "why": <why none is
pinned>}`, under `models` and `datasets`. A loader asks the hub for the pinned commit (`request_revision`) and
hands what it resolved to `settle`, which records it in the run's provenance (`machinery.results.record_source`) and
raises `RevisionMoved` — one line naming both commits — when it differs from the pin. A pin the hub no longer
has (a rewritten history) fails the same way (`explain_missing`). An entry whose revision is null records what
the run resolved and checks nothing. `$TOKUNI_UPDATE_LOCK=1` (`scripts/rerun.py --update-lock`) is the one way
to move a pin: the loaders then ask for `main` and write the commit it resolves to into the lock.

The offline paths record their own identity instead: a PyPI weight package by name, version and the SHA-256 of
its files; a file of the offline mirror by its path in the mirror and its SHA-256 (`record_mirror_file`).
"""

from __future__ import annotations

import datetime as _dt
import fcntl
import hashlib
import json
import os
import re
from pathlib import Path

from ..machinery.results import record_source, write_atomic
from ..machinery.runtime import REPO_ROOT

#: a lock entry's revision: a full commit sha (a branch or tag can move under the pin)
COMMIT = re.compile(r"^[0-9a-f]{40}$")
#: the lock's sections, by the kind of repository
SECTIONS = {"model": "models", "dataset": "datasets"}
#: the environment variable that names another lock file, and the one that moves the pins (`--update-lock`)
LOCK_ENV, UPDATE_ENV = "TOKUNI_HUB_LOCK", "TOKUNI_UPDATE_LOCK"
#: how to move a pin, as the one-line error says it
MOVE_HINT = "rerun with --update-lock to move the pin (make rerun CHAPTER=<name> SCALE=paper PARAMS=--update-lock)"


class RevisionMoved(RuntimeError):
    """A hub repository resolved to another commit than `hub.lock` pins (or no longer has the pinned one)."""


class LockError(ValueError):
    """`hub.lock` is not what it must be (not JSON, a revision that is not a full commit sha)."""


def lock_path() -> Path:
    """The lock file: `$TOKUNI_HUB_LOCK`, else `hub.lock` at the repository root."""
    return Path(os.environ.get(LOCK_ENV) or REPO_ROOT / "hub.lock")


_READ: dict[tuple[str, int], dict] = {}


def forget_read_lock() -> None:
    """Drop the lock `read_lock` keeps read, so that the next call reads the file again."""
    _READ.clear()


def read_lock(path: str | os.PathLike | None = None) -> dict:
    """The lock's contents (`{"about": ..., "models": {id: entry}, "datasets": {id: entry}}`), checked: every
    revision is a 40-hex commit or null, and a null one says why. An absent file is an empty lock."""
    path = Path(path) if path else lock_path()
    if not path.is_file():
        return {"models": {}, "datasets": {}}
    key = (str(path), path.stat().st_mtime_ns)
    if key not in _READ:
        try:
            lock = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as err:
            raise LockError(f"{path} is not JSON ({err})") from None
        for section in SECTIONS.values():
            for repo_id, e in lock.setdefault(section, {}).items():
                rev = e.get("revision")
                if rev is not None and not COMMIT.match(str(rev)):
                    raise LockError(f"{path}: {section} {repo_id}: revision {rev!r} is not a full commit sha")
                if rev is None and not e.get("why"):
                    raise LockError(f"{path}: {section} {repo_id}: no revision and no `why`")
        _READ.clear()
        _READ[key] = lock
    return _READ[key]


def pin(kind: str, repo_id: str) -> str | None:
    """The commit `hub.lock` pins `repo_id` (a `model` or `dataset`) to, or None (not locked, or no revision)."""
    return (read_lock()[SECTIONS[kind]].get(repo_id) or {}).get("revision")


def updating() -> bool:
    """Whether this run moves the pins (`$TOKUNI_UPDATE_LOCK=1`, set by `scripts/rerun.py --update-lock`)."""
    return os.environ.get(UPDATE_ENV, "0") == "1"


def request_revision(kind: str, repo_id: str) -> str | None:
    """The revision a loader asks the hub for: the pin, or None (`main`) when there is none or the pins move."""
    return None if updating() else pin(kind, repo_id)


def moved(kind: str, repo_id: str, pinned: str, resolved: str, missing: bool = False) -> RevisionMoved:
    """The one-line error naming the pinned commit and the one the hub resolved (`missing`: the hub no longer
    has the pinned commit, and `resolved` is where its `main` is now)."""
    what = f"the hub has no such commit (main is at {resolved})" if missing else f"the hub resolved {resolved}"
    return RevisionMoved(f"{kind} {repo_id}: hub.lock pins {pinned} but {what}; {MOVE_HINT}")


def settle(kind: str, repo_id: str, resolved: str | None, asked: str | None = None, **identity) -> None:
    """After a hub load: record the commit it resolved to in the run's provenance, and either move the pin
    (`updating()`) or check it. `asked`: a revision the caller chose itself (not the lock's), which is
    recorded and not checked against the pin."""
    pinned = pin(kind, repo_id)
    record_source(f"hub {kind} {repo_id}", {"kind": f"hub {kind}", "id": repo_id, "revision": resolved,
                                             "pinned": pinned, **({"asked": asked} if asked else {}), **identity})
    if asked or resolved is None:
        return
    if updating():
        if resolved != pinned:
            write_pin(kind, repo_id, resolved)
        return
    if pinned is not None and resolved != pinned:
        raise moved(kind, repo_id, pinned, resolved)


def hub_head(kind: str, repo_id: str) -> str | None:
    """The commit `main` of `repo_id` points to now, asked of the hub; None when the hub cannot be asked."""
    try:
        from huggingface_hub import HfApi

        info = (HfApi().model_info if kind == "model" else HfApi().dataset_info)(repo_id, revision="main")
        return info.sha
    except Exception:  # noqa: BLE001 - offline, unknown id: nothing to name
        return None


def _revision_missing(err: BaseException) -> bool:
    from huggingface_hub.errors import RevisionNotFoundError

    seen: BaseException | None = err
    while seen is not None:
        if (isinstance(seen, RevisionNotFoundError) or "is not a valid git identifier" in str(seen)
                or "Invalid rev id" in str(seen)):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def explain_missing(kind: str, repo_id: str, asked: str | None, err: BaseException) -> RevisionMoved | None:
    """For a load that failed while asking for the pinned commit: the one-line `RevisionMoved` naming the pin
    and the commit `main` points to now, when the hub no longer has the pin; None otherwise (the caller
    raises its own error)."""
    pinned = pin(kind, repo_id)
    if asked is None or asked != pinned or not _revision_missing(err):
        return None
    head = hub_head(kind, repo_id)
    return (moved(kind, repo_id, pinned, head or "unknown: the hub could not be asked", missing=True)
            if head != pinned else None)


def write_pin(kind: str, repo_id: str, revision: str, source: str | None = None) -> None:
    """Move (or set) one pin in the lock, in one atomic write under a file lock (runs in parallel may move
    several pins)."""
    if not COMMIT.match(revision):
        raise LockError(f"{kind} {repo_id}: {revision!r} is not a full commit sha")
    path = lock_path()
    with open(path.with_name(f".{path.name}.lock"), "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            _READ.clear()
            lock = read_lock(path) if path.is_file() else {"about": ABOUT, "models": {}, "datasets": {}}
            entries = lock.setdefault(SECTIONS[kind], {})
            day = _dt.date.today().isoformat()
            entries[repo_id] = {"revision": revision,
                                "source": source or f"resolved from main by a run with --update-lock on {day}"}
            write_atomic(path, dumps(lock))
            _READ.clear()
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


ABOUT = ("The commit of every Hugging Face hub model and dataset a `paper` preset reads (README: Pinned "
         "revisions). The loaders ask the hub for these commits and a run fails, in one line naming both, when "
         "it resolves another; a null revision says why none is pinned, and a run records what it resolved. "
         "Move a pin only with `make rerun CHAPTER=<name> SCALE=paper PARAMS=--update-lock`.")


def dumps(lock: dict) -> str:
    """The lock as the file keeps it: one entry a line, ids sorted, so a moved pin is a one-line diff."""
    lines = ["{", f' "about": {json.dumps(lock.get("about", ABOUT))},']
    for i, section in enumerate(SECTIONS.values()):
        entries = lock.get(section, {})
        lines.append(f' "{section}": {{')
        rows = [f'  {json.dumps(k)}: {json.dumps(entries[k], ensure_ascii=False)}' for k in sorted(entries)]
        lines.append(",\n".join(rows))
        lines.append(" }" + ("," if i < len(SECTIONS) - 1 else ""))
    return "\n".join(x for x in lines if x) + "\n}\n"


# --- the offline paths' identity ------------------------------------------------------------------------------

_DIGESTS: dict[tuple[str, int, int], str] = {}


def file_sha256(path: str | os.PathLike) -> str:
    """The SHA-256 of a file (hex), computed once per process for each (path, size, modification time)."""
    path = Path(path)
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _DIGESTS:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        _DIGESTS[key] = h.hexdigest()
    return _DIGESTS[key]


def folder_sha256(folder: str | os.PathLike) -> dict[str, str]:
    """{path relative to `folder`: SHA-256} of every file under it (Python sources and caches left out)."""
    folder = Path(folder)
    if folder.is_file():
        return {folder.name: file_sha256(folder)}
    return {str(f.relative_to(folder)): file_sha256(f) for f in sorted(folder.rglob("*"))
            if f.is_file() and "__pycache__" not in f.parts and f.suffix not in (".py", ".pyc")}


def record_mirror_file(path: str | os.PathLike, what: str, root: str | os.PathLike | None) -> None:
    """Record one file of the offline mirror (whose folder is `root`) in the run's provenance: its path in the
    mirror and its SHA-256."""
    path, root = Path(path), Path(root) if root else None
    try:
        rel = str(path.resolve().relative_to(root.resolve())) if root else str(path)
    except ValueError:
        rel = str(path)
    record_source(f"mirror {rel}", {"kind": "offline mirror", "what": what, "path": rel,
                                     "sha256": file_sha256(path)})


#: datasets already loaded in this process, by (id, resolved commit, arguments): a commit's content never changes,
#: so a run that reads one set for each of its models loads it once (streamed datasets are never kept)
_LOADED: dict = {}


def load_hub_dataset(repo_id: str, *args, **kwargs):
    """`datasets.load_dataset(repo_id, *args, **kwargs)` at the pinned commit: the commit is resolved first
    (`HfApi.dataset_info`, which names a pin the hub no longer has), passed as `revision=`, and settled
    (recorded with the dataset's fingerprint; a different commit than the pin raises `RevisionMoved`). A commit
    loaded before in this process is served from memory, and recorded again."""
    import datasets

    asked = request_revision("dataset", repo_id)
    sha = None
    try:
        from huggingface_hub import HfApi

        sha = HfApi().dataset_info(repo_id, revision=asked or "main").sha
    except Exception as err:  # noqa: BLE001 - offline (a cached copy may still load), or the pin is gone
        mv = explain_missing("dataset", repo_id, asked, err)
        if mv is not None:
            raise mv from None
    key = (repo_id, sha, args, tuple(sorted(kwargs.items()))) if sha and not kwargs.get("streaming") else None
    ds = _LOADED.get(key) if key is not None else None
    if ds is None:
        ds = datasets.load_dataset(repo_id, *args, revision=sha or asked, **kwargs)
        if key is not None:
            _LOADED[key] = ds
    config = args[0] if args else kwargs.get("name")
    settle("dataset", repo_id, sha, **({"config": config} if config else {}),
           **({"split": kwargs["split"]} if "split" in kwargs else {}),
           **({"fingerprint": ds._fingerprint} if getattr(ds, "_fingerprint", None) else {}))
    return ds


def hub_revision(source: str, revision: str | None = None) -> tuple[str | None, str | None, str | None]:
    """For a hub id: (the revision asked for — `revision`, else the commit `hub.lock` pins, else None for
    `main` —, the revision to pass to every `from_pretrained` of the load, the commit it points to now). The
    commit is asked once, so every file of a load comes from it; offline it comes from the local cache, or is
    None. After the load, `settle("model", source, commit, asked=revision)` records and checks it."""
    from transformers.utils.hub import resolve_revision

    asked = revision or request_revision("model", source)
    rev = resolve_revision(source, asked)
    commit = getattr(rev, "resolved", None) or (str(rev) if rev and COMMIT.match(str(rev)) else None)
    return asked, rev, commit


__all__ = ["RevisionMoved", "LockError", "lock_path", "read_lock", "pin", "updating", "request_revision", "settle",
           "explain_missing", "write_pin", "dumps", "file_sha256", "folder_sha256", "record_mirror_file",
           "load_hub_dataset", "hub_head", "hub_revision"]
