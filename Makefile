# The course in a few commands. `make run` runs every notebook; `make test` passes the tests.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
CONSTRAINTS := requirements/constraints.txt
INSTALLED := $(VENV)/.installed
CLUSTER := scripts/with-ray-cluster.sh

# Offline by default: never let a library wait on the Hub. COURSE_SOURCES=real turns this off.
ifneq ($(COURSE_SOURCES),real)
export HF_HUB_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
endif
export TOKENIZERS_PARALLELISM := false
export PYTHONUNBUFFERED := 1

.PHONY: help setup data run test lab lint lock clean

help: ## list the commands
	@grep -hE '^[a-z]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\n", $$1, $$2}'

setup: $(INSTALLED) ## create .venv and install the pinned packages

$(INSTALLED): pyproject.toml $(CONSTRAINTS)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "installing pinned packages into $(VENV) (a few minutes the first time)"
	@start=$$(date +%s); \
	$(BIN)/pip install --quiet --disable-pip-version-check -c $(CONSTRAINTS) torch && \
	$(BIN)/pip install --quiet --disable-pip-version-check -c $(CONSTRAINTS) -e ".[dev]" && \
	echo "installed in $$(( $$(date +%s) - start )) s"
	@touch $@

data: setup ## build the offline stand-in data and model in data/ (about 2 minutes, once)
	$(BIN)/python -m helpers.build

run: data ## run the whole course on a local 2-node Ray cluster; print times and accuracies
	$(CLUSTER) $(BIN)/python scripts/run_course.py

test: data ## lint, unit tests, and every notebook under nbmake on a local 2-node Ray cluster
	$(BIN)/ruff check .
	$(BIN)/ruff format --check helpers tests scripts
	$(CLUSTER) $(BIN)/pytest tests --nbmake notebooks --nbmake-timeout=900 -p no:cacheprovider

lab: data ## open JupyterLab on the course (notebooks start their own local Ray)
	$(BIN)/jupyter lab notebooks

lint: setup ## fix what ruff can fix
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format helpers tests scripts

lock: setup ## rewrite the constraints file from the current .venv
	@{ head -2 $(CONSTRAINTS); $(BIN)/pip freeze --exclude-editable | sed 's/^torch==\(.*\)+cpu$$/torch==\1/'; } > $(CONSTRAINTS).new
	@mv $(CONSTRAINTS).new $(CONSTRAINTS)

clean: ## remove results and the local cluster's state (keeps .venv and data/)
	$(CLUSTER) stop
	rm -rf results .cluster
