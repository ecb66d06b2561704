-- release: end the holding of (owner, attempt, and token unless "0"), and
-- announce it when a refused attempt waits for it (field w), so that waiters
-- wake at once. KEYS, ARGV and replies: CONTRACT.md.
local cur = redis.call('HMGET', KEYS[1], 'owner', 'attempt', 'token', 'w')
if cur[1] ~= ARGV[1] or cur[2] ~= ARGV[2] or (ARGV[3] ~= '0' and cur[3] ~= ARGV[3]) then
	return 0
end
redis.call('DEL', KEYS[1])
if cur[4] and ARGV[4] ~= '' then
	redis.call('PUBLISH', ARGV[4], ARGV[5])
end
return 1
