package mysql

// nowUs is the server's UTC clock in microseconds since the Unix epoch, by
// arithmetic on UTC_TIMESTAMP(6), so that no time zone applies.
const nowUs = "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))"

// queries are the statements on one lease table.
type queries struct {
	acquire, release, revoke, sweep string // the procedures (procs.go)
	renew, renewRead                string
	abandoned                       string
	inspect, holders, list          string
}

func newQueries(n names) queries {
	const live = "expires_us > " + nowUs
	return queries{
		acquire: "CALL " + n.proc(acquireSuffix) + "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
		release: "CALL " + n.proc(releaseSuffix) + "(?, ?, ?, ?)",
		revoke:  "CALL " + n.proc(revokeSuffix) + "(?, ?)",
		sweep:   "CALL " + n.proc(sweepSuffix) + "(?)",
		// renewals changes on every renewal, so that the row counts as
		// changed (MySQL reports changed rows, not matched ones) even when
		// two renewals set the same expiry.
		renew: "UPDATE " + n.holds + " SET expires_us = " + nowUs + " + ?, renewals = renewals + 1" +
			" WHERE token = ? AND name = ? AND owner = ? AND attempt = ? AND " + live,
		// Names with an expired holding (by the expires index) or an
		// expired queue entry, for the sweep.
		abandoned: "(SELECT name FROM " + n.holds + " WHERE expires_us <= " + nowUs + " ORDER BY expires_us LIMIT ?)" +
			" UNION (SELECT name FROM " + n.queue + " WHERE expires_us <= " + nowUs + " LIMIT ?)",
		renewRead: "SELECT expires_us FROM " + n.holds + " WHERE token = ?",
		inspect: "SELECT owner, token, expires_us, metadata, holder_limit, " + nowUs + " FROM " + n.holds +
			" WHERE name = ? AND " + live + " ORDER BY expires_us, token LIMIT 1",
		holders: "SELECT owner, token, expires_us, metadata, holder_limit, " + nowUs + " FROM " + n.holds +
			" WHERE name = ? AND " + live + " ORDER BY token",
		list: "SELECT name, owner, token, expires_us, metadata, holder_limit, " + nowUs + " FROM " + n.holds +
			" WHERE name >= ? AND LEFT(name, LENGTH(?)) = ? AND " + live + " ORDER BY name, token",
	}
}
