-- acquire: grant a name to an attempt, refresh that attempt's own holding, or
-- report the holding in the way. KEYS, ARGV and replies: CONTRACT.md.
local owner, attempt = ARGV[1], ARGV[2]
local ttl, meta, grace = tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])

local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local cur = redis.call('HMGET', KEYS[1], 'owner', 'attempt', 'token')
if cur[1] then
	if cur[1] == owner and cur[2] == attempt then
		-- The same attempt again (a retry after an ambiguous failure):
		-- refresh, keep the token.
		redis.call('HSET', KEYS[1], 'meta', meta)
		redis.call('PEXPIREAT', KEYS[1], now_ms + ttl)
		return {1, cur[3], now_ms + ttl}
	end
	local pttl = redis.call('PTTL', KEYS[1])
	if pttl < 0 then
		return redis.error_reply('leasehold: lease hash ' .. KEYS[1] .. ' has no expiry; it was not written by leasehold')
	end
	return {0, cur[1], cur[3] or '0', now_ms + pttl, pttl}
end

if grace > 0 then
	-- The lease may have been lost with the data in a restart (no
	-- persistence, an older snapshot, the unsynced tail of the AOF): while
	-- the server is younger than the grace its previous holder may still
	-- believe it holds the name, so nothing is granted.
	local info = redis.pcall('INFO', 'server')
	if type(info) == 'table' and info.err then
		return redis.error_reply('leasehold: the restart grace needs INFO in scripts: ' .. info.err)
	end
	local up_s = tonumber(string.match(info, 'uptime_in_seconds:(%d+)'))
	if not up_s then
		return redis.error_reply('leasehold: the restart grace needs uptime_in_seconds in INFO server')
	end
	-- uptime_in_seconds is a difference of whole seconds (it reads 1 a few
	-- ms after a start late in a second): a second more makes this start
	-- estimate late, never early, so the grace is never shorter than asked.
	local grace_end = now_ms - up_s * 1000 + 1000 + grace
	if now_ms < grace_end then
		return {0, '', '0', grace_end, grace_end - now_ms}
	end
end

-- token = max(counter + 1, now_us): a counter that went back with lost
-- writes cannot repeat a token, because the clock has moved past them all.
local now_us = t[1] .. string.format('%06d', tonumber(t[2]))
local token = now_us
local last = redis.call('GET', KEYS[2])
if last then
	local n = tonumber(last)
	if not n or n >= 2^53 then
		return redis.error_reply('leasehold: fence counter ' .. KEYS[2] .. ' holds ' .. last .. ', not a token')
	end
	if n >= tonumber(now_us) then
		token = string.format('%d', n + 1)
	end
end
redis.call('SET', KEYS[2], token)
redis.call('HSET', KEYS[1], 'owner', owner, 'attempt', attempt, 'token', token, 'meta', meta)
redis.call('PEXPIREAT', KEYS[1], now_ms + ttl)
return {1, token, now_ms + ttl}
