	-- shared.lua: the part shared by the scripts that meet a record of
	-- holdings under a limit above 1 (a shared record: owner "\0"). Put by
	-- scripts.go where a script says --[[shared.lua]], after queue.lua,
	-- inside the block of the paths that meet such a record, so that the
	-- exclusive paths create none of these functions. The record's fields
	-- and the holding's text: CONTRACT.md.

	-- holding_of reads a holding's text (exp NUL token NUL owner NUL meta);
	-- nil when it is not one (then it counts as expired).
	local function holding_of(d)
		local until_ms, token, owner, meta = string.match(d, '^(%d+)%z(%d+)%z([^%z]*)%z(.*)$')
		if not until_ms then
			return nil
		end
		return {exp = tonumber(until_ms), token = token, owner = owner, meta = meta}
	end

	local function holding_text(h)
		return string.format('%d', h.exp) .. '\0' .. h.token .. '\0' .. h.owner .. '\0' .. h.meta
	end

	-- holdings reads the whole record: its live holdings (each with its
	-- attempt a), the one that ends first (nil when none is live), the
	-- fields of the others (expired, or not a holding), and the record's
	-- other fields by name.
	local function holdings(now_ms)
		local all = redis.call('HGETALL', KEYS[1])
		local live, dead, rec, first = {}, {}, {}, nil
		for i = 1, #all, 2 do
			local f = all[i]
			if string.sub(f, 1, 2) == 'h:' then
				local h = holding_of(all[i + 1])
				if h and h.exp > now_ms then
					h.a = string.sub(f, 3)
					live[#live + 1] = h
					if not first or h.exp < first.exp then
						first = h
					end
				else
					dead[#dead + 1] = f
				end
			else
				rec[f] = all[i + 1]
			end
		end
		return live, first, dead, rec
	end

	-- shared_end ends the holding in field freed of the shared record (a
	-- release or a revoke). c is the record's count of holding fields (the
	-- freed one included), n its limit, rec_exp its exp, counter its token,
	-- marked whether it has w, live whether the holding had not expired.
	-- A live marked holding's slot goes to the live head of the queue of
	-- limit n (entries of another limit and expired ones dropped on the
	-- way): a new holding of the entry's owner, attempt and metadata with a
	-- new token, for the entry's pickup window; a HandOff is published on
	-- handoff .. notify (when neither is ""). Otherwise the slot is free:
	-- the last holding's end makes the record a free exclusive one (owner
	-- "", unmarked when the queue was looked at and had no live entry), and
	-- a marked record's release is published on channel (when not ""). A
	-- record left free and unmarked is forgotten after the forget delay
	-- (forget, forget.lua's). Returns 2 (handed on), 1 (free), or nil and an error reply (the
	-- counter is not a token: nothing changed).
	local function shared_end(t, now_ms, freed, c, n, rec_exp, counter, marked, live, channel, name, handoff, forget)
		local unmark = false
		if live and marked then
			local first = redis.call('LINDEX', KEYS[3], 0)
			local a, e
			if first then
				a, e = live_head(now_ms, first, n)
			end
			if a then
				local token, err = new_token(t, counter)
				if not token then
					return nil, err
				end
				pop_head(a)
				if 'h:' .. a ~= freed then
					redis.call('HDEL', KEYS[1], freed)
				end
				local until_ms = now_ms + e.pickup
				local f = {'token', token, 'g', string.format('%d', now_ms),
					'h:' .. a, holding_text({exp = until_ms, token = token, owner = e.owner, meta = e.meta})}
				if until_ms > rec_exp then
					f[#f + 1], f[#f + 2] = 'exp', string.format('%d', until_ms)
				end
				redis.call('HSET', KEYS[1], unpack(f))
				if handoff ~= '' and e.notify ~= '' then
					redis.call('PUBLISH', handoff .. e.notify,
						name .. '\0' .. e.owner .. '\0' .. a .. '\0' .. token .. '\0' .. e.poll)
				end
				return 2
			end
			unmark = true
		end
		if c <= 1 then
			redis.call('HDEL', KEYS[1], freed, 'n', 'c', 'g')
			if unmark then
				redis.call('HSET', KEYS[1], 'owner', '', 'w', '')
			else
				redis.call('HSET', KEYS[1], 'owner', '')
			end
			if unmark or not marked then
				forget(KEYS[1], counter)
			end
		else
			redis.call('HDEL', KEYS[1], freed)
			redis.call('HSET', KEYS[1], 'c', string.format('%d', c - 1))
		end
		if marked and channel ~= '' then
			redis.call('PUBLISH', channel, name)
		end
		return 1
	end

	-- grace_end is the restart grace's end (acquire.lua's rule, step 3 of
	-- CONTRACT.md: keep the two in step) when the server is younger than
	-- the grace of grace_ms, else nil; or nil and an error reply.
	local function grace_end(now_ms, grace_ms)
		local grace = tonumber(grace_ms)
		local saved = redis.pcall('LASTSAVE')
		if type(saved) == 'number' and saved > 0 and now_ms >= saved * 1000 + 1000 + grace then
			return nil
		end
		local info = redis.pcall('INFO', 'server')
		if type(info) == 'table' and info.err then
			return nil, redis.error_reply('leasehold: the restart grace needs INFO in scripts: ' .. info.err)
		end
		local up_s = tonumber(string.match(info, 'uptime_in_seconds:(%d+)'))
		if not up_s then
			return nil, redis.error_reply('leasehold: the restart grace needs uptime_in_seconds in INFO server')
		end
		local e = now_ms - up_s * 1000 + 1000 + grace
		if now_ms < e then
			return e
		end
		return nil
	end
