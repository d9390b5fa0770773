--[[ stage.lua: list a task's jobs by wave in its waves set (member "<job id> <host>", score the
wave number) and stage the jobs of its later waves (2, 3, ...): each gets its job hash in state
`waiting` and no due set entry, so claim never sees it until release_wave.lua releases its
wave. The released waves' jobs (wave 1 at submit; up to the current wave when reconcile
rebuilds a task) were queued by enqueue.lua just before: they are only listed here. The first call also writes the task's rollout
fields and lists the task in {P}:waving, where wave controllers look.

KEYS[1]   task     {P}:task:<task>    HASH (must exist, state active or paused)
KEYS[2]   waves    {P}:waves:<task>   ZSET "<job id> <host>" -> wave number
KEYS[3]   waving   {P}:waving         SET of task ids
KEYS[4]   stats    {P}:stats          HASH (field enqueued)
KEYS[5]   events   {P}:events         STREAM
ARGV[1]   tag ("{prefix}"): job i's hash is <tag>:job:<job id i>, in the slot of KEYS
ARGV[2]   task id
ARGV[3]   waves: how many waves the task has (>= 2)
ARGV[4]   policy: JSON text kept in the task hash's wave_policy (pause_ms, gate, check, sizes,
          max_failures, counts: each wave's host count, for the released wave's failure limit)
ARGV[5]   the jobs, as JSON text: a list of n >= 1 lists of 6 strings [job id "<task>.<k>",
          host, due (ms epoch, '0' = when released), window name ('' = none), window close
          ('' = none), wave number (>= 1)]
ARGV[6]   released: waves 1 .. released are out (1 at submit), or up to the task's wave if
          that is later; their jobs are only listed
ARGV[7]   the wave state the rollout starts in (running at submit; reconcile: SQL's)
ARGV[8]   (optional, reconcile) failures the released wave had already counted, per SQL: its
          wave_failures start there, so a Redis loss does not give the wave its limit again
Returns   {added, total}: jobs of later waves staged by this call and the task's job count. A
          job of a later wave whose hash exists is only listed, so a retried fan-out stages
          nothing twice; one whose hash is missing cannot have run (its wave was never
          released) and is staged again. The first call sets wave = released, waves,
          wave_state, wave_policy and the released wave's wave_limit, wave_size, wave_failures (HSETNX on waves: a retried call changes nothing). One event enqueue per call (jobs, count, wave = the
          lowest wave staged): SQL records the jobs pending.
Errors    {-3 UNKNOWN_TASK | -7 TASK_NOT_ACTIVE | -4 BAD_ARGUMENT, message}; nothing is written.
]]
local task_key, waves_key, waving, stats, events = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local tag, task_id, waves, policy = ARGV[1], ARGV[2], fs_count(ARGV[3]), ARGV[4]
local released, start_state = fs_count(ARGV[6]), ARGV[7]
local carried_failures = fs_count(ARGV[8] or '0')
fs_effects()

local ok, jobs = pcall(cjson.decode, ARGV[5] or '')
if #KEYS ~= 5 or (#ARGV ~= 7 and #ARGV ~= 8) or carried_failures == nil or waves == nil or waves < 2 or not ok or type(jobs) ~= 'table'
    or #jobs < 1 or released == nil or released < 1 or released > waves or start_state == '' then
  return fs_err(FS_BAD_ARGUMENT, 'stage needs waves >= 2 and a JSON list of at least one job')
end
local t = redis.call('HMGET', task_key, 'state', 'span')
if not t[1] then return fs_err(FS_UNKNOWN_TASK, 'no task ' .. task_id) end
if t[1] ~= 'active' and t[1] ~= 'paused' then
  return fs_err(FS_TASK_NOT_ACTIVE, 'task ' .. task_id .. ' is ' .. t[1] .. '; it takes no new jobs')
end
local prefix = task_id .. '.'
local span = fs_num(t[2])
for i = 1, #jobs do
  local job = jobs[i]
  if type(job) ~= 'table' or #job ~= 6 then
    return fs_err(FS_BAD_ARGUMENT, 'stage job ' .. i .. ' is not [id, host, due, window, close, wave]')
  end
  for f = 1, 6 do
    if type(job[f]) ~= 'string' then
      return fs_err(FS_BAD_ARGUMENT, 'stage job ' .. i .. ' field ' .. f .. ' is not a string')
    end
  end
  local k = string.sub(job[1], #prefix + 1)
  if string.sub(job[1], 1, #prefix) ~= prefix or not string.match(k, '^%d+$') then
    return fs_err(FS_BAD_ARGUMENT, 'job id ' .. job[1] .. ' is not of task ' .. task_id)
  end
  local w = fs_count(job[6])
  if job[2] == '' or not string.match(job[3], '^%d+$') or w == nil or w < 1 or w > waves then
    return fs_err(FS_BAD_ARGUMENT, 'stage job ' .. job[1] .. ': needs a host, a due time and a wave from 1 to ' .. fs_int(waves))
  end
  if tonumber(k) + 1 > span then span = tonumber(k) + 1 end
end

local now = fs_now()
if redis.call('HSETNX', task_key, 'waves', fs_int(waves)) == 1 then
  redis.call('HSET', task_key, 'wave', fs_int(released), 'wave_state', start_state,
    'wave_policy', policy)
  redis.call('SADD', waving, task_id)
  local okp, p = pcall(cjson.decode, policy)
  local counts = okp and type(p) == 'table' and type(p.counts) == 'table' and p.counts or {}
  fs_wave_begins(task_key, tonumber(counts[released]) or 0)
  if carried_failures > 0 then
    redis.call('HSET', task_key, 'wave_failures', fs_int(carried_failures))
  end
end
-- A wave the task has released since the caller looked counts as released too.
released = math.max(released, fs_num(redis.call('HGET', task_key, 'wave')))
local added, lowest = {}, nil
for i = 1, #jobs do
  local id, host, due, window, wclose, wave = unpack(jobs[i])
  local member = id .. ' ' .. host
  local jk = tag .. ':job:' .. id
  if tonumber(wave) <= released or redis.call('EXISTS', jk) == 1 then
    redis.call('ZADD', waves_key, 'NX', wave, member)
  else
    redis.call('HSET', jk, 'host', host, 'state', 'waiting', 'due', due)
    if window ~= '' then redis.call('HSET', jk, 'window', window, 'wclose', wclose) end
    redis.call('ZADD', waves_key, wave, member)
    added[#added + 1] = id
    if lowest == nil or tonumber(wave) < lowest then lowest = tonumber(wave) end
  end
end
local total = fs_count_enqueued(task_key, stats, events, now, task_id, added, span, now,
  {'wave', fs_int(lowest or 0)})
return {#added, total}
