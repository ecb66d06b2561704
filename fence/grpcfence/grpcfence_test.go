package grpcfence_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/backend/memory"
	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/fence/fencetest"
	"github.com/leasehold/leasehold/fence/grpcfence"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// service is a key-value store behind the server interceptors, served in
// process over bufconn: Put sets the fenced resource's value; Append, a
// client stream, sets it to the concatenation of the stream's values.
type service struct {
	conn *grpc.ClientConn // through the client interceptors
	raw  *grpc.ClientConn // without them
	mu   sync.Mutex
	data map[string]string
}

// serviceDesc is the service's hand-written descriptor: its messages are
// protobuf's well-known wrappers, so no generated code is needed.
func (s *service) serviceDesc() *grpc.ServiceDesc {
	return &grpc.ServiceDesc{
		ServiceName: "leasehold.test.Store",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Put", Handler: func(_ any, ctx context.Context, dec func(any) error, icp grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			h := func(ctx context.Context, req any) (any, error) {
				return s.put(ctx, req.(*wrapperspb.StringValue).Value)
			}
			if icp == nil {
				return h(ctx, in)
			}
			return icp(ctx, in, &grpc.UnaryServerInfo{FullMethod: "/leasehold.test.Store/Put"}, h)
		}}},
		Streams: []grpc.StreamDesc{{StreamName: "Append", ClientStreams: true, Handler: func(_ any, ss grpc.ServerStream) error {
			value := ""
			for {
				in := new(wrapperspb.StringValue)
				err := ss.RecvMsg(in)
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					return err
				}
				value += in.Value
			}
			out, err := s.put(ss.Context(), value)
			if err != nil {
				return err
			}
			return ss.SendMsg(out)
		}}},
	}
}

func (s *service) put(ctx context.Context, value string) (*emptypb.Empty, error) {
	resource, _, ok := grpcfence.TokenFrom(ctx)
	if !ok {
		return nil, status.Error(codes.Internal, "no token in the context")
	}
	s.mu.Lock()
	s.data[resource] = value
	s.mu.Unlock()
	return &emptypb.Empty{}, nil
}

func newService(t *testing.T, store fence.Store) *service {
	t.Helper()
	s := &service{data: map[string]string{}}
	lis := bufconn.Listen(1 << 20)
	fs := grpcfence.NewServer(store)
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(fs.Unary), grpc.ChainStreamInterceptor(fs.Stream))
	srv.RegisterService(s.serviceDesc(), nil)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(lis)
	}()
	dial := func(opts ...grpc.DialOption) *grpc.ClientConn {
		conn, err := grpc.NewClient("passthrough:///bufnet", append(opts,
			grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
			grpc.WithTransportCredentials(insecure.NewCredentials()))...)
		if err != nil {
			t.Fatal(err)
		}
		return conn
	}
	s.conn = dial(grpc.WithChainUnaryInterceptor(grpcfence.UnaryClientInterceptor("")),
		grpc.WithChainStreamInterceptor(grpcfence.StreamClientInterceptor("")))
	s.raw = dial()
	t.Cleanup(func() {
		s.conn.Close()
		s.raw.Close()
		srv.Stop()
		<-served
	})
	return s
}

func (s *service) putCall(ctx context.Context, value string) error {
	return s.conn.Invoke(ctx, "/leasehold.test.Store/Put", wrapperspb.String(value), new(emptypb.Empty))
}

func (s *service) appendCall(ctx context.Context, values ...string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	desc := &s.serviceDesc().Streams[0]
	cs, err := s.conn.NewStream(ctx, desc, "/leasehold.test.Store/Append")
	if err != nil {
		return err
	}
	for _, v := range values {
		if err := cs.SendMsg(wrapperspb.String(v)); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
	}
	if err := cs.CloseSend(); err != nil {
		return err
	}
	return cs.RecvMsg(new(emptypb.Empty))
}

// guard is the service as a fencetest.Guard: it sends the metadata by hand,
// as the client interceptors would for a lease with this token (they are
// tested below with real leases), on the connection without them.
type guard struct{ s *service }

func (g guard) Write(ctx context.Context, resource string, token uint64, value string) error {
	if err := fence.Validate(resource, token); err != nil {
		return err // the metadata could not carry it
	}
	ctx = metadata.AppendToOutgoingContext(ctx, grpcfence.TokenKey, strconv.FormatUint(token, 10), grpcfence.ResourceKey, resource)
	return grpcfence.CheckError(g.s.raw.Invoke(ctx, "/leasehold.test.Store/Put", wrapperspb.String(value), new(emptypb.Empty)))
}

func (g guard) Read(ctx context.Context, resource string) (string, error) {
	g.s.mu.Lock()
	defer g.s.mu.Unlock()
	return g.s.data[resource], nil
}

func TestServerConformance(t *testing.T) {
	fencetest.Run(t, func(t *testing.T) fencetest.Guard { return guard{newService(t, fence.NewMemory())} })
}

// The whole path with real leases, unary and streaming: after a takeover,
// the stale holder's calls through the client interceptors are refused
// with FailedPrecondition, matched as ErrStaleToken, and B's value stands.
func TestStaleHolderRefusedAfterTakeover(t *testing.T) {
	for _, c := range []struct {
		name string
		call func(s *service, ctx context.Context, value string) error
	}{
		{"Unary", func(s *service, ctx context.Context, value string) error { return s.putCall(ctx, value) }},
		{"Stream", func(s *service, ctx context.Context, value string) error {
			return s.appendCall(ctx, value[:1], value[1:])
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newService(t, fence.NewMemory())
			ctx := context.Background()
			m, err := leasehold.New(memory.New())
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close(ctx)
			a, err := m.Acquire(ctx, "job")
			if err != nil {
				t.Fatal(err)
			}
			if err := c.call(s, a.Context(), "A's work"); err != nil {
				t.Fatal(err)
			}
			aCtx, tokenA := a.Context(), a.Token()
			// A's lease ends (released here; expired under a paused A in
			// real life); a call under a live context of that lease still
			// carries A's token: LeaseFrom answers for a done context too.
			if err := a.Release(ctx); err != nil {
				t.Fatal(err)
			}
			b, err := m.Acquire(ctx, "job")
			if err != nil {
				t.Fatal(err)
			}
			defer b.Release(ctx)
			if err := c.call(s, b.Context(), "B's work"); err != nil {
				t.Fatal(err)
			}
			err = c.call(s, context.WithoutCancel(aCtx), "A's late work")
			var se *leasehold.StaleTokenError
			if !errors.As(err, &se) || se.Token != tokenA || se.Highest != b.Token() || se.Resource != "job" {
				t.Fatalf("A's late call: %v, want a StaleTokenError of %d under %d", err, tokenA, b.Token())
			}
			if !errors.Is(err, leasehold.ErrStaleToken) || status.Code(err) != codes.FailedPrecondition {
				t.Fatalf("A's late call: %v (code %v), want ErrStaleToken and FailedPrecondition", err, status.Code(err))
			}
			if v, _ := (guard{s}).Read(ctx, "job"); v != "B's work" {
				t.Fatalf("value %q, want B's work", v)
			}
		})
	}
}

func TestClientSendsNothingWithoutALease(t *testing.T) {
	s := newService(t, fence.NewMemory())
	if err := s.putCall(context.Background(), "x"); !errors.Is(err, grpcfence.ErrNoLease) {
		t.Fatalf("unary call without a lease: %v, want ErrNoLease", err)
	}
	if err := s.appendCall(context.Background(), "x"); !errors.Is(err, grpcfence.ErrNoLease) {
		t.Fatalf("stream without a lease: %v, want ErrNoLease", err)
	}
	if len(s.data) != 0 {
		t.Fatalf("data written without a lease: %v", s.data)
	}
}

func TestServerRefusesMissingMetadata(t *testing.T) {
	s := newService(t, fence.NewMemory())
	ctx := context.Background()
	for _, md := range [][]string{
		nil,
		{grpcfence.ResourceKey, "job"},
		{grpcfence.TokenKey, "x", grpcfence.ResourceKey, "job"},
		{grpcfence.TokenKey, "0", grpcfence.ResourceKey, "job"},
		{grpcfence.TokenKey, "3"},
		{grpcfence.TokenKey, "3", grpcfence.TokenKey, "4", grpcfence.ResourceKey, "job"},
	} {
		err := s.raw.Invoke(metadata.AppendToOutgoingContext(ctx, md...), "/leasehold.test.Store/Put", wrapperspb.String("x"), new(emptypb.Empty))
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("metadata %q: %v, want InvalidArgument", md, err)
		}
	}
	if len(s.data) != 0 {
		t.Fatalf("data written without valid metadata: %v", s.data)
	}
}

// failingStore is a fence.Store whose every check fails.
type failingStore struct{}

func (failingStore) Check(context.Context, string, uint64) error { return errors.New("store down") }

func TestServerFailsClosedWhenTheStoreFails(t *testing.T) {
	s := newService(t, failingStore{})
	err := guard{s}.Write(context.Background(), "job", 1, "x")
	if status.Code(err) != codes.Unavailable || errors.Is(err, leasehold.ErrStaleToken) {
		t.Fatalf("write while the store fails: %v, want Unavailable", err)
	}
	if len(s.data) != 0 {
		t.Fatalf("data written while the store fails: %v", s.data)
	}
}
