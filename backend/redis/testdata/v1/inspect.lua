-- inspect: the live holding of one name, read-only. KEYS, ARGV and replies:
-- CONTRACT.md.
local cur = redis.call('HMGET', KEYS[1], 'owner', 'token', 'meta')
if not cur[1] then
	return {0}
end
local pttl = redis.call('PTTL', KEYS[1])
if pttl < 0 then
	return redis.error_reply('leasehold: lease hash ' .. KEYS[1] .. ' has no expiry; it was not written by leasehold')
end
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return {1, cur[1], cur[2] or '0', cur[3] or '', now_ms + pttl, pttl}
