# Every target calls the eksinf CLI or pytest; CI does nothing `make` cannot do locally.
EKSINF ?= .venv/bin/eksinf
PYTEST ?= .venv/bin/pytest
RUFF ?= .venv/bin/ruff
# The offline mirror (charts; pinned manifests in manifests/ beside it): a fresh clone has no cache.
CHART_MIRROR ?= ../shared/charts

.PHONY: help render guard verify lint bundles push test check

help:
	@echo "render  render configs/ from components.yaml, versions.env and render/"
	@echo "guard   check a fresh render for Helm features that do not survive flattening"
	@echo "verify  fail if configs/ differs from a fresh render, or the API server would refuse a unit (validate)"
	@echo "bundles write bundles/<component>.tar.gz (reproducible)"
	@echo "push    push each bundle to \$$EKSINF_REGISTRY (default: oci-layout:.eksinf/oci)"
	@echo "test    run the test suite"
	@echo "lint    check profile links and cross-component invariants on configs/"
	@echo "check   lint, format check, tests, verify, validate and eksinf lint"

render:
	$(EKSINF) render --chart-mirror $(CHART_MIRROR)

guard:
	$(EKSINF) guard

verify:
	$(EKSINF) verify --chart-mirror $(CHART_MIRROR)
	$(EKSINF) validate --chart-mirror $(CHART_MIRROR)

lint:
	$(EKSINF) lint

bundles:
	$(EKSINF) bundle

push:
	$(EKSINF) push

test:
	$(PYTEST) -q

check:
	$(RUFF) check .
	$(RUFF) format --check .
	$(PYTEST) -q
	$(EKSINF) verify --chart-mirror $(CHART_MIRROR)
	$(EKSINF) validate --chart-mirror $(CHART_MIRROR)
	$(EKSINF) lint
