-- inspect: the live holding of one name, read-only. KEYS, ARGV, the record
-- and replies: CONTRACT.md.
local cur = redis.call('HMGET', KEYS[1], 'v', 'owner', 'token', 'meta', 'exp')
if cur[1] == '2' then
	if cur[2] == '' then
		return {0}
	end
	if cur[2] == '\0' then
		-- A shared record: every live holding, as {2, limit, then owner,
		-- token, meta, expires_ms, pttl_ms of each}.
		local t = redis.call('TIME')
		local now_ms = t[1] * 1000 + math.floor(t[2] / 1000)
		local all = redis.call('HGETALL', KEYS[1])
		local out = {2, 0}
		for i = 1, #all, 2 do
			local f = all[i]
			if f == 'n' then
				out[2] = tonumber(all[i + 1])
			elseif string.sub(f, 1, 2) == 'h:' then
				local h_exp, token, owner, meta = string.match(all[i + 1], '^(%d+)%z(%d+)%z([^%z]*)%z(.*)$')
				h_exp = tonumber(h_exp)
				if h_exp and h_exp > now_ms then
					out[#out + 1], out[#out + 2], out[#out + 3] = owner, token, meta
					out[#out + 1], out[#out + 2] = h_exp, h_exp - now_ms
				end
			end
		end
		if #out == 2 then
			return {0}
		end
		return out
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
