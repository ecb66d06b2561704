-- release: end the holding of (owner, attempt, and token unless "0"); when it
-- is marked w (somebody waits, or the queue may hold entries), hand the name
-- to the head of the queue, or announce the release so that waiters wake at
-- once. A release that matches no holding takes the attempt out of the queue
-- (a waiter leaving). A name left free and unmarked is forgotten after the
-- forget delay (forget.lua). KEYS, ARGV, the record and replies: CONTRACT.md.
--[[forget.lua]]

local cur = redis.call('HMGET', KEYS[1], 'owner', 'att', 'token', 'w')
if cur[1] == '\0' then
	-- A shared record (holdings under a limit above 1): the attempt's
	-- holding, if it matches, ends and its slot is handed on.
	local s = redis.call('HMGET', KEYS[1], 'h:' .. ARGV[2], 'c', 'n', 'exp')
	local until_ms, token, owner
	if s[1] then
		until_ms, token, owner = string.match(s[1], '^(%d+)%z(%d+)%z([^%z]*)%z')
	end
	if owner == ARGV[1] and (ARGV[3] == '0' or token == ARGV[3]) then
		--[[queue.lua]]
		--[[shared.lua]]

		local t = redis.call('TIME')
		local now_ms = t[1] * 1000 + math.floor(t[2] / 1000)
		local r, err = shared_end(t, now_ms, 'h:' .. ARGV[2], tonumber(s[2]) or 1, tonumber(s[3]), tonumber(s[4]) or 0,
			cur[3], cur[4] == '1', tonumber(until_ms) > now_ms, ARGV[4], ARGV[5], ARGV[6], forget)
		if not r then
			return err
		end
		return r
	end
end
if cur[1] ~= ARGV[1] or cur[2] ~= ARGV[2] or (ARGV[3] ~= '0' and cur[3] ~= ARGV[3]) then
	-- Not this attempt's holding: its queue entry, if any, goes (the owner
	-- is the entry's sixth field).
	local d = redis.call('HGET', KEYS[4], ARGV[2])
	if d and string.match(d, '^%d+%z%d+%z%d+%z%d+%z[^%z]*%z([^%z]*)%z') == ARGV[1] then
		redis.call('HDEL', KEYS[4], ARGV[2])
		redis.call('LREM', KEYS[3], 1, ARGV[2])
	end
	return 0
end
if cur[4] ~= '1' then
	-- Nobody waits and the queue is empty: the record stays, free, with
	-- its token (the fence counter), until it is forgotten.
	redis.call('HSET', KEYS[1], 'owner', '', 'att', '', 'meta', '')
	forget(KEYS[1], cur[3])
	return 1
end
do
	--[[queue.lua]]

	local r, err = hand_on(nil, ARGV[4], ARGV[5], ARGV[6], cur[3], false, forget)
	if not r then
		return err
	end
	return r
end
