// Package grpcfence carries a lease's fencing token over gRPC: the client
// interceptors send the token of the lease on each call's context in the
// leasehold-token and leasehold-resource metadata, and the server
// interceptors refuse a call whose token is lower than the highest its
// resource has seen with codes.FailedPrecondition, so that a holder paused
// past its TTL cannot overwrite the work of its successor through the
// service.
package grpcfence

import (
	"errors"
	"fmt"
	"strconv"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/leasehold/leasehold"
)

// The metadata keys a fenced call carries.
const (
	TokenKey    = "leasehold-token"
	ResourceKey = "leasehold-resource"
)

// The ErrorInfo of a refusal's status details: Reason and Domain, and the
// Metadata keys naming the resource, the refused token and the highest.
const (
	StaleReason = "STALE_FENCING_TOKEN"
	Domain      = "leasehold"
)

// ErrNoLease is returned (wrapped) by the client interceptors for a call
// whose context holds no lease (see leasehold.LeaseFrom): it is not sent,
// rather than sent unfenced.
var ErrNoLease = errors.New("grpcfence: no lease in the call's context")

// staleStatus is the status of a refusal: FailedPrecondition, with an
// ErrorInfo naming the resource and both tokens.
func staleStatus(se *leasehold.StaleTokenError) error {
	st := status.New(codes.FailedPrecondition, se.Error())
	withInfo, err := st.WithDetails(&errdetails.ErrorInfo{Reason: StaleReason, Domain: Domain, Metadata: map[string]string{
		"resource": se.Resource,
		"token":    strconv.FormatUint(se.Token, 10),
		"highest":  strconv.FormatUint(se.Highest, 10),
	}})
	if err != nil {
		return st.Err() // still FailedPrecondition, without the details
	}
	return withInfo.Err()
}

// CheckError turns the error of a call that a server interceptor refused
// into one that also matches leasehold.ErrStaleToken (errors.As finds the
// *leasehold.StaleTokenError naming both tokens, status.Code still says
// FailedPrecondition); any other error comes back as it is. The client
// interceptors apply it to every error they return.
func CheckError(err error) error {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.FailedPrecondition {
		return err
	}
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || info.Reason != StaleReason || info.Domain != Domain {
			continue
		}
		token, err1 := strconv.ParseUint(info.Metadata["token"], 10, 64)
		highest, err2 := strconv.ParseUint(info.Metadata["highest"], 10, 64)
		if err1 != nil || err2 != nil {
			return err
		}
		return fmt.Errorf("%w: %w", err, &leasehold.StaleTokenError{Resource: info.Metadata["resource"], Token: token, Highest: highest})
	}
	return err
}
