-- renew extends one holding, identified by owner AND token, to now + TTL.
--
-- KEYS[1]  lease hash
-- ARGV[1]  owner
-- ARGV[2]  token (decimal)
-- ARGV[3]  TTL in milliseconds
--
-- Returns {1, expires_ms} when renewed, {0, holder} when the holding no longer
-- exists (holder "" when the name is free).
local cur = redis.call('HMGET', KEYS[1], 'owner', 'token')
if cur[1] ~= ARGV[1] or cur[2] ~= ARGV[2] then
	return {0, cur[1] or ''}
end
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local exp = now_ms + tonumber(ARGV[3])
redis.call('PEXPIREAT', KEYS[1], exp)
return {1, exp}
