# Transformers from Scratch: every command sets up .venv first, so a fresh clone needs only these.
#   make lab        install, then open JupyterLab on the first chapter's student edition (TORCH=cpu: see below)
#   make quick      install, then ruff and every test that trains nothing and runs no notebook (about a minute)
#   make test       install, then lint, every test (but those marked dry_run, which make gpu-dry-run runs) and every
#                   notebook under nbval, on other CPU kernels than its outputs were made with (notebooks/conftest.py)
#   make outputs    re-execute every notebook on the CPU and store its outputs (commit the result)
#   make notebooks  rebuild notebooks/*.ipynb from notebooks/src/*.py without running them
#   make benchmark  time our Transformer against nn.Transformer (see benchmarks/README.md)
#   make checkpoints  retrain the weights shipped for SKIP_TRAINING (tools/build_checkpoints.py)
#   make test-colab re-execute every notebook's complete edition, training included, with the library versions
#                   Google Colab ships (.venv-colab) and PyTorch's plain kernels (ATEN_CPU_CAPABILITY=default), every
#                   compared output matching; not in CI: run it after changing .ci/constraints-colab.txt
#   make site       the course as a website in build/site/, built offline from the committed notebooks (no execution)
#   make slides     a reveal.js deck per chapter in build/slides/ that works offline (tools/build_slides.py)
#   make check-browser  open every notebook, every page of the site, every deck and a RISE presentation offline in
#                   headless Chromium: every image, chart and formula must appear, every slide fit 1280x800, with no
#                   failed request or console error
#   make gpu-dry-run    every notebook's GPU code paths on the CPU, 3 training steps each (tools/gpu_dry_run.py), the
#                       student editions through the grader; 06 and 10 also in float16 with a gradient scaler (a T4's);
#                       all on the libraries Google Colab ships (.venv-colab), the tests marked dry_run too
#   make gpu-wheels     on a machine with internet: wheels and data for a GPU machine without a registry
#   make gpu-check      on a machine with CUDA: every notebook on the GPU, the full recipes, the GPU benchmarks,
#                       one report in benchmarks/gpu/ (tools/gpu_check.py; PARTS="notebooks translator" for some,
#                       GPU_CHECK_ARGS="--jobs 5" for its other options; tools/gpu_session.sh runs the parts in
#                       order of importance within a time budget)

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# uv, if installed (`pip install uv`), creates environments and installs into them in seconds; pip otherwise.
UV ?= $(shell command -v uv 2>/dev/null)
new_venv = $(if $(UV),$(UV) venv -q --python $(PYTHON) $(1),$(PYTHON) -m venv $(1) && $(1)/bin/python -m pip install -q --upgrade pip)
pip_install = $(if $(UV),$(UV) pip install -q --python $(1)/bin/python,$(1)/bin/python -m pip install -q)
# uv, unlike pip, installs no .pyc files; Python writes them at first import (only for the modules used), unless
# this is set, and then every kernel would compile torch's sources again.
unexport PYTHONDONTWRITEBYTECODE
# Exact versions, so that committed outputs reproduce; `make lab CONSTRAINTS=` takes the newest releases instead.
CONSTRAINTS ?= .ci/constraints.txt
PIP_CONSTRAINTS := $(if $(CONSTRAINTS),-c $(CONSTRAINTS))
# On Linux, PyPI's PyTorch is the CUDA build, several GB even without a GPU. `make lab TORCH=cpu` first installs the
# CPU-only build (about 200 MB) from pytorch.org's index, TORCH_INDEX=URL from another; an installed torch is kept.
TORCH ?=
TORCH_INDEX ?= $(if $(filter cpu,$(TORCH)),https://download.pytorch.org/whl/cpu)
ifneq ($(filter-out cpu,$(TORCH)),)
$(error TORCH=$(TORCH): the one choice is TORCH=cpu (PyTorch's CPU-only build); leave it unset for PyPI's build)
endif
# The student editions (notebooks/student/) have no outputs to compare: make gpu-dry-run runs each through the grader.
NBVAL := --nbval --nbval-current-env --nbval-sanitize-with notebooks/nbval_sanitize.cfg --ignore=notebooks/student
# Committed outputs come from the CPU (the same seeded code prints other floats on a GPU), with
# plain-text progress bars whose final line reads well in a saved notebook.
CPU_ONLY := COURSE_DEVICE=cpu CUDA_VISIBLE_DEVICES= PYTHONHASHSEED=0 COURSE_PROGRESS=text
# Tests and notebooks run in parallel (pytest-xdist), one notebook to a worker (notebooks/conftest.py), each worker and
# its kernels on one thread. On 2 cores the nine notebooks take 140 s this way, against 240 s one after another on two
# threads each: small models leave a second thread little to do. JOBS=1 runs everything in one process, on every thread.
JOBS ?= $(shell $(PYTHON) -c 'import os; print(min(4, os.cpu_count() or 1))')
pytest_parallel = $(if $(filter 1,$(JOBS)),$(1)/bin/python -m pytest,OMP_NUM_THREADS=1 $(1)/bin/python -m pytest -n $(JOBS) --dist loadscope)
# A processor's rounding changes what training computes in its last digits; committed outputs must not depend on it.
# make test's notebooks run on other kernels than the outputs were made with (notebooks/conftest.py picks them);
# make test-colab on PyTorch's kernels without vector instructions, which round otherwise than any other.
OTHER_KERNELS := ATEN_CPU_CAPABILITY=default

.PHONY: install lab ruff quick test test-colab site site-students slides check-browser gpu-dry-run gpu-wheels gpu-check lint unit nbval outputs notebooks benchmark checkpoints constraints clean

$(BIN)/python:
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "make needs Python >= 3.11 (found " + sys.version.split()[0] + "); set PYTHON=python3.12 or see README for plain pip")'
	$(call new_venv,$(VENV))

$(VENV)/.installed: $(BIN)/python requirements.txt pyproject.toml $(CONSTRAINTS)
	$(if $(TORCH_INDEX),$(call pip_install,$(VENV)) $(PIP_CONSTRAINTS) --no-deps --index-url $(TORCH_INDEX) torch)
	$(call pip_install,$(VENV)) $(PIP_CONSTRAINTS) -e ".[test]"
	@touch $@

install: $(VENV)/.installed

lab: install
	$(call pip_install,$(VENV)) $(PIP_CONSTRAINTS) -e ".[test,lab]"
	$(BIN)/jupyter lab notebooks/student/01_attention.ipynb

ruff: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

lint: ruff
	$(BIN)/basedpyright --project pyproject.toml --pythonpath $(BIN)/python

# The quick tier: what a change to the package needs first, in about a minute on two cores; the type check
# (basedpyright, about 20 s more) waits for make lint or make test.
quick: ruff
	$(if $(filter 1,$(JOBS)),,OMP_NUM_THREADS=1) $(BIN)/python -m pytest -p no:nbval tests -m "not slow" -q $(if $(filter 1,$(JOBS)),,-n $(JOBS))

unit: install
	$(CPU_ONLY) $(call pytest_parallel,$(VENV)) tests -m "not dry_run" -q

nbval: install
	$(CPU_ONLY) $(call pytest_parallel,$(VENV)) notebooks $(NBVAL) -q

# The type check (one process, about 20 s) runs beside the tests, whose workers leave a core free now and then; the
# tests marked dry_run check the GPU tools on the CPU and run in make gpu-dry-run.
# TESTS_REMOTE_ANSWERS=1: every checker's test runs twice in the one session (tests/conftest.py), the second time
# [remote], as the grader runs the answers: across a link (course_utils.remote), arguments and results crossing as data.
test: ruff
	$(BIN)/basedpyright --project pyproject.toml --pythonpath $(BIN)/python > $(VENV)/basedpyright.log 2>&1 & typing=$$!; \
	TESTS_REMOTE_ANSWERS=1 $(CPU_ONLY) $(call pytest_parallel,$(VENV)) tests notebooks $(NBVAL) -m "not dry_run" -q; \
	tests=$$?; wait $$typing; typed=$$?; echo "basedpyright:"; cat $(VENV)/basedpyright.log; exit $$((tests || typed))

outputs: install
	$(CPU_ONLY) $(BIN)/python notebooks/build.py --execute
	$(BIN)/python tools/lesson_times.py
	$(BIN)/python tools/lesson_quotes.py

notebooks: install
	$(BIN)/python notebooks/build.py

# A second environment with Colab's (older) versions, which CI's make gpu-dry-run runs in: every student edition
# (every cell but the exercises' stubs) and the training chapters' complete editions (06-08), 3 training steps each.
# make test-colab runs every complete edition there, training included, on PyTorch's plain kernels (OTHER_KERNELS),
# every compared output matching (about a quarter of an hour on two cores: run it after changing .ci/constraints-colab.txt).
# Only the packages that file names are Colab's; the others (pytest, nbclient, ...) install at their newest.
COLAB_VENV := .venv-colab
$(COLAB_VENV)/bin/python:
	$(call new_venv,$(COLAB_VENV))
	UV=$(UV) .ci/install-torch $(COLAB_VENV)/bin/python

$(COLAB_VENV)/.installed: $(COLAB_VENV)/bin/python requirements.txt pyproject.toml .ci/constraints-colab.txt
	$(call pip_install,$(COLAB_VENV)) -c .ci/constraints-colab.txt -e ".[test]"
	@touch $@

test-colab: $(COLAB_VENV)/.installed
	$(CPU_ONLY) $(OTHER_KERNELS) $(call pytest_parallel,$(COLAB_VENV)) notebooks $(NBVAL) -q

# On Colab's libraries (so that the notebooks' cells run on both sets of versions: make test's nbval on CI's), every
# student edition runs through the grader, as a class that skips training would run it; the complete editions of
# the chapters that train live only without SKIP_TRAINING (06-08) run too, training. And, last in the same pool of
# kernels, as on a GPU without bfloat16 (Colab's T4), float16 with a gradient scaler: chapter 06 (the
# encoder-decoder, masks and cross-attention, as 08 trains it) and chapter 10 (the GPT, as 07 trains it, and Llama);
# 07 and 08 at their GPU sizes would add minutes of float16 emulated by the CPU for the same code.
gpu-dry-run: $(COLAB_VENV)/.installed
	PYTHONHASHSEED=0 $(COLAB_VENV)/bin/python tools/gpu_dry_run.py --jobs $(JOBS) --float16-too 06 10

gpu-wheels:
	tools/gpu_wheels.sh

# The GPU machine's own Python (which has PyTorch with CUDA), no .venv: the wheels of `make gpu-wheels`, if carried
# along in .whl/, go into a folder of their own first.
GPU_SITE := /tmp/course-site
gpu-check:
	@$(PYTHON) tools/gpu_check.py --preflight $(GPU_CHECK_ARGS)
	@if [ -d .whl ]; then $(PYTHON) -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $(GPU_SITE) .whl/*.whl; fi
	PYTHONPATH=$(GPU_SITE):$(CURDIR) $(PYTHON) tools/gpu_check.py $(if $(PARTS),--parts $(PARTS)) $(GPU_CHECK_ARGS)

# The website: Sphinx with MyST-NB and the Book theme, from the committed outputs; fetches nothing from another host.
site: install
	$(call pip_install,$(VENV)) $(PIP_CONSTRAINTS) -e ".[test,site]"
	$(BIN)/python tools/build_site.py

# The same site without the Teaching section (the guide, the lesson plans with the polls' answers): for students.
site-students: install
	$(call pip_install,$(VENV)) $(PIP_CONSTRAINTS) -e ".[test,site]"
	$(BIN)/python tools/build_site.py --students

slides: install
	$(call pip_install,$(VENV)) $(PIP_CONSTRAINTS) -e ".[test,slides]"
	$(BIN)/python tools/build_slides.py

# Needs Chromium (Debian/Ubuntu: apt-get install chromium). Screenshots land in build/browser-check/,
# build/site-check/, build/slides-check/ and build/rise-check/.
check-browser: site slides
	$(call pip_install,$(VENV)) $(PIP_CONSTRAINTS) -e ".[test,lab,site,slides,browser]"
	$(BIN)/python tests/browser/check_offline.py
	$(BIN)/python tests/browser/check_site.py
	$(BIN)/python tests/browser/check_slides.py
	$(BIN)/python tests/browser/check_rise.py

benchmark: install
	$(BIN)/python benchmarks/bench_transformer.py

checkpoints: install
	$(CPU_ONLY) $(BIN)/python tools/build_checkpoints.py

constraints: install
	$(if $(UV),$(UV) pip freeze --python $(BIN)/python,$(BIN)/python -m pip freeze) --exclude-editable | sed 's/+cpu$$//' | grep -v '^-e' > $(CONSTRAINTS).new
	@echo "review and move $(CONSTRAINTS).new to $(CONSTRAINTS)"

clean:
	rm -rf $(VENV) build *.egg-info
