--[[ restore.lua: reconcile puts back jobs of one task that SQL knows and Redis lost, where
queuing them again could run them twice (scheduler/submission/reconcile.py; docs/reliability.md
"Reconcile and live nodes"). Each job comes back in one of two ways:
  'run'   a live node reports it running (the job is in its presence record, with its token):
          the hash comes back `running` under that node's token and owner, its lease entry at
          now + lease, so the node's heartbeat renews it and its ack or fail ends it as after
          any claim; an exclusive task's job holds its host again (unless a running job holds
          it; on a sharded queue's shard >= 1 the hold is a place in shard 0, not taken here).
          Event adopt.
  'lost'  a job of a non-idempotent task that had started, which no live node reports: it may
          have run, so it ends failed as lost (never re-run blindly; the token moves on so a
          late result is refused and recorded stale); failed + 1, lost_failed + 1 in its task;
          event lost, outcome failed.
  'ack'    a job whose run ended after Redis lost it: its node's late ack was refused and
  'fail'  recorded (a stale event with its result, which SQL now holds), and no live node runs
          it any more. The late result decides it: succeeded (event ack), or failed for good
          (event fail; the job hash kept, in the dead letter set), with that result and token;
          total + 1 and succeeded or failed + 1 in its task.
  'retry'  an idempotent job that was running when Redis lost it, which reconcile queues again
          (enqueue, in the same repair): its run was lost, so it runs again; no job hash is
          written here; lost + 1 in its task. Event lost, outcome retry (what explains the
          second run in the record, as a lease expiry's does).
  'cancel' a job of a task that was cancelled or aborted (SQL says so; reconcile does not
          recreate such a task) whose end was lost with Redis: it ends cancelled, as a claim
          ends a job of such a task (a live node's late result is refused and recorded stale);
          no job hash; cancelled + 1 if the task hash exists. Event cancel.
A job whose hash exists is skipped. Group counts are not taken again for an adopted job (the
group limits' counters restart from the jobs claimed after the loss).

KEYS[1]     task      {P}:task:<task id>            HASH (recreated by reconcile first; may be
                                                  missing when every job is 'cancel')
KEYS[2..4]  due sets  {P}:due:urgent|normal|bulk    ZSET
KEYS[5]     dead      {P}:dead                      ZSET
KEYS[6]     events    {P}:events                    STREAM
ARGV[1]     tag ("{prefix}"): job i's hash is <tag>:job:<id>, its host hold in <tag>:busy
ARGV[2]     task id
ARGV[3]     lease (ms, >= 1) of an adopted job
ARGV[4]     the jobs, as JSON text: a list of [mode, job id, host, attempt, token, owner, due],
            strings; mode 'run', 'lost', 'ack', 'fail', 'retry' or 'cancel'; owner the reporting node's
            worker id, or the worker of the late result ('' else); 'ack' and 'fail' add an 8th:
            the result, a JSON object of strings {exit_code, duration_ms, output, error}
Returns     {restored}: how many jobs came back (run or lost)
Errors      {-3 UNKNOWN_TASK | -4 BAD_ARGUMENT, message}; nothing is written.
]]
local task_key = KEYS[1]
local due_keys = {urgent = KEYS[2], normal = KEYS[3], bulk = KEYS[4]}
local dead, events = KEYS[5], KEYS[6]
local tag, task_id = ARGV[1], ARGV[2]
local lease = fs_count(ARGV[3])
fs_effects()

local ok, jobs = pcall(cjson.decode, ARGV[4] or '')
if #KEYS ~= 6 or #ARGV ~= 4 or not ok or type(jobs) ~= 'table' or #jobs < 1 then
  return fs_err(FS_BAD_ARGUMENT, 'restore needs a JSON list of at least one job')
end
if lease == nil or lease < 1 then return fs_err(FS_BAD_ARGUMENT, 'lease must be an integer >= 1 ms') end
local t = redis.call('HMGET', task_key, 'prio', 'exclusive', 'span')
local prefix = task_id .. '.'
for i = 1, #jobs do
  local j = jobs[i]
  local late = type(j) == 'table' and (j[1] == 'ack' or j[1] == 'fail')
  if type(j) ~= 'table' or #j ~= (late and 8 or 7)
      or (j[1] ~= 'run' and j[1] ~= 'lost' and j[1] ~= 'cancel' and j[1] ~= 'retry' and not late) then
    return fs_err(FS_BAD_ARGUMENT, 'restore job ' .. i .. ' is not [run|lost|ack|fail|cancel, id, host, attempt, token, owner, due(, result)]')
  end
  if late then
    local ok, r = pcall(cjson.decode, j[8])
    if not ok or type(r) ~= 'table' then return fs_err(FS_BAD_ARGUMENT, 'restore job ' .. i .. ': result is not a JSON object') end
    for _, k in ipairs({'exit_code', 'duration_ms', 'output', 'error'}) do
      if type(r[k]) ~= 'string' then return fs_err(FS_BAD_ARGUMENT, 'restore job ' .. i .. ': result ' .. k .. ' is not text') end
    end
    j[8] = r
  end
  if j[1] ~= 'cancel' and not t[1] then return fs_err(FS_UNKNOWN_TASK, 'no task ' .. task_id) end
  for k = 2, 7 do
    if type(j[k]) ~= 'string' then return fs_err(FS_BAD_ARGUMENT, 'restore job ' .. i .. ': field ' .. k .. ' is not text') end
  end
  if string.sub(j[2], 1, #prefix) ~= prefix or not string.match(string.sub(j[2], #prefix + 1), '^%d+$') then
    return fs_err(FS_BAD_ARGUMENT, 'job id ' .. j[2] .. ' is not of task ' .. task_id)
  end
  if fs_count(j[4]) == nil or fs_count(j[5]) == nil or fs_count(j[7]) == nil then
    return fs_err(FS_BAD_ARGUMENT, 'job ' .. j[2] .. ': attempt, token and due must be integers')
  end
  if j[1] == 'run' and j[6] == '' then return fs_err(FS_BAD_ARGUMENT, 'job ' .. j[2] .. ': no owner') end
end

local now = fs_now()
local due = fs_due_of(due_keys, t[1])
local leases = fs_leases_of(due)
local expiry = fs_int(now + lease)
local span = fs_num(t[3])
local restored = 0
local cancelled = {}
for i = 1, #jobs do
  local mode, id, host, attempt, token, owner, due_ms, result = unpack(jobs[i])
  local jk = tag .. ':job:' .. id
  if mode == 'retry' then
    restored = restored + 1
    redis.call('HINCRBY', task_key, 'lost', 1)
    fs_emit(events, now, 'lost', {'task', task_id, 'job', id, 'host', host, 'attempt', attempt,
      'token', token, 'worker', 'reconcile', 'expired', '', 'outcome', 'retry', 'error',
      'Redis lost this job while it ran (reconcile); run again because the action is idempotent'})
  elseif mode == 'cancel' then
    if redis.call('EXISTS', jk) == 0 then
      restored = restored + 1
      cancelled[#cancelled + 1] = id
    end
  elseif redis.call('EXISTS', jk) == 0 then
    restored = restored + 1
    local k = tonumber(string.sub(id, #prefix + 1))
    if k + 1 > span then span = k + 1 end
    redis.call('HINCRBY', task_key, 'total', 1)
    if mode == 'ack' or mode == 'fail' then
      local fields = {'task', task_id, 'job', id, 'host', host, 'attempt', attempt, 'token', token,
        'worker', owner, 'exit_code', result.exit_code, 'duration_ms', result.duration_ms,
        'output', result.output}
      if mode == 'ack' then
        redis.call('HINCRBY', task_key, 'succeeded', 1)
        fs_emit(events, now, 'ack', fields)
      else
        redis.call('HSET', jk, 'host', host, 'state', 'failed', 'due', due_ms, 'attempt', attempt,
          'token', token, 'error', result.error)
        redis.call('ZADD', dead, now, id)
        redis.call('HINCRBY', task_key, 'failed', 1)
        fields[#fields + 1], fields[#fields + 2] = 'error', result.error
        fs_emit(events, now, 'fail', fields)
      end
    elseif mode == 'run' then
      redis.call('HSET', jk, 'host', host, 'state', 'running', 'due', due_ms, 'attempt', attempt,
        'token', token, 'owner', owner)
      redis.call('ZADD', due, expiry, id)
      redis.call('ZADD', leases, expiry, id)
      redis.call('HINCRBY', task_key, 'running', 1)
      -- its host again, unless a job still running holds it (never take a live hold)
      if t[2] == '1' and redis.call('HSETNX', tag .. ':busy', host, id) == 0 then
        local holder = redis.call('HGET', tag .. ':busy', host)
        if redis.call('HGET', tag .. ':job:' .. holder, 'state') ~= 'running' then
          redis.call('HSET', tag .. ':busy', host, id)
        end
      end
      fs_emit(events, now, 'adopt', {'task', task_id, 'job', id, 'host', host, 'attempt', attempt,
        'token', token, 'worker', owner})
    else
      local why = 'Redis lost this job while it may have been running, and no live node ' ..
        'reports it (reconcile); not run again because the action is not idempotent'
      redis.call('HSET', jk, 'host', host, 'state', 'failed', 'due', due_ms, 'attempt', attempt,
        'token', fs_int(tonumber(token) + 1), 'error', why)
      redis.call('ZADD', dead, now, id)
      fs_count_lost_failure(task_key, jk)
      fs_emit(events, now, 'lost', {'task', task_id, 'job', id, 'host', host, 'attempt', attempt,
        'token', token, 'worker', 'reconcile', 'expired', '', 'outcome', 'failed', 'error', why})
    end
  end
end
if #cancelled > 0 then
  if t[1] then
    redis.call('HINCRBY', task_key, 'total', #cancelled)
    redis.call('HINCRBY', task_key, 'cancelled', #cancelled)
  end
  fs_emit(events, now, 'cancel', {'task', task_id, 'count', fs_int(#cancelled), 'jobs',
    table.concat(cancelled, ' '), 'error', 'the task had ended (cancelled or aborted) when ' ..
    'Redis lost this job; it ends cancelled (reconcile)'})
end
if t[1] then redis.call('HSET', task_key, 'span', fs_int(span)) end
return {restored}
