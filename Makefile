# warpdrive-operator: a Helm-based operator (operator-sdk Helm layout) with a Go sidecar.
# `make help` lists the targets.

# Image of the manager pod (helm-operator + sidecar, built from one Dockerfile).
IMG ?= warpdrive-operator:latest
# The pod sandbox image of the local cluster's real node (make node-up).
PAUSE_IMAGE ?= localhost/warpdrive-pause:1

# Where tools and binaries go. Everything is built from the Go module proxy at the
# versions pinned in go.mod and hack/tools/*/go.mod; nothing is downloaded from release pages.
LOCALBIN ?= $(CURDIR)/bin
export PATH := $(LOCALBIN):$(PATH)

# The local cluster (make cluster-up) keeps its state, logs and kubeconfig here.
CLUSTER_DIR ?= $(CURDIR)/.cluster
LOCAL_KUBECONFIG := $(CLUSTER_DIR)/kubeconfig
# make run / install / deploy talk to $KUBECONFIG, and to the local cluster when it is unset.
KUBECONFIG ?= $(LOCAL_KUBECONFIG)

KUBE_VERSION := $(shell awk '$$1=="require" && $$2=="k8s.io/kubernetes" {print $$3}' hack/tools/kube/go.mod)
KUBE_MINOR := $(word 2,$(subst ., ,$(KUBE_VERSION)))
KUBE_LDFLAGS := $(foreach p,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
	-X $(p).gitVersion=$(KUBE_VERSION) -X $(p).gitMajor=1 -X $(p).gitMinor=$(KUBE_MINOR) -X $(p).gitTreeState=clean)

KUBECTL ?= $(LOCALBIN)/kubectl
KUSTOMIZE ?= $(LOCALBIN)/kustomize
GOLANGCI_LINT ?= $(LOCALBIN)/golangci-lint
KUBE_SCORE ?= $(LOCALBIN)/kube-score
GO_TEST_FLAGS ?= -count=1

SHELL = /usr/bin/env bash -o pipefail
.SHELLFLAGS = -ec

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Display this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: ## Generate from watches.yaml and the charts the CRDs and every file that lists the kinds (config/, PROJECT).
	go run ./hack/crdgen -watches watches.yaml -charts helm-charts -out config/crd/bases
	go run ./hack/kindgen

# The API version of make add-kind is VERSION only when given on the command line: the
# default VERSION is the bundle's (make bundle).
ADD_KIND_VERSION = $(if $(filter command line,$(origin VERSION)),$(VERSION),v1alpha1)

.PHONY: add-kind
add-kind: $(KUBE_SCORE) ## Make an existing chart a kind: CHART=<chart dir or .tgz> KIND=<Kind> GROUP=<api group> [VERSION=v1alpha1]; runs make manifests, says what to review.
	go run ./hack/addkind -chart "$(CHART)" -kind "$(KIND)" -group "$(GROUP)" -version "$(ADD_KIND_VERSION)"

# VERSION is the new API version only when given on the command line: the default VERSION
# is the bundle's (make bundle).
.PHONY: add-version
add-version: ## Add an API version to a kind: KIND=<Kind> VERSION=<version> [CHART=<chart dir or .tgz>]; the new version is stored, the old ones served; runs make manifests, says what to review.
	go run ./hack/addversion -kind "$(KIND)" -version "$(if $(filter command line,$(origin VERSION)),$(VERSION))" -chart "$(CHART)"

.PHONY: remove-version
remove-version: ## Remove a kind's oldest API version: KIND=<Kind> VERSION=<version>; refused while the CRD's status.storedVersions on the cluster of $KUBECONFIG lists it; runs make manifests.
	go run ./hack/removeversion -kind "$(KIND)" -version "$(if $(filter command line,$(origin VERSION)),$(VERSION))" -kubeconfig "$(KUBECONFIG)"

.PHONY: fmt
fmt: ## Run go fmt.
	go fmt ./...

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

# The tiers, cheapest first; each can be run alone.
UNIT_PACKAGES = $$(go list ./... | grep -v -e /test/e2e -e /test/deploy -e /test/faults -e /test/security -e /test/integration)

.PHONY: test
# The e2e suite runs once, in the deploy e2e, as the operator's ServiceAccount: what it
# checks run as cluster-admin (make test-e2e) it checks there too, and that the RBAC of
# config/rbac suffices for it.
test: build helm-operator tools ## Run every test: unit, lint, integration, attack suite, the deploy e2e (the e2e suite as the operator's ServiceAccount, with its pod on a real node) and faults on the local cluster (started if needed).
	go vet ./...
	$(MAKE) test-unit
	$(MAKE) lint
	$(MAKE) bundle
	$(MAKE) test-integration
	$(MAKE) test-security
	$(MAKE) node-up image-load 2>&1 | tee $(CLUSTER_DIR)/node-up.log
	WARPDRIVE_DEPLOY_POD=1 $(MAKE) test-deploy KUBECONFIG=$(LOCAL_KUBECONFIG) 2>&1 | tee $(CLUSTER_DIR)/deploy-e2e.log
	$(MAKE) node-down
	$(MAKE) test-faults

# kustomize renders config/default, whose Deployment gives the binaries their flags
# (internal/podargs; test/framework checks the suites use them). The chart tests' lint gate
# (test/charts/lint_test.go) runs kube-score over config/default and the charts.
.PHONY: test-unit
# Built as the image's binaries are, without cgo: internal/renderbound's tests run the render
# worker from the test binary, and a cgo binary's threads each reserve 8 MiB of the address
# space the worker's memory bound limits, more of them the busier the machine.
test-unit: $(KUSTOMIZE) $(KUBE_SCORE) ## Unit and chart tests (no cluster), the kube-score lint gate among them.
	CGO_ENABLED=0 go test $(GO_TEST_FLAGS) $(UNIT_PACKAGES)

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint (pinned in hack/tools/lint, configured in .golangci.yml).
	$(GOLANGCI_LINT) run ./...

# The integration test runs operator.Setup in the test process against the apiserver; the e2e
# suite runs bin/manager's two commands as the pod would.
.PHONY: test-e2e
test-e2e: build helm-operator tools ## Integration test and e2e suite (as cluster-admin) on the local cluster (started if needed).
	$(MAKE) test-integration
	WARPDRIVE_KUBECONFIG=$(LOCAL_KUBECONFIG) go test $(GO_TEST_FLAGS) -timeout 40m -v ./test/e2e/... 2>&1 | tee $(CLUSTER_DIR)/e2e.log

.PHONY: test-integration
test-integration: build helm-operator tools ## Integration test on the local cluster (started if needed).
	$(MAKE) cluster-up
	WARPDRIVE_KUBECONFIG=$(LOCAL_KUBECONFIG) go test $(GO_TEST_FLAGS) -timeout 10m -v ./test/integration/ 2>&1 | tee $(CLUSTER_DIR)/integration.log

# The attacks that meet release records: make test-security runs them again with the records
# read by name (the others read none).
SECURITY_RECORD_TESTS = Record|Forged|Tampered|TakeOver|Lookup|NamedAfter|CrossKind

.PHONY: test-security
test-security: build helm-operator tools ## Attack suite on the local cluster (started if needed), then its attacks on release records again with the records read by name: a namespace editor tries to steer the operator elsewhere.
	$(MAKE) cluster-up
	WARPDRIVE_KUBECONFIG=$(LOCAL_KUBECONFIG) go test $(GO_TEST_FLAGS) -timeout 30m -v ./test/security/ 2>&1 | tee $(CLUSTER_DIR)/security.log
	WARPDRIVE_KUBECONFIG=$(LOCAL_KUBECONFIG) WARPDRIVE_SECURITY_MANAGER_FLAGS=--release-list-secrets-per-get=0 \
		go test $(GO_TEST_FLAGS) -timeout 30m -v -run '$(SECURITY_RECORD_TESTS)' ./test/security/ 2>&1 | tee $(CLUSTER_DIR)/security-records-by-name.log

.PHONY: test-security-memory
test-security-memory: build helm-operator tools ## Measure the manager's RSS with 200 of the largest CRs a tenant may create.
	$(MAKE) cluster-up
	WARPDRIVE_SECURITY_MEASURE=1 WARPDRIVE_KUBECONFIG=$(LOCAL_KUBECONFIG) go test -count=1 -timeout 30m -v \
		-run 'TestManagerMemoryWithLargestCRs' ./test/security/ 2>&1 | tee $(CLUSTER_DIR)/security-memory.log

# The same attacks on the stock helm-operator: outcomes are recorded, not asserted
# (docs/security.md quotes them).
.PHONY: test-security-stock
test-security-stock: build helm-operator tools ## Run the attack suite against the stock helm-operator and write the outcomes to .cluster/security-stock.tsv.
	$(MAKE) cluster-up
	rm -f $(CLUSTER_DIR)/security-stock.tsv
	WARPDRIVE_SECURITY_OPERATOR=stock WARPDRIVE_SECURITY_REPORT=$(CLUSTER_DIR)/security-stock.tsv \
		WARPDRIVE_KUBECONFIG=$(LOCAL_KUBECONFIG) go test -count=1 -timeout 30m -v ./test/security/ 2>&1 | tee $(CLUSTER_DIR)/security-stock.log

.PHONY: test-status-stock
test-status-stock: build helm-operator tools ## Record how kstatus reads the stock helm-operator's CRs through TestStatusContract's steps, in .cluster/kstatus-stock.tsv.
	$(MAKE) cluster-up
	WARPDRIVE_E2E_OPERATOR=stock WARPDRIVE_KUBECONFIG=$(LOCAL_KUBECONFIG) \
		go test -count=1 -timeout 20m -v -run 'TestStatusContract$$' ./test/e2e/ 2>&1 | tee $(CLUSTER_DIR)/kstatus-stock.log

# The fault suite (test/faults): crashes mid-operation, control-plane restarts, failover,
# churn, at the sizes it must survive (100 CRs through 18 kills, 1000 churn cycles).
# WARPDRIVE_FAULTS_HEAVY=1 runs larger ones (200 CRs through 30 kills, 5000 cycles).
.PHONY: test-faults
test-faults: build tools ## Fault suite on the local cluster (started if needed): kills, control-plane restarts, failover, churn.
	$(MAKE) cluster-up
	WARPDRIVE_KUBECONFIG=$(LOCAL_KUBECONFIG) go test $(GO_TEST_FLAGS) -timeout 180m -v ./test/faults/ 2>&1 | tee $(CLUSTER_DIR)/faults.log

.PHONY: test-deploy
test-deploy: build $(KUSTOMIZE) ## Deploy e2e on $KUBECONFIG: make deploy, the e2e suite as the manager's ServiceAccount, make undeploy.
	KUBECONFIG=$(KUBECONFIG) GO_TEST_FLAGS="$(GO_TEST_FLAGS)" hack/test-deploy.sh

# The operator's pod alone (test/deploy's TestOperatorPod and TestConversionWebhookInPod), without the rest of the deploy
# e2e: make deploy with config/local on the real node, then make undeploy and make node-down.
.PHONY: test-node
test-node: build tools ## The operator's real pod on the local cluster's real node (needs root): make node-up image-load, TestOperatorPod and TestConversionWebhookInPod, make node-down.
	$(MAKE) cluster-up
	$(MAKE) node-up image-load 2>&1 | tee $(CLUSTER_DIR)/node-up.log
	WARPDRIVE_DEPLOY_POD=1 WARPDRIVE_KUBECONFIG=$(LOCAL_KUBECONFIG) \
		WARPDRIVE_E2E_IMPERSONATE=warpdrive-operator-system/warpdrive-operator-controller-manager \
		go test $(GO_TEST_FLAGS) -timeout 30m -v -run 'TestOperatorPod$$|TestConversionWebhookInPod$$' ./test/deploy/ 2>&1 | tee $(CLUSTER_DIR)/node-e2e.log
	$(MAKE) node-down

.PHONY: bench
bench: build helm-operator tools ## Benchmark against the stock helm-operator and kubectl apply at 100, 1000 and 10000 CRs, then spec.valuesFrom, a noisy neighbour, updates of unowned ConfigMaps, planted release records, template bombs and the release history's etcd bytes (several hours): docs/bench/.
	$(MAKE) cluster-up
	WARPDRIVE_BENCH=1 WARPDRIVE_KUBECONFIG=$(LOCAL_KUBECONFIG) go test -count=1 -timeout 840m -v -run 'TestCompare|TestPool|TestValuesFrom|TestNoisyNeighbour|TestUnownedUpdates|TestPlantedRecords|TestTemplateBombs|TestHistoryFootprint' ./test/bench/ 2>&1 | tee $(CLUSTER_DIR)/bench.log

.PHONY: bench-quick
bench-quick: build helm-operator tools ## The same at 10 CRs with a 20 s idle window (valuesFrom: 2 edits, 500 unrelated Secrets), to check the benchmark runs; figures go to .cluster/bench-quick.
	$(MAKE) cluster-up
	WARPDRIVE_BENCH=1 WARPDRIVE_BENCH_N=10 WARPDRIVE_BENCH_IDLE=20s WARPDRIVE_BENCH_OUT=$(CLUSTER_DIR)/bench-quick \
		WARPDRIVE_BENCH_VALUESFROM_CRS=10 WARPDRIVE_BENCH_VALUESFROM_EDITS=2 WARPDRIVE_BENCH_VALUESFROM_SECRETS=500 \
		WARPDRIVE_KUBECONFIG=$(LOCAL_KUBECONFIG) go test -count=1 -timeout 60m -v -run 'TestCompare|TestValuesFrom' ./test/bench/

.PHONY: bench-valuesfrom
bench-valuesfrom: build helm-operator tools ## Benchmark spec.valuesFrom at 100 CRs: source edit -> applied, manager memory with 5000 unrelated Secrets, the stock operator's spec edits beside (about 10 minutes): docs/bench/valuesfrom.md.
	$(MAKE) cluster-up
	WARPDRIVE_BENCH=1 WARPDRIVE_KUBECONFIG=$(LOCAL_KUBECONFIG) go test -count=1 -timeout 60m -v -run TestValuesFrom ./test/bench/ 2>&1 | tee $(CLUSTER_DIR)/bench-valuesfrom.log

.PHONY: bench-fairness
bench-fairness: build helm-operator tools ## Benchmark a noisy neighbour: one tenant's edit latency while another floods the operator with forced reconciles, edit waves and a restart over 1000 CRs, this operator beside the stock one (about 65 minutes): docs/bench/fairness.md.
	$(MAKE) cluster-up
	WARPDRIVE_BENCH=1 WARPDRIVE_KUBECONFIG=$(LOCAL_KUBECONFIG) go test -count=1 -timeout 150m -v -run TestNoisyNeighbour ./test/bench/ 2>&1 | tee $(CLUSTER_DIR)/bench-fairness.log

.PHONY: bench-exhaustion
bench-exhaustion: build helm-operator tools ## Benchmark 10,000 updates of ConfigMaps no chart owns (the manager's GETs and CPU), 300 planted release records of 900 KiB (its peak RSS) and template bombs in a tenant's values (memory, CPU, output: its peak RSS, whether it stays up, another tenant's edit served), this operator beside the stock one (about 25 minutes): docs/bench/exhaustion.md.
	$(MAKE) cluster-up
	WARPDRIVE_BENCH=1 WARPDRIVE_KUBECONFIG=$(LOCAL_KUBECONFIG) go test -count=1 -timeout 60m -v -run 'TestUnownedUpdates|TestPlantedRecords|TestTemplateBombs' ./test/bench/ 2>&1 | tee $(CLUSTER_DIR)/bench-exhaustion.log

.PHONY: bench-history
bench-history: build helm-operator tools ## Benchmark etcd bytes per CR after the creates, 1 and 10 edits of 100 CRs: kubectl apply, the stock helm-operator and this operator at --max-release-history 10, 5, 3, 2 (about 30 minutes): docs/bench/history.md.
	$(MAKE) cluster-up
	WARPDRIVE_BENCH=1 WARPDRIVE_KUBECONFIG=$(LOCAL_KUBECONFIG) go test -count=1 -timeout 90m -v -run TestHistoryFootprint ./test/bench/ 2>&1 | tee $(CLUSTER_DIR)/bench-history.log

.PHONY: bench-tune
bench-tune: build tools ## Measure the manager's idle CPU by --reconcile-period, and edit and delete waves by --max-concurrent-reconciles (about 35 minutes): docs/bench/tune-*.md.
	$(MAKE) cluster-up
	WARPDRIVE_BENCH=1 WARPDRIVE_KUBECONFIG=$(LOCAL_KUBECONFIG) go test -count=1 -timeout 120m -v -run TestTune ./test/bench/ 2>&1 | tee $(CLUSTER_DIR)/bench-tune.log

.PHONY: demo
demo: ## Start the local cluster, run the operator, apply the samples and show them converge.
	hack/demo.sh

.PHONY: demo-deploy
demo-deploy: build ## The same with the operator in its pod: real node, image from the Dockerfile, make deploy (needs root).
	hack/demo-deploy.sh

##@ Build

# Every binary that a suite, the benchmark or make run starts is built as the images build
# theirs (the Dockerfile's builder stage; the stock helm-operator's goreleaser build for
# distroless/static): static, trimmed paths, no symbol tables. A cgo build would link Go's
# plugin support (cli-runtime imports kustomize's plugin loader), with which the linker keeps
# every exported symbol: 14 MB of dynamic symbol tables and more code, another binary than
# the one users run (test/framework's TestSuitesRunTheImagesBinaries).
GO_BUILD := CGO_ENABLED=0 go build -trimpath -ldflags "-s -w"

.PHONY: build
build: manager ## Build bin/manager: the helm-operator of this project, and its sidecar (bin/manager sidecar).

.PHONY: manager
manager: ## Build bin/manager: helm-operator-plugins' reconciler for every kind in watches.yaml, and the sidecar.
	$(GO_BUILD) -o $(LOCALBIN)/manager ./cmd/manager

.PHONY: helm-operator
helm-operator: ## Build bin/helm-operator, the stock helm-operator (version pinned in go.mod), for comparison.
	$(GO_BUILD) -o $(LOCALBIN)/helm-operator github.com/operator-framework/helm-operator-plugins

.PHONY: run
run: build $(KUSTOMIZE) ## Run the manager and the sidecar in the foreground against $KUBECONFIG, with the arguments of config/default's Deployment.
	hack/run.sh

.PHONY: docker-build
docker-build: ## Build the manager image (needs a Docker engine).
	docker build -t $(IMG) .

# The same image without a container engine: the binaries are built the way the Dockerfile's
# builder stage builds them, then hack/image applies the Dockerfile's runtime stage (COPY,
# WORKDIR, USER, ENTRYPOINT) on a distroless-like base; its test checks the two agree.
IMAGE_TAR ?= $(LOCALBIN)/operator-image.tar

.PHONY: image
image: ## Build the manager image $(IMG) from the Dockerfile without Docker, into bin/operator-image.tar.
	mkdir -p $(LOCALBIN)/image
	$(GO_BUILD) -o $(LOCALBIN)/image/manager ./cmd/manager
	go run ./hack/image operator -dockerfile Dockerfile -context . -from builder:/out=$(LOCALBIN)/image \
		-tag $(IMG) -o $(IMAGE_TAR)

.PHONY: image-load
image-load: image ## Load the manager image into the real node's containerd (make node-up).
	ctr --address $(CLUSTER_DIR)/node/containerd.sock -n k8s.io images import $(IMAGE_TAR)

.PHONY: docker-push
docker-push: ## Push the manager image.
	docker push $(IMG)

##@ Local cluster

.PHONY: tools
tools: $(LOCALBIN)/kube-apiserver $(LOCALBIN)/etcd $(LOCALBIN)/etcdctl $(LOCALBIN)/etcdutl $(LOCALBIN)/kwok $(KUSTOMIZE) ## Build the local cluster's binaries and kustomize into bin/.

.PHONY: cluster-up
cluster-up: tools ## Start etcd, kube-apiserver, controller-manager, scheduler and kwok nodes (no-op if running).
	CLUSTER_DIR=$(CLUSTER_DIR) hack/cluster-up.sh

.PHONY: cluster-down
cluster-down: ## Stop the local cluster and delete its state.
	CLUSTER_DIR=$(CLUSTER_DIR) hack/cluster-down.sh

.PHONY: node-up
node-up: kubelet pause-image ## Join a real node (kubelet, Debian's containerd) to the local cluster, tainted for the operator's pod only (needs root).
	CLUSTER_DIR=$(CLUSTER_DIR) PAUSE_IMAGE=$(PAUSE_IMAGE) hack/node-up.sh

.PHONY: node-down
node-down: ## Remove the real node: Node object, kubelet, containers, containerd, mounts, bridge and iptables rule.
	CLUSTER_DIR=$(CLUSTER_DIR) hack/node-down.sh

.PHONY: kubeconfig
kubeconfig: ## Print the path of the local cluster's kubeconfig (use with make -s).
	@echo $(LOCAL_KUBECONFIG)

##@ Deployment

.PHONY: install
install: manifests $(KUSTOMIZE) ## Install the CRDs into the cluster in $KUBECONFIG.
	$(KUSTOMIZE) build config/crd | KUBECONFIG=$(KUBECONFIG) $(KUBECTL) apply --server-side -f -

.PHONY: uninstall
uninstall: $(KUSTOMIZE) ## Uninstall the CRDs (deletes every CR: their releases are uninstalled only while the operator runs).
	$(KUSTOMIZE) build config/crd | KUBECONFIG=$(KUBECONFIG) $(KUBECTL) delete --ignore-not-found -f -

# The kustomization make deploy applies; config/local is config/default on the local
# cluster's real node (make demo-deploy).
DEPLOY_CONFIG ?= config/default

# Server-side apply; --force-conflicts because these manifests are the truth about what the
# operator's objects should be, whoever (such as the e2e suite's CRD install) set a field last.
.PHONY: deploy
deploy: manifests $(KUSTOMIZE) ## Deploy the operator ($DEPLOY_CONFIG, by default config/default) to the cluster in $KUBECONFIG.
	cd config/manager && $(KUSTOMIZE) edit set image controller=$(IMG)
	$(KUSTOMIZE) build $(DEPLOY_CONFIG) | KUBECONFIG=$(KUBECONFIG) $(KUBECTL) apply --server-side --force-conflicts -f -

.PHONY: undeploy
undeploy: $(KUSTOMIZE) ## Remove the operator from $KUBECONFIG: CRs first (releases uninstalled), then all of config/default.
	KUBECONFIG=$(KUBECONFIG) KUBECTL=$(KUBECTL) KUSTOMIZE=$(KUSTOMIZE) hack/undeploy.sh

##@ OLM bundle

# Version and channels of the bundle (make bundle VERSION=0.2.0 CHANNELS=stable).
VERSION ?= 0.1.0
CHANNELS ?= candidate
DEFAULT_CHANNEL ?= candidate

# operator-sdk cannot be installed from the Go module proxy (it refuses the module), so
# hack/bundle does what `operator-sdk generate bundle` and `bundle validate` do, with the
# validation library operator-sdk uses (github.com/operator-framework/api).
.PHONY: bundle
bundle: manifests $(KUSTOMIZE) ## Build the OLM bundle in bundle/ (and bundle.Dockerfile) for IMG and VERSION, and validate it.
	cd config/manager && $(KUSTOMIZE) edit set image controller=$(IMG)
	$(KUSTOMIZE) build config/manifests | (cd hack/bundle && go run . generate -version $(VERSION) \
		-channels $(CHANNELS) -default-channel $(DEFAULT_CHANNEL) -out $(CURDIR)/bundle)
	cd hack/bundle && go run . validate $(CURDIR)/bundle

##@ Dependencies

# The control plane: kube-apiserver, kube-controller-manager, kube-scheduler and kubectl from
# the k8s.io/kubernetes module, stamped with the real version so that clients accept it.
$(LOCALBIN)/kube-apiserver $(LOCALBIN)/kube-controller-manager $(LOCALBIN)/kube-scheduler $(LOCALBIN)/kubectl &: hack/tools/kube/go.mod
	cd hack/tools/kube && go build -ldflags "$(KUBE_LDFLAGS)" -o $(LOCALBIN)/ \
		k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
		k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl
	touch $(LOCALBIN)/kube-apiserver $(LOCALBIN)/kube-controller-manager $(LOCALBIN)/kube-scheduler $(LOCALBIN)/kubectl

# The real node's kubelet, from the same module and version as the control plane.
.PHONY: kubelet
kubelet: $(LOCALBIN)/kubelet ## Build bin/kubelet (hack/tools/kube, the control plane's k8s.io/kubernetes).
$(LOCALBIN)/kubelet: hack/tools/kube/go.mod
	cd hack/tools/kube && go build -ldflags "$(KUBE_LDFLAGS)" -o $@ k8s.io/kubernetes/cmd/kubelet

# The real node's pod sandbox image: no registry is reachable, so it is built from hack/pause.
.PHONY: pause-image
pause-image: ## Build the pod sandbox image of the real node into bin/pause-image.tar.
	mkdir -p $(LOCALBIN)/image
	$(GO_BUILD) -o $(LOCALBIN)/image/pause ./hack/pause
	go run ./hack/image pause -binary $(LOCALBIN)/image/pause -tag $(PAUSE_IMAGE) -o $(LOCALBIN)/pause-image.tar

$(LOCALBIN)/etcd: hack/tools/etcd/go.mod
	cd hack/tools/etcd && go build -o $@ go.etcd.io/etcd/server/v3

# etcd's snapshots (hack/etcd-snapshot.sh, the fault suite's restore): etcdctl saves them,
# etcdutl restores them, from the same module and version as etcd.
$(LOCALBIN)/etcdctl: hack/tools/etcd/go.mod
	cd hack/tools/etcd && go build -o $@ go.etcd.io/etcd/etcdctl/v3

$(LOCALBIN)/etcdutl: hack/tools/etcd/go.mod
	cd hack/tools/etcd && go build -o $@ go.etcd.io/etcd/etcdutl/v3

$(LOCALBIN)/kwok: hack/tools/kwok/go.mod
	cd hack/tools/kwok && go build -o $@ sigs.k8s.io/kwok/cmd/kwok

$(KUSTOMIZE): hack/tools/kustomize/go.mod
	cd hack/tools/kustomize && go build -o $@ sigs.k8s.io/kustomize/kustomize/v5

$(GOLANGCI_LINT): hack/tools/lint/go.mod
	cd hack/tools/lint && go build -o $@ github.com/golangci/golangci-lint/v2/cmd/golangci-lint

# The manifest linter of the lint gate and of make add-kind's report (internal/kubescore).
.PHONY: kube-score
kube-score: $(KUBE_SCORE) ## Build bin/kube-score (pinned in hack/tools/kube-score).
$(KUBE_SCORE): hack/tools/kube-score/go.mod
	cd hack/tools/kube-score && go build -o $@ github.com/zegl/kube-score/cmd/kube-score
