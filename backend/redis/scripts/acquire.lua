-- acquire: grant a name to an attempt, refresh that attempt's own holding, or
-- report what stands in the way (marking the holding when the caller waits
-- for it, and queueing the caller when it asks to be). KEYS, ARGV, the
-- record and replies: CONTRACT.md. Each redis.call costs a command dispatch
-- and a reply conversion: the common paths make three (TIME, HMGET, HSET),
-- and the paths that need no queue run before the queue's code (and its
-- functions) is reached.
local t = redis.call('TIME')
local now_ms = t[1] * 1000 + math.floor(t[2] / 1000)
local cur = redis.call('HMGET', KEYS[1], 'v', 'owner', 'att', 'token', 'exp', 'w')
local exp = now_ms + ARGV[3]

-- counter is the fence counter's text (nil when there is none yet): the
-- record's token, or the older layout's counter key for a name without a
-- record. refusal is the reply's holding part when the caller is refused;
-- look says whether the queue may have entries (the record is marked, or
-- there is no record: the older layout kept no mark on a free name).
local counter, refusal, look
local record = cur[1] == '2'
-- A free record may have an expiry (it is forgotten some time after it was
-- freed, forget.lua): whatever makes it live or marked again removes it.
local expiring = record and cur[2] == ''
if record then
	counter = cur[4]
	local until_ms = tonumber(cur[5])
	if cur[2] == '\0' then
		-- A shared record (holdings under a limit above 1, acquire_shared.lua):
		-- a live holding refuses this exclusive acquire with the record's
		-- limit, and nothing changes; with none live the record becomes a
		-- free exclusive one, its holdings gone.
		--[[shared.lua]]

		local live, first, dead, rec = holdings(now_ms)
		if first then
			return {0, first.owner, first.token, first.exp, first.exp - now_ms, 0, tonumber(rec.n)}
		end
		dead[#dead + 1], dead[#dead + 2], dead[#dead + 3] = 'n', 'c', 'g'
		redis.call('HDEL', KEYS[1], unpack(dead))
		redis.call('HSET', KEYS[1], 'owner', '')
		cur[2] = ''
	elseif cur[2] ~= '' and until_ms > now_ms then
		if cur[2] == ARGV[1] and cur[3] == ARGV[2] then
			-- The same attempt again (a retry after an ambiguous failure, or
			-- the pickup of a hand-off): refresh, keep the token (and the
			-- mark).
			redis.call('HSET', KEYS[1], 'meta', ARGV[4], 'exp', string.format('%d', exp))
			return {1, cur[4], exp}
		end
		if (ARGV[6] == '1' or ARGV[7]) and cur[6] ~= '1' then
			-- Somebody waits, or may be queued: the end of this holding must
			-- be announced, and must look at the queue.
			redis.call('HSET', KEYS[1], 'w', '1')
		end
		if not ARGV[7] then
			return {0, cur[2], cur[4], until_ms, until_ms - now_ms, 0}
		end
		refusal = {cur[2], cur[4], until_ms, until_ms - now_ms}
	end
	look = cur[6] == '1'
elseif cur[1] then
	return redis.error_reply('leasehold: lease hash ' .. KEYS[1] .. ' has record version ' .. cur[1] .. ', which this leasehold does not know')
elseif cur[2] then
	-- A holding in the older layout (owner, attempt, token, meta, w; its
	-- deadline the key's expiry), written by an older leasehold.
	local pttl = redis.call('PTTL', KEYS[1])
	if pttl < 0 then
		return redis.error_reply('leasehold: lease hash ' .. KEYS[1] .. ' has no expiry; it was not written by leasehold')
	end
	local old = redis.call('HMGET', KEYS[1], 'attempt')
	if cur[2] == ARGV[1] and old[1] == ARGV[2] then
		-- This attempt's own (a hand-off from an older release): it becomes
		-- a record, with its token, which the counter key must not exceed.
		local last = redis.call('GET', KEYS[2])
		local n, tok = last and tonumber(last), tonumber(cur[4])
		if not tok or (last and (not n or n > tok)) then
			return redis.error_reply('leasehold: fence counter ' .. KEYS[2] .. ' holds ' .. tostring(last) .. ', beyond the token of ' .. KEYS[1])
		end
		redis.call('HDEL', KEYS[1], 'attempt')
		redis.call('PERSIST', KEYS[1])
		redis.call('HSET', KEYS[1], 'v', '2', 'att', ARGV[2], 'meta', ARGV[4], 'exp', string.format('%d', exp))
		if last then
			redis.call('DEL', KEYS[2])
		end
		return {1, cur[4], exp}
	end
	if (ARGV[6] == '1' or ARGV[7]) and not cur[6] then
		redis.call('HSET', KEYS[1], 'w', '1')
	end
	if not ARGV[7] then
		return {0, cur[2], cur[4] or '0', now_ms + pttl, pttl, 0}
	end
	refusal = {cur[2], cur[4] or '0', now_ms + pttl, pttl}
else
	-- No record: a name never acquired, or free in the older layout, whose
	-- counter is a key of its own. Read once; the grant's record carries it
	-- on.
	counter = redis.call('GET', KEYS[2]) or nil
	look = true
end

if not refusal and ARGV[5] ~= '0' then
	-- The name is free. It may have been lost with the data in a restart
	-- (no persistence, an older snapshot, the unsynced tail of the AOF):
	-- while the server is younger than the grace its previous holder may
	-- still believe it holds the name, so nothing is granted.
	local grace = tonumber(ARGV[5])
	-- LASTSAVE is the start of this process (Redis "considers the
	-- database saved at startup") or a later successful save, in whole
	-- seconds: this process began before LASTSAVE + 1 s. When that is
	-- longer ago than the grace, the server is old enough without asking
	-- INFO, which costs more than the rest of the script.
	local saved = redis.pcall('LASTSAVE')
	if type(saved) ~= 'number' or saved <= 0 or now_ms < saved * 1000 + 1000 + grace then
		local info = redis.pcall('INFO', 'server')
		if type(info) == 'table' and info.err then
			return redis.error_reply('leasehold: the restart grace needs INFO in scripts: ' .. info.err)
		end
		local up_s = tonumber(string.match(info, 'uptime_in_seconds:(%d+)'))
		if not up_s then
			return redis.error_reply('leasehold: the restart grace needs uptime_in_seconds in INFO server')
		end
		-- uptime_in_seconds is a difference of whole seconds (it reads 1
		-- a few ms after a start late in a second): a second more makes
		-- this start estimate late, never early, so the grace is never
		-- shorter than asked.
		local grace_end = now_ms - up_s * 1000 + 1000 + grace
		if now_ms < grace_end then
			if not ARGV[7] then
				return {0, '', '0', grace_end, grace_end - now_ms, 0}
			end
			refusal = {'', '0', grace_end, grace_end - now_ms}
		end
	end
end

-- token = max(counter + 1, now_us): a counter that went back with lost
-- writes cannot repeat a token, because the clock has moved past them all.
-- Tokens are integers below 2^53, exact as Lua numbers; the decimal text is
-- made once ('%d', cheaper than Redis's own conversion of a number
-- argument). Taken before any write, so that a counter that is not a token
-- changes nothing. (queue.lua's new_token does the same for hand-offs: keep
-- the two in step.)
local token
if not refusal then
	local now_us = t[1] * 1000000 + t[2]
	local n = 0
	if counter then
		n = tonumber(counter)
		if not n or n >= 2^53 then
			return redis.error_reply('leasehold: fence counter of ' .. KEYS[1] .. ' holds ' .. counter .. ', not a token')
		end
	end
	if n >= now_us then
		token = string.format('%d', n + 1)
	else
		token = string.format('%d', now_us)
	end
end

-- finish, set when the grant ends queue entries, removes them and reports
-- whether entries remain: then the new holding is marked w.
local head, finish
if look and not refusal then
	-- The one queue call of a free name: no queue, nothing more to do.
	head = redis.call('LINDEX', KEYS[3], 0)
end
if refusal or head then
	--[[queue.lua]]

	local qa, qlimit = 7, nil -- enqueue's arguments start at ARGV[7]; an exclusive entry
	--[[enqueue.lua]]

	if refusal then
		-- Refused by a holding or by the restart grace: queued if asked. A
		-- free record gets the mark, so that the next acquire looks at the
		-- queue.
		local queued = enqueue()
		if queued == 1 and record and cur[6] ~= '1' and refusal[1] == '' then
			redis.call('HSET', KEYS[1], 'w', '1')
			if expiring then
				redis.call('PERSIST', KEYS[1])
			end
		end
		return {0, refusal[1], refusal[2], refusal[3], refusal[4], queued}
	end

	-- The name is free and a queue exists: the live head has the turn.
	local a, e = live_head(now_ms, head)
	if a and a ~= ARGV[2] then
		if e.turn == 0 then
			-- The first acquire to find the name free with this head: its
			-- turn starts now.
			e.turn = now_ms
			redis.call('HSET', KEYS[4], a, entry_text(e))
		end
		local turn_end = e.turn + e.pickup
		if now_ms < turn_end then
			local queued = 0
			if ARGV[7] then
				queued = enqueue()
			end
			return {0, '', '0', turn_end, turn_end - now_ms, queued}
		end
		-- The head let its turn pass: it leaves the queue, and the caller's
		-- own entry (if any) goes with the grant.
		finish = function()
			redis.call('LPOP', KEYS[3])
			redis.call('HDEL', KEYS[4], a)
			if redis.call('HDEL', KEYS[4], ARGV[2]) == 1 then
				redis.call('LREM', KEYS[3], 1, ARGV[2])
			end
			if redis.call('LLEN', KEYS[3]) > 0 then
				return true
			end
			redis.call('DEL', KEYS[4])
			return false
		end
	elseif a then
		-- The caller is the head: granted, out of the queue.
		finish = function()
			return pop_head(a)
		end
	end
end

-- The new holding: one write of the record (the whole record when there was
-- none; the older layout's counter key then goes, its value carried on).
-- The mark is written only when it changes: a name nobody ever waited for
-- has no w field.
local fields = {'owner', ARGV[1], 'att', ARGV[2], 'token', token, 'meta', ARGV[4], 'exp', string.format('%d', exp)}
if finish and finish() then
	fields[11], fields[12] = 'w', '1'
elseif cur[6] then
	fields[11], fields[12] = 'w', ''
end
if record then
	redis.call('HSET', KEYS[1], unpack(fields))
	if expiring then
		redis.call('PERSIST', KEYS[1])
	end
else
	redis.call('HSET', KEYS[1], 'v', '2', unpack(fields))
	if counter then
		redis.call('DEL', KEYS[2])
	end
end
return {1, token, exp}
