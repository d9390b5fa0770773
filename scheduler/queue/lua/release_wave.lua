--[[ release_wave.lua: release wave k of a task rolled out in waves: its waiting jobs become
pending in the due set of the task's class at max(their due time, now) (a job with a service
window is deferred at claim as usual), or held when the task is paused; the task's wave becomes
k and its wave_state running. Compare-and-set: only from wave k - 1 in one of the given states,
so two wave controllers (or a controller and a late retry) release a wave once. The wave's
failure count starts again (wave_failures, wave_failed_names) with its limit (wave_limit, of
wave_size hosts: see fs_wave_failed, which stops the rollout when a wave reaches it).

KEYS[1]     task      {P}:task:<task>              HASH
KEYS[2]     waves     {P}:waves:<task>             ZSET "<job id> <host>" -> wave number
KEYS[3]     held      {P}:held:<task>              ZSET
KEYS[4..6]  due sets  {P}:due:urgent|normal|bulk   ZSET
KEYS[7]     events    {P}:events                   STREAM
ARGV[1]     tag ("{prefix}": wave members name job hashes <tag>:job:<id>, same slot)
ARGV[2]     task id
ARGV[3]     k: the wave to release (>= 2)
ARGV[4]     the wave states it may be released from, space-separated (e.g. "checking")
ARGV[5]     operator ('' = the controller)
ARGV[6]     wake channel
Returns     {released}: jobs made pending (or held) by this call | {-1} nothing done (the
            task's wave or wave_state is not what the caller saw: someone else acted)
Errors      {-3 UNKNOWN_TASK | -7 TASK_NOT_ACTIVE (cancelled or aborted) | -4 BAD_ARGUMENT, message}
Event       wave-release (task, wave, count, jobs, operator if given)
]]
local task_key, waves_key, held = KEYS[1], KEYS[2], KEYS[3]
local due_keys = {urgent = KEYS[4], normal = KEYS[5], bulk = KEYS[6]}
local events = KEYS[7]
local tag, task_id, k, from, operator, wake = ARGV[1], ARGV[2], fs_count(ARGV[3]), ARGV[4], ARGV[5], ARGV[6]
fs_effects()

if #KEYS ~= 7 or k == nil or k < 2 then return fs_err(FS_BAD_ARGUMENT, 'release_wave needs a wave >= 2') end
local t = redis.call('HMGET', task_key, 'state', 'prio', 'wave', 'waves', 'wave_state')
if not t[1] then return fs_err(FS_UNKNOWN_TASK, 'no task ' .. task_id) end
if t[1] ~= 'active' and t[1] ~= 'paused' then
  return fs_err(FS_TASK_NOT_ACTIVE, 'task ' .. task_id .. ' is ' .. t[1] .. '; no wave is released')
end
if fs_num(t[3]) ~= k - 1 or k > fs_num(t[4]) or not string.find(' ' .. from .. ' ', ' ' .. (t[5] or '') .. ' ', 1, true) then
  return {-1}
end
local now = fs_now()
local due = fs_due_of(due_keys, t[2])
local ids = redis.call('ZRANGEBYSCORE', waves_key, k, k)
local released = {}
for _, member in ipairs(ids) do
  local id = string.match(member, '^(%S+)')
  local jk = tag .. ':job:' .. id
  local j = redis.call('HMGET', jk, 'state', 'due')
  if j[1] == 'waiting' then
    local at = math.max(fs_num(j[2]), now)
    if t[1] == 'paused' then
      redis.call('HSET', jk, 'state', 'held', 'due', fs_int(at))
      redis.call('ZADD', held, at, id)
    else
      redis.call('HSET', jk, 'state', 'pending', 'due', fs_int(at))
      fs_put_due(due, id, at, wake)
    end
    released[#released + 1] = id
  end
end
redis.call('HSET', task_key, 'wave', fs_int(k), 'wave_state', 'running', 'wave_why', '', 'wave_until', '')
fs_wave_begins(task_key, #ids)
local fields = {'task', task_id, 'wave', fs_int(k), 'state', 'running', 'count', fs_int(#released),
  'jobs', table.concat(released, ' ')}
if operator ~= '' then fields[#fields + 1], fields[#fields + 2] = 'operator', operator end
fs_emit(events, now, 'wave-release', fields)
return {#released}
