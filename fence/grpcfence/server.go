package grpcfence

import (
	"context"
	"errors"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/fence"
)

// Server holds the server interceptors of one fence.Store. A call without
// valid fencing metadata is refused with codes.InvalidArgument, a stale
// token with codes.FailedPrecondition (its details an ErrorInfo, see
// CheckError), a failing store with codes.Unavailable; the handler never
// sees them. Calls of one resource run their handler one at a time, the
// check included (a stream from its start to its end), so that with a
// store only this process writes to (fence.Memory) a stale call can never
// pass the check while a newer one is being handled. Several server
// processes need a shared store (postgres.FenceStore, redis.FenceStore)
// and, to be exact, the write's own guard: see docs/fencing-tokens.md.
type Server struct {
	store fence.Store

	serial fence.Serial
}

// NewServer returns the server interceptors on store.
func NewServer(store fence.Store) *Server {
	return &Server{store: store}
}

// Unary is the grpc.UnaryServerInterceptor (grpc.ChainUnaryInterceptor).
func (s *Server) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	ctx, unlock, err := s.check(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return handler(ctx, req)
}

// Stream is the grpc.StreamServerInterceptor (grpc.ChainStreamInterceptor).
func (s *Server) Stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx, unlock, err := s.check(ss.Context())
	if err != nil {
		return err
	}
	defer unlock()
	return handler(srv, &serverStream{ServerStream: ss, ctx: ctx})
}

// check reads and checks the call's fencing metadata, and returns the
// call's context carrying it and the function that ends the resource's
// turn.
func (s *Server) check(ctx context.Context) (context.Context, func(), error) {
	md, _ := metadata.FromIncomingContext(ctx)
	token, err := strconv.ParseUint(first(md, TokenKey), 10, 64)
	if err != nil {
		return nil, nil, status.Error(codes.InvalidArgument, "grpcfence: missing or invalid "+TokenKey+" metadata")
	}
	resource := first(md, ResourceKey)
	if err := fence.Validate(resource, token); err != nil {
		return nil, nil, status.Error(codes.InvalidArgument, err.Error())
	}
	unlock := s.serial.Lock(resource)
	var se *leasehold.StaleTokenError
	switch err := s.store.Check(ctx, resource, token); {
	case err == nil:
		return context.WithValue(ctx, tokenKey{}, fenced{resource, token}), unlock, nil
	case errors.As(err, &se):
		unlock()
		return nil, nil, staleStatus(se)
	default:
		unlock()
		return nil, nil, status.Error(codes.Unavailable, "grpcfence: fence store: "+err.Error())
	}
}

func first(md metadata.MD, key string) string {
	if v := md.Get(key); len(v) == 1 {
		return v[0]
	}
	return "" // none, or several: refused as invalid
}

type tokenKey struct{}

type fenced struct {
	resource string
	token    uint64
}

// TokenFrom returns the resource and token of a call that Server let
// through: a handler writing to a store with a guard of its own (say
// postgres.Fence in the write's transaction) passes them on.
func TokenFrom(ctx context.Context) (resource string, token uint64, ok bool) {
	f, ok := ctx.Value(tokenKey{}).(fenced)
	return f.resource, f.token, ok
}

// serverStream is a stream whose context carries the checked token.
type serverStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *serverStream) Context() context.Context { return s.ctx }
