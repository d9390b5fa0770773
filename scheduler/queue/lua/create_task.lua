--[[ create_task.lua: write a task's live state (policy and zeroed counters) once.

KEYS[1]  task      {P}:task:<task id>  HASH
KEYS[2]  events    {P}:events          STREAM
ARGV[1]  task id
ARGV[2]  priority class: urgent | normal | bulk
ARGV[3]  max_running   (jobs, >= 0; 0 = no concurrency limit)
ARGV[4]  max_failures  (jobs, >= 0; 0 = never abort)
ARGV[5]  max_attempts  (claims, >= 1)
ARGV[6]  backoff_ms    (ms, >= 0: base of the exponential retry backoff)
ARGV[7]  timeout_ms    (ms, >= 1: per attempt)
ARGV[8]  idempotent    (1 | 0)
ARGV[9]  spec          (JSON text: action, params, executor, expected_ms ...)
ARGV[10] operator
ARGV[11] share         (fair-share key)
ARGV[12] count_failures (attempts | final: what max_failures counts, hosts that failed any
         attempt or jobs failed for good)
ARGV[13] exclusive     (1 | 0): one job per host at a time across tasks (claim.lua); 0 for an
         action safe to overlap
ARGV[14] carried (JSON, or '' for a new task): what a task recreated from SQL by reconcile
         carries into its new hash in this same step: {ended, succeeded, failed, cancelled,
         failed_hosts, lost_failed} (the jobs that had ended: counted in total and their
         counters, so views and exit codes count them; lost_failed: of the failed, those lost
         with their worker, which no threshold counts) and paused_by ('' | an operator | 'rollout': the
         task starts paused, event pause, before any job is queued again; 'rollout' sets
         wave_held so `tasks continue` resumes it)
Returns  {1} created (event create; pause when carried says so) | {0} the task existed and is
         left unchanged
Errors   {-4 BAD_ARGUMENT, message}; also when the queue is sharded ({P}:shards in this
         shard, i.e. shard 0) and the task id routes to another shard: a writer configured
         with another queue_shards
]]
local task_key = KEYS[1]
local events = KEYS[2]
fs_effects()

local task_id, prio = ARGV[1], ARGV[2]
if prio ~= 'urgent' and prio ~= 'normal' and prio ~= 'bulk' then
  return fs_err(FS_BAD_ARGUMENT, 'priority must be urgent, normal or bulk, not ' .. prio)
end
local names = {'max_running', 'max_failures', 'max_attempts', 'backoff_ms', 'timeout_ms'}
for i, name in ipairs(names) do
  if fs_count(ARGV[2 + i]) == nil then
    return fs_err(FS_BAD_ARGUMENT, name .. ' must be a non-negative integer, not ' .. ARGV[2 + i])
  end
end
if tonumber(ARGV[5]) < 1 or tonumber(ARGV[7]) < 1 then
  return fs_err(FS_BAD_ARGUMENT, 'max_attempts and timeout_ms must be at least 1')
end
if ARGV[8] ~= '0' and ARGV[8] ~= '1' then
  return fs_err(FS_BAD_ARGUMENT, 'idempotent must be 0 or 1')
end

if ARGV[13] ~= '0' and ARGV[13] ~= '1' then
  return fs_err(FS_BAD_ARGUMENT, 'exclusive must be 0 or 1')
end
if ARGV[12] ~= 'attempts' and ARGV[12] ~= 'final' then
  return fs_err(FS_BAD_ARGUMENT, 'count_failures must be attempts or final')
end

local carried = {ended = 0, succeeded = 0, failed = 0, cancelled = 0, failed_hosts = 0,
                 lost_failed = 0, paused_by = ''}
if ARGV[14] and ARGV[14] ~= '' then
  local ok, decoded = pcall(cjson.decode, ARGV[14])
  if not ok or type(decoded) ~= 'table' or #decoded > 0 then
    return fs_err(FS_BAD_ARGUMENT, 'carried must be a JSON object')
  end
  for name, _ in pairs(carried) do
    local v = decoded[name]
    if name == 'paused_by' then
      if v ~= nil and type(v) ~= 'string' then
        return fs_err(FS_BAD_ARGUMENT, 'carried paused_by must be a string')
      end
      carried[name] = v or ''
    elseif v ~= nil then
      if fs_count(v) == nil then
        return fs_err(FS_BAD_ARGUMENT, 'carried ' .. name .. ' must be a non-negative integer')
      end
      carried[name] = tonumber(v)
    end
  end
  if carried.succeeded + carried.failed + carried.cancelled ~= carried.ended
      or carried.lost_failed > carried.failed then
    return fs_err(FS_BAD_ARGUMENT, 'carried counters do not add up to ended')
  end
end

-- A sharded queue records its shard count in shard 0 ({P}:shards). A task created in shard 0
-- that the count routes elsewhere comes from a writer with another queue_shards (a node left
-- running through a change of the count): refused, or nobody would find it. Ids that are not
-- decimal (routed by CRC-32 in Python), or past 15 digits (beyond a Lua number's exact
-- integers), are not checked here.
local tag = string.sub(task_key, 1, #task_key - #(':task:' .. task_id))
local shards = tonumber(redis.call('GET', tag .. ':shards') or '1') or 1
if shards > 1 and string.match(task_id, '^%d+$') and #task_id <= 15 and tonumber(task_id) % shards ~= 0 then
  return fs_err(FS_BAD_ARGUMENT, 'task ' .. task_id .. ' belongs to shard ' ..
    (tonumber(task_id) % shards) .. ' of the ' .. shards .. ' shards of this queue, not shard 0: ' ..
    'this writer runs with another queue_shards')
end

if redis.call('EXISTS', task_key) == 1 then return {0} end
local now = fs_now()
local state = carried.paused_by ~= '' and 'paused' or 'active'
redis.call('HSET', task_key, 'state', state, 'prio', prio,
  'total', carried.ended, 'span', 0, 'running', 0, 'succeeded', carried.succeeded,
  'failed', carried.failed, 'lost_failed', carried.lost_failed, 'cancelled', carried.cancelled,
  'lost', 0,
  'overshoot', 0, 'failed_hosts', carried.failed_hosts, 'count_failures', ARGV[12], 'exclusive', ARGV[13], 'max_running', ARGV[3], 'max_failures', ARGV[4], 'max_attempts', ARGV[5],
  'backoff_ms', ARGV[6], 'timeout_ms', ARGV[7], 'idempotent', ARGV[8], 'spec', ARGV[9],
  'operator', ARGV[10], 'share', ARGV[11], 'created', fs_int(now))
fs_emit(events, now, 'create', {'task', task_id, 'operator', ARGV[10], 'detail',
  cjson.encode({prio = prio, max_running = tonumber(ARGV[3]), max_failures = tonumber(ARGV[4]), count_failures = ARGV[12],
                max_attempts = tonumber(ARGV[5]), idempotent = ARGV[8] == '1'})})
if state == 'paused' then
  if carried.paused_by == 'rollout' then redis.call('HSET', task_key, 'wave_held', '1') end
  fs_emit(events, now, 'pause', {'task', task_id, 'operator', carried.paused_by})
end
return {1}
