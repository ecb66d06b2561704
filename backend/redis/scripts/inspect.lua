-- inspect: the live holding of one name, read-only. KEYS, ARGV, the record
-- and replies: CONTRACT.md.
local cur = redis.call('HMGET', KEYS[1], 'v', 'owner', 'token', 'meta', 'exp')
if cur[1] == '2' then
	if cur[2] == '' then
		return {0}
	end
	local t = redis.call('TIME')
	local now_ms = t[1] * 1000 + math.floor(t[2] / 1000)
	local until_ms = tonumber(cur[5])
	if until_ms <= now_ms then
		return {0}
	end
	return {1, cur[2], cur[3], cur[4], until_ms, until_ms - now_ms}
elseif cur[1] then
	return redis.error_reply('leasehold: lease hash ' .. KEYS[1] .. ' has record version ' .. cur[1] .. ', which this leasehold does not know')
end
if not cur[2] then
	return {0}
end
-- A holding in the older layout: its deadline is the key's expiry.
local pttl = redis.call('PTTL', KEYS[1])
if pttl < 0 then
	return redis.error_reply('leasehold: lease hash ' .. KEYS[1] .. ' has no expiry; it was not written by leasehold')
end
local t = redis.call('TIME')
local now_ms = t[1] * 1000 + math.floor(t[2] / 1000)
return {1, cur[2], cur[3] or '0', cur[4] or '', now_ms + pttl, pttl}
