# The one test command (also what .ci/run calls): make test
#
# It makes sure the services the tests talk to are up (starting or installing
# them when it can), vets, runs every test with the race detector, and builds
# every example and the bench CLI.

GO ?= go

# Tests that need Redis or PostgreSQL fail, not skip, when they are missing.
export LEASEHOLD_REQUIRE_SERVICES ?= 1

.PHONY: test services vet unit build fuzz bench stress

test: services vet unit build

services:
	.ci/ensure-redis
	.ci/ensure-postgres
	.ci/ensure-tsqlcheck
	.ci/ensure-etcd

# Modules of their own (so that a library user's module graph stays light):
# the bench CLI, the etcd backend and the admin CLI.
MODULES := bench backend/etcd cmd/leasehold

vet:
	$(GO) vet ./...
	for m in $(MODULES); do (cd $$m && $(GO) vet ./...) || exit 1; done

unit:
	$(GO) test -race -count=1 -timeout 20m ./...
	for m in $(MODULES); do (cd $$m && $(GO) test -race -count=1 -timeout 20m ./...) || exit 1; done

build:
	$(GO) build -o /dev/null ./examples/...
	cd bench && $(GO) build -o /dev/null .
	cd backend/etcd && $(GO) build -o /dev/null ./...
	cd cmd/leasehold && $(GO) build -o /dev/null .

# Not part of `make test`: explore name and option validation for a while.
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzValidation -fuzztime 60s .

# Not part of `make test` (which runs it for 2 s): the engine stress test, long.
stress:
	$(GO) test -race -count=1 -run '^TestStress$$' -stress.duration 5m -timeout 30m .

# Not part of `make test`: the engine's own cost against a mutex-map floor.
bench:
	cd bench && $(GO) test -run '^$$' -bench 'MemoryAcquireRelease|MutexMapAcquireRelease' -count 6 .
