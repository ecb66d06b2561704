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
