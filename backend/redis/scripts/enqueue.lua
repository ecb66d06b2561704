	-- enqueue.lua: the queueing part shared by the two acquire scripts
	-- (acquire.lua and acquire_shared.lua), put by scripts.go where each
	-- says --[[enqueue.lua]], after queue.lua. The including script defines
	-- qa, the index of the entry TTL among its ARGV (pickup, notify and poll
	-- follow), and qlimit, the limit of the caller's entry (nil: 1).

	local max_entries = {{MaxQueueEntries}} -- backend.MaxQueueEntries, put in by scripts.go

	-- purge drops the expired entries anywhere in the queue, for the bound,
	-- which counts live entries only; n is the queue's length. min_exp is
	-- no later than any entry's expiry, so before it nothing is read.
	-- Returns the length and min_exp afterwards.
	local function purge(now_ms, n, min_exp)
		if min_exp and now_ms < min_exp then
			return n, min_exp
		end
		local all = redis.call('LRANGE', KEYS[3], 0, -1)
		local data = redis.call('HMGET', KEYS[4], unpack(all))
		local live, low = 0, nil
		for i, a in ipairs(all) do
			local e = data[i] and tonumber(string.match(data[i], '^%d+'))
			if e and e > now_ms then
				live = live + 1
				if not low or e < low then
					low = e
				end
			else
				redis.call('LREM', KEYS[3], 1, a)
				redis.call('HDEL', KEYS[4], a)
			end
		end
		return live, low
	end

	-- enqueue puts the caller at the tail of the queue, or renews its live
	-- entry where it stands (its place, and its turn if it has one), with
	-- this request's data and poll number. Returns 1 when the caller has an
	-- entry afterwards, 0 when the queue was full.
	local function enqueue()
		local ttl = tonumber(ARGV[qa])
		local e = {exp = now_ms + ttl, pickup = tonumber(ARGV[qa + 1]), turn = 0, poll = ARGV[qa + 3],
			notify = ARGV[qa + 2], owner = ARGV[1], meta = ARGV[4], limit = qlimit}
		local got = redis.call('HMGET', KEYS[4], ARGV[2], 'keys exp', 'min exp')
		local keys_exp, min_exp = tonumber(got[2]), tonumber(got[3])
		local old = got[1] and entry_of(got[1])
		local fields = {}
		if old and old.exp > now_ms then
			e.turn = old.turn
		else
			if got[1] then
				-- An expired entry not met yet: it is gone, the caller queues
				-- anew at the tail.
				redis.call('LREM', KEYS[3], 1, ARGV[2])
			end
			local n = redis.call('LLEN', KEYS[3])
			if n == 0 then
				-- A new queue: what an old one left of its bookkeeping goes.
				if got[2] or got[3] then
					redis.call('DEL', KEYS[4])
				end
				keys_exp, min_exp = nil, nil
			elseif n >= max_entries then
				n, min_exp = purge(now_ms, n, min_exp)
				if n >= max_entries then
					if min_exp then
						redis.call('HSET', KEYS[4], 'min exp', string.format('%d', min_exp))
					end
					return 0
				end
			end
			if redis.call('RPUSH', KEYS[3], ARGV[2]) == 1 then
				-- The list is new (a purge may have emptied it): it has no
				-- expiry yet, whatever the bookkeeping says.
				keys_exp = nil
			end
			if not min_exp or e.exp < min_exp then
				min_exp = e.exp
			end
			fields[#fields + 1] = 'min exp'
			fields[#fields + 1] = string.format('%d', min_exp)
		end
		fields[#fields + 1] = ARGV[2]
		fields[#fields + 1] = entry_text(e)
		local renew_keys = not keys_exp or e.exp > keys_exp
		if renew_keys then
			-- The keys live one entry TTL past the latest entry's expiry, so
			-- that the polls in between need not extend them.
			keys_exp = e.exp + ttl
			fields[#fields + 1] = 'keys exp'
			fields[#fields + 1] = string.format('%d', keys_exp)
		end
		redis.call('HSET', KEYS[4], unpack(fields))
		if renew_keys then
			redis.call('PEXPIREAT', KEYS[3], keys_exp)
			redis.call('PEXPIREAT', KEYS[4], keys_exp)
		end
		return 1
	end

