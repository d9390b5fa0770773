--[[ cancel.lua: cancel a task, then its not-yet-running jobs, one chunk of job ids per call.

Queue.cancel_task calls it first with no job keys (first = 1: the task becomes cancelled unless
it is already aborted or cancelled; event cancel with the operator; returns the span), then
with the ids <task>.0 .. <task>.<span-1> in chunks (a task's job ids are derivable from its
span), the last chunk with last = 1.
KEYS[1]     task      {P}:task:<task>              HASH
KEYS[2..4]  due sets  {P}:due:urgent|normal|bulk   ZSET
KEYS[5]     parked    {P}:parked:<task>            LIST
KEYS[6]     held      {P}:held:<task>              ZSET
KEYS[7]     events    {P}:events                   STREAM
KEYS[7+i]   job i     {P}:job:<task>.<k>           HASH, i = 1..n
ARGV[1]     task id
ARGV[2]     operator
ARGV[3]     first (1 | 0), or 2: the first call of the sweep after an abort, which stops at once
            (going on = 0) unless the task is aborted
ARGV[4]     last (1 | 0): drop the parked list (its jobs were cancelled by this walk), the
            held set and the staged-waves set {P}:waves:<task> (named from the held set), and
            take the task out of the shard's aborting set {P}:aborting (named from the task
            key, _lib fs_aborting_of): it is swept
ARGV[5]     principal: JSON recorded with the operator's events ('' = none)
ARGV[5+i]   job id i
Returns     {cancelled, span, going on}: jobs cancelled by this call (pending, parked, held or
            waiting in a later wave:
            hash deleted, cancelled + 1, one event cancel for the chunk); running jobs finish,
            failed ones stay in the dead letter set. A chunk call (first = 0) on a task that is
            neither cancelled nor aborted any more (retry-failed revived it meanwhile) cancels
            nothing and returns going on = 0: the sweep stops there.
Errors      {-3 UNKNOWN_TASK | -4 BAD_ARGUMENT, message}; nothing is written.
]]
local task_key = KEYS[1]
local due_keys = {urgent = KEYS[2], normal = KEYS[3], bulk = KEYS[4]}
local parked, held, events = KEYS[5], KEYS[6], KEYS[7]
local task_id, operator, first, last, principal = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local n = #KEYS - 7
fs_effects()

if n < 0 or #ARGV ~= 5 + n then return fs_err(FS_BAD_ARGUMENT, 'cancel needs one job id per job key') end
local t = redis.call('HMGET', task_key, 'state', 'prio', 'span')
if not t[1] then return fs_err(FS_UNKNOWN_TASK, 'no task ' .. task_id) end
local prefix = task_id .. '.'
for i = 1, n do
  if string.sub(ARGV[5 + i], 1, #prefix) ~= prefix then
    return fs_err(FS_BAD_ARGUMENT, 'job id ' .. ARGV[5 + i] .. ' is not of task ' .. task_id)
  end
end

local now = fs_now()
if first == '1' and (t[1] == 'active' or t[1] == 'paused') then
  redis.call('HSET', task_key, 'state', 'cancelled')
  fs_emit(events, now, 'cancel', fs_signed({'task', task_id, 'operator', operator}, principal))
end
if first == '2' and t[1] ~= 'aborted' then
  -- The sweep after an abort, and the task is not aborted (any more): an operator's
  -- retry-failed revived it before the sweep began. Leave it alone.
  redis.call('SREM', fs_aborting_of(task_key), task_id)
  return {0, fs_num(t[3]), 0}
end
if first == '0' and t[1] ~= 'cancelled' and t[1] ~= 'aborted' then
  -- The task is live again (retry-failed revived an aborted task during this sweep): the rest
  -- of the sweep would cancel the jobs it has just queued again. Stop.
  redis.call('SREM', fs_aborting_of(task_key), task_id)
  return {0, fs_num(t[3]), 0}
end
local due = fs_due_of(due_keys, t[2])
local ids = {}
for i = 1, n do
  local jk, id = KEYS[7 + i], ARGV[5 + i]
  local state = redis.call('HGET', jk, 'state')
  if state == 'pending' or state == 'parked' or state == 'held' or state == 'hostwait'
      or state == 'waiting' then
    if state == 'hostwait' then  -- waiting for its host or a group (_lib fs_free_host)
      local q = redis.call('HGET', jk, 'waitq')
      if q then redis.call('LREM', q, 0, id) end
    end
    if state == 'pending' then
      -- In its class's set, or still in the old class's while Queue.reprioritize moves it.
      redis.call('ZREM', due, id)
      fs_drop_elsewhere(due_keys, due, id)
    end
    if state == 'held' then redis.call('ZREM', held, id) end
    fs_forget_failed_host(task_key, jk)  -- a cancelled host no longer counts as failed
    redis.call('DEL', jk)
    ids[#ids + 1] = id
  end
end
if #ids > 0 then
  redis.call('HINCRBY', task_key, 'cancelled', #ids)
  fs_emit(events, now, 'cancel', fs_signed({'task', task_id, 'operator', operator,
    'count', fs_int(#ids), 'jobs', table.concat(ids, ' ')}, principal))
end
if last == '1' then
  redis.call('DEL', parked, held, fs_waves_of(held))
  redis.call('SREM', fs_aborting_of(task_key), task_id)  -- swept: no node needs to sweep it
end
return {#ids, fs_num(t[3]), 1}
