"""`jupyter-book build . --builder html`, with the chapters executed in parallel first.

    python scripts/build_book.py [--jobs N]      # N: $TOKUNI_BOOK_JOBS, else the CPU count

Jupyter Book executes the pages one after another while it reads them. This executes every page that has code
and no up-to-date copy in the book's execution cache (`_build/.jupyter_cache`, jupyter-cache's project, read
with myst-nb's Markdown-notebook reader as the build reads it) in N processes first, each in its own folder as
the build would, and caches each one that succeeds; the build then finds every page in the cache and only
renders. A page that fails is left to the build, which executes it again and reports its error as it always
does. `make book` calls it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "_build" / ".jupyter_cache"
#: how myst-nb reads the book's MyST Markdown notebooks (its jupyter-cache reader plugin)
READER = {"type": "plugin", "name": "myst_nb_md"}


def pages() -> list[Path]:
    """The book's pages that hold code cells, in the table of contents' order."""
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))

    def files_of(entries: list[dict]) -> list[str]:     # a chapter, then the pages under it (its `sections`)
        return [f for e in entries for f in [e["file"], *files_of(e.get("sections", []))]]

    files = [toc["root"]] + [f for part in toc.get("parts", [toc]) for f in files_of(part.get("chapters", []))]
    out = []
    for f in files:
        path = ROOT / (f if f.endswith(".md") else f + ".md")
        if path.is_file() and "```{code-cell}" in path.read_text(encoding="utf-8"):
            out.append(path)
    return out


def _read(path: str):
    from jupyter_cache.readers import get_reader

    return get_reader(READER)(path)


def _run(path: str):
    """Execute one page as myst-nb's cache mode does (in its own folder, every output kept): (path, notebook,
    seconds, error text or None)."""
    from jupyter_cache.executors.utils import single_nb_execution

    result = single_nb_execution(_read(path), cwd=str(Path(path).parent), timeout=1800, allow_errors=False,
                                 meta_override=True)
    return path, result.nb, result.time, result.exc_string if result.err is not None else None


def execute(jobs: int) -> list[str]:
    """Execute the pages whose code the cache does not hold, `jobs` at a time, and cache each that succeeds;
    returns the pages that failed."""
    from concurrent.futures import ProcessPoolExecutor

    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn

    cache = get_cache(str(CACHE))
    stale = []
    for path in pages():
        try:
            cache.match_cache_notebook(_read(str(path)))
        except KeyError:
            stale.append(str(path))
    if not stale:
        return []
    print(f"executing {len(stale)} pages, {jobs} at a time: " + ", ".join(Path(p).stem for p in stale), flush=True)
    t, failed = time.time(), []
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for path, nb, seconds, error in pool.map(_run, stale):
            if error is None:
                rec = cache.add_nb_to_project(path, read_data=READER)
                cache.cache_notebook_bundle(CacheBundleIn(nb, rec.uri, data={"execution_seconds": seconds}),
                                            check_validity=False, overwrite=True)
                print(f"  {Path(path).stem}: {seconds:.0f} s", flush=True)
            else:
                failed.append(path)
                print(f"  {Path(path).stem}: failed (the build runs it again and reports the error)", flush=True)
    print(f"executed in {time.time() - t:.0f} s", flush=True)
    return failed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("TOKUNI_BOOK_JOBS") or os.cpu_count() or 1))
    a = ap.parse_args()
    if a.jobs < 1:
        ap.error("--jobs must be at least 1")
    execute(a.jobs)
    return subprocess.call([str(Path(sys.executable).parent / "jupyter-book"), "build", ".", "--builder", "html"],
                           cwd=ROOT)


if __name__ == "__main__":
    sys.exit(main())
