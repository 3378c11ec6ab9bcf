# Every target calls the eksinf CLI or a dev tool from .venv; CI does nothing `make` cannot do
# locally: `.ci/run` is `bash .ci/setup`, then `make verify`, then the test suite.
# The offline mirror is the one mirror setting (--chart-mirror, $EKSINF_CHART_MIRROR, mirror:
# in .eksinf/config.yaml, else ../shared/charts beside the stack).
EKSINF ?= .venv/bin/eksinf
PYTEST ?= .venv/bin/pytest
RUFF ?= .venv/bin/ruff
MYPY ?= .venv/bin/mypy

.PHONY: help render guard verify code-check stack-check lint bundles push test check

help:
	@echo "render       render configs/ from components.yaml, versions.env and render/"
	@echo "guard        check a fresh render for Helm features that do not survive flattening"
	@echo "verify       what .ci/run runs except the test suite: code-check, then stack-check"
	@echo "code-check   ruff (lint and format) and mypy"
	@echo "stack-check  configs/ equals a fresh render (no cache); the API server admits every unit"
	@echo "             (validate, and validate --server local on a real kube-apiserver); lint;"
	@echo "             sandbox up twice (the second changes nothing)"
	@echo "bundles      write bundles/<component>.tar.gz (reproducible)"
	@echo "push         push each bundle to \$$EKSINF_REGISTRY (default: oci-layout:.eksinf/oci)"
	@echo "test         run the test suite"
	@echo "lint         check profile links and cross-component invariants on configs/"
	@echo "check        verify and test: all of .ci/run but the setup"

render:
	$(EKSINF) render

guard:
	$(EKSINF) guard

verify: code-check stack-check

code-check:
	$(RUFF) check .
	$(RUFF) format --check .
	$(MYPY)

stack-check:
	EKSINF_NO_CACHE=1 $(EKSINF) verify
	$(EKSINF) validate
	$(EKSINF) validate --server local
	$(EKSINF) lint
	$(EKSINF) sandbox up
	$(EKSINF) sandbox up | grep 'nothing changed'

lint:
	$(EKSINF) lint

bundles:
	$(EKSINF) bundle

push:
	$(EKSINF) push

test:
	$(PYTEST) -q

check: verify test
