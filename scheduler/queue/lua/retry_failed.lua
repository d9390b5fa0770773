--[[ retry_failed.lua: an operator re-enqueues a task's failed jobs with a new attempt budget,
one chunk of job ids per call (scheduler.submission.control.retry_failed walks <task>.0 .. <task>.<span-1>).

KEYS[1]     task      {P}:task:<task>              HASH
KEYS[2..4]  due sets  {P}:due:urgent|normal|bulk   ZSET
KEYS[5]     dead      {P}:dead                     ZSET
KEYS[6]     events    {P}:events                   STREAM
KEYS[6+i]   job i     {P}:job:<task>.<k>           HASH, i = 1..n
ARGV[1]     task id
ARGV[2]     operator
ARGV[3]     wake channel
ARGV[4]     principal: JSON recorded with the event ('' = none)
ARGV[4+i]   job id i
Returns     {requeued, event id}: jobs of this chunk that were failed for good (state failed,
            in the dead letter set) and are pending again now: attempt count reset, fencing
            token kept (it only grows), error cleared, failed - 1 each (and failed_hosts - 1
            each: its host counts against max_failures again only when it fails again;
            lost_failed - 1 for each that had been lost with its worker, its hash marked
            `lost`). One event `retry-failed` (operator, count, jobs, due) per chunk that moved
            any; event id ''
            when none moved. A chunk that moves any job revives an aborted task (state active,
            overshoot 0): its failure budget counts again from the jobs still failed; a
            rollout in waves with staged waves left goes back into {P}:waving.
Errors      {-3 UNKNOWN_TASK | -7 TASK_NOT_ACTIVE (cancelled; or ended with no failed job) |
            -4 BAD_ARGUMENT, message};
            nothing is written.
]]
local task_key = KEYS[1]
local due_keys = {urgent = KEYS[2], normal = KEYS[3], bulk = KEYS[4]}
local dead, events = KEYS[5], KEYS[6]
local task_id, operator, wake, principal = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local n = #KEYS - 6
fs_effects()

if n < 0 or #ARGV ~= 4 + n then return fs_err(FS_BAD_ARGUMENT, 'retry_failed needs one job id per job key') end
local t = redis.call('HMGET', task_key, 'state', 'prio', 'total', 'succeeded', 'failed', 'cancelled')
if not t[1] then return fs_err(FS_UNKNOWN_TASK, 'no task ' .. task_id) end
if t[1] == 'cancelled' then
  return fs_err(FS_TASK_NOT_ACTIVE, 'task ' .. task_id .. ' is cancelled; its failed jobs stay failed')
end
-- An ended task without a failed job: nothing to do, refused as pause.lua refuses it.
local total, failed = fs_num(t[3]), fs_num(t[5])
if total > 0 and failed == 0 and fs_num(t[4]) + fs_num(t[6]) >= total then
  return fs_err(FS_TASK_NOT_ACTIVE, 'task ' .. task_id .. ' has ended with no failed job; ' ..
    'there is nothing to retry')
end
local prefix = task_id .. '.'
for i = 1, n do
  if string.sub(ARGV[4 + i], 1, #prefix) ~= prefix then
    return fs_err(FS_BAD_ARGUMENT, 'job id ' .. ARGV[4 + i] .. ' is not of task ' .. task_id)
  end
end

local now = fs_now()
local due = fs_due_of(due_keys, t[2])
local ids = {}
local lost = 0  -- of them, jobs lost with their worker (fs_count_lost_failure marked them)
for i = 1, n do
  local jk, id = KEYS[6 + i], ARGV[4 + i]
  if redis.call('HGET', jk, 'state') == 'failed' then
    if redis.call('HGET', jk, 'lost') then lost = lost + 1 end
    redis.call('HSET', jk, 'state', 'pending', 'due', fs_int(now))
    redis.call('HDEL', jk, 'attempt', 'error', 'owner', 'lost')
    -- Its host no longer counts against max_failures (count_failures = attempts) until it
    -- fails again.
    fs_forget_failed_host(task_key, jk)
    redis.call('ZREM', dead, id)
    fs_put_due(due, id, now, wake)
    ids[#ids + 1] = id
  end
end
if t[1] == 'aborted' and #ids > 0 then
  redis.call('HSET', task_key, 'state', 'active', 'overshoot', 0)
  redis.call('SREM', fs_aborting_of(task_key), task_id)  -- revived: nothing to sweep
  redis.call('HDEL', task_key, 'wave_held')  -- no pause of a wave's limit holds it any more
  -- A rollout in waves whose later waves are still staged goes on: the wave controllers had
  -- dropped the aborted task from {P}:waving (same slot: named from the task key).
  local ws = redis.call('HGET', task_key, 'wave_state')
  if ws and ws ~= 'done'
      and redis.call('EXISTS', (string.gsub(task_key, ':task:([^:]+)$', ':waves:%1'))) == 1 then
    redis.call('SADD', (string.gsub(task_key, ':task:[^:]+$', ':waving')), task_id)
  end
end
if #ids == 0 then return {0, ''} end
redis.call('HINCRBY', task_key, 'failed', -#ids)
if lost > 0 then redis.call('HINCRBY', task_key, 'lost_failed', -lost) end
local id = redis.call('XADD', events, '*', 'kind', 'retry-failed', 'ts', fs_int(now),
  unpack(fs_signed({'task', task_id, 'operator', operator, 'count', fs_int(#ids),
                    'jobs', table.concat(ids, ' '), 'due', fs_int(now)}, principal)))
return {#ids, id}
