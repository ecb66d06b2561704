-- release ends one holding and announces it so that waiters wake at once.
--
-- KEYS[1]  lease hash
-- ARGV[1]  owner
-- ARGV[2]  token (decimal), or "0" for whatever the owner holds
-- ARGV[3]  channel to publish on ("" when notifications are off)
-- ARGV[4]  message: the key as the caller named it
--
-- Returns 1 when a holding ended, 0 when nothing matching was held.
local cur = redis.call('HMGET', KEYS[1], 'owner', 'token')
if cur[1] ~= ARGV[1] then
	return 0
end
if ARGV[2] ~= '0' and cur[2] ~= ARGV[2] then
	return 0
end
redis.call('DEL', KEYS[1])
if ARGV[3] ~= '' then
	redis.call('PUBLISH', ARGV[3], ARGV[4])
end
return 1
