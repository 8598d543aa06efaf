# kubevirt-redfish. `make run` serves the demo; `make test` runs every test tier.
SHELL := /bin/bash
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
GO ?= go

.PHONY: all build run tools deps test test-unit test-integration vet fmt clean conformance bench

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
	$(GO) test -count=1 -timeout 30m ./test/... && \
	$(MAKE) fuzz FUZZTIME=10s

test-unit:
	$(GO) test -race -count=1 ./pkg/... ./cmd/...

test-integration:
	eval "$$(hack/tools.sh env)" && $(GO) test -count=1 -timeout 30m -v ./test/...

# The benchmark of BENCHMARKS.md: kube-apiserver + etcd with N = 100, 1,000 and 10,000 VMs, the
# server binary and a bare net/http ceiling under the same load (~10 min on 2 cores). Results in
# bin/bench/results.md. BENCH_FLAGS passes options to bin/krf-bench (-n, -d, -c, ...: -help).
bench: build
	$(GO) build -o bin/krf-bench ./bench
	eval "$$(hack/tools.sh env)" && bin/krf-bench -server bin/kubevirt-redfish -out bin/bench $(BENCH_FLAGS)

# The DMTF Service, Protocol and Interop (Ironic profile) validators against the demo and the
# real-apiserver backends on 127.0.0.1; see docs/conformance.md. Exits 4 when the tools are absent.
conformance:
	hack/conformance.sh $(BACKENDS)

# Fuzzing (RELIABILITY.md): every request-body decoder, the system-id and query parsers, config
# loading and the whole HTTP handler, each for FUZZTIME (their seeds alone run in every `go test`).
# A failing input is saved under the package's testdata/fuzz/ and fails the run. Minimizing each
# new interesting input is capped at 2 s (the default, 60 s, would eat a bounded run).
FUZZTIME ?= 20s
FUZZ_TARGETS := pkg/server:FuzzDecodeReset pkg/server:FuzzDecodeSystemPatch pkg/server:FuzzDecodeSystemSettings \
	pkg/server:FuzzDecodeInsertMedia pkg/server:FuzzEjectMediaBody pkg/server:FuzzDecodeLogin \
	pkg/server:FuzzDecodeSecureBootPatch pkg/server:FuzzParseQuery pkg/server:FuzzHTTP \
	pkg/kubevirt:FuzzParseSystemID pkg/kubevirt:FuzzSystemIDRoundTrip pkg/config:FuzzParse
.PHONY: fuzz reliability soak
fuzz:
	@mkdir -p bin/fuzz; set -eo pipefail; for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; fn=$${t##*:}; \
		$(GO) test -run='^$$' -fuzz="^$$fn\$$" -fuzztime=$(FUZZTIME) -fuzzminimizetime=2s ./$$pkg > bin/fuzz/$$fn.log 2>&1 || { cat bin/fuzz/$$fn.log; exit 1; }; \
		echo "$$fn ($$pkg, $(FUZZTIME)): $$(grep -o 'execs: [0-9]*' bin/fuzz/$$fn.log | tail -1 | cut -d' ' -f2) executions"; \
	done

# Reliability (RELIABILITY.md): the fuzz targets, then input limits, slowloris, apiserver outage,
# crash restart, races, two replicas and a 75 s soak against a real kube-apiserver, with the race
# detector (about 15 minutes on 2 cores). Figures go to bin/reliability/.
reliability: fuzz
	eval "$$(hack/tools.sh env)" && KRF_RELIABILITY_OUT=$(CURDIR)/bin/reliability \
	$(GO) test -race -count=1 -timeout 40m -v ./test/reliability/

# The long soak: SOAK (10 minutes) of steady mixed load on the server binary; the RSS and
# goroutine curve goes to bin/reliability/soak.csv.
SOAK ?= 10m
soak:
	eval "$$(hack/tools.sh env)" && KRF_SOAK_DURATION=$(SOAK) KRF_RELIABILITY_OUT=$(CURDIR)/bin/reliability \
	$(GO) test -count=1 -timeout 40m -run '^TestSoak$$' -v ./test/reliability/

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go' | grep -v '^tools/'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	$(GO) vet ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin
