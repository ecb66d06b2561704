package grpcfence_test

import (
	"context"
	"errors"
	"fmt"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/leasehold/leasehold/fence"
	"github.com/leasehold/leasehold/fence/grpcfence"
)

// The gRPC middleware of docs/fencing-tokens.md, verbatim between the
// markers (readme_test.go in the root package checks it).
func Example() {
	ctx := context.Background()
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	target := lis.Addr().String()
	run := func() error {
		// docs/fencing-tokens.md: gRPC
		// The server: one process, fence.NewMemory(); several, a shared
		// store such as postgres.FenceStore or redis.FenceStore.
		fs := grpcfence.NewServer(fence.NewMemory())
		srv := grpc.NewServer(grpc.ChainUnaryInterceptor(fs.Unary), grpc.ChainStreamInterceptor(fs.Stream))
		defer srv.Stop()
		go srv.Serve(lis)

		// The client: every call carries the token of the lease on its
		// context, and a refusal matches leasehold.ErrStaleToken.
		conn, err := grpc.NewClient(target,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithChainUnaryInterceptor(grpcfence.UnaryClientInterceptor("")), // "": the lease's name
			grpc.WithChainStreamInterceptor(grpcfence.StreamClientInterceptor("")))
		if err != nil {
			return err
		}
		defer conn.Close()
		// end docs
		// A call outside a lease is not sent.
		err = conn.Invoke(ctx, "/reports.Reports/Save", wrapperspb.String("42 invoices"), new(emptypb.Empty))
		fmt.Println("without a lease:", errors.Is(err, grpcfence.ErrNoLease))
		return nil
	}
	if err := run(); err != nil {
		fmt.Println(err)
	}
	// Output:
	// without a lease: true
}
