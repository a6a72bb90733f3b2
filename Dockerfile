# syntax=docker/dockerfile:1

# ---- build stage: one binary, the helm-operator (cmd/manager, helm-operator-plugins pinned in
# go.mod) and the sidecar (sidecar/, run as `manager sidecar`, the pod's second container): the
# node keeps one binary's pages for both containers
# (docs/bench/findings.md, "One binary for both containers")
FROM --platform=$BUILDPLATFORM golang:1.26 AS builder
ARG TARGETOS
ARG TARGETARCH

WORKDIR /workspace

# Download the modules first so that this layer is reused while only sources change.
COPY go.mod go.sum ./
RUN go mod download

COPY . .

# Static binaries (distroless/static has no libc). The helm-operator is stamped with the
# helm-operator-plugins version that go.mod resolves, so its startup log reports it.
RUN set -eu; \
    export CGO_ENABLED=0 GOOS="${TARGETOS:-linux}" GOARCH="${TARGETARCH:-$(go env GOARCH)}"; \
    go build -trimpath -ldflags "-s -w" -o /out/manager ./cmd/manager

# ---- runtime stage
FROM gcr.io/distroless/static:nonroot

# watches.yaml refers to its charts as relative paths (helm-charts/<kind>), which the
# helm-operator resolves against its working directory.
WORKDIR /opt/helm
COPY --from=builder /out/manager /manager
COPY watches.yaml /opt/helm/watches.yaml
COPY helm-charts/ /opt/helm/helm-charts/

# Numeric user so that the kubelet can check runAsNonRoot.
USER 65532:65532

ENTRYPOINT ["/manager"]
