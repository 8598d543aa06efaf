# kubevirt-redfish container image.
#
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) \
#     -t quay.io/kubevirt-redfish/kubevirt-redfish:dev .
#   (podman/buildah build work the same way)
#
# Multi-platform: docker buildx build --platform linux/amd64,linux/arm64 ... (the Go toolchain
# cross-compiles on the build platform; no emulation needed).

# ---- build ---------------------------------------------------------------------------------
# The Go version must satisfy go.mod's `go` directive.
FROM --platform=$BUILDPLATFORM golang:1.26.8-bookworm AS build

# Set by BuildKit/buildah from --platform; the fallbacks below cover builders that do not.
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=dev

WORKDIR /src

# Modules first, so that source edits do not invalidate the download layer.
COPY go.mod go.sum ./
RUN go mod download

COPY cmd/ cmd/
COPY pkg/ pkg/

# Static, reproducible binary: no cgo, no local paths, no symbol tables; the version is
# stamped into main.version (what `kubevirt-redfish --version` prints).
RUN CGO_ENABLED=0 GOOS=${TARGETOS:-linux} GOARCH=${TARGETARCH:-amd64} \
    go build -mod=readonly -trimpath -buildvcs=false \
      -ldflags "-s -w -X main.version=${VERSION}" \
      -o /out/kubevirt-redfish ./cmd/kubevirt-redfish

# ---- run -----------------------------------------------------------------------------------
# distroless/static: CA certificates, tzdata and /etc/passwd with the nonroot user; no shell,
# no package manager.
FROM gcr.io/distroless/static-debian12:nonroot

ARG VERSION=dev
LABEL org.opencontainers.image.title="kubevirt-redfish" \
      org.opencontainers.image.description="Redfish BMC for KubeVirt virtual machines" \
      org.opencontainers.image.source="https://github.com/kubevirt-redfish/kubevirt-redfish" \
      org.opencontainers.image.version="${VERSION}"

COPY --from=build /out/kubevirt-redfish /usr/local/bin/kubevirt-redfish

# Numeric, so that Kubernetes can verify runAsNonRoot without resolving a user name.
USER 65532:65532
EXPOSE 8443

ENTRYPOINT ["/usr/local/bin/kubevirt-redfish"]
