--[[ fail.lua: a running job failed; retry it later with backoff, or fail it for good.

KEYS[1]     job       {P}:job:<id>                 HASH
KEYS[2]     task      {P}:task:<task>              HASH
KEYS[3..5]  due sets  {P}:due:urgent|normal|bulk   ZSET
KEYS[6]     parked    {P}:parked:<task>            LIST
KEYS[7]     dead      {P}:dead                     ZSET
KEYS[8]     events    {P}:events                   STREAM
ARGV[1]     tag ("{prefix}", for the job hash of a parked job released in exchange)
ARGV[2]     worker id
ARGV[3]     wake channel
ARGV[4]     job id
ARGV[5]     fencing token
ARGV[6]     retryable (1 | 0): 0 fails for good whatever the attempts left
ARGV[7]     error: a message for the operator (never a secret)
ARGV[8]     exit code ('' none)
ARGV[9]     duration (ms)
ARGV[10]    output (capped head/tail text)
ARGV[11]    jitter in [0, 1): random fraction from the caller (Redis < 7 seeds math.random
            identically in every script run, so the caller draws it)
ARGV[12]    backoff cap (ms)
ARGV[13]    memo lifetime (ms, >= 1; the caller's lease): the outcome is remembered under the
            token, so the same token's fail again (its first reply was lost) answers it and
            writes nothing (_lib fs_remember, fs_recall)
ARGV[14]    blame: 'host' (the host did it: a non-zero exit, a timeout on the host, a refused
            key) or 'worker' (the run was lost with its worker: a killed child, an interrupted
            shutdown). Only the host's failures count against max_failures, wave limits and
            failed_hosts; both count against max_attempts. A worker's final failure is recorded
            as lost (event fail with blame worker; failed + 1, lost_failed + 1)
Returns     {1, due_ms}  retry: pending again at now + backoff_ms * 2^(attempt-1) * (0.8 + 0.4 *
                         jitter), capped; event retry
            {2, 0}       failed for good: dead letter, failed + 1; event fail. With the task's
                         count_failures = attempts, every job's first failed attempt counts its
                         host in failed_hosts, which max_failures then limits: the failure that
                         reaches the limit is failed for good even with attempts left
            {3, 0}       as 2, and this failure aborted the task (event abort): the caller should
                         cancel the task's pending jobs (Queue.cancel_task)
            A task that is no longer active (cancelled, aborted) retries nothing. In a
            rollout in waves, a failure (as count_failures counts them) that reaches the
            current wave's limit also stops the rollout and pauses the task (events wave-stop,
            pause: see fs_wave_failed).
Errors      {-1 STALE_TOKEN | -2 UNKNOWN_JOB | -5 NOT_RUNNING | -4 BAD_ARGUMENT, message};
            nothing changes; a STALE_TOKEN or UNKNOWN_JOB result is recorded (event stale, verb
            fail), as ack.lua does.
]]
local jk, task_key = KEYS[1], KEYS[2]
local due_keys = {urgent = KEYS[3], normal = KEYS[4], bulk = KEYS[5]}
local parked, dead, events = KEYS[6], KEYS[7], KEYS[8]
local tag, worker, wake, id, token = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local task_id = fs_task_of(id) or ''
local retryable, err, exit_code, duration, output = ARGV[6], ARGV[7], ARGV[8], ARGV[9], ARGV[10]
local jitter, cap = tonumber(ARGV[11]), fs_count(ARGV[12])
local memo_ms, blame = fs_count(ARGV[13]), ARGV[14]
fs_effects()

if fs_count(token) == nil or fs_count(duration) == nil or cap == nil then
  return fs_err(FS_BAD_ARGUMENT, 'token, duration and backoff cap must be non-negative integers')
end
if jitter == nil or jitter < 0 or jitter >= 1 then return fs_err(FS_BAD_ARGUMENT, 'jitter must be in [0, 1)') end
if retryable ~= '0' and retryable ~= '1' then return fs_err(FS_BAD_ARGUMENT, 'retryable must be 0 or 1') end
if memo_ms == nil or memo_ms < 1 then return fs_err(FS_BAD_ARGUMENT, 'memo lifetime must be an integer >= 1 ms') end
if blame ~= 'host' and blame ~= 'worker' then return fs_err(FS_BAD_ARGUMENT, 'blame must be host or worker') end
local j = redis.call('HMGET', jk, 'token', 'state', 'host', 'attempt')
if not j[2] or fs_num(j[1]) ~= tonumber(token) or j[2] ~= 'running' then
  local first = fs_recall(tag, id, token, 'fail')
  if first then return {tonumber(first[1]), tonumber(first[2])} end  -- a repeat: the first outcome
end
-- A refused result is recorded (event stale): it proves this worker ran the job too.
local function stale(reason, more)
  local fields = {'task', task_id, 'job', id, 'verb', 'fail', 'reason', reason, 'token', token,
    'worker', worker, 'exit_code', exit_code, 'duration_ms', duration, 'output', output, 'error', err}
  for k = 1, #more do fields[#fields + 1] = more[k] end
  fs_emit(events, fs_now(), 'stale', fields)
end
if not j[2] then
  stale('unknown_job', {})
  return fs_err(FS_UNKNOWN_JOB, 'no job ' .. id)
end
if fs_num(j[1]) ~= tonumber(token) then
  stale('stale_token', {'host', j[3], 'attempt', j[4] or '0', 'current_token', j[1] or '0'})
  return fs_err(FS_STALE_TOKEN, 'job ' .. id .. ' was claimed again since token ' .. token .. ' (now ' .. (j[1] or '0') .. ')')
end
if j[2] ~= 'running' then return fs_err(FS_NOT_RUNNING, 'job ' .. id .. ' is ' .. j[2] .. ', not running') end

local now = fs_now()
local t = redis.call('HMGET', task_key, 'state', 'prio', 'max_running', 'max_attempts', 'backoff_ms')
local due = fs_due_of(due_keys, t[2])
fs_drop_elsewhere(due_keys, due, id)  -- its lease entry may be in its task's old class
redis.call('ZREM', fs_leases_of(due), id)
fs_free_host(tag, j[3], id, wake, events, now)
local attempt, max_attempts = fs_num(j[4]), fs_num(t[4])
local fields = {'task', task_id, 'job', id, 'host', j[3], 'attempt', fs_int(attempt), 'token', token,
  'worker', worker, 'exit_code', exit_code, 'duration_ms', duration, 'output', output, 'error', err}
local outcome, due_ms = 2, 0
local retry = retryable == '1' and attempt < max_attempts and (t[1] == 'active' or t[1] == 'paused')
local host_fault = blame == 'host'
if not host_fault then fields[#fields + 1], fields[#fields + 2] = 'blame', 'worker' end
-- A retry still counts its host against max_failures (count_failures = attempts): the failure
-- that reaches the limit is not retried; it fails for good and aborts the task.
if retry and host_fault and fs_attempt_crosses_limit(task_key, task_id, events, now, jk, j[3]) then
  retry = false
end
if retry then
  local delay = fs_num(t[5]) * 2 ^ (attempt - 1)
  delay = math.floor(math.min(delay, cap) * (0.8 + 0.4 * jitter))
  delay = math.min(delay, cap)
  due_ms = now + delay
  redis.call('HSET', jk, 'state', 'pending', 'due', fs_int(due_ms))
  redis.call('HDEL', jk, 'owner')
  fs_put_due(due, id, due_ms, wake)
  fs_finish(task_key, nil)
  fields[#fields + 1], fields[#fields + 2] = 'due', fs_int(due_ms)
  fs_emit(events, now, 'retry', fields)
  outcome = 1
else
  fs_bury(jk, id, due, dead, now, err)
  fs_finish(task_key, nil)
  fs_emit(events, now, 'fail', fields)
  if not host_fault then
    fs_count_lost_failure(task_key, jk)
  elseif fs_count_failure(task_key, task_id, events, now, jk, j[3]) then
    outcome = 3
  end
end
fs_remember(tag, id, token, 'fail', fs_int(outcome), fs_int(due_ms), memo_ms)
if fs_num(t[3]) > 0 then fs_unpark(tag, parked, due, wake, events, now, task_id) end
return {outcome, due_ms}
