-- revoke: end the live holding of one name by force (an operator's act),
-- whoever holds it, and hand it on or announce it as a release does (when it
-- is marked w); leave a receipt naming this revoke (ARGV[5]), so that a
-- resend of it whose first answer was lost knows it removed the holding.
-- A name left free and unmarked is forgotten after the forget delay
-- (forget.lua). KEYS, ARGV, the record and replies: CONTRACT.md.
--[[forget.lua]]

local t = redis.call('TIME')
local now_ms = t[1] * 1000 + math.floor(t[2] / 1000)
local cur = redis.call('HMGET', KEYS[1], 'v', 'owner', 'token', 'meta', 'exp', 'w')
-- live: a holding stands; pttl is its time left; old: in the older layout
-- (a hash whose expiry is the deadline, its counter the key KEYS[2]).
local live, pttl, old = false, 0, false
if cur[1] == '2' then
	local until_ms = tonumber(cur[5])
	live = cur[2] ~= '' and until_ms > now_ms
	if live then
		pttl = until_ms - now_ms
	end
elseif cur[1] then
	return redis.error_reply('leasehold: lease hash ' .. KEYS[1] .. ' has record version ' .. cur[1] .. ', which this leasehold does not know')
elseif cur[2] then
	live, old = true, true
	pttl = redis.call('PTTL', KEYS[1])
	if pttl < 0 then
		pttl = 0
	end
end
if live and cur[2] == '\0' then
	-- A shared record: the live holding of token ARGV[1] (or the one that
	-- ends first) ends, its slot handed on as a release's.
	--[[queue.lua]]
	--[[shared.lua]]

	local hs, first, dead, rec = holdings(now_ms)
	local h = first
	if ARGV[1] ~= '0' then
		h = nil
		for _, x in ipairs(hs) do
			if x.token == ARGV[1] then
				h = x
			end
		end
	end
	if h then
		local r, err = shared_end(t, now_ms, 'h:' .. h.a, tonumber(rec.c) or (#hs + #dead), tonumber(rec.n), tonumber(cur[5]),
			cur[3], cur[6] == '1', true, ARGV[2], ARGV[3], ARGV[4], forget)
		if not r then
			return err
		end
		local pttl = h.exp - now_ms
		redis.call('HSET', KEYS[5], 'id', ARGV[5], 'owner', h.owner, 'token', h.token, 'meta', h.meta,
			'expires', h.exp, 'pttl', pttl, 'limit', rec.n)
		redis.call('PEXPIRE', KEYS[5], ARGV[6])
		return {1, h.owner, h.token, h.meta, h.exp, pttl, tonumber(rec.n)}
	end
	live = false
end
if not live or (ARGV[1] ~= '0' and cur[3] ~= ARGV[1]) then
	local done = redis.call('HMGET', KEYS[5], 'id', 'owner', 'token', 'meta', 'expires', 'pttl', 'limit')
	if done[1] == ARGV[5] then
		if done[7] then
			return {1, done[2], done[3], done[4], tonumber(done[5]), tonumber(done[6]), tonumber(done[7])}
		end
		return {1, done[2], done[3], done[4], tonumber(done[5]), tonumber(done[6])}
	end
	return {0}
end
if cur[6] == '1' then
	--[[queue.lua]]

	local counter = cur[3]
	if old then
		counter = redis.call('GET', KEYS[2]) or nil
	end
	local r, err = hand_on(t, ARGV[2], ARGV[3], ARGV[4], counter, old, forget)
	if not r then
		return err
	end
elseif old then
	redis.call('DEL', KEYS[1]) -- the counter key stays, until it is forgotten: it is this name's
	forget(KEYS[2], redis.call('GET', KEYS[2]) or nil)
else
	-- The record stays, free, with the revoked token (it is never issued
	-- again), until it is forgotten.
	redis.call('HSET', KEYS[1], 'owner', '', 'att', '', 'meta', '')
	forget(KEYS[1], cur[3])
end
local token, meta = cur[3] or '0', cur[4] or ''
redis.call('HSET', KEYS[5], 'id', ARGV[5], 'owner', cur[2], 'token', token, 'meta', meta,
	'expires', now_ms + pttl, 'pttl', pttl, 'limit', '1')
redis.call('PEXPIRE', KEYS[5], ARGV[6])
return {1, cur[2], token, meta, now_ms + pttl, pttl}
