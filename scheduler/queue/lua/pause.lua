--[[ pause.lua: pause an active task. Its jobs met due by claim move to {P}:held:<task> (at
their due time, so they are not rescanned); running jobs finish.

KEYS[1]   task    {P}:task:<task>  HASH
KEYS[2]   events  {P}:events       STREAM
ARGV[1]   task id
ARGV[2]   operator (`rollout`: the pause of a wave that reached its failure limit, restored
          by reconcile; sets wave_held, so `tasks continue` resumes the task)
ARGV[3]   principal: JSON recorded with the event ('' = none)
Returns   {1} paused now (event pause) | {0} already paused
Errors    {-3 UNKNOWN_TASK | -7 TASK_NOT_ACTIVE (cancelled or aborted, or every job has ended),
          message}
]]
local task_key, events = KEYS[1], KEYS[2]
local task_id, operator, principal = ARGV[1], ARGV[2], ARGV[3]
fs_effects()

local t = redis.call('HMGET', task_key, 'state', 'total', 'succeeded', 'failed', 'cancelled')
local state = t[1]
if not state then return fs_err(FS_UNKNOWN_TASK, 'no task ' .. task_id) end
if state == 'paused' then return {0} end
local total = fs_num(t[2])
if state == 'active' and total > 0 and fs_num(t[3]) + fs_num(t[4]) + fs_num(t[5]) >= total then
  return fs_err(FS_TASK_NOT_ACTIVE, 'task ' .. task_id .. ' has ended (every job finished); ' ..
    'there is nothing to pause')
end
if state ~= 'active' then
  return fs_err(FS_TASK_NOT_ACTIVE, 'task ' .. task_id .. ' is ' .. state .. '; only an active task can be paused')
end
redis.call('HSET', task_key, 'state', 'paused')
-- reconcile restores a rollout's own pause (fs_wave_failed) under its name: continue resumes it
if operator == 'rollout' then redis.call('HSET', task_key, 'wave_held', '1') end
fs_emit(events, fs_now(), 'pause', fs_signed({'task', task_id, 'operator', operator}, principal))
return {1}
