-- renew_many: renew.lua for many holdings, one after the other, in one call:
-- the client builds, sends and parses one command instead of one per lease.
-- KEYS, ARGV, the record and replies: CONTRACT.md.
if #ARGV ~= 4 * #KEYS then
	return redis.error_reply('ERR renew_many: 4 arguments per key expected')
end
-- TIME once: the renewals of one call run within a moment of each other.
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local out = {}
for i = 1, #KEYS do
	local k, a = KEYS[i], 4 * i - 4
	-- pcall: an error (a key of the wrong type) answers this renewal alone,
	-- as renew.lua's error answers its one call, and the others go on.
	local cur = redis.pcall('HMGET', k, 'owner', 'att', 'token', 'exp')
	if cur.err then
		out[i] = cur
	else
		local until_ms = tonumber(cur[4])
		if until_ms and until_ms <= now then
			out[i] = {0, ''}
		elseif cur[1] ~= ARGV[a + 1] or cur[2] ~= ARGV[a + 2] or cur[3] ~= ARGV[a + 3] then
			out[i] = {0, cur[1] or ''}
		else
			local exp = now + ARGV[a + 4]
			local r = redis.pcall('HSET', k, 'exp', string.format('%d', exp))
			if type(r) == 'table' and r.err then
				out[i] = r
			else
				out[i] = {1, exp}
			end
		end
	end
end
return out
