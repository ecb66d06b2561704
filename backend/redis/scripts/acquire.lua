-- acquire grants a lease to an owner, refreshes the owner's own live lease, or
-- reports the current holder. One atomic step on the server.
--
-- KEYS[1]  lease hash (fields owner, token, meta), expiring at its PX deadline
-- KEYS[2]  fencing counter of the name (no expiry)
-- ARGV[1]  owner
-- ARGV[2]  TTL in milliseconds
-- ARGV[3]  metadata
-- ARGV[4]  restart grace in milliseconds (0: off)
--
-- Returns {1, token, expires_ms} when the owner holds the lease now, or
-- {0, holder, holder_expires_ms} when it does not (holder "" and expiry the end
-- of the restart grace when the server is too young to grant).
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])

local cur = redis.call('HMGET', KEYS[1], 'owner', 'token')
if cur[1] then
	if cur[1] == ARGV[1] then
		-- The same owner again (typically a retry after an ambiguous failure):
		-- refresh, keep the token.
		redis.call('HSET', KEYS[1], 'meta', ARGV[3])
		redis.call('PEXPIREAT', KEYS[1], now_ms + ttl)
		return {1, cur[2], now_ms + ttl}
	end
	local pttl = redis.call('PTTL', KEYS[1])
	local holder_exp = 0
	if pttl >= 0 then
		holder_exp = now_ms + pttl
	end
	return {0, cur[1], holder_exp}
end

if redis.call('EXISTS', KEYS[2]) == 0 then
	-- No counter: a name never used, or data lost in a restart. Within the
	-- restart grace a lost lease may still be believed held by its previous
	-- owner, so nothing new is granted until the grace has passed.
	local grace = tonumber(ARGV[4])
	if grace > 0 then
		local info = redis.call('INFO', 'server')
		local up_s = tonumber(string.match(info, 'uptime_in_seconds:(%d+)'))
		-- uptime is rounded down, so this start estimate is late: conservative.
		local started_ms = now_ms - up_s * 1000
		if now_ms < started_ms + grace then
			return {0, '', started_ms + grace}
		end
	end
	-- Seed from the clock in microseconds so tokens keep increasing after the
	-- counter was lost, as long as the server clock does not go backwards.
	redis.call('SET', KEYS[2], t[1] .. string.format('%06d', tonumber(t[2])))
end

local token = string.format('%d', redis.call('INCR', KEYS[2]))
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'token', token, 'meta', ARGV[3])
redis.call('PEXPIREAT', KEYS[1], now_ms + ttl)
return {1, token, now_ms + ttl}
