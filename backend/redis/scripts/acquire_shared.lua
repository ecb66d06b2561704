-- acquire_shared: acquire.lua for a limit above 1 (ARGV[7]): grant one of
-- the name's n slots to an attempt (after handing the free slots to the
-- queued heads ahead of it), refresh that attempt's own holding, or report
-- what stands in the way (the holding that ends first, the heads' turn,
-- the restart grace, or a limit that differs from the live holdings').
-- KEYS, ARGV, the shared record and replies: CONTRACT.md.
local t = redis.call('TIME')
local now_ms = t[1] * 1000 + math.floor(t[2] / 1000)
local cur = redis.call('HMGET', KEYS[1], 'v', 'owner', 'att', 'token', 'exp', 'w')
local n = tonumber(ARGV[7])
local exp = now_ms + ARGV[3]
local queue_asked = ARGV[10] ~= nil

	--[[queue.lua]]
	--[[shared.lua]]
	local qa, qlimit = 10, n -- enqueue's arguments start at ARGV[10]; an entry of limit n
	--[[enqueue.lua]]

-- counter is the fence counter's text (nil for none); look says whether
-- the queue may have entries; live, dead and rec are the shared record's
-- holdings (none for another record).
local record = cur[1] == '2'
-- A free record may have an expiry (it is forgotten some time after it was
-- freed, forget.lua): whatever makes it live or marked again removes it.
local expiring = record and cur[2] == ''
local counter, look
local live, first, dead, rec = {}, nil, {}, {}
if record then
	counter = cur[4]
	local until_ms = tonumber(cur[5])
	if cur[2] == '\0' then
		live, first, dead, rec = holdings(now_ms)
		if first and tonumber(rec.n) ~= n then
			-- Held under another limit: refused for that alone, nothing
			-- changes.
			return {0, first.owner, first.token, first.exp, first.exp - now_ms, 0, tonumber(rec.n)}
		end
	elseif cur[2] ~= '' and until_ms > now_ms then
		-- An exclusive holding: its limit is 1.
		return {0, cur[2], cur[4], until_ms, until_ms - now_ms, 0, 1}
	end
	look = cur[6] == '1'
elseif cur[1] then
	return redis.error_reply('leasehold: lease hash ' .. KEYS[1] .. ' has record version ' .. cur[1] .. ', which this leasehold does not know')
elseif cur[2] then
	-- A holding in the older layout: exclusive, limit 1.
	local pttl = redis.call('PTTL', KEYS[1])
	if pttl < 0 then
		return redis.error_reply('leasehold: lease hash ' .. KEYS[1] .. ' has no expiry; it was not written by leasehold')
	end
	return {0, cur[2], cur[4] or '0', now_ms + pttl, pttl, 0, 1}
else
	counter = redis.call('GET', KEYS[2]) or nil
	look = true
end

-- The attempt's own live holding: refreshed, its token kept. (The attempt
-- with another owner is another contender's: refused by it.)
for _, h in ipairs(live) do
	if h.a == ARGV[2] then
		if h.owner ~= ARGV[1] then
			return {0, h.owner, h.token, h.exp, h.exp - now_ms, 0}
		end
		h.exp, h.meta = exp, ARGV[4]
		if exp > tonumber(cur[5]) then
			redis.call('HSET', KEYS[1], 'h:' .. ARGV[2], holding_text(h), 'exp', string.format('%d', exp))
		else
			redis.call('HSET', KEYS[1], 'h:' .. ARGV[2], holding_text(h))
		end
		return {1, h.token, exp}
	end
end

-- handed holds the fields of the holdings handed on below (hand_free),
-- their count, and the latest end among them (0: none).
local handed, nhanded, handed_exp = {}, 0, 0

-- refuse answers a refusal with the holding part r (owner, token, expires,
-- pttl): the record is marked when the caller waits (or queues) and it is
-- not yet, and the caller is queued if it asked.
local function refuse(r)
	if (ARGV[6] == '1' or queue_asked) and record and cur[6] ~= '1' then
		redis.call('HSET', KEYS[1], 'w', '1')
		if expiring then
			redis.call('PERSIST', KEYS[1])
		end
	end
	local queued = 0
	if queue_asked then
		queued = enqueue()
	end
	return {0, r[1], r[2], r[3], r[4], queued}
end

if #live >= n then
	return refuse({first.owner, first.token, first.exp, first.exp - now_ms})
end

if ARGV[5] ~= '0' then
	-- A free slot may have been lost with the data in a restart: while the
	-- server is younger than the grace, nothing is granted.
	local e, err = grace_end(now_ms, ARGV[5])
	if err then
		return err
	end
	if e then
		return refuse({'', '0', e, e - now_ms})
	end
end

-- With live holdings, the free slots go to the live entries of limit n
-- ahead of the caller, in order, each a hand-off for its pickup window as a
-- release makes one (entries of another limit, or of an attempt that holds
-- already, dropped on the way): the heads need not poll for a slot that
-- expiry freed, which on a busy name they may never do while the other
-- slots are handed on to them. The caller is granted if a slot is left.
-- With none, the heads' turns: the caller is granted when fewer than free
-- live entries are ahead of it; otherwise the first free live entries have
-- their turn, each for its pickup window from the first acquire that found
-- a slot free for it since the last grant (g; a turn that began no later
-- is void), and a head whose turn passed leaves the queue.
local free = n - #live
local queued_here = false
local any_left = false
-- leave_queue takes the caller's own entry out of the queue when the walk
-- found it (the caller is about to be granted), and says whether entries
-- are left; the bookkeeping goes with the last entry.
local function leave_queue()
	if queued_here then
		redis.call('LREM', KEYS[3], 1, ARGV[2])
		redis.call('HDEL', KEYS[4], ARGV[2])
	end
	if redis.call('LLEN', KEYS[3]) > 0 then
		return true
	end
	redis.call('DEL', KEYS[4])
	return false
end
if look and #live > 0 and redis.call('LINDEX', KEYS[3], 0) then
	local holds = {}
	for _, h in ipairs(live) do
		holds[h.a] = true
	end
	local all = redis.call('LRANGE', KEYS[3], 0, -1)
	for _, a in ipairs(all) do
		if free == 0 then
			break
		end
		local d = redis.call('HGET', KEYS[4], a)
		local e = d and entry_of(d)
		if e and e.exp > now_ms and a == ARGV[2] then
			queued_here = true
			break
		end
		redis.call('LREM', KEYS[3], 1, a)
		redis.call('HDEL', KEYS[4], a)
		if e and e.exp > now_ms and e.limit == n and not holds[a] then
			local token, err = new_token(t, counter)
			if not token then
				return err
			end
			counter = token
			local until_ms = now_ms + e.pickup
			handed[#handed + 1], handed[#handed + 2] = 'h:' .. a,
				holding_text({exp = until_ms, token = token, owner = e.owner, meta = e.meta})
			nhanded, handed_exp, free = nhanded + 1, math.max(handed_exp, until_ms), free - 1
			if first == nil or until_ms < first.exp then
				first = {owner = e.owner, token = token, exp = until_ms}
			end
			if ARGV[8] ~= '' and e.notify ~= '' then
				redis.call('PUBLISH', ARGV[8] .. e.notify,
					ARGV[9] .. '\0' .. e.owner .. '\0' .. a .. '\0' .. token .. '\0' .. e.poll)
			end
		end
	end
	any_left = leave_queue()
	if free == 0 then
		-- Every slot is taken now: the hand-offs are written, and the caller
		-- is refused as by full slots.
		if #dead > 0 then
			redis.call('HDEL', KEYS[1], unpack(dead))
		end
		handed[#handed + 1], handed[#handed + 2] = 'token', counter
		handed[#handed + 1], handed[#handed + 2] = 'g', string.format('%d', now_ms)
		handed[#handed + 1], handed[#handed + 2] = 'c', string.format('%d', #live + nhanded)
		if handed_exp > tonumber(cur[5]) then
			handed[#handed + 1], handed[#handed + 2] = 'exp', string.format('%d', handed_exp)
		end
		redis.call('HSET', KEYS[1], unpack(handed))
		return refuse({first.owner, first.token, first.exp, first.exp - now_ms})
	end
elseif look and redis.call('LINDEX', KEYS[3], 0) then
	local g = tonumber(rec.g) or 0
	while true do
		local heads = {}
		local all = redis.call('LRANGE', KEYS[3], 0, -1)
		for _, a in ipairs(all) do
			local d = redis.call('HGET', KEYS[4], a)
			local e = d and entry_of(d)
			if not e or e.exp <= now_ms then
				redis.call('LREM', KEYS[3], 1, a)
				redis.call('HDEL', KEYS[4], a)
			elseif a == ARGV[2] then
				queued_here = true
				break
			else
				heads[#heads + 1] = {a, e}
				if #heads >= free then
					break
				end
			end
		end
		if queued_here or #heads < free then
			break
		end
		local shortest, lapsed
		for _, he in ipairs(heads) do
			local e = he[2]
			if e.turn <= g then
				e.turn, e.started = now_ms, true
			end
			local left = e.turn + e.pickup - now_ms
			if left <= 0 then
				lapsed = he[1]
				break
			end
			if not shortest or left < shortest then
				shortest = left
			end
		end
		if not lapsed then
			for _, he in ipairs(heads) do
				if he[2].started then
					redis.call('HSET', KEYS[4], he[1], entry_text(he[2]))
				end
			end
			return refuse({'', '0', now_ms + shortest, shortest})
		end
		redis.call('LREM', KEYS[3], 1, lapsed)
		redis.call('HDEL', KEYS[4], lapsed)
	end
	any_left = leave_queue()
end

-- A new holding: a token as acquire.lua's grant takes one (new_token), one
-- field h:<attempt> in the record, and the record's token, deadline bound,
-- count and last grant; a fresh start (no live holding) makes the record a
-- shared one of limit n, expired holdings go.
local token, err = new_token(t, counter)
if not token then
	return err
end
if #dead > 0 then
	redis.call('HDEL', KEYS[1], unpack(dead))
end
local fields = {'h:' .. ARGV[2], holding_text({exp = exp, token = token, owner = ARGV[1], meta = ARGV[4]}),
	'token', token, 'g', string.format('%d', now_ms), 'c', string.format('%d', #live + nhanded + 1)}
local function add(f, v)
	fields[#fields + 1], fields[#fields + 2] = f, v
end
for i = 1, #handed do
	fields[#fields + 1] = handed[i]
end
if #live == 0 then
	add('owner', '\0')
	add('att', '')
	add('meta', '')
	add('n', ARGV[7])
	add('exp', string.format('%d', exp))
	if not record then
		add('v', '2')
	end
elseif math.max(exp, handed_exp) > tonumber(cur[5]) then
	add('exp', string.format('%d', math.max(exp, handed_exp)))
end
if any_left then
	if cur[6] ~= '1' then
		add('w', '1')
	end
elseif #live == 0 and cur[6] then
	add('w', '')
end
redis.call('HSET', KEYS[1], unpack(fields))
if expiring then
	redis.call('PERSIST', KEYS[1])
end
if not record and counter then
	redis.call('DEL', KEYS[2])
end
return {1, token, exp}
