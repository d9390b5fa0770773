--[[ next_due.lua: the Redis clock and the earliest score of any due set (read only).

KEYS[1..3]  due sets  {P}:due:urgent|normal|bulk  ZSET
Returns     {now_ms, earliest score or -1 when every due set is empty, now's microseconds
            past now_ms (0-999): a waiter sleeping until the earliest score from the whole
            millisecond would wake up to 1 ms late}
]]
local due_sets = {KEYS[1], KEYS[2], KEYS[3]}
local now, micros = fs_clock()
local earliest = -1
for _, due in ipairs(due_sets) do
  local head = redis.call('ZRANGE', due, 0, 0, 'WITHSCORES')
  if head[2] ~= nil and (earliest < 0 or tonumber(head[2]) < earliest) then earliest = tonumber(head[2]) end
end
return {now, earliest, micros}
