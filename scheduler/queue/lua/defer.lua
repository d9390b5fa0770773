--[[ defer.lua: a running job may not run now (its window closed): pending again at a later
time, without counting an attempt.

KEYS[1]     job       {P}:job:<id>                 HASH
KEYS[2]     task      {P}:task:<task>              HASH
KEYS[3..5]  due sets  {P}:due:urgent|normal|bulk   ZSET
KEYS[6]     parked    {P}:parked:<task>            LIST
KEYS[7]     events    {P}:events                   STREAM
ARGV[1]     tag ("{prefix}", for the job hash of a parked job released in exchange)
ARGV[2]     worker id
ARGV[3]     wake channel
ARGV[4]     job id
ARGV[5]     fencing token
ARGV[6]     new due time (ms epoch; 0 = now by the Redis clock)
ARGV[7]     new window close (ms epoch; '' = none)
ARGV[8]     reason (for the operator)
ARGV[9]     memo lifetime (ms, >= 1; the caller's lease): see _lib fs_remember
Returns     {0, due_ms}: pending at due_ms, attempt - 1, running - 1, event defer (also the
            answer to the same token's defer again, whose first reply was lost: nothing written)
            {-1 STALE_TOKEN | -2 UNKNOWN_JOB | -5 NOT_RUNNING, message}: nothing changed
Errors      {-4 BAD_ARGUMENT, message}; nothing is written.
]]
local jk, task_key = KEYS[1], KEYS[2]
local due_keys = {urgent = KEYS[3], normal = KEYS[4], bulk = KEYS[5]}
local parked, events = KEYS[6], KEYS[7]
local tag, worker, wake, id, token = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local task_id = fs_task_of(id) or ''
local due_ms, wclose, reason, memo_ms = fs_count(ARGV[6]), ARGV[7], ARGV[8], fs_count(ARGV[9])
fs_effects()

if fs_count(token) == nil then return fs_err(FS_BAD_ARGUMENT, 'token must be a non-negative integer') end
if due_ms == nil then return fs_err(FS_BAD_ARGUMENT, 'due must be a non-negative integer (ms)') end
if wclose ~= '' and fs_count(wclose) == nil then
  return fs_err(FS_BAD_ARGUMENT, 'window close must be a ms epoch or empty')
end
if memo_ms == nil or memo_ms < 1 then return fs_err(FS_BAD_ARGUMENT, 'memo lifetime must be an integer >= 1 ms') end
local j = redis.call('HMGET', jk, 'token', 'state', 'host', 'attempt')
if not j[2] or fs_num(j[1]) ~= tonumber(token) or j[2] ~= 'running' then
  local first = fs_recall(tag, id, token, 'defer')
  if first then return {0, tonumber(first[1])} end  -- a repeat: the first outcome
end
if not j[2] then return fs_err(FS_UNKNOWN_JOB, 'no job ' .. id) end
if fs_num(j[1]) ~= tonumber(token) then
  return fs_err(FS_STALE_TOKEN, 'job ' .. id .. ' was claimed again since token ' .. token)
end
if j[2] ~= 'running' then return fs_err(FS_NOT_RUNNING, 'job ' .. id .. ' is ' .. j[2] .. ', not running') end

local now = fs_now()
if due_ms == 0 then due_ms = now end
local t = redis.call('HMGET', task_key, 'prio', 'max_running')
local due = fs_due_of(due_keys, t[1])
local attempt = math.max(fs_num(j[4]) - 1, 0)
redis.call('HSET', jk, 'state', 'pending', 'attempt', attempt, 'due', fs_int(due_ms))
redis.call('HDEL', jk, 'owner')
if wclose ~= '' then redis.call('HSET', jk, 'wclose', wclose) else redis.call('HDEL', jk, 'wclose') end
fs_drop_elsewhere(due_keys, due, id)  -- its lease entry may be in its task's old class
redis.call('ZREM', fs_leases_of(due), id)
fs_free_host(tag, j[3], id, wake, events, now)
fs_put_due(due, id, due_ms, wake)
fs_finish(task_key, nil)
fs_emit(events, now, 'defer', {'task', task_id, 'job', id, 'host', j[3], 'attempt', fs_int(attempt),
  'token', token, 'worker', worker, 'due', fs_int(due_ms), 'error', reason})
if fs_num(t[2]) > 0 then fs_unpark(tag, parked, due, wake, events, now, task_id) end
fs_remember(tag, id, token, 'defer', fs_int(due_ms), '', memo_ms)
return {0, due_ms}
