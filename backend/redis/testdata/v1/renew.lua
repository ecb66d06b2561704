-- renew: extend the holding (owner, attempt, token) to now + TTL.
-- KEYS, ARGV and replies: CONTRACT.md.
local cur = redis.call('HMGET', KEYS[1], 'owner', 'attempt', 'token')
if cur[1] ~= ARGV[1] or cur[2] ~= ARGV[2] or cur[3] ~= ARGV[3] then
	return {0, cur[1] or ''}
end
local t = redis.call('TIME')
local exp = t[1] * 1000 + math.floor(t[2] / 1000) + ARGV[4]
redis.call('PEXPIREAT', KEYS[1], exp)
return {1, exp}
