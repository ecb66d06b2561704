package mysql

import "strings"

// Suffixes of the stored procedures beside the lease table (at most as long
// as holdsSuffix, so that ValidateTable's bound fits them too).
const (
	acquireSuffix = "_acq"
	releaseSuffix = "_rel"
	revokeSuffix  = "_rev"
	sweepSuffix   = "_swp"
)

// procedures returns the statements that create the stored procedures of
// one lease table: Acquire, Release, Revoke and the sweep of one name each
// run as one CALL, a READ COMMITTED transaction that the procedure begins,
// under the name's row lock, and commits before it answers, so that the
// lock is never held while the server waits for the client. They apply
// the rules of backend/queue.go and backend/limit.go on the server's
// clock; grants and hand-offs draw their tokens from the holds table's
// AUTO_INCREMENT. Any error rolls the transaction back before it reaches
// the client. SQL SECURITY INVOKER: a caller needs the privileges on the
// tables that the statements need, and no definer account must outlive
// them.
func procedures(n names) map[string]string {
	r := strings.NewReplacer(
		"{leases}", n.leases, "{holds}", n.holds, "{queue}", n.queue,
		"{now}", nowUs, "{comment}", versionComment,
	)
	return map[string]string{
		n.table + acquireSuffix: "CREATE PROCEDURE " + n.proc(acquireSuffix) + r.Replace(acquireBody),
		n.table + releaseSuffix: "CREATE PROCEDURE " + n.proc(releaseSuffix) + r.Replace(releaseBody),
		n.table + revokeSuffix:  "CREATE PROCEDURE " + n.proc(revokeSuffix) + r.Replace(revokeBody),
		n.table + sweepSuffix:   "CREATE PROCEDURE " + n.proc(sweepSuffix) + r.Replace(sweepBody),
	}
}

// proc is the quoted name of the procedure of n's table with suffix.
func (n names) proc(suffix string) string { return "`" + n.schema + "`.`" + n.table + suffix + "`" }

// procedureNames are the procedures' unquoted names, in creation order.
func procedureNames(n names) []string {
	return []string{n.table + acquireSuffix, n.table + releaseSuffix, n.table + revokeSuffix, n.table + sweepSuffix}
}

// begin is the start of every procedure's transaction: READ COMMITTED, so
// that each statement reads what committed before it (a renewal that came
// in between), and the name's row locked first (inserted when missing:
// INSERT ... ON DUPLICATE KEY UPDATE locks it either way).
const begin = `
  DECLARE EXIT HANDLER FOR SQLEXCEPTION BEGIN ROLLBACK; RESIGNAL; END;
  SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
  START TRANSACTION;
  INSERT INTO {leases} (name) VALUES (p_name) ON DUPLICATE KEY UPDATE name = name;
  SET v_now = {now};`

// finish drops the name's row when nothing of the name is left, and
// commits.
const finish = `
  IF NOT EXISTS (SELECT 1 FROM {holds} WHERE name = p_name) AND NOT EXISTS (SELECT 1 FROM {queue} WHERE name = p_name) THEN
    DELETE FROM {leases} WHERE name = p_name;
  END IF;
  COMMIT;`

// handOn gives the slot a release or revoke of a live holding of limit
// v_limit freed to the head live entry of that limit (entries of another
// limit are dropped on the way), for its pickup window, and ends the
// heads' turns; v_handed is the new holding's token (0: none).
const handOn = `
  DELETE FROM {queue} WHERE name = p_name AND expires_us <= v_now;
  hand: LOOP
    SET v_pos = 0;
    SELECT position, owner, attempt, metadata, holder_limit, pickup_us INTO v_pos, v_e_owner, v_e_attempt, v_e_meta, v_e_limit, v_e_pickup
      FROM {queue} WHERE name = p_name ORDER BY position LIMIT 1;
    IF v_pos = 0 THEN LEAVE hand; END IF;
    DELETE FROM {queue} WHERE position = v_pos;
    IF v_e_limit = v_limit THEN
      INSERT INTO {holds} (name, owner, attempt, holder_limit, acquired_us, expires_us, metadata)
        VALUES (p_name, v_e_owner, v_e_attempt, v_e_limit, v_now, v_now + v_e_pickup, v_e_meta);
      SET v_handed = LAST_INSERT_ID();
      UPDATE {queue} SET turn_us = NULL WHERE name = p_name AND turn_us IS NOT NULL;
      LEAVE hand;
    END IF;
  END LOOP;`

const handVars = `
  DECLARE v_pos, v_handed BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_e_owner VARBINARY(800);
  DECLARE v_e_attempt VARBINARY(64);
  DECLARE v_e_meta VARBINARY(4000);
  DECLARE v_e_limit INT DEFAULT 0;
  DECLARE v_e_pickup BIGINT DEFAULT 0;`

// acquireBody answers one row: kind (1 granted: token, expires; 2 refused
// by a holding: the one that ends first, its owner, token and expiry, and
// held_limit when the limits disagree; 3 refused for the heads' turn:
// expires is when the shortest turn ends), queued, the clock.
var acquireBody = `(
  IN p_name VARBINARY(800), IN p_owner VARBINARY(800), IN p_attempt VARBINARY(64), IN p_meta VARBINARY(4000),
  IN p_limit INT, IN p_ttl BIGINT, IN p_wait BOOLEAN, IN p_entry_ttl BIGINT, IN p_poll BIGINT UNSIGNED,
  IN p_notify VARBINARY(64), IN p_pickup BIGINT, IN p_max_queue INT)
  MODIFIES SQL DATA SQL SECURITY INVOKER COMMENT '{comment}'
proc: BEGIN
  DECLARE v_now, v_expires, v_left BIGINT DEFAULT 0;
  DECLARE v_kind, v_held_limit, v_count, v_free, v_rank, v_off INT DEFAULT 0;
  DECLARE v_token, v_edge, v_lapsed BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_holder VARBINARY(800) DEFAULT '';
  DECLARE v_queued BOOLEAN DEFAULT FALSE;` + handVars + begin + `
  DELETE FROM {holds} WHERE name = p_name AND expires_us <= v_now;
  SET v_count = (SELECT COUNT(*) FROM {holds} WHERE name = p_name);
  SET v_held_limit = COALESCE((SELECT holder_limit FROM {holds} WHERE name = p_name ORDER BY token LIMIT 1), 0);
  SET v_token = COALESCE((SELECT token FROM {holds} WHERE name = p_name AND owner = p_owner AND attempt = p_attempt ORDER BY token LIMIT 1), 0);
  rules: BEGIN
    IF v_count > 0 AND v_held_limit <> p_limit THEN
      -- Agreement: refused, nothing queued or marked.
      SET v_kind = 2;
      LEAVE rules;
    END IF;
    SET v_held_limit = 0;
    IF v_token > 0 THEN
      -- The same attempt again: refreshed, its token kept.
      SET v_kind = 1, v_expires = v_now + p_ttl;
      UPDATE {holds} SET expires_us = v_expires, metadata = p_meta, renewals = renewals + 1 WHERE token = v_token;
      LEAVE rules;
    END IF;
    DELETE FROM {queue} WHERE name = p_name AND expires_us <= v_now;
    IF v_count > 0 AND p_limit > 1 THEN
      -- Free slots go first to the live entries of this limit queued
      -- ahead of the attempt, in order.
      hand: LOOP
        IF v_count >= p_limit THEN LEAVE hand; END IF;
        SET v_pos = 0;
        SELECT position, owner, attempt, metadata, holder_limit, pickup_us INTO v_pos, v_e_owner, v_e_attempt, v_e_meta, v_e_limit, v_e_pickup
          FROM {queue} WHERE name = p_name ORDER BY position LIMIT 1;
        IF v_pos = 0 OR (v_e_owner = p_owner AND v_e_attempt = p_attempt) THEN LEAVE hand; END IF;
        DELETE FROM {queue} WHERE position = v_pos;
        IF v_e_limit = p_limit AND NOT EXISTS (SELECT 1 FROM {holds} WHERE name = p_name AND owner = v_e_owner AND attempt = v_e_attempt) THEN
          INSERT INTO {holds} (name, owner, attempt, holder_limit, acquired_us, expires_us, metadata)
            VALUES (p_name, v_e_owner, v_e_attempt, v_e_limit, v_now, v_now + v_e_pickup, v_e_meta);
          SET v_count = v_count + 1;
        END IF;
      END LOOP;
    END IF;
    IF v_count >= p_limit THEN
      SET v_kind = 2;
      LEAVE rules;
    END IF;
    -- The heads' turns: the attempt may be granted when fewer than the
    -- free slots' number of live entries are queued ahead of it; a head
    -- that let its turn pass leaves the queue.
    SET v_free = p_limit - v_count, v_off = v_free - 1;
    turns: LOOP
      SET v_pos = COALESCE((SELECT position FROM {queue} WHERE name = p_name AND owner = p_owner AND attempt = p_attempt), 0);
      IF v_pos > 0 THEN
        SET v_rank = (SELECT COUNT(*) FROM {queue} WHERE name = p_name AND position < v_pos);
      ELSE
        SET v_rank = (SELECT COUNT(*) FROM {queue} WHERE name = p_name);
      END IF;
      IF v_rank < v_free THEN LEAVE turns; END IF;
      SELECT position INTO v_edge FROM {queue} WHERE name = p_name ORDER BY position LIMIT v_off, 1;
      UPDATE {queue} SET turn_us = v_now WHERE name = p_name AND position <= v_edge AND turn_us IS NULL;
      SET v_lapsed = COALESCE((SELECT position FROM {queue} WHERE name = p_name AND position <= v_edge
        AND turn_us + pickup_us <= v_now ORDER BY position LIMIT 1), 0);
      IF v_lapsed = 0 THEN
        SET v_kind = 3, v_expires = v_now + (SELECT MIN(turn_us + pickup_us - v_now) FROM {queue} WHERE name = p_name AND position <= v_edge);
        LEAVE rules;
      END IF;
      DELETE FROM {queue} WHERE position = v_lapsed;
      -- An exclusive name goes to the attempt once its head let its turn
      -- pass.
      IF p_limit = 1 THEN LEAVE turns; END IF;
    END LOOP;
    -- Granted: a new holding, the attempt's entry gone, the turns ended.
    SET v_kind = 1, v_expires = v_now + p_ttl;
    INSERT INTO {holds} (name, owner, attempt, holder_limit, acquired_us, expires_us, metadata)
      VALUES (p_name, p_owner, p_attempt, p_limit, v_now, v_expires, p_meta);
    SET v_token = LAST_INSERT_ID();
    DELETE FROM {queue} WHERE name = p_name AND owner = p_owner AND attempt = p_attempt;
    UPDATE {queue} SET turn_us = NULL WHERE name = p_name AND turn_us IS NOT NULL;
  END rules;
  IF v_kind = 2 THEN
    SELECT owner, token, expires_us INTO v_holder, v_token, v_expires FROM {holds} WHERE name = p_name ORDER BY expires_us, token LIMIT 1;
  END IF;
  IF v_kind <> 1 AND v_held_limit = 0 AND p_wait AND p_entry_ttl > 0 THEN
    -- A refused waiting attempt: its entry renewed, or a new one at the
    -- end of a queue that has room.
    UPDATE {queue} SET expires_us = v_now + p_entry_ttl, poll = p_poll, metadata = p_meta, notify = p_notify,
      pickup_us = p_pickup, holder_limit = p_limit WHERE name = p_name AND owner = p_owner AND attempt = p_attempt;
    IF ROW_COUNT() > 0 OR EXISTS (SELECT 1 FROM {queue} WHERE name = p_name AND owner = p_owner AND attempt = p_attempt) THEN
      SET v_queued = TRUE;
    ELSE
      DELETE FROM {queue} WHERE name = p_name AND expires_us <= v_now;
      IF (SELECT COUNT(*) FROM {queue} WHERE name = p_name) < p_max_queue THEN
        INSERT INTO {queue} (name, owner, attempt, metadata, notify, holder_limit, pickup_us, poll, expires_us, turn_us)
          VALUES (p_name, p_owner, p_attempt, p_meta, p_notify, p_limit, p_pickup, p_poll, v_now + p_entry_ttl, NULL);
        SET v_queued = TRUE;
      END IF;
    END IF;
  END IF;` + finish + `
  SELECT v_kind, v_token, v_expires, v_holder, v_held_limit, v_queued, v_now;
END`

// releaseBody ends the holding of the attempt (of token p_token, 0: any)
// and hands a live one on, or removes the attempt's queue entry; it answers
// the token of the holding a hand-off made (0: none).
var releaseBody = `(IN p_name VARBINARY(800), IN p_owner VARBINARY(800), IN p_attempt VARBINARY(64), IN p_token BIGINT UNSIGNED)
  MODIFIES SQL DATA SQL SECURITY INVOKER COMMENT '{comment}'
BEGIN
  DECLARE v_now, v_expires BIGINT DEFAULT 0;
  DECLARE v_token BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_limit INT DEFAULT 0;` + handVars + begin + `
  SELECT token, holder_limit, expires_us INTO v_token, v_limit, v_expires FROM {holds}
    WHERE name = p_name AND owner = p_owner AND attempt = p_attempt AND (p_token = 0 OR token = p_token) ORDER BY token LIMIT 1;
  IF v_token = 0 THEN
    DELETE FROM {queue} WHERE name = p_name AND owner = p_owner AND attempt = p_attempt;
  ELSE
    DELETE FROM {holds} WHERE token = v_token;
    IF v_expires > v_now THEN` + handOn + `
    END IF;
  END IF;` + finish + `
  SELECT v_handed;
END`

// revokeBody ends the live holding of token p_token (0: the one that ends
// first) and hands it on; it answers whether one was ended, which, and the
// token of the holding a hand-off made.
var revokeBody = `(IN p_name VARBINARY(800), IN p_token BIGINT UNSIGNED)
  MODIFIES SQL DATA SQL SECURITY INVOKER COMMENT '{comment}'
BEGIN
  DECLARE v_now, v_expires BIGINT DEFAULT 0;
  DECLARE v_token BIGINT UNSIGNED DEFAULT 0;
  DECLARE v_limit INT DEFAULT 0;
  DECLARE v_owner VARBINARY(800) DEFAULT '';
  DECLARE v_meta VARBINARY(4000) DEFAULT '';` + handVars + begin + `
  DELETE FROM {holds} WHERE name = p_name AND expires_us <= v_now;
  SELECT token, owner, metadata, holder_limit, expires_us INTO v_token, v_owner, v_meta, v_limit, v_expires FROM {holds}
    WHERE name = p_name AND (p_token = 0 OR token = p_token) ORDER BY expires_us, token LIMIT 1;
  IF v_token > 0 THEN
    DELETE FROM {holds} WHERE token = v_token;` + handOn + `
  END IF;` + finish + `
  SELECT v_token, v_owner, v_meta, v_limit, v_expires, v_now, v_handed;
END`

// sweepBody drops the expired holdings and queue entries of one name.
var sweepBody = `(IN p_name VARBINARY(800))
  MODIFIES SQL DATA SQL SECURITY INVOKER COMMENT '{comment}'
BEGIN
  DECLARE v_now BIGINT DEFAULT 0;` + begin + `
  DELETE FROM {holds} WHERE name = p_name AND expires_us <= v_now;
  DELETE FROM {queue} WHERE name = p_name AND expires_us <= v_now;` + finish + `
END`
