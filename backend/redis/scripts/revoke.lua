-- revoke: end the live holding of one name by force (an operator's act),
-- whoever holds it, and hand it on or announce it as a release does (when it
-- is marked w). KEYS, ARGV and replies: CONTRACT.md.
local cur = redis.call('HMGET', KEYS[1], 'owner', 'token', 'meta', 'w')
if not cur[1] then
	return {0}
end
if ARGV[1] ~= '0' and cur[2] ~= ARGV[1] then
	return {0}
end
local pttl = redis.call('PTTL', KEYS[1])
local t = redis.call('TIME')
local now_ms = t[1] * 1000 + math.floor(t[2] / 1000)
if cur[4] then
	--[[queue.lua]]

	local r, err = hand_on(t, ARGV[2], ARGV[3], ARGV[4])
	if not r then
		return err
	end
else
	redis.call('DEL', KEYS[1])
end
if pttl < 0 then
	pttl = 0
end
return {1, cur[1], cur[2] or '0', cur[3] or '', now_ms + pttl, pttl}
