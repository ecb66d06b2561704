package postgres

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/leasehold/leasehold/backend"
)

func acquireCall(key, owner, attempt string) backend.Call {
	return backend.Call{Op: backend.OpAcquire, Acquire: backend.AcquireRequest{Key: key, Owner: owner, Attempt: attempt, TTL: live}}
}

func renewCall(h held) backend.Call {
	return backend.Call{Op: backend.OpRenew, Renew: h.renewReq(live)}
}

func releaseCall(h held) backend.Call {
	return backend.Call{Op: backend.OpRelease, Release: h.releaseReq()}
}

// A mixed batch answers every call as the single calls would, runs calls on
// one key in slice order, and answers an invalid request without touching
// the others.
func TestBatchAnswersLikeSingleCalls(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t)
	held1 := mustAcquire(t, b, "renewed", "a", time.Minute)
	gone := mustAcquire(t, b, "gone", "a", live)
	if err := b.Release(ctxT(t), gone.releaseReq()); err != nil {
		t.Fatal(err)
	}
	busy := mustAcquire(t, b, "busy", "a", live)

	attA, attB := newAttempt(), newAttempt()
	calls := []backend.Call{
		acquireCall("k", "a", attA), // 0: granted
		acquireCall("k", "b", attB), // 1: refused by 0
		{Op: backend.OpRelease, Release: backend.ReleaseRequest{Key: "k", Owner: "a", Attempt: attA}}, // 2: ends 0 (token 0)
		acquireCall("k", "b", attB),            // 3: granted, after 2
		renewCall(held1),                       // 4: renewed
		renewCall(gone),                        // 5: not held
		acquireCall("", "a", newAttempt()),     // 6: invalid
		acquireCall("busy", "b", newAttempt()), // 7: refused by busy
		releaseCall(busy),                      // 8: released
		{Op: backend.Op(99)},                   // 9: invalid
	}
	b.Batch(ctxT(t), calls)

	for i, want := range []bool{true, false, false, true, true, false, false, false, false, false} {
		if calls[i].Grant.Acquired != want {
			t.Errorf("call %d (%v): Acquired = %v, want %v (%+v, %v)", i, calls[i].Op, calls[i].Grant.Acquired, want, calls[i].Grant, calls[i].Err)
		}
	}
	for _, i := range []int{0, 1, 2, 3, 4, 7, 8} {
		if calls[i].Err != nil {
			t.Errorf("call %d (%v): %v", i, calls[i].Op, calls[i].Err)
		}
	}
	if g := calls[1].Grant; g.Holder != "a" || g.HolderToken != calls[0].Grant.Token || g.HolderExpiresIn <= 0 {
		t.Errorf("refusal by call 0 = %+v, want holder a with token %d", g, calls[0].Grant.Token)
	}
	if calls[3].Grant.Token <= calls[0].Grant.Token {
		t.Errorf("token after release %d, want > %d", calls[3].Grant.Token, calls[0].Grant.Token)
	}
	if g := calls[4].Grant; g.Token != held1.Token || !g.ExpiresAt.After(held1.ExpiresAt) {
		t.Errorf("renewal = %+v, want token %d and an expiry after %v", g, held1.Token, held1.ExpiresAt)
	}
	if !errors.Is(calls[5].Err, backend.ErrNotHeld) {
		t.Errorf("renewal of a released holding: %v, want ErrNotHeld", calls[5].Err)
	}
	for _, i := range []int{6, 9} {
		if !errors.Is(calls[i].Err, backend.ErrInvalidRequest) {
			t.Errorf("call %d: %v, want ErrInvalidRequest", i, calls[i].Err)
		}
	}
	if g := calls[7].Grant; g.Holder != "a" || g.HolderToken != busy.Token {
		t.Errorf("refusal by busy = %+v", g)
	}
	// What the store holds now: k by b (call 3), renewed, and nothing else.
	if h, ok, err := b.Inspect(ctxT(t), "k"); err != nil || !ok || h.Owner != "b" || h.Token != calls[3].Grant.Token {
		t.Errorf("Inspect(k) = %+v, %v, %v; want b's holding", h, ok, err)
	}
	if _, ok, err := b.Inspect(ctxT(t), "busy"); err != nil || ok {
		t.Errorf("Inspect(busy) = %v, %v; want released", ok, err)
	}
	if n := e.rows(t); n != 2 {
		t.Errorf("%d rows, want 2", n)
	}
}

// failOn makes the server refuse the acquire transaction of key (a trigger
// raising code) while the table's other keys work: the first times calls it
// fails, then it lets the key through (times < 0: always fails).
func failOn(t *testing.T, e *testEnv, key, code string, times int) {
	t.Helper()
	n := newNames(e.schema, e.table)
	// A sequence counts the failures: nextval survives the rollback of the
	// transaction it failed.
	stmts := []string{
		"CREATE SEQUENCE " + n.schema + ".fail_count",
		`CREATE FUNCTION ` + n.schema + `.fail() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
    IF NEW.lease_name = '` + key + `' AND (` + strconv.Itoa(times) + ` < 0 OR nextval('` + n.schema + `.fail_count') <= ` + strconv.Itoa(times) + `) THEN
        RAISE EXCEPTION 'injected failure' USING ERRCODE = '` + code + `';
    END IF;
    RETURN NEW;
END $f$`,
		"CREATE TRIGGER fail BEFORE INSERT ON " + n.table + " FOR EACH ROW EXECUTE FUNCTION " + n.schema + ".fail()",
	}
	for _, s := range stmts {
		if _, err := e.admin.Exec(ctxT(t), s); err != nil {
			t.Fatalf("install failure trigger: %v", err)
		}
	}
}

// PostgreSQL skips the rest of a pipeline after an error: the calls after a
// refused one are sent again, the ones before it stay committed, and the
// refused call alone gets the server's error.
func TestBatchFailureOfOneCallLeavesTheOthers(t *testing.T) {
	e := newEnv(t)
	failOn(t, e, "boom", "22012", -1) // division_by_zero: not transient
	b := e.backend(t)
	calls := []backend.Call{
		acquireCall("a", "o", newAttempt()),
		acquireCall("boom", "o", newAttempt()),
		acquireCall("c", "o", newAttempt()),
		acquireCall("boom", "o", newAttempt()),
		acquireCall("d", "o", newAttempt()),
	}
	b.Batch(ctxT(t), calls)
	for _, i := range []int{0, 2, 4} {
		if c := calls[i]; c.Err != nil || !c.Grant.Acquired {
			t.Errorf("call %d (%s) = %+v, %v; want a grant", i, c.Acquire.Key, c.Grant, c.Err)
		}
	}
	for _, i := range []int{1, 3} {
		var pgErr *pgconn.PgError
		if c := calls[i]; !errors.As(c.Err, &pgErr) || pgErr.Code != "22012" || c.Grant.Acquired {
			t.Errorf("call %d = %+v, %v; want the injected error", i, c.Grant, c.Err)
		}
	}
	if n := e.rows(t); n != 3 {
		t.Errorf("%d rows, want 3 (a, c, d)", n)
	}
}

// A transient fault is retried: the refused call and the ones after it are
// sent again, and every call ends up answered.
func TestBatchRetriesTransientFault(t *testing.T) {
	e := newEnv(t)
	failOn(t, e, "flaky", "40001", 2) // serialization_failure, twice
	b := e.backend(t, WithRetry(5, time.Millisecond, 5*time.Millisecond))
	calls := []backend.Call{
		acquireCall("a", "o", newAttempt()),
		acquireCall("flaky", "o", newAttempt()),
		acquireCall("c", "o", newAttempt()),
	}
	b.Batch(ctxT(t), calls)
	for i, c := range calls {
		if c.Err != nil || !c.Grant.Acquired {
			t.Errorf("call %d (%s) = %+v, %v; want a grant", i, c.Acquire.Key, c.Grant, c.Err)
		}
	}
	// The call answered before the fault was made again (its answer
	// counts only with the round trip's last, synchronous, commit): a
	// refresh of its own holding, with the same token.
	var token int64
	var refreshed bool
	if err := e.admin.QueryRow(ctxT(t), "SELECT fencing_token, acquired_at < renewed_at FROM "+newNames(e.schema, e.table).table+" WHERE lease_name = 'a'").Scan(&token, &refreshed); err != nil || uint64(token) != calls[0].Grant.Token || !refreshed {
		t.Errorf("call 0's row: token %d, refreshed %v, %v; want token %d, refreshed", token, refreshed, err, calls[0].Grant.Token)
	}
	if n := e.rows(t); n != 3 {
		t.Errorf("%d rows, want 3", n)
	}
}

// When the round trip cannot be made, every call sent gets the error; the
// invalid ones still get theirs.
func TestBatchRoundTripFailureAnswersEveryCall(t *testing.T) {
	e := newEnv(t)
	b := e.backend(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls := []backend.Call{
		acquireCall("a", "o", newAttempt()),
		{Op: backend.OpRelease, Release: backend.ReleaseRequest{Key: "a", Owner: "o", Attempt: newAttempt()}},
		acquireCall("", "o", newAttempt()),
	}
	b.Batch(ctx, calls)
	for _, i := range []int{0, 1} {
		if !errors.Is(calls[i].Err, context.Canceled) {
			t.Errorf("call %d: %v, want context.Canceled", i, calls[i].Err)
		}
	}
	if !errors.Is(calls[2].Err, backend.ErrInvalidRequest) {
		t.Errorf("invalid call: %v, want ErrInvalidRequest", calls[2].Err)
	}
}
