-- renew: extend the holding (owner, attempt, token) to now + TTL.
-- KEYS, ARGV, the record and replies: CONTRACT.md.
local cur = redis.call('HMGET', KEYS[1], 'owner', 'att', 'token', 'exp')
local t = redis.call('TIME')
local now_ms = t[1] * 1000 + math.floor(t[2] / 1000)
local until_ms = tonumber(cur[4])
if cur[1] ~= ARGV[1] or cur[2] ~= ARGV[2] or cur[3] ~= ARGV[3] or not until_ms or until_ms <= now_ms then
	if cur[1] == '\0' and until_ms > now_ms then
		-- A shared record: the holding is the field h:<attempt> (exp NUL
		-- token NUL owner NUL meta); the record's exp stays the latest
		-- deadline or later.
		local d = redis.call('HGET', KEYS[1], 'h:' .. ARGV[2])
		local h_exp, token, owner, meta
		if d then
			h_exp, token, owner, meta = string.match(d, '^(%d+)%z(%d+)%z([^%z]*)%z(.*)$')
		end
		if owner ~= ARGV[1] or token ~= ARGV[3] or tonumber(h_exp) <= now_ms then
			return {0, ''}
		end
		local exp = now_ms + ARGV[4]
		local text = string.format('%d', exp) .. '\0' .. token .. '\0' .. owner .. '\0' .. meta
		if exp > until_ms then
			redis.call('HSET', KEYS[1], 'h:' .. ARGV[2], text, 'exp', string.format('%d', exp))
		else
			redis.call('HSET', KEYS[1], 'h:' .. ARGV[2], text)
		end
		return {1, exp}
	end
	if until_ms and until_ms <= now_ms then
		return {0, ''} -- what holding there is has expired: the name is free
	end
	return {0, cur[1] or ''}
end
local exp = now_ms + ARGV[4]
redis.call('HSET', KEYS[1], 'exp', string.format('%d', exp))
return {1, exp}
