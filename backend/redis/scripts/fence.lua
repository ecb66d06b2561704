-- fence.lua: a write guarded by a fencing token (fence.go).
-- KEYS[1]: the fence key (the highest token recorded for the resource);
-- KEYS[2..]: the keys written.
-- ARGV[1]: the writer's token, in decimal; ARGV[2]: the write ("check":
-- none, "set", "hset", "del"); then the write's arguments: for set the value
-- and the TTL in ms (0: none), for hset field, value, field, value, ...
-- Returns {1} after the write, or {0, highest} without writing anything.

-- Tokens are compared as decimal strings (no leading zeros), which keeps
-- the whole uint64 range exact where Lua numbers would round above 2^53.
local function lower(a, b)
  if #a ~= #b then return #a < #b end
  return a < b
end

local token = ARGV[1]
local highest = redis.call('GET', KEYS[1])
if highest and lower(token, highest) then
  return {0, highest}
end

local op = ARGV[2]
if op == 'set' then
  if ARGV[4] == '0' then
    redis.call('SET', KEYS[2], ARGV[3])
  else
    redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[4])
  end
elseif op == 'hset' then
  redis.call('HSET', KEYS[2], unpack(ARGV, 3))
elseif op == 'del' then
  redis.call('DEL', unpack(KEYS, 2))
end
if highest ~= token then
  redis.call('SET', KEYS[1], token)
end
return {1}
