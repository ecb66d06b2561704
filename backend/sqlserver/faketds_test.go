package sqlserver

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf16"

	mssql "github.com/microsoft/go-mssqldb"

	"github.com/leasehold/leasehold/backend"
	"github.com/leasehold/leasehold/backend/backendtest"
)

// fakeTDS is just enough of a SQL Server for go-mssqldb to log in (TDS
// prelogin without encryption, LOGINACK) and send one batch, after which it
// breaks the connection the way a dropped or killed session does. The
// errors the backend then sees are the driver's own, not values built by
// hand.
type fakeTDS struct {
	ln      net.Listener
	drop    func(c net.Conn) // what happens once the batch has arrived
	batches atomic.Int32
	wg      sync.WaitGroup
}

func newFakeTDS(t *testing.T, drop func(c net.Conn)) *fakeTDS {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeTDS{ln: ln, drop: drop}
	f.wg.Add(1)
	go f.serve()
	t.Cleanup(func() {
		ln.Close()
		f.wg.Wait()
	})
	return f
}

func (f *fakeTDS) serve() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(time.Minute)) // never outlive a stuck client
			f.session(c)
		}()
	}
}

// TDS packet types and token bytes used here (MS-TDS 2.2.3, 2.2.7).
const (
	tdsReply       = 0x04
	tdsPrelogin    = 0x12
	tdsLogin7      = 0x10
	tdsLoginAck    = 0xAD
	tdsDone        = 0xFD
	tdsError       = 0xAA
	tdsColMetadata = 0x81
)

func (f *fakeTDS) session(c net.Conn) {
	if typ, _, err := readTDSMessage(c); err != nil || typ != tdsPrelogin {
		return
	}
	// ENCRYPTION = NOT_SUP: the client sent NOT_SUP too (encrypt=disable).
	prelogin := []byte{0x01, 0x00, 0x06, 0x00, 0x01, 0xFF, 0x02}
	if writeTDSPacket(c, 1, prelogin) != nil {
		return
	}
	if typ, _, err := readTDSMessage(c); err != nil || typ != tdsLogin7 {
		return
	}
	var ack bytes.Buffer
	ack.WriteByte(tdsLoginAck)
	binary.Write(&ack, binary.LittleEndian, uint16(10))      // interface, version, name length, version
	ack.WriteByte(1)                                         // SQL interface
	binary.Write(&ack, binary.BigEndian, uint32(0x74000004)) // TDS 7.4
	ack.WriteByte(0)                                         // empty program name
	binary.Write(&ack, binary.BigEndian, uint32(0x10000000)) // program version
	ack.Write(doneToken(0))                                  // end of the login response
	if writeTDSPacket(c, 1, ack.Bytes()) != nil {
		return
	}
	if _, _, err := readTDSMessage(c); err != nil {
		return
	}
	f.batches.Add(1)
	f.drop(c)
}

// readTDSMessage reads packets until the one marked end of message.
func readTDSMessage(c net.Conn) (typ byte, payload []byte, err error) {
	for {
		var h [8]byte
		if _, err := io.ReadFull(c, h[:]); err != nil {
			return 0, nil, err
		}
		size := int(binary.BigEndian.Uint16(h[2:4]))
		if size < 8 {
			return 0, nil, fmt.Errorf("packet size %d", size)
		}
		body := make([]byte, size-8)
		if _, err := io.ReadFull(c, body); err != nil {
			return 0, nil, err
		}
		typ, payload = h[0], append(payload, body...)
		if h[1]&1 != 0 {
			return typ, payload, nil
		}
	}
}

// writeTDSPacket writes one reply packet; status 1 marks the end of the
// message, 0 promises more packets.
func writeTDSPacket(c net.Conn, status byte, payload []byte) error {
	h := []byte{tdsReply, status, 0, 0, 0, 0, 1, 0}
	binary.BigEndian.PutUint16(h[2:4], uint16(len(payload)+8))
	_, err := c.Write(append(h, payload...))
	return err
}

func doneToken(status uint16) []byte {
	var b bytes.Buffer
	b.WriteByte(tdsDone)
	binary.Write(&b, binary.LittleEndian, status)
	binary.Write(&b, binary.LittleEndian, uint16(0)) // current command
	binary.Write(&b, binary.LittleEndian, uint64(0)) // row count
	return b.Bytes()
}

func usVarChar(s string) []byte {
	u := utf16.Encode([]rune(s))
	b := binary.LittleEndian.AppendUint16(nil, uint16(len(u)))
	for _, r := range u {
		b = binary.LittleEndian.AppendUint16(b, r)
	}
	return b
}

// errorToken is an ERROR token (MS-TDS 2.2.7.10).
func errorToken(number int32, class byte, msg string) []byte {
	var body bytes.Buffer
	binary.Write(&body, binary.LittleEndian, number)
	body.WriteByte(1)     // state
	body.WriteByte(class) // severity
	body.Write(usVarChar(msg))
	body.Write([]byte{0, 0})                           // server name, procedure name: empty
	binary.Write(&body, binary.LittleEndian, int32(1)) // line
	var b bytes.Buffer
	b.WriteByte(tdsError)
	binary.Write(&b, binary.LittleEndian, uint16(body.Len()))
	b.Write(body.Bytes())
	return b.Bytes()
}

// The ways a connection breaks once the batch is on its way.
var drops = []struct {
	name  string
	drop  func(c net.Conn)
	check func(err error) bool // the driver's error, as the backend gets it
}{
	{
		// Nothing comes back: the first read of the response fails.
		"closed before the answer",
		func(c net.Conn) {},
		func(err error) bool { var ne net.Error; return errors.As(err, &ne) },
	},
	{
		// The connection is reset (RST, as when the server is killed).
		"reset before the answer",
		func(c net.Conn) {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
		},
		func(err error) bool { var ne net.Error; return errors.As(err, &ne) },
	},
	{
		// The answer stops half-way: a packet promising more, then nothing.
		"closed half-way through the answer",
		func(c net.Conn) { _ = writeTDSPacket(c, 0, []byte{tdsColMetadata, 1, 0}) },
		func(err error) bool { var se mssql.StreamError; return errors.As(err, &se) },
	},
	{
		// A fatal error (severity 20) ends the session.
		"fatal server error",
		func(c net.Conn) {
			msg := append(errorToken(596, 21, "Cannot continue the execution because the session is in the kill state."), doneToken(0x0002|0x0100)...)
			_ = writeTDSPacket(c, 1, msg)
		},
		func(err error) bool {
			var sve mssql.ServerError
			var me mssql.Error
			// The server's message is in the error's text, not only "SQL
			// Server had internal error".
			return errors.As(err, &sve) && errors.As(err, &me) && me.Number == 596 && strings.Contains(err.Error(), "kill state")
		},
	},
}

// TestDroppedConnectionsAreRetried: for each way a connection breaks under
// a batch, go-mssqldb's real error is classified as transient and the whole
// batch is sent again, up to the retry limit, on a new connection.
func TestDroppedConnectionsAreRetried(t *testing.T) {
	for _, d := range drops {
		t.Run(d.name, func(t *testing.T) {
			f := newFakeTDS(t, d.drop)
			db, err := sql.Open("sqlserver", "sqlserver://sa:x@"+f.ln.Addr().String()+"?encrypt=disable&dial+timeout=10")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			b, err := New(db, WithRetry(3, 100*time.Microsecond, time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err = b.Acquire(ctx, backend.AcquireRequest{Key: "k", Owner: "o", Attempt: "a", TTL: time.Second})
			if err == nil || !d.check(err) || !isTransient(err) {
				t.Fatalf("Acquire = %T %v; want the driver's dropped-connection error, transient", errors.Unwrap(err), err)
			}
			t.Logf("driver error: %v", err)
			if n := f.batches.Load(); n != 3 {
				t.Errorf("the batch was sent %d times, want 3 (retried to the limit)", n)
			}
		})
	}
}

// TestDelayedDurabilityErrorFromTheDriver: the acquire batch's durability
// guard, as go-mssqldb delivers it (an ERROR token 50101, severity 16, and a
// DONE with the error bit), is ErrDelayedDurability, and is not retried.
func TestDelayedDurabilityErrorFromTheDriver(t *testing.T) {
	f := newFakeTDS(t, func(c net.Conn) {
		msg := append(errorToken(errDelayedDurabilityNumber, 16, "leasehold: the database has DELAYED_DURABILITY = FORCED"), doneToken(0x0002)...)
		_ = writeTDSPacket(c, 1, msg)
	})
	db, err := sql.Open("sqlserver", "sqlserver://sa:x@"+f.ln.Addr().String()+"?encrypt=disable&dial+timeout=10")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	b, err := New(db, WithRetry(3, 100*time.Microsecond, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g, err := b.Acquire(ctx, backend.AcquireRequest{Key: "k", Owner: "o", Attempt: "a", TTL: time.Second})
	if !errors.Is(err, ErrDelayedDurability) || g.Acquired {
		t.Fatalf("Acquire = %+v, %v; want ErrDelayedDurability", g, err)
	}
	if n := f.batches.Load(); n != 1 {
		t.Errorf("the batch was sent %d times, want 1", n)
	}
}

// Column types of a result set (MS-TDS 2.2.5.4).
const (
	tdsIntN           = 0x26
	tdsBitN           = 0x68
	tdsNVarChar       = 0xE7
	tdsDateTimeOffset = 0x2B
	tdsBigBinary      = 0xAD
	tdsRow            = 0xD1
)

// acquireAnswer encodes the acquire batch's result row as SQL Server sends
// it: COLMETADATA for TINYINT, NVARCHAR(400), BIGINT, DATETIMEOFFSET(7),
// BINARY(8), BIGINT, BIT, INT, one ROW, and DONE. nil values are NULL.
func acquireAnswer(outcome byte, holder *string, token *int64, expires *time.Time, rowVer []byte, remainingUs *int64, queued bool) []byte {
	var b bytes.Buffer
	column := func(typeInfo []byte, name string) {
		binary.Write(&b, binary.LittleEndian, uint32(0)) // user type
		binary.Write(&b, binary.LittleEndian, uint16(1)) // flags: nullable
		b.Write(typeInfo)
		u := utf16.Encode([]rune(name))
		b.WriteByte(byte(len(u)))
		for _, r := range u {
			binary.Write(&b, binary.LittleEndian, r)
		}
	}
	b.WriteByte(tdsColMetadata)
	binary.Write(&b, binary.LittleEndian, uint16(8))
	column([]byte{tdsIntN, 1}, "Outcome")
	column([]byte{tdsNVarChar, 0x20, 0x03, 0x09, 0x04, 0xD0, 0x00, 0x34}, "Holder") // 800 bytes, a collation
	column([]byte{tdsIntN, 8}, "FencingToken")
	column([]byte{tdsDateTimeOffset, 7}, "ExpiresAtUtc")
	column([]byte{tdsBigBinary, 8, 0}, "RowVer")
	column([]byte{tdsIntN, 8}, "RemainingUs")
	column([]byte{tdsBitN, 1}, "Queued")
	column([]byte{tdsIntN, 4}, "HeldLimit")

	b.WriteByte(tdsRow)
	b.Write([]byte{1, outcome})
	if holder == nil {
		b.Write([]byte{0xFF, 0xFF})
	} else {
		u := utf16.Encode([]rune(*holder))
		binary.Write(&b, binary.LittleEndian, uint16(2*len(u))) // in bytes
		binary.Write(&b, binary.LittleEndian, u)
	}
	bigint := func(v *int64) {
		if v == nil {
			b.WriteByte(0)
			return
		}
		b.WriteByte(8)
		binary.Write(&b, binary.LittleEndian, *v)
	}
	bigint(token)
	if expires == nil {
		b.WriteByte(0)
	} else {
		// UTC time of day in 100 ns units (5 bytes), UTC days since
		// 0001-01-01 (3 bytes), then the offset in minutes.
		utc := expires.UTC()
		midnight := time.Date(utc.Year(), utc.Month(), utc.Day(), 0, 0, 0, 0, time.UTC)
		ticks := uint64(utc.Sub(midnight) / 100)
		days := uint32((midnight.Unix() - time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).Unix()) / 86400) // a Duration holds only 292 years
		_, offset := expires.Zone()
		b.WriteByte(10)
		b.Write(binary.LittleEndian.AppendUint64(nil, ticks)[:5])
		b.Write(binary.LittleEndian.AppendUint32(nil, days)[:3])
		binary.Write(&b, binary.LittleEndian, int16(offset/60))
	}
	if rowVer == nil {
		b.Write([]byte{0xFF, 0xFF})
	} else {
		binary.Write(&b, binary.LittleEndian, uint16(len(rowVer)))
		b.Write(rowVer)
	}
	bigint(remainingUs)
	b.WriteByte(1) // the BIT's length
	if queued {
		b.WriteByte(1)
	} else {
		b.WriteByte(0)
	}
	b.WriteByte(0) // HeldLimit NULL: only a refusal for the limit has one
	b.WriteByte(tdsDone)
	binary.Write(&b, binary.LittleEndian, uint16(0x0010)) // row count valid
	binary.Write(&b, binary.LittleEndian, uint16(0xC1))   // SELECT
	binary.Write(&b, binary.LittleEndian, uint64(1))
	return b.Bytes()
}

// TestAcquireAnswerThroughTheDriver: the acquire result, encoded as SQL
// Server sends it, decodes through go-mssqldb into the grant or refusal
// (TINYINT outcome, DATETIMEOFFSET with its offset, BINARY(8), BIT, NULLs);
// the go-sqlmock tests hand Go values to the scanner instead.
func TestAcquireAnswerThroughTheDriver(t *testing.T) {
	expires := time.Date(2026, 3, 1, 12, 0, 30, 123456700, time.FixedZone("+02:00", 2*60*60))
	str := func(s string) *string { return &s }
	num := func(n int64) *int64 { return &n }
	cases := []struct {
		name   string
		answer []byte
		want   backend.Grant
	}{
		{"refusal", acquireAnswer(outcomeBusy, str("other ✓"), num(39), &expires, nil, num(29_500_001), false),
			backend.Grant{Holder: "other ✓", HolderToken: 39, HolderExpiresAt: expires.UTC(), HolderExpiresIn: 29_500_001 * time.Microsecond}},
		{"queued refusal", acquireAnswer(outcomeBusy, str("other"), num(39), &expires, nil, num(5), true),
			backend.Grant{Holder: "other", HolderToken: 39, HolderExpiresAt: expires.UTC(), HolderExpiresIn: 5 * time.Microsecond, Queued: true}},
		// The queue head's turn: no holder, no token, the turn's end and
		// time left.
		{"turn", acquireAnswer(outcomeTurn, nil, nil, &expires, nil, num(700_000), true),
			backend.Grant{HolderExpiresAt: expires.UTC(), HolderExpiresIn: 700 * time.Millisecond, Queued: true}},
		{"grant", acquireAnswer(outcomeInserted, str("me"), num(41), &expires, []byte{0, 0, 0, 0, 0, 0, 7, 0xd1}, nil, false),
			backend.Grant{Acquired: true, Token: 41, ExpiresAt: expires.UTC()}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeTDS(t, func(conn net.Conn) { _ = writeTDSPacket(conn, 1, c.answer) })
			db, err := sql.Open("sqlserver", "sqlserver://sa:x@"+f.ln.Addr().String()+"?encrypt=disable&dial+timeout=10")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			b, err := New(db)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { b.Close() })
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			g, err := b.Acquire(ctx, backend.AcquireRequest{Key: "k", Owner: "me", Attempt: "a", TTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			if g != c.want {
				t.Errorf("grant = %+v\nwant    %+v", g, c.want)
			}
		})
	}
}

// The conformance suites' black-holed link, on the fake server: the proxy
// carries the driver's connections (the first batch reaches the server),
// and once it is black-holed every call ends with its context, with its
// error, and nothing more reaches the server. Each call names a key of its
// own, so that it waits on the driver rather than behind the abandoned
// calls before it.
func TestBlackholedLinkEndsCallsWithTheirContext(t *testing.T) {
	f := newFakeTDS(t, func(c net.Conn) { c.Close() })
	db, blackhole := proxiedDB(t, "sqlserver://sa:x@"+f.ln.Addr().String()+"?encrypt=disable&dial+timeout=10")
	b, err := New(db, WithRetry(1, time.Millisecond, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	var n atomic.Int64
	key := func() string { return fmt.Sprintf("k%d", n.Add(1)) }
	renew := func() backend.RenewRequest {
		return backend.RenewRequest{Key: key(), Owner: "o", Attempt: "a", Token: 1, TTL: time.Second}
	}
	calls := []struct {
		name string
		fn   func(ctx context.Context) error
	}{
		{"Acquire", func(ctx context.Context) error {
			_, err := b.Acquire(ctx, backend.AcquireRequest{Key: key(), Owner: "o", Attempt: "a", TTL: time.Second})
			return err
		}},
		{"Renew", func(ctx context.Context) error { _, err := b.Renew(ctx, renew()); return err }},
		{"Release", func(ctx context.Context) error {
			return b.Release(ctx, backend.ReleaseRequest{Key: key(), Owner: "o", Attempt: "a", Token: 1})
		}},
		{"Inspect", func(ctx context.Context) error { _, _, err := b.Inspect(ctx, key()); return err }},
		{"List", func(ctx context.Context) error {
			return b.List(ctx, key(), func(backend.Holder) bool { return true })
		}},
		{"Revoke", func(ctx context.Context) error { _, _, err := b.Revoke(ctx, key(), 1); return err }},
		{"RenewBatch", func(ctx context.Context) error {
			_, err := b.RenewBatch(ctx, []backend.RenewRequest{renew(), renew()})
			return err
		}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := calls[0].fn(ctx); err == nil || f.batches.Load() != 1 {
		t.Fatalf("through the proxy: %v with %d batches at the server; want the dropped connection's error after one", err, f.batches.Load())
	}
	blackhole()
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			t.Run("Cancelled", func(t *testing.T) { backendtest.EndsWithContext(t, true, c.fn) })
			t.Run("Deadline", func(t *testing.T) { backendtest.EndsWithContext(t, false, c.fn) })
		})
	}
	if n := f.batches.Load(); n != 1 {
		t.Errorf("%d batches reached the server through the black hole", n-1)
	}
}
