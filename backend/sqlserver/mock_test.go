package sqlserver

import (
	"database/sql"
	"testing"

	"github.com/DATA-DOG/go-sqlmock"
)

// newMockDB returns a go-sqlmock database that matches SQL text exactly (up to
// white space) and checks at cleanup that every expectation was met.
func newMockDB(t *testing.T) (*sql.DB, sqlmock.Sqlmock) {
	t.Helper()
	db, mock, err := sqlmock.New(sqlmock.QueryMatcherOption(sqlmock.QueryMatcherEqual))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := mock.ExpectationsWereMet(); err != nil {
			t.Error(err)
		}
		db.Close()
	})
	return db, mock
}

// newMockBackend returns a backend on a mock database, with fast retries.
func newMockBackend(t *testing.T, opts ...Option) (*Backend, sqlmock.Sqlmock) {
	t.Helper()
	db, mock := newMockDB(t)
	opts = append([]Option{WithRetry(4, 100_000, 1_000_000)}, opts...) // 0.1ms .. 1ms
	b, err := New(db, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b, mock
}
