# The commands the README gives. Every test of every module runs with the
# race detector; the tests that need a control plane build it on first use.

GO ?= go
BIN := $(CURDIR)/.bin
# Where package clustertest builds the control plane and runs it from: the
# repository keeps it in the ignored .bin/, and every go command make runs,
# a test in another module's go test included, finds it there. A cold build
# takes 13 to 18 minutes on 2 cores; make test runs it first (a test that
# needs it and finds it missing builds it too).
export HUMUS_CONTROLPLANE ?= $(BIN)/controlplane
# The repository's own targets build the control plane from source and
# download nothing: its CI and development machines reach no download
# location. A machine that does may fetch the released binaries instead,
# in seconds: make test HUMUS_CONTROLPLANE_FETCH=auto (an argument to make,
# not the environment, overrides this). The folder is keyed as clustertest
# keys it: its stamp is a hash of the embedded source
# (kube/clustertest/source/, which pins Kubernetes v1.37.2 and etcd
# v3.7.0), so a CI that keeps .bin/controlplane between runs keys its cache
# by that folder's tree, git rev-parse HEAD:kube/clustertest/source, and a
# stale folder is rebuilt, never used.
export HUMUS_CONTROLPLANE_FETCH := off
TEST_TIMEOUT ?= 60m

.PHONY: demo test unit lint apicheck controlplane cluster bench bench-large fuzz

# The Memcached controller at work on a control plane of its own, each
# step told as it happens and checked against the API server; it builds
# what is missing first (the control plane, cold, in 13 to 18 minutes, with
# its progress), and exits non-zero if a step didn't happen. See
# kube/example/memcached/demo. It is built into .bin/ and run as itself,
# not through go run, so a signal to the process make starts reaches it.
demo:
	$(GO) build -o $(BIN)/demo ./kube/example/memcached/demo
	exec $(BIN)/demo

# The control plane is built first, as its own step, so its progress reaches
# the terminal. Then every test but the fault suite, the modules' packages in
# parallel; then the fault suite (kube's TestClusterFault...) alone, so no
# other package's control plane competes with its timings: it kills, pauses
# and cuts off the API server and etcd, against Lease deadlines of seconds.
# Its scenarios that touch no process of the control plane, each in a
# namespace of its own, run in parallel once the others have run: they
# wait more than they work, so more of them at once than the cores.
test: controlplane
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) -skip '^TestClusterFault' ./... ./kube/...
	cd kube && $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) -parallel 8 -run '^TestClusterFault' .

# Every test that needs no control plane, in both modules: go test -short
# skips the ones that do (clustertest.Get skips them).
unit:
	$(GO) test -short -count=1 ./... ./kube/...

$(BIN)/golangci-lint: tools/lint/go.mod tools/lint/go.sum
	cd tools/lint && GOWORK=off $(GO) build -o $(BIN)/golangci-lint github.com/golangci/golangci-lint/v2/cmd/golangci-lint

# filecycles (tools/filecycles) fails when the files of one package tie
# into a cycle of more than 8 files: which file uses which other file's
# names, as go/types resolves them. Within a package nothing else holds a
# layer; `$(BIN)/filecycles -v ./kube/internal/control` prints what ties a
# package's files. It reads export data, not a cluster: a second, warm.
$(BIN)/filecycles: tools/filecycles/go.mod tools/filecycles/go.sum tools/filecycles/main.go
	cd tools/filecycles && GOWORK=off $(GO) build -o $(BIN)/filecycles .

lint: $(BIN)/golangci-lint $(BIN)/filecycles
	$(BIN)/golangci-lint run ./...
	cd kube && $(BIN)/golangci-lint run --config ../.golangci.yaml ./...
	$(BIN)/filecycles -max 8 ./...
	cd kube && $(BIN)/filecycles -max 8 ./...

# Compares the public API of both modules with their last release, whose
# commit CHANGELOG.md records (tags may not travel with a clone), and fails
# on an incompatible change its Unreleased section doesn't name under
# Changed or Removed; additions pass. The old API is read from the commit's
# tree, written into a temporary folder by git archive, so a clone needs
# the history back to it. apicheck is built from tools/apicheck, which pins
# golang.org/x/exp/apidiff; its own tests, which see it fail on a changed
# signature and pass once the changelog names it, run first. About 40
# seconds warm. See docs/releasing.md.
$(BIN)/apicheck: tools/apicheck/go.mod tools/apicheck/go.sum $(wildcard tools/apicheck/*.go)
	cd tools/apicheck && GOWORK=off $(GO) build -o $(BIN)/apicheck .

apicheck: $(BIN)/apicheck
	cd tools/apicheck && GOWORK=off $(GO) test -count=1 .
	$(BIN)/apicheck

# The cluster command (kube/clustertest/cmd/cluster), built into .bin/ and
# run as itself, not through go run, so a signal to the process make starts
# reaches it.
CLUSTER := $(BIN)/cluster

# Builds etcd, kube-apiserver and kube-controller-manager from Kubernetes'
# source into .bin/controlplane, if they are missing or stale (fetched
# instead, given HUMUS_CONTROLPLANE_FETCH=auto).
controlplane:
	$(GO) build -o $(CLUSTER) ./kube/clustertest/cmd/cluster
	$(CLUSTER) -build

# Starts the tests' control plane in the foreground; it writes its
# kubeconfig, logs, audit log and etcd's data into .cluster/, says so, and
# prints the export KUBECONFIG=... line. Ctrl-C, or SIGTERM to the process
# make started (or to make), stops it and everything it started.
cluster:
	$(GO) build -o $(CLUSTER) ./kube/clustertest/cmd/cluster
	exec $(CLUSTER)

# Runs each of kube's fuzz targets, in every package of the module, for
# FUZZTIME, one after another: go test -fuzz takes one target at a time. A
# failing input is written under the package's testdata/fuzz/<target>/;
# once fixed, commit it as a regression seed.
FUZZTIME ?= 60s

fuzz:
	cd kube && for pkg in $$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -n1 dirname | sort -u); do \
		for t in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
			$(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
		done; \
	done

# Runs the benchmarks; BENCHMARKS.md holds the last committed results. The
# Go micro-benchmarks first, then the scenarios on the local control plane
# (kube/example/memcached/bench), each App in a process of its own, whose
# medians, mins and maxes benchtab writes into kube/BENCHMARKS.md,
# replacing the tables of the scenarios run and keeping the others. The
# cold start at 1,000 runs three times, its settle time spreading by 8%
# from run to run; the other scenarios once each, their settle times and
# latencies spreading by 2% or less in three runs (BENCHMARKS.md's tables
# of 2026-12-04), though of-ceiling spreads by 6% at 10,000. The cold
# start at 10,000, its process's one benchmark, leaves its objects to the
# control plane's end (-leave) instead of deleting them; so does, in a
# process of its own, the cold start of 10,000 stored at v1alpha1 and
# reconciled at v1beta1 through the conversion webhook, beside the same
# at v1alpha1 (ConvertedColdStart: three cold starts, 2.5 minutes in all
# at 1,000).
# Each says what it does as it goes; BENCH_SCALE=0.05 tries them in minutes.
# BENCH_RUN='ColdStart/N=1000$$' runs one scenario, BENCH_COUNT times
# (without the $$, N=10000 matches too); BENCH_RUN='Shards' runs the
# scaling out one, 1, 2 and 4 replicas of 4 shards;
# BENCH_RUN='(Related|SharedOwns|Selector)' the cache's scenarios, which
# the default set runs last (about 10 minutes on 2 cores: a ConfigMap's
# change reaching the Websites that name it, two controllers owning
# Deployments on one Client, a Reader's selector). BENCH_RUN=CeilingDrift
# BENCH_COUNT=1 times the ceiling four times in a row from a fresh control
# plane (not in the default set).
BENCH_SCALE ?= 1
BENCH_COUNT ?= 3
BENCH_RUN ?=
BENCH = $(GO) -C kube test -run '^$$' -benchtime 1x -timeout 240m ./example/memcached/bench/ -scale $(BENCH_SCALE)
bench: controlplane
	cd kube && $(GO) test -run '^$$' -bench . -benchmem -count 5 . ./internal/cache/
	cd kube && $(GO) test -run '^$$' -bench '^BenchmarkAdmissionReview(Large)?$$' -benchmem -count 5 ./admission/
	cd kube && $(GO) test -run '^$$' -bench '^BenchmarkClusterAdmissionWrite$$' -benchtime 300x -count 3 ./admission/
	mkdir -p $(BIN)
	@rm -f $(BIN)/bench.out
	$(if $(BENCH_RUN),$(BENCH) -bench '^BenchmarkCluster$(BENCH_RUN)' -count $(BENCH_COUNT) >> $(BIN)/bench.out || { cat $(BIN)/bench.out; exit 1; },\
		$(BENCH) -bench '^BenchmarkClusterColdStart$$/^N=1000$$' -count 3 >> $(BIN)/bench.out && \
		$(BENCH) -bench '^BenchmarkClusterColdStart$$/^N=10000$$' -count 1 -leave >> $(BIN)/bench.out && \
		$(BENCH) -bench '^BenchmarkClusterConvertedColdStart$$' -count 1 -leave >> $(BIN)/bench.out && \
		$(BENCH) -bench '^BenchmarkCluster(Workers|Churn|LiveChanges|ColdChurn|BurstChange|Shards|Related|SharedOwns|Selector)$$' -count 1 >> $(BIN)/bench.out \
		|| { cat $(BIN)/bench.out; exit 1; })
	cd kube && $(GO) run ./internal/benchtab BENCHMARKS.md < $(BIN)/bench.out

# The cold start at N = 100,000 (kube/example/memcached/bench's -large),
# then, in a process and control plane of its own, the cold start at 10,000
# beside 90,000 Memcacheds the App doesn't watch (ColdStartBeside: the
# control plane's size without the App's): not in make bench, the two take
# about 41 minutes on 2 cores. benchtab writes their tables into
# kube/BENCHMARKS.md beside those of 1,000 and 10,000.
bench-large: controlplane
	mkdir -p $(BIN)
	$(BENCH) -bench '^BenchmarkClusterColdStart$$' -count 1 -large -leave > $(BIN)/bench-large.out || { cat $(BIN)/bench-large.out; exit 1; }
	$(BENCH) -bench '^BenchmarkClusterColdStartBeside$$' -count 1 -leave >> $(BIN)/bench-large.out || { cat $(BIN)/bench-large.out; exit 1; }
	cd kube && $(GO) run ./internal/benchtab BENCHMARKS.md < $(BIN)/bench-large.out
