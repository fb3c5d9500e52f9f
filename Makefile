# One command each: `make demo` (set up + run the main job), `make test` (set up + run every test tier).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
LOWEST ?= .venv-lowest
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: venv demo test lint unit e2e bench dev-cluster image clean

VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
## image: the controller's image from Containerfile, built with docker, podman or buildah (first that works)
IMAGE ?= ghcr.io/trainjob-advisor/trainjob-advisor:$(VERSION)
# deferred (`?=` expands at use), so `docker info` runs only for `make image`
CONTAINER_TOOL ?= $(shell for t in docker podman buildah; do command -v $$t >/dev/null 2>&1 || continue; \
  if [ $$t = docker ] && ! docker info >/dev/null 2>&1; then continue; fi; echo $$t; break; done)
IMAGE_BUILD_ARGS ?=

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[controller,sim,test,training-test]'
	rm -f $(VENV)/.installed-* && touch $(STAMP)

venv: $(STAMP)

## demo: the main job on its embedded default scenario (no external data needed)
demo: $(STAMP)
	$(BIN)/trainjob-advisor simulate --report out/demo-report

## test: lint, type-check, the import contract, the unit tier against the lowest allowed versions, then
## every test tier (e2e and reliability build/start a real API server when Go is present)
test: $(STAMP) lint unit-lowest
	@mkdir -p out
	@# the Ray sweep test needs the optional extra; where Ray cannot install, that test skips with a reason
	$(BIN)/python -c "import importlib.util as u, sys; sys.exit(u.find_spec('ray') is None)" \
	  || $(BIN)/python -m pip install --quiet -e '.[ray]' \
	  || echo "ray could not be installed here: the --ray sweep test will be skipped"
	scripts/dev-control-plane build --if-go
	$(BIN)/python -m pytest --junitxml=out/junit.xml $(PYTEST_ARGS) || { rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest: no tests collected"; else exit $$rc; fi; }

lint: $(STAMP)
	$(BIN)/ruff check advisor policies simulator tests bench scripts examples
	$(BIN)/mypy
	$(BIN)/lint-imports

unit: $(STAMP)
	$(BIN)/python -m pytest -m "not e2e" $(PYTEST_ARGS)

## unit-lowest: the unit tier with every direct dependency at the lowest version pyproject allows,
## so that a lower bound the code does not support fails here rather than on a user's install
unit-lowest:
	test -x $(LOWEST)/bin/python || $(PYTHON) -m venv $(LOWEST)
	$(LOWEST)/bin/python -m pip install --quiet --upgrade pip
	$(PYTHON) scripts/lowest-constraints sim controller test > $(LOWEST)/constraints.txt
	$(LOWEST)/bin/python -m pip install --quiet -c $(LOWEST)/constraints.txt -e '.[sim,controller,test]'
	$(LOWEST)/bin/python -m pip list --format=freeze > $(LOWEST)/installed.txt
	$(LOWEST)/bin/python -m pytest -m "not e2e" -q -p no:cacheprovider

e2e: $(STAMP)
	$(BIN)/python -m pytest tests/e2e $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python bench/forecast_bench.py --quick
	$(BIN)/python bench/policy_bench.py

dev-cluster: $(STAMP)
	scripts/dev-control-plane up

image:
	@test -n "$(CONTAINER_TOOL)" || { echo "make image: needs docker (with a running daemon), podman or buildah on PATH" >&2; exit 2; }
	$(CONTAINER_TOOL) build -f Containerfile --build-arg VERSION=$(VERSION) -t $(IMAGE) $(IMAGE_BUILD_ARGS) .

clean:
	rm -rf $(VENV) $(LOWEST) out .pytest_cache .mypy_cache .ruff_cache
