package leasehold

import (
	"context"
	"log/slog"
)

// plumbingHandler logs protoactor's own records a level lower: "actor system
// started" is the engine's plumbing, not news for the application that gave
// WithLogger. Info and below become Debug; warnings and errors stay.
type plumbingHandler struct{ slog.Handler }

func demote(l slog.Level) slog.Level {
	if l < slog.LevelWarn {
		return slog.LevelDebug
	}
	return l
}

func (h plumbingHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.Handler.Enabled(ctx, demote(l))
}

func (h plumbingHandler) Handle(ctx context.Context, r slog.Record) error {
	r.Level = demote(r.Level)
	return h.Handler.Handle(ctx, r)
}

func (h plumbingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return plumbingHandler{h.Handler.WithAttrs(as)}
}

func (h plumbingHandler) WithGroup(name string) slog.Handler {
	return plumbingHandler{h.Handler.WithGroup(name)}
}
