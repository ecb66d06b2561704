	-- queue.lua: the waiter queue's part shared by acquire, release and
	-- revoke. Lua scripts cannot include each other: scripts.go puts this
	-- text where each of them says --[[queue.lua]], inside the block of
	-- the paths that touch a queue, so that the other paths create none of
	-- these functions (a closure per function per run). KEYS, the entry
	-- format and the rules: CONTRACT.md.
	--
	-- KEYS[1] the record (lease hash), KEYS[2] the older layout's fence
	-- counter, KEYS[3] the queue (a list of attempts, head first), KEYS[4]
	-- the entries (a hash: attempt -> entry text, plus 'keys exp' and 'min
	-- exp', which contain a space and so are no attempt).

	-- entry_of reads an entry's text; nil when it is not one (then the
	-- entry counts as expired). An entry of a limit above 1 ends with NUL
	-- and the limit; limit is 1 for the others.
	local function entry_of(d)
		local exp, pickup, turn, poll, notify, owner, meta, limit =
			string.match(d, '^(%d+)%z(%d+)%z(%d+)%z(%d+)%z([^%z]*)%z([^%z]*)%z([^%z]*)%z?(%d*)$')
		if not exp then
			return nil
		end
		return {exp = tonumber(exp), pickup = tonumber(pickup), turn = tonumber(turn),
			poll = poll, notify = notify, owner = owner, meta = meta, limit = tonumber(limit) or 1}
	end

	-- entry_text is the stored form of entry e: numbers as integers, never
	-- in Lua's exponent notation.
	local function entry_text(e)
		local d = string.format('%d', e.exp) .. '\0' .. string.format('%d', e.pickup) .. '\0' ..
			string.format('%d', e.turn) .. '\0' .. e.poll .. '\0' .. e.notify .. '\0' ..
			e.owner .. '\0' .. e.meta
		if e.limit and e.limit > 1 then
			return d .. '\0' .. string.format('%d', e.limit)
		end
		return d
	end

	-- live_head returns the live head of the queue (its attempt and entry)
	-- after dropping the expired entries in front of it, or nil when no
	-- entry is live. first is LINDEX KEYS[3] 0, which the caller has read.
	-- limit, when not nil, drops the entries of another limit too (a
	-- hand-off goes only to an entry of the name's limit).
	local function live_head(now_ms, first, limit)
		local a = first
		local dropped = false
		while a do
			local d = redis.call('HGET', KEYS[4], a)
			local e = d and entry_of(d)
			if e and e.exp > now_ms and (not limit or e.limit == limit) then
				return a, e
			end
			redis.call('LPOP', KEYS[3])
			redis.call('HDEL', KEYS[4], a)
			dropped = true
			a = redis.call('LINDEX', KEYS[3], 0)
		end
		if dropped then
			redis.call('DEL', KEYS[4]) -- the bookkeeping goes with the last entry
		end
		return nil
	end

	-- pop_head removes the head a (read by live_head) and reports whether
	-- entries remain; the entries hash goes with the last one.
	local function pop_head(a)
		redis.call('LPOP', KEYS[3])
		redis.call('HDEL', KEYS[4], a)
		if redis.call('LLEN', KEYS[3]) > 0 then
			return true
		end
		redis.call('DEL', KEYS[4])
		return false
	end

	-- new_token is max(counter + 1, now_us), as in acquire.lua's grant (keep
	-- the two in step); counter is the fence counter's text or nil. nil and
	-- an error reply when the counter is not a token: nothing changes.
	local function new_token(t, counter)
		local now_us = t[1] * 1000000 + t[2]
		local n = 0
		if counter then
			n = tonumber(counter)
			if not n or n >= 2^53 then
				return nil, redis.error_reply('leasehold: fence counter of ' .. KEYS[1] .. ' holds ' .. counter .. ', not a token')
			end
		end
		if n >= now_us then
			return string.format('%d', n + 1)
		end
		return string.format('%d', now_us)
	end

	-- hand_on ends the live holding in KEYS[1], which is marked w (a
	-- release or a revoke), and grants the name to the live head of the
	-- queue: a new holding of the entry's owner, attempt and metadata, a
	-- new token, expiring after the entry's pickup window, marked w; a
	-- HandOff is published on handoff .. notify (when neither is ""). With
	-- no live entry the name is free, and the release is published on
	-- channel (when not ""). t is TIME, or nil: then it is read only when
	-- the queue has entries. counter is the fence counter's text (nil for
	-- none). old says the holding is in the older layout (a hash with an
	-- expiry, its counter the key KEYS[2]): it goes, and a hand-off writes a
	-- record in its place. forget is forget.lua's: a name left free is
	-- forgotten after the forget delay. Returns 2 (handed on), 1 (free), or nil and an
	-- error reply (the counter is not a token: the holding stays).
	local function hand_on(t, channel, name, handoff, counter, old, forget)
		local a, e
		local now_ms
		local first = redis.call('LINDEX', KEYS[3], 0)
		if first then
			t = t or redis.call('TIME')
			now_ms = t[1] * 1000 + math.floor(t[2] / 1000)
			a, e = live_head(now_ms, first, 1)
		end
		if not a then
			-- The queue is empty now (live_head dropped what it met): the
			-- name is free and unmarked, and is forgotten after the delay.
			if old then
				redis.call('DEL', KEYS[1]) -- the counter key stays: it is this name's
				forget(KEYS[2], counter)
			else
				redis.call('HSET', KEYS[1], 'owner', '', 'att', '', 'meta', '', 'w', '')
				forget(KEYS[1], counter)
			end
			if channel ~= '' then
				redis.call('PUBLISH', channel, name)
			end
			return 1
		end
		local token, err = new_token(t, counter)
		if not token then
			return nil, err
		end
		pop_head(a)
		if old then
			redis.call('DEL', KEYS[1])
			if counter then
				redis.call('DEL', KEYS[2])
			end
		end
		-- Marked like the holding it replaces: entries may remain, and the
		-- waiters that poll without an entry still wait for the name.
		redis.call('HSET', KEYS[1], 'v', '2', 'owner', e.owner, 'att', a, 'token', token, 'meta', e.meta,
			'exp', string.format('%d', now_ms + e.pickup), 'w', '1')
		if handoff ~= '' and e.notify ~= '' then
			redis.call('PUBLISH', handoff .. e.notify,
				name .. '\0' .. e.owner .. '\0' .. a .. '\0' .. token .. '\0' .. e.poll)
		end
		return 2
	end
