-- forget.lua: how a name that ends free and unmarked is forgotten. Put by
-- scripts.go where release.lua and revoke.lua say --[[forget.lua]]; both
-- take the forget delay in milliseconds as ARGV[7]. Why the next token is
-- still above every earlier one: CONTRACT.md, "Forgetting a free name".

-- forget gives key, whose fence counter is token (decimal text; nil or
-- anything else, or no ARGV[7]: the key is kept), the expiry (PEXPIREAT) ARGV[7] ms after
-- the millisecond of that token, plus 1 ms: token is µs, and the server's
-- clock has passed it once the key is gone. An expiry in the past deletes
-- the key at once.
local function forget(key, token)
	local delay = tonumber(ARGV[7])
	if not delay or not token or not string.match(token, '^%d+$') then
		return
	end
	local ms = tonumber(string.sub(token, 1, -4)) or 0 -- floor(token / 1000), exactly
	redis.call('PEXPIREAT', key, string.format('%d', ms + 1 + delay))
end
