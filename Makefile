# The course in a few commands. `make run` runs every notebook; `make test` passes the tests.
SHELL := /bin/bash
.DEFAULT_GOAL := help

# The environment the course runs in: a venv made here (default), or any other prefix that has
# bin/python, a conda environment for example: `make test VENV=$$CONDA_PREFIX`. Every command below,
# the local Ray cluster included, uses it.
VENV ?= .venv
export VENV
# The Python that `make setup` builds .venv with: PYTHON=... if you say so, else the newest supported python3.X on
# the PATH, else python3 if it fits (scripts/check_python.py --find; the versions come from pyproject.toml).
PYTHON ?= $(shell python3 scripts/check_python.py --find 2>/dev/null)
LOWEST_PYTHON := $(shell sed -n 's/^requires-python = ">=\([0-9.]*\),.*/\1/p' pyproject.toml)
BIN := $(VENV)/bin
LOCK := requirements/lock.txt
OVERRIDES := requirements/overrides.txt
INSTALLED := $(VENV)/.course-installed
CLUSTER := scripts/with-ray-cluster.sh
# Runs a step of `make test` and records its time for the table `.ci/run` ends with (results/steps.tsv)
STEP := $(BIN)/python scripts/steps.py run
LAB_IP ?= 127.0.0.1  # where `make lab` listens; an instructor serving a room sets another address on purpose
LAB_PORT ?= 8888  # JupyterLab takes the next free one if this one is busy
LAB_DIR ?= notebooks  # the folder the lab opens (the browser test serves copies of the notebooks)
MLFLOW_UI_PORT ?= 5000  # where `make mlflow` serves MLflow's UI, on 127.0.0.1 (`make lab` takes a free port itself)
# torch 2.13.0: the CPU build on Linux without an NVIDIA GPU (no CUDA libraries), else the default build
# (CUDA on a Linux GPU machine, the only build on macOS). Set TORCH_INDEX= to always take the default.
TORCH_INDEX ?= $(shell [ "$$(uname -s)" = Linux ] && ! command -v nvidia-smi >/dev/null 2>&1 && echo https://download.pytorch.org/whl/cpu)

# The COURSE_* settings this file reads, read as the course reads them: declared and checked in course/settings.py (a
# wrong value stops make here, with the fix). Any Python runs it (the standard library only): the environment's, else
# the one `make setup` takes (PYTHON); with none, nothing is checked, and `make setup` says what to install.
SETTINGS_PYTHON := $(if $(wildcard $(BIN)/python),$(BIN)/python,$(PYTHON))
setting = $(call checked,$(if $(SETTINGS_PYTHON),$(shell out=$$('$(SETTINGS_PYTHON)' -S course/settings.py get \
  $(1)='$($(1))' 2>&1); case $$? in (0) echo "$$out" ;; (2) echo "$$out (refused)" ;; esac)))
checked = $(if $(filter (refused),$(1)),$(error $(filter-out (refused),$(1))),$(1))
SOURCES := $(call setting,COURSE_SOURCES)
VERBOSE := $(call setting,COURSE_VERBOSE)

# Offline by default: never let a library wait on the Hub. COURSE_SOURCES=real turns this off.
ifneq ($(SOURCES),real)
export HF_HUB_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
endif
export TOKENIZERS_PARALLELISM := false
# Quiet libraries (course/settings.py's QUIET_LIBRARIES, which course.cluster gives every Ray worker too): no progress
# bars, no load reports. COURSE_VERBOSE=1 keeps them all.
ifneq ($(VERBOSE),1)
$(foreach quiet,$(if $(SETTINGS_PYTHON),$(shell '$(SETTINGS_PYTHON)' -S course/settings.py quiet)),$(eval export $(quiet)))
endif
export PYTHONUNBUFFERED := 1

.PHONY: help setup hooks data run smoke solutions test site check doctor bench lab mlflow latest lint lock clean \
  sources minimal-linux rehearse gpu-check

help: ## list the commands
	@grep -hE '^[a-z]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

setup: $(INSTALLED) ## create .venv (or use VENV=...) and install the locked packages

# uv installs with --compile-bytecode: where PYTHONDONTWRITEBYTECODE=1 is set (many containers, this test machine),
# nothing else would ever write the .pyc files, and every Ray worker would compile pandas, torch and Ray from source.
$(INSTALLED): pyproject.toml $(LOCK) $(OVERRIDES) scripts/check_python.py
	@if [ -x $(BIN)/python ] && [ -f $(VENV)/pyvenv.cfg ] && ! $(BIN)/python -m pip --version >/dev/null 2>&1; then \
	  echo "$(VENV) has no working pip (an earlier setup stopped half-way): making it again"; rm -rf $(VENV); fi; \
	py=$(BIN)/python; [ -x "$$py" ] || py="$(PYTHON)"; \
	if [ -z "$$py" ]; then \
	  if command -v python3 >/dev/null; then python3 scripts/check_python.py --find >/dev/null; else \
	    echo "No python3 on the PATH. This course runs on Python 3.11 to 3.14: install one (https://docs.astral.sh/uv/, then uv python install 3.13)." >&2; fi; \
	  exit 1; fi; \
	"$$py" scripts/check_python.py $$([ -x $(BIN)/python ] || echo --venv) || exit 1; \
	if [ ! -x $(BIN)/python ]; then echo "creating $(VENV) with $$py ($$("$$py" -V))"; \
	  "$$py" -m venv $(VENV) || { rm -rf $(VENV); exit 1; }; fi
	@echo "installing the locked packages into $(VENV) (about a minute the first time)"
	@start=$$(date +%s); set -e; index="$(TORCH_INDEX)"; \
	if [ -n "$$index" ] && ! $(BIN)/python -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=5)" \
	    "$$index/torch/" >/dev/null 2>&1; then \
	  echo "($$index cannot be reached: torch comes from the default index)"; index=; fi; \
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --no-deps \
	  $${index:+--index-url $$index --extra-index-url https://pypi.org/simple} torch==2.13.0; \
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c $(LOCK) uv; \
	$(BIN)/python -m uv pip install --quiet --python $(BIN)/python -c $(LOCK) --override $(OVERRIDES) \
	  --compile-bytecode -e ".[playbook,lab,dev]"; \
	echo "installed in $$(( $$(date +%s) - start )) s"
	@$(MAKE) --no-print-directory hooks
	@touch $@

hooks: ## strip notebook outputs on commit (nbstripout as a git filter; `make setup` runs it)
	@# Then one status: the first after a clone passes every notebook through the filter (10 s here), since git cannot
	@# trust files written in the same second as its index; done here once, not within results.run_facts' time limit
	@if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then \
	  $(BIN)/python -m nbstripout --install --attributes .gitattributes && \
	  { git status --porcelain --untracked-files=no >/dev/null 2>&1 || true; } && \
	  echo "git strips notebook outputs on commit (nbstripout filter); your working copy keeps them"; \
	fi

data: setup ## build the offline stand-in data and model in data/ (about a minute, once)
	$(BIN)/python -m course.build

run: data ## run the whole course on a local 2-node Ray cluster; print times and accuracies
	$(CLUSTER) $(BIN)/python scripts/run_course.py

# The smoke size (COURSE_SMOKE=1: every code path, at its smallest) through nbmake, as a user's own CI would run it; the
# headlines and verdicts go to results/smoke/, not beside `make run`'s. pytest's durations table gives each notebook's time.
smoke: data ## every notebook at the smoke size through nbmake on the local 2-node cluster, in minutes; each one's time
	COURSE_SMOKE=1 COURSE_RESULTS_DIR=$(CURDIR)/results/smoke $(CLUSTER) $(BIN)/pytest -p no:cacheprovider -o addopts= \
	  -q -ra --durations=0 --durations-min=1 --nbmake --nbmake-timeout=600 notebooks/

solutions: data ## run the exercises' solutions (solutions/) on the local cluster: every check must pass
	$(CLUSTER) $(BIN)/python scripts/run_course.py solutions/*.ipynb --executed results/executed-solutions

# The tests' cluster is a real cluster in small: its worker node shares no files with this checkout (see CLUSTER). The
# notebooks run at COURSE_TEST_SIZE: the smoke size (every code path, on every landing), or the course size
# (COURSE_TEST_SIZE=course: floors held and claims checked, what learners see; the weekly workflow). Every lesson's
# reads of the real sources run in the first session (tests/cluster/test_real_sources.py); whole notebooks on them,
# `make rehearse`.
test: data ## everything: lint, format, unit tests, a cluster whose worker node shares no files, every notebook (MARK=cluster: one group)
	@# A new table of steps (results/steps.tsv), unless .ci/run, which times its own steps around it, keeps its rows
	@[ -n "$$STEPS_KEEP" ] || $(BIN)/python scripts/steps.py clear
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(STEP) "the first session" -- env COURSE_RAY_ISOLATED_NODE=1 $(CLUSTER) $(BIN)/pytest -p no:cacheprovider \
	  $(if $(MARK),-m "$(MARK)") --ignore=tests/site --ignore=tests/hosted tests
	@# One lesson alone on a stand-in of a hosted runtime (tests/hosted), with no cluster on the machine: its Ray is
	@# the one its notebook starts; and 02c on one node, where no node can leave. 5: MARK selected none of its tests.
	$(STEP) "the hosted-runtime test" -- $(BIN)/pytest -p no:cacheprovider $(if $(MARK),-m "$(MARK)") tests/hosted \
	  || [ $$? = 5 ]
	@# The site, from the notebooks just executed, checked in Chromium (tests/site; skipped without Chromium). 5: MARK
	@# selected none of its tests.
	$(STEP) "the site" -- bash -c '$(MAKE) --no-print-directory site && \
	  { $(BIN)/pytest -p no:cacheprovider $(if $(MARK),-m "$(MARK)") tests/site || [ $$? = 5 ]; }'

# The real-sources rehearsal: notebooks with COURSE_SOURCES=real against stand-ins of the Hub and S3 on 127.0.0.1, on
# a cluster of their own per size (the peak memory it prints is then a learner's). SIZE: smoke, course, or both in
# turn (the default; COURSE_SMOKE=1 alone: smoke). LESSONS: the notebooks, by number ("03 04"; 06 serves 03's model:
# name 03 before it); unset, every one. Each size's figures (each notebook's outcome, time, peak memory, checkpoint
# disk) go to results/rehearsal/figures-<size>.md, its executed copies beside them (the weekly workflow keeps both).
SIZE ?= $(if $(filter 1,$(call setting,COURSE_SMOKE)),smoke,smoke course)
REHEARSED = $(if $(strip $(LESSONS)),$(foreach lesson,$(LESSONS),$(or $(patsubst notebooks/%,results/executed-real/%,\
  $(wildcard notebooks/$(lesson).ipynb notebooks/$(lesson)_*.ipynb)),$(error LESSONS: no notebook $(lesson) in \
  notebooks/ (name it by its number, such as 03)))),results/executed-real)
rehearse: data ## the notebooks on the real sources' stand-ins, smoke then course size (SIZE=, LESSONS=): times, memory, disk
	@$(if $(filter-out smoke course,$(SIZE)),$(error SIZE=$(SIZE): say smoke, course, or "smoke course"))status=0; \
	for size in $(SIZE); do \
	  echo "the real-sources rehearsal at the $$size size: $(or $(strip $(LESSONS)),every notebook)"; \
	  COURSE_SMOKE=$$([ $$size = smoke ] && echo 1 || echo 0) COURSE_RAY_ISOLATED_NODE=1 $(CLUSTER) $(BIN)/pytest \
	    -p no:cacheprovider $(if $(MARK),-m "$(MARK)") --nbmake --overwrite --nbmake-timeout=900 $(REHEARSED) \
	    || [ $$? = 5 ] || status=1; \
	done; exit $$status

# The course as a website: the executed copies of the last `make test` or `make run`, rendered with Sphinx and MyST-NB
# (site/conf.py); nothing executes. It opens from results/site/index.html, or python -m http.server -d results/site.
site: setup ## build the course's site in results/site/ from the last test's or run's executed notebooks (no execution)
	$(BIN)/python scripts/build_site.py

check: data ## the fast loop, under 2 min: lint, format (notebooks too), unit tests; no Ray, no notebooks
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/pytest -p no:cacheprovider -q -m "$(or $(MARK),not cluster and not notebook and not site)"

doctor: setup ## pre-flight of the cluster in RAY_ADDRESS (else a local Ray): versions, GPUs, storage, sources, plans
	$(BIN)/python scripts/doctor.py

# RAY_ADDRESS set: that cluster; else the local 2-node one, started and stopped around the run.
bench: data ## measure ingest, training and batch inference side by side (QUICK=1: a small run); results/bench/
	$(if $(RAY_ADDRESS),,$(CLUSTER)) $(BIN)/python scripts/bench.py $(if $(QUICK),--quick)

# Every kernel of the lab attaches to one local Ray cluster (RAY_ADDRESS set: that cluster), started with the lab and
# stopped with it; beside it MLflow's tracking server and UI on 127.0.0.1 (its address printed as it starts), where the
# lessons log their runs, stopped with it too. jupyter-config/ turns off JupyterLab's news pop-up; Ray's stack dump when a kernel is shut down is off, and so is
# the debugger's note on frozen modules that every kernel prints to the lab's terminal as it starts.
lab: data ## JupyterLab on 127.0.0.1 with its token, one local Ray cluster and MLflow's UI, all stopped with the lab
	@flags="--ip=$(strip $(LAB_IP)) --port=$(strip $(LAB_PORT))"; if [ "$$(id -u)" = 0 ]; then \
	  echo "running as root (a container?): starting JupyterLab with --allow-root"; flags="$$flags --allow-root"; fi; \
	export JUPYTER_CONFIG_PATH="$(CURDIR)/jupyter-config$${JUPYTER_CONFIG_PATH:+:$$JUPYTER_CONFIG_PATH}"; \
	export RAY_DISABLE_FAILURE_SIGNAL_HANDLER=1; \
	export PYDEVD_DISABLE_FILE_VALIDATION=1; \
	$(if $(RAY_ADDRESS),uri=$$($(BIN)/python -c 'from course import tracking; print(tracking.tracking_uri())') || exit 2; \
	  if [ "$${uri#http}" != "$$uri" ]; then echo "MLflow's UI: $$uri (the lessons' runs)"; \
	  else echo "MLflow: the lessons' runs go to $$uri (make mlflow shows them)"; fi;) \
	$(if $(RAY_ADDRESS),,$(CLUSTER)) $(BIN)/jupyter lab $(strip $(LAB_DIR)) $$flags

# The runs the lessons logged to the store in the results folder (course/tracking.py; `make run` and `make lab` log
# there through the cluster's tracking server), in MLflow's UI alone: no cluster, nothing else. Ctrl-C stops it. No job
# execution (MLflow 3's GenAI jobs, unused here): its worker processes outlived a Ctrl-C.
mlflow: setup ## MLflow's UI on 127.0.0.1 over the runs the lessons logged (results/mlflow), alone; Ctrl-C stops it
	@uri=$$($(BIN)/python -c 'from course import tracking; print(tracking.tracking_uri())') || exit 2; \
	case "$$uri" in sqlite:///*) ;; *) echo "your runs go to $$uri (COURSE_TRACKING_URI or MLFLOW_TRACKING_URI): open its \
	  own UI, or unset both for the store in the results folder" >&2; exit 2 ;; esac; \
	store=$$(dirname "$${uri#sqlite:///}"); mkdir -p "$$store/artifacts"; \
	echo "MLflow's UI over $$store: http://127.0.0.1:$(strip $(MLFLOW_UI_PORT)) (Ctrl-C stops it)"; \
	MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false exec $(BIN)/mlflow server --host 127.0.0.1 --port $(strip $(MLFLOW_UI_PORT)) --workers 1 \
	  --backend-store-uri "$$uri" --artifacts-destination "$$store/artifacts"

# On a machine with an NVIDIA GPU (docs/development.md, "On a GPU machine"): what only a GPU shows, one table, minutes.
gpu-check: data ## on a GPU machine: precision per card, a GPU checkpoint on a CPU, NCCL, every notebook (gpu, smoke), bench
	$(if $(RAY_ADDRESS),,$(CLUSTER)) $(BIN)/python scripts/gpu_check.py

minimal-linux: ## as root: setup and lesson 00 in a Debian minbase root (no procps), then nothing may be left running
	scripts/minimal-linux.sh

# Its own venv (.venv-latest) and report (results/latest/); LATEST_TESTS=check for the fast loop, LATEST_TORCH=auto|newest|locked.
latest: setup ## the tests against the newest releases of Ray, torch, transformers and the rest; the lock stays as it is
	$(BIN)/python scripts/latest.py

lint: setup ## fix what ruff can fix
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

lock: setup ## re-resolve requirements/lock.txt for every supported platform (after editing pyproject.toml)
	$(BIN)/python -m uv pip compile pyproject.toml --all-extras --universal --python-version $(LOWEST_PYTHON) \
	  --override $(OVERRIDES) --custom-compile-command "make lock" --quiet -o $(LOCK) $(if $(UPGRADE),--upgrade)

sources: ## print the data/model sources setting as the Makefile reads it
	@echo "COURSE_SOURCES=$(if $(SOURCES),$(SOURCES),standin) HF_HUB_OFFLINE=$${HF_HUB_OFFLINE:-0}"

clean: ## remove results and the local cluster's state (keeps .venv and data/)
	$(CLUSTER) stop
	rm -rf results .cluster
