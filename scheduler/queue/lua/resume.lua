--[[ resume.lua: resume a paused task, and put its held jobs back in their due set in order,
one bounded chunk per call (Queue.resume calls it until nothing is left).

KEYS[1]     task      {P}:task:<task>              HASH
KEYS[2]     held      {P}:held:<task>              ZSET job id -> due ms
KEYS[3..5]  due sets  {P}:due:urgent|normal|bulk   ZSET
KEYS[6]     events    {P}:events                   STREAM
ARGV[1]     tag ("{prefix}": held job ids name job hashes <tag>:job:<id>, same slot)
ARGV[2]     task id
ARGV[3]     operator
ARGV[4]     chunk: held jobs moved at most by this call (>= 1)
ARGV[5]     first (1 | 0): the first call switches the task to active (event resume)
ARGV[6]     wake channel
ARGV[7]     principal: JSON recorded with the event ('' = none)
Returns     {moved, remaining}; moved jobs are pending again at their due time
Errors      {-3 UNKNOWN_TASK | -7 TASK_NOT_ACTIVE (cancelled or aborted; or its rollout in
            waves stopped, by failures or by its check: `tasks continue` passes the stop first)
            | -4 BAD_ARGUMENT,
            message}
]]
local task_key, held = KEYS[1], KEYS[2]
local due_keys = {urgent = KEYS[3], normal = KEYS[4], bulk = KEYS[5]}
local events = KEYS[6]
local tag, task_id, operator, first, wake = ARGV[1], ARGV[2], ARGV[3], ARGV[5], ARGV[6]
local principal = ARGV[7]
local chunk = fs_count(ARGV[4])
fs_effects()

if chunk == nil or chunk < 1 then return fs_err(FS_BAD_ARGUMENT, 'chunk must be an integer >= 1') end
local t = redis.call('HMGET', task_key, 'state', 'prio', 'wave_state', 'wave')
if not t[1] then return fs_err(FS_UNKNOWN_TASK, 'no task ' .. task_id) end
if t[1] ~= 'active' and t[1] ~= 'paused' then
  return fs_err(FS_TASK_NOT_ACTIVE, 'task ' .. task_id .. ' is ' .. t[1] .. '; it cannot be resumed')
end
-- A rollout stopped by its wave's failures or check: resuming would run the rest of that wave
-- (paused by the stop) or do nothing at all (active: a check stops the next wave, not a pause).
if first == '1' and t[3] == 'stopped' then
  return fs_err(FS_TASK_NOT_ACTIVE, 'task ' .. task_id .. "'s rollout stopped at wave " ..
    (t[4] or '?') .. ': `fleetsched tasks continue ' .. task_id .. '` goes on with it, ' ..
    '`fleetsched tasks cancel ' .. task_id .. '` ends it')
end
local now = fs_now()
if t[1] == 'paused' then
  if first ~= '1' then return {0, redis.call('ZCARD', held)} end  -- paused again meanwhile
  redis.call('HSET', task_key, 'state', 'active')
  redis.call('HDEL', task_key, 'wave_held')  -- a rollout's hold (wave.lua) is over too
  fs_emit(events, now, 'resume', fs_signed({'task', task_id, 'operator', operator,
    'count', fs_int(redis.call('ZCARD', held))}, principal))
end
local due = fs_due_of(due_keys, t[2])
local batch = redis.call('ZRANGE', held, 0, chunk - 1, 'WITHSCORES')
local moved = #batch / 2
if moved > 0 then
  local head = redis.call('ZRANGE', due, 0, 0, 'WITHSCORES')
  local zadd = {}
  for i = 1, #batch, 2 do
    redis.call('HSET', tag .. ':job:' .. batch[i], 'state', 'pending')
    zadd[#zadd + 1], zadd[#zadd + 2] = batch[i + 1], batch[i]
  end
  redis.call('ZADD', due, unpack(zadd))
  redis.call('ZREMRANGEBYRANK', held, 0, moved - 1)
  fs_requeued(tag)  -- back at their old scores, which a reorder since may have passed
  local earliest = tonumber(batch[2])
  if head[2] == nil or earliest < tonumber(head[2]) then redis.call('PUBLISH', wake, fs_int(earliest)) end
end
return {moved, redis.call('ZCARD', held)}
