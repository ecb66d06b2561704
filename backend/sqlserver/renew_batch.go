package sqlserver

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/leasehold/leasehold/backend"
)

// maxBatchRenewals is how many renewals go in one round trip: five parameters
// each (2000) stay under SQL Server's 2100 parameters per request, and the
// rows stay under the 1000 rows of a table value constructor.
const maxBatchRenewals = 400

// RenewBatch renews many holdings in one round trip per 400 requests: one
// UPDATE joined to the requests, filtered like Renew by name, owner, attempt,
// token and expiry. It returns one result per request, in order: a Grant, or an error
// wrapping backend.ErrNotHeld (holding gone) or backend.ErrInvalidRequest
// (request rejected before any write). A non-nil error means the batch as a
// whole could not be confirmed (fail closed: no result is reported then).
func (b *Backend) RenewBatch(ctx context.Context, rs []backend.RenewRequest) ([]backend.RenewResult, error) {
	results := make([]backend.RenewResult, len(rs))
	// first maps each holding to the index of its first request, so that a
	// holding asked twice is sent once and both get its result.
	type holding struct {
		key, owner, attempt string
		token               int64
	}
	first := map[holding]int{}
	var send []int // indexes of the requests to send
	for i, r := range rs {
		if err := r.Validate(); err != nil {
			results[i].Err = err
			continue
		}
		token, ok := tokenParam(r.Token)
		if !ok {
			results[i].Err = fmt.Errorf("sqlserver: renew %q: token %d was never issued: %w", r.Key, r.Token, backend.ErrNotHeld)
			continue
		}
		h := holding{r.Key, r.Owner, r.Attempt, token}
		if _, dup := first[h]; dup {
			continue
		}
		first[h] = i
		send = append(send, i)
	}
	renewed := map[int]backend.Grant{}
	for start := 0; start < len(send); start += maxBatchRenewals {
		chunk := send[start:min(start+maxBatchRenewals, len(send))]
		err := b.retry(ctx, "renew batch", chunkNames(rs, chunk), func(ctx context.Context) error {
			got, err := b.renewChunk(ctx, rs, chunk)
			if err == nil {
				for i, g := range got {
					renewed[i] = g
				}
			}
			return err
		})
		if err != nil {
			b.logFailure(ctx, "batch renew failed", err, "renewals", len(chunk))
			return nil, fmt.Errorf("sqlserver: batch renew of %d holdings: %w", len(chunk), err)
		}
	}
	for i, r := range rs {
		if results[i].Err != nil {
			continue
		}
		token, _ := tokenParam(r.Token)
		j := first[holding{r.Key, r.Owner, r.Attempt, token}]
		if g, ok := renewed[j]; ok {
			results[i].Grant = g
		} else {
			results[i].Err = notHeld(r)
		}
	}
	return results, nil
}

// renewChunk renews the requests rs[idx...] in one batch and returns the
// grants by request index; requests that are not held are absent.
func (b *Backend) renewChunk(ctx context.Context, rs []backend.RenewRequest, idx []int) (map[int]backend.Grant, error) {
	args := make([]any, 0, 5*len(idx))
	var ttls []int64 // the chunk's distinct TTLs, in order of first appearance
	for _, i := range idx {
		token, _ := tokenParam(rs[i].Token)
		ttl := ttlMicros(rs[i].TTL)
		args = append(args,
			sql.Named(fmt.Sprint("n", i), rs[i].Key),
			sql.Named(fmt.Sprint("o", i), rs[i].Owner),
			sql.Named(fmt.Sprint("a", i), rs[i].Attempt),
			sql.Named(fmt.Sprint("t", i), token),
			sql.Named(fmt.Sprint("u", i), ttl),
		)
		if !slices.Contains(ttls, ttl) {
			ttls = append(ttls, ttl)
		}
	}
	rows, err := b.db.QueryContext(ctx, renewBatchSQL(b.names, idx, ttls), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	// The batch returns the renewed rows' own columns (an OUTPUT of the
	// joined request table's columns is refused by some engines), matched
	// here to their requests: the join compares them exactly (binary
	// collation and byte lengths), so equal strings are the same holding.
	type holding struct {
		key, owner, attempt string
		token               int64
	}
	want := make(map[holding]int, len(idx))
	for _, i := range idx {
		token, _ := tokenParam(rs[i].Token)
		want[holding{rs[i].Key, rs[i].Owner, rs[i].Attempt, token}] = i
	}
	got := map[int]backend.Grant{}
	for rows.Next() {
		var (
			h       holding
			expires sql.NullTime
		)
		if err := rows.Scan(&h.key, &h.owner, &h.attempt, &h.token, &expires); err != nil {
			return nil, fmt.Errorf("sqlserver: scanning the batch renew result: %w", err)
		}
		i, asked := want[h]
		if _, seen := got[i]; !asked || seen || !expires.Valid {
			return nil, fmt.Errorf("sqlserver: malformed batch renew result (key %q, token %d)", h.key, h.token)
		}
		got[i] = backend.Grant{Acquired: true, Token: uint64(h.token), ExpiresAt: expires.Time.UTC()}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return got, nil
}

// renewBatchSQL builds the batch for requests idx: parameters @nI, @oI, @aI,
// @tI, @uI (name, owner, attempt, token, TTL in microseconds) of request I;
// ttls are their distinct TTLs, written into the batch as numbers (they are
// integers this package computed, and parameters for them could pass SQL
// Server's 2,100 per request). The request table's text
// columns use the table's binary collation; otherwise the join would fail on
// a collation conflict or compare case-insensitively.
//
// There is one UPDATE per distinct TTL (a batch's renewals mostly share
// one), which sets the expiry from that number: an UPDATE whose SET reads
// the joined request table and that has an OUTPUT clause is refused by
// Babelfish for PostgreSQL (missing FROM-clause entry), as is an OUTPUT of
// the request table's columns; SQL Server takes either.
//
// @out keeps each renewed row's LeaseNameBytes beside its name: SQL Server
// ignores trailing spaces in GROUP BY as in =, so names are grouped and
// joined by both, exactly as keyMatch compares them.
//
// Requests that no exclusive row renewed and whose name has a record are
// renewed among the holdings of names with several holders, in the same
// round trip (renewSharedUpdateTemplate); when every request was renewed,
// that part costs one count of the table variable.
func renewBatchSQL(n objectNames, idx []int, ttls []int64) string {
	var values strings.Builder
	for k, i := range idx {
		if k > 0 {
			values.WriteString(",\n    ")
		}
		fmt.Fprintf(&values, "(%d, @n%d, @o%d, @a%d, @t%d, @u%d)", i, i, i, i, i, i)
	}
	var updates, shared strings.Builder
	for _, ttl := range ttls {
		r := strings.NewReplacer("{ttl}", strconv.FormatInt(ttl, 10), "{table}", n.tableQ, "{holds}", n.holdsQ)
		updates.WriteString(r.Replace(renewUpdateTemplate))
		shared.WriteString(r.Replace(renewSharedUpdateTemplate))
	}
	return strings.NewReplacer("{table}", n.tableQ, "{holds}", n.holdsQ, "{values}", values.String(), "{updates}", updates.String(),
		"{sharedUpdates}", shared.String(), "{count}", strconv.Itoa(len(idx))).Replace(renewBatchTemplate)
}

const renewBatchTemplate = `SET NOCOUNT ON;
SET XACT_ABORT ON;

DECLARE @req TABLE (
    Idx             INT           NOT NULL PRIMARY KEY,
    LeaseName       NVARCHAR(400) COLLATE ` + binaryCollation + ` NOT NULL,
    OwnerInstanceId NVARCHAR(400) COLLATE ` + binaryCollation + ` NOT NULL,
    AttemptId       NVARCHAR(64)  COLLATE ` + binaryCollation + ` NOT NULL,
    FencingToken    BIGINT        NOT NULL,
    TtlUs           BIGINT        NOT NULL
);
INSERT INTO @req (Idx, LeaseName, OwnerInstanceId, AttemptId, FencingToken, TtlUs) VALUES
    {values};

DECLARE @out TABLE (
    LeaseName       NVARCHAR(400)     COLLATE ` + binaryCollation + ` NOT NULL,
    LeaseNameBytes  INT               NOT NULL,
    OwnerInstanceId NVARCHAR(400)     NOT NULL,
    AttemptId       NVARCHAR(64)      NOT NULL,
    FencingToken    BIGINT            NOT NULL,
    ExpiresAtUtc    DATETIMEOFFSET(7) NOT NULL
);
DECLARE @now DATETIMEOFFSET(7) = SYSDATETIMEOFFSET();
{updates}
IF (SELECT COUNT_BIG(*) FROM @out) < {count}
   AND EXISTS (SELECT 1 FROM @req AS r
               INNER JOIN {table} AS m ON m.LeaseName = r.LeaseName AND m.LeaseNameBytes = DATALENGTH(r.LeaseName)
               WHERE m.AttemptId = N'' AND m.HolderLimit > 1)
BEGIN
    BEGIN TRANSACTION;
    UPDATE m
    SET HolderLimit = m.HolderLimit
    FROM {table} AS m WITH (ROWLOCK)
    INNER JOIN @req AS r ON m.LeaseName = r.LeaseName AND m.LeaseNameBytes = DATALENGTH(r.LeaseName)
    WHERE m.AttemptId = N'' AND m.HolderLimit > 1;
    SET @now = SYSDATETIMEOFFSET();
{sharedUpdates}
    UPDATE m
    SET ExpiresAtUtc = x.LastExpires
    FROM {table} AS m WITH (ROWLOCK)
    INNER JOIN (SELECT LeaseName, LeaseNameBytes, MAX(ExpiresAtUtc) AS LastExpires FROM @out GROUP BY LeaseName, LeaseNameBytes) AS x
        ON m.LeaseName = x.LeaseName AND m.LeaseNameBytes = x.LeaseNameBytes
    WHERE m.AttemptId = N'' AND m.HolderLimit > 1 AND m.ExpiresAtUtc < x.LastExpires;
    COMMIT TRANSACTION;
END;

SELECT LeaseName, OwnerInstanceId, AttemptId, FencingToken, ExpiresAtUtc FROM @out;
`

// renewUpdateTemplate renews the requests whose TTL is {ttl}.
const renewUpdateTemplate = `
UPDATE l
SET RenewedAtUtc = @now,
    ExpiresAtUtc = DATEADD(MICROSECOND, CAST({ttl} % 1000000 AS INT), DATEADD(SECOND, CAST({ttl} / 1000000 AS INT), @now))
OUTPUT inserted.LeaseName, inserted.LeaseNameBytes, inserted.OwnerInstanceId, inserted.AttemptId, inserted.FencingToken, inserted.ExpiresAtUtc
INTO @out (LeaseName, LeaseNameBytes, OwnerInstanceId, AttemptId, FencingToken, ExpiresAtUtc)
FROM {table} AS l WITH (ROWLOCK)
INNER JOIN @req AS r
    ON  l.LeaseName = r.LeaseName AND l.LeaseNameBytes = DATALENGTH(r.LeaseName)
    AND l.OwnerInstanceId = r.OwnerInstanceId AND DATALENGTH(l.OwnerInstanceId) = DATALENGTH(r.OwnerInstanceId)
    AND l.AttemptId = r.AttemptId AND DATALENGTH(l.AttemptId) = DATALENGTH(r.AttemptId)
    AND l.FencingToken = r.FencingToken
    AND r.TtlUs = {ttl}
WHERE l.ExpiresAtUtc > @now;
`

// renewSharedUpdateTemplate renews, as renewUpdateTemplate, the holdings of
// names with several holders whose TTL is {ttl} (shared.go): it runs only
// when some request was not renewed and names a record, after the
// records' locks, and the records are then extended with their holdings.
const renewSharedUpdateTemplate = `
    UPDATE h
    SET RenewedAtUtc = @now,
        ExpiresAtUtc = DATEADD(MICROSECOND, CAST({ttl} % 1000000 AS INT), DATEADD(SECOND, CAST({ttl} / 1000000 AS INT), @now))
    OUTPUT inserted.LeaseName, inserted.LeaseNameBytes, inserted.OwnerInstanceId, inserted.AttemptId, inserted.FencingToken, inserted.ExpiresAtUtc
    INTO @out (LeaseName, LeaseNameBytes, OwnerInstanceId, AttemptId, FencingToken, ExpiresAtUtc)
    FROM {holds} AS h WITH (ROWLOCK)
    INNER JOIN @req AS r
        ON  h.LeaseName = r.LeaseName AND h.LeaseNameBytes = DATALENGTH(r.LeaseName)
        AND h.OwnerInstanceId = r.OwnerInstanceId AND DATALENGTH(h.OwnerInstanceId) = DATALENGTH(r.OwnerInstanceId)
        AND h.AttemptId = r.AttemptId AND DATALENGTH(h.AttemptId) = DATALENGTH(r.AttemptId)
        AND h.FencingToken = r.FencingToken
        AND r.TtlUs = {ttl}
    WHERE h.ExpiresAtUtc > @now;
`

// chunkNames are the keys of the requests rs[idx...].
func chunkNames(rs []backend.RenewRequest, idx []int) []string {
	names := make([]string, len(idx))
	for j, i := range idx {
		names[j] = rs[i].Key
	}
	return names
}
