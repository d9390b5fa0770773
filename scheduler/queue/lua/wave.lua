--[[ wave.lua: move a task's rollout from one wave state to another (compare-and-set), with its
event. Wave states (task hash wave_state): running (the wave's jobs run), pausing (until
wave_until), gated (waits for `tasks continue`), approved (the gate was passed), checking (the
health check runs), stopped (the rollout waits for the operator: continue or cancel),
continued (an operator continued a stopped rollout), done (every wave ended).

KEYS[1]   task     {P}:task:<task>   HASH
KEYS[2]   waving   {P}:waving        SET of task ids (done leaves it)
KEYS[3]   events   {P}:events        STREAM
ARGV[1]   task id
ARGV[2]   wave: the task's current wave the caller saw
ARGV[3]   from: the states allowed now, space-separated
ARGV[4]   to: the new state
ARGV[5]   why: one line for the operator ('' = none)
ARGV[6]   until: ms epoch (pausing), '' otherwise
ARGV[7]   event kind (wave-wait, wave-check, wave-stop, wave-done, continue)
ARGV[8]   operator ('' = the controller)
ARGV[9]   principal: JSON recorded with the event ('' = none)
Returns   {1} moved | {0} the wave or state was not what the caller saw (nothing written)
Errors    {-3 UNKNOWN_TASK | -7 TASK_NOT_ACTIVE (cancelled or aborted) | -4 BAD_ARGUMENT, message}
Event     <kind> (task, wave, state, error = why if any, until, operator if given)
]]
local task_key, waving, events = KEYS[1], KEYS[2], KEYS[3]
local task_id, wave, from, to, why, untl, kind, operator, principal = unpack(ARGV)
fs_effects()

if #KEYS ~= 3 or #ARGV ~= 9 or to == '' or kind == '' then
  return fs_err(FS_BAD_ARGUMENT, 'wave needs 3 keys and 8 arguments')
end
local t = redis.call('HMGET', task_key, 'state', 'wave', 'wave_state')
if not t[1] then return fs_err(FS_UNKNOWN_TASK, 'no task ' .. task_id) end
if t[1] ~= 'active' and t[1] ~= 'paused' then
  return fs_err(FS_TASK_NOT_ACTIVE, 'task ' .. task_id .. ' is ' .. t[1])
end
if (t[2] or '') ~= wave or not string.find(' ' .. from .. ' ', ' ' .. (t[3] or '') .. ' ', 1, true) then
  return {0}
end
redis.call('HSET', task_key, 'wave_state', to, 'wave_why', why, 'wave_until', untl)
if to == 'done' then redis.call('SREM', waving, task_id) end
local fields = {'task', task_id, 'wave', wave, 'state', to}
if why ~= '' then fields[#fields + 1], fields[#fields + 2] = 'error', why end
if untl ~= '' then fields[#fields + 1], fields[#fields + 2] = 'until', untl end
if operator ~= '' then fields[#fields + 1], fields[#fields + 2] = 'operator', operator end
fs_emit(events, fs_now(), kind, fs_signed(fields, principal))
return {1}
