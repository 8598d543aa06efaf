# kubevirt-redfish. `make run` serves the demo; `make test` runs every test tier.
SHELL := /bin/bash
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
GO ?= go

.PHONY: all build run tools deps test test-unit test-integration vet fmt clean conformance

all: build

build: ## the server binary, in bin/
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/kubevirt-redfish ./cmd/kubevirt-redfish

run: ## the demo: an in-memory cluster with simulated VMs, on http://127.0.0.1:8000
	$(GO) run -ldflags '$(LDFLAGS)' ./cmd/kubevirt-redfish --demo --listen 127.0.0.1:8000

tools: ## build (once, cached) kube-apiserver, etcd and the KubeVirt/CDI CRDs the tests use
	hack/tools.sh build

deps: ## the Debian packages of the real clients the tests drive (python3-sushy, redfishtool)
	hack/deps.sh

# Every test tier: unit and table tests (with the race detector), then the tests against a real
# kube-apiserver + etcd and the real clients. The tools are built first when missing.
test: vet
	hack/deps.sh
	eval "$$(hack/tools.sh env)" && \
	$(GO) test -race -count=1 ./pkg/... ./cmd/... && \
	$(GO) test -count=1 -timeout 30m ./test/...

test-unit:
	$(GO) test -race -count=1 ./pkg/... ./cmd/...

test-integration:
	eval "$$(hack/tools.sh env)" && $(GO) test -count=1 -timeout 30m -v ./test/...

# The DMTF Service, Protocol and Interop (Ironic profile) validators against the demo and the
# real-apiserver backends on 127.0.0.1; see docs/conformance.md. Exits 4 when the tools are absent.
conformance:
	hack/conformance.sh $(BACKENDS)

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go' | grep -v '^tools/'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin
