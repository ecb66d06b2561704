-- acquire: grant a name to an attempt, refresh that attempt's own holding, or
-- report the holding in the way (marking it when the caller waits for it).
-- KEYS, ARGV and replies: CONTRACT.md. Each redis.call costs a command
-- dispatch and a reply conversion: the paths below make as few as they can.
local cur = redis.call('HMGET', KEYS[1], 'owner', 'attempt', 'token', 'w')
local t = redis.call('TIME')
local now_ms = t[1] * 1000 + math.floor(t[2] / 1000)
local exp = now_ms + ARGV[3]

if cur[1] then
	if cur[1] == ARGV[1] and cur[2] == ARGV[2] then
		-- The same attempt again (a retry after an ambiguous failure):
		-- refresh, keep the token (and a waiter's mark).
		redis.call('HSET', KEYS[1], 'meta', ARGV[4])
		redis.call('PEXPIREAT', KEYS[1], exp)
		return {1, cur[3], exp}
	end
	local pttl = redis.call('PTTL', KEYS[1])
	if pttl < 0 then
		return redis.error_reply('leasehold: lease hash ' .. KEYS[1] .. ' has no expiry; it was not written by leasehold')
	end
	if ARGV[6] == '1' and not cur[4] then
		-- Somebody waits: the release of this holding must be announced.
		redis.call('HSET', KEYS[1], 'w', '1')
	end
	return {0, cur[1], cur[3] or '0', now_ms + pttl, pttl}
end

if ARGV[5] ~= '0' then
	-- The lease may have been lost with the data in a restart (no
	-- persistence, an older snapshot, the unsynced tail of the AOF): while
	-- the server is younger than the grace its previous holder may still
	-- believe it holds the name, so nothing is granted.
	local grace = tonumber(ARGV[5])
	-- LASTSAVE is the start of this process (Redis "considers the database
	-- saved at startup") or a later successful save, in whole seconds:
	-- this process began before LASTSAVE + 1 s. When that is longer ago
	-- than the grace, the server is old enough without asking INFO, which
	-- costs more than the rest of the script.
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
		-- uptime_in_seconds is a difference of whole seconds (it reads 1 a
		-- few ms after a start late in a second): a second more makes this
		-- start estimate late, never early, so the grace is never shorter
		-- than asked.
		local grace_end = now_ms - up_s * 1000 + 1000 + grace
		if now_ms < grace_end then
			return {0, '', '0', grace_end, grace_end - now_ms}
		end
	end
end

-- token = max(counter + 1, now_us): a counter that went back with lost
-- writes cannot repeat a token, because the clock has moved past them all.
-- Tokens are integers below 2^53, exact as Lua numbers; the decimal text is
-- made once ('%d', cheaper than Redis's own conversion of a number argument,
-- which this token would go through twice). The counter is written first
-- (SET ... GET: one call where the clock is ahead of it, which is nearly
-- always) and corrected when it was not.
local now_us = t[1] * 1000000 + t[2]
local token = string.format('%d', now_us)
local last = redis.call('SET', KEYS[2], token, 'GET')
if last then
	local n = tonumber(last)
	if not n or n >= 2^53 then
		redis.call('SET', KEYS[2], last) -- put it back: fail, change nothing
		return redis.error_reply('leasehold: fence counter ' .. KEYS[2] .. ' holds ' .. last .. ', not a token')
	end
	if n >= now_us then
		token = string.format('%d', n + 1)
		redis.call('SET', KEYS[2], token)
	end
end
redis.call('HSET', KEYS[1], 'owner', ARGV[1], 'attempt', ARGV[2], 'token', token, 'meta', ARGV[4])
redis.call('PEXPIREAT', KEYS[1], exp)
return {1, token, exp}
