# The one test command (also what .ci/run calls): make test
#
# It makes sure the services the tests talk to are up (starting or installing
# them when it can), vets, runs every test with the race detector, and builds
# every example and the bench CLI, and checks that the release versions.yaml
# records can be fetched and used as a user would (release-check).

GO ?= go

# Tests that need Redis, PostgreSQL or MariaDB fail, not skip, when they are missing.
export LEASEHOLD_REQUIRE_SERVICES ?= 1

.PHONY: test services vet unit build release-check release-tags fuzz bench stress soak model-deep model-long

test: services vet unit build release-check

services:
	.ci/ensure-redis
	.ci/ensure-postgres
	.ci/ensure-mariadb
	.ci/ensure-tsqlcheck
	.ci/ensure-etcd
	.ci/ensure-spin

# Every module of the tree. The root module is the library and the stores
# that need no network (backend/memory); each networked backend is a module
# of its own, and so are the tools and tests that need a store or a test-only
# dependency, so that a library user's module graph holds only the stores
# they use. Each of them replaces github.com/leasehold/leasehold (and the
# modules of the tree it uses) with the directory beside it.
MODULES := . backend/redis backend/postgres backend/sqlserver backend/mysql backend/etcd fence/grpcfence internal/storetests internal/releasetool examples bench cmd/leasehold

vet:
	for m in $(MODULES); do (cd $$m && $(GO) vet ./...) || exit 1; done

unit:
	for m in $(MODULES); do (cd $$m && $(GO) test -race -count=1 -timeout 20m ./...) || exit 1; done

# Every package of every module: the examples, the bench and admin CLIs, the
# etcd example.
build:
	for m in $(MODULES); do (cd $$m && $(GO) build -o /dev/null ./...) || exit 1; done

# The modules versions.yaml releases, at its versions, from a module proxy
# made of the tree: `go get` in an empty module, a build on memory, Redis and
# PostgreSQL, and no test-only module in its graph (.ci/check-release).
release-check:
	.ci/check-release

# The tags of the release versions.yaml records (docs/releasing.md); with
# CREATE=1 it makes them (annotated git tags, not pushed).
release-tags:
	$(GO) run -C internal/releasetool . -versions $(CURDIR)/versions.yaml tags $(if $(CREATE),-create)

# Not part of `make test`: explore name and option validation for a while.
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzValidation -fuzztime 60s .

# Not part of `make test` (which runs the small bounds): the lease protocol's
# model (actors/model) with larger bounds: three Managers with a fault, a
# restart and Close; two attempts or two faults each; the hand-off design with
# a fault, a restart, Close (pickup by notice included, with clock drift in
# one run); liveness with a fault. Every search exhaustive: the hand-off
# checks alone are about 47 million states and need up to 5.6 GB of memory
# (the fault run); allow about 15 minutes of CPU. And the limit's model
# (limit.pml) with clock drift.
model-deep:
	LEASEHOLD_MODEL_DEEP=1 $(GO) test -count=1 -timeout 2h -v ./actors/model

# Not part of `make test` (which runs 300 short sequences of each): the
# renewer's and the alarm heaps' model tests, long: 5,000 random sequences of
# 2,000 steps (schedule, move, cancel, fire on a fake clock, against a plain
# model of each). A few minutes under the race detector.
model-long:
	LEASEHOLD_MODEL_LONG=1 $(GO) test -race -count=1 -timeout 1h -run '^Test(Renewer|Alarms)Model$$' -v ./internal/engine

# Not part of `make test` (which runs it for 2 s): the engine stress test, long.
stress:
	$(GO) test -race -count=1 -run '^TestStress$$' -stress.duration 5m -timeout 30m .

# Not part of `make test` (which runs it for 2 s per backend): the soak, long.
# Short jobs in bursts with quiet spells, leases held for a few renewals and
# long-lived ones, on memory and on the Redis at LEASEHOLD_REDIS_ADDR: no
# lease lost, no renewal failed and HealthCheck nil at every probe. Its log
# line gives the counts. SOAK=5m for another length; -soak.backends memory
# (or redis) for one backend.
SOAK ?= 10m
soak:
	cd internal/storetests && $(GO) test -race -count=1 -run '^TestSoak$$' -soak.duration $(SOAK) -timeout 60m -v ./soak

# Not part of `make test`: the engine's own cost against a mutex-map floor.
bench:
	cd bench && $(GO) test -run '^$$' -bench 'MemoryAcquireRelease|MutexMapAcquireRelease' -count 6 .
