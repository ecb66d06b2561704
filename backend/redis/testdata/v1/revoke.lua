-- revoke: end the live holding of one name by force (an operator's act),
-- whoever holds it, and hand it on or announce it as a release does (when it
-- is marked w); leave a receipt naming this revoke (ARGV[5]), so that a
-- resend of it whose first answer was lost knows it removed the holding.
-- KEYS, ARGV and replies: CONTRACT.md.
local cur = redis.call('HMGET', KEYS[1], 'owner', 'token', 'meta', 'w')
if not cur[1] or (ARGV[1] ~= '0' and cur[2] ~= ARGV[1]) then
	local done = redis.call('HMGET', KEYS[5], 'id', 'owner', 'token', 'meta', 'expires', 'pttl')
	if done[1] == ARGV[5] then
		return {1, done[2], done[3], done[4], tonumber(done[5]), tonumber(done[6])}
	end
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
local token, meta = cur[2] or '0', cur[3] or ''
redis.call('HSET', KEYS[5], 'id', ARGV[5], 'owner', cur[1], 'token', token, 'meta', meta,
	'expires', now_ms + pttl, 'pttl', pttl)
redis.call('PEXPIRE', KEYS[5], ARGV[6])
return {1, cur[1], token, meta, now_ms + pttl, pttl}
