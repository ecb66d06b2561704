package grpcfence

import (
	"context"
	"fmt"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/leasehold/leasehold"
)

// UnaryClientInterceptor adds the fencing metadata to every unary call from
// the lease of the call's context (run the call under the lease's Context,
// or inside Do's function) and turns a refusal into an error matching
// leasehold.ErrStaleToken (CheckError). resource names the resource the
// token fences; "": the lease's name.
func UnaryClientInterceptor(resource string) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		ctx, err := withToken(ctx, resource, method)
		if err != nil {
			return err
		}
		return CheckError(invoker(ctx, method, req, reply, cc, opts...))
	}
}

// StreamClientInterceptor is UnaryClientInterceptor for streams: the
// metadata goes with the stream's start, and the stream's errors are passed
// through CheckError.
func StreamClientInterceptor(resource string) grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		ctx, err := withToken(ctx, resource, method)
		if err != nil {
			return nil, err
		}
		s, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			return nil, CheckError(err)
		}
		return &clientStream{s}, nil
	}
}

// withToken returns ctx with the fencing metadata of its lease.
func withToken(ctx context.Context, resource, method string) (context.Context, error) {
	l, ok := leasehold.LeaseFrom(ctx)
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNoLease, method)
	}
	if resource == "" {
		resource = l.Name()
	}
	return metadata.AppendToOutgoingContext(ctx, TokenKey, strconv.FormatUint(l.Token(), 10), ResourceKey, resource), nil
}

// clientStream passes a stream's errors through CheckError.
type clientStream struct{ grpc.ClientStream }

func (s *clientStream) SendMsg(m any) error { return CheckError(s.ClientStream.SendMsg(m)) }
func (s *clientStream) RecvMsg(m any) error { return CheckError(s.ClientStream.RecvMsg(m)) }

func (s *clientStream) Header() (metadata.MD, error) {
	md, err := s.ClientStream.Header()
	return md, CheckError(err)
}
