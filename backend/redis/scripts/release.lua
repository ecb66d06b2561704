-- release: end the holding of (owner, attempt, and token unless "0"), and
-- announce it so that waiters wake at once. KEYS, ARGV and replies: CONTRACT.md.
local cur = redis.call('HMGET', KEYS[1], 'owner', 'attempt', 'token')
if cur[1] ~= ARGV[1] or cur[2] ~= ARGV[2] then
	return 0
end
if ARGV[3] ~= '0' and cur[3] ~= ARGV[3] then
	return 0
end
redis.call('DEL', KEYS[1])
if ARGV[4] ~= '' then
	redis.call('PUBLISH', ARGV[4], ARGV[5])
end
return 1
