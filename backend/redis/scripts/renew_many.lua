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
		elseif cur[1] == '\0' then
			-- A shared record: renew.lua's rule for its holding h:<attempt>.
			local d = redis.pcall('HGET', k, 'h:' .. ARGV[a + 2])
			local h_exp, token, owner, meta
			if type(d) == 'string' then
				h_exp, token, owner, meta = string.match(d, '^(%d+)%z(%d+)%z([^%z]*)%z(.*)$')
			end
			if type(d) == 'table' and d.err then
				out[i] = d
			elseif owner ~= ARGV[a + 1] or token ~= ARGV[a + 3] or tonumber(h_exp) <= now then
				out[i] = {0, ''}
			else
				local exp = now + ARGV[a + 4]
				local text = string.format('%d', exp) .. '\0' .. token .. '\0' .. owner .. '\0' .. meta
				local r
				if exp > until_ms then
					r = redis.pcall('HSET', k, 'h:' .. ARGV[a + 2], text, 'exp', string.format('%d', exp))
				else
					r = redis.pcall('HSET', k, 'h:' .. ARGV[a + 2], text)
				end
				if type(r) == 'table' and r.err then
					out[i] = r
				else
					out[i] = {1, exp}
				end
			end
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
