package sqlserver

import (
	"context"

	"github.com/leasehold/leasehold/backend"
)

// Holders returns the key's one live holding, if any: the store keeps
// exclusive holdings only (Info.MaxLimit 0).
func (b *Backend) Holders(ctx context.Context, key string) ([]backend.Holder, error) {
	return backend.HoldersFromInspect(ctx, b, key)
}
