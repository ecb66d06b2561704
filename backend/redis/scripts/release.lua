-- release: end the holding of (owner, attempt, and token unless "0"); when it
-- is marked w (somebody waits, or the queue may hold entries), hand the name
-- to the head of the queue, or announce the release so that waiters wake at
-- once. A release that matches no holding takes the attempt out of the queue
-- (a waiter leaving). KEYS, ARGV, the record and replies: CONTRACT.md.
local cur = redis.call('HMGET', KEYS[1], 'owner', 'att', 'token', 'w')
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
	-- its token (the fence counter).
	redis.call('HSET', KEYS[1], 'owner', '', 'att', '', 'meta', '')
	return 1
end
do
	--[[queue.lua]]

	local r, err = hand_on(nil, ARGV[4], ARGV[5], ARGV[6], cur[3], false)
	if not r then
		return err
	end
	return r
end
