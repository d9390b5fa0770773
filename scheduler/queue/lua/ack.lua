--[[ ack.lua: a batch of running jobs succeeded; each is removed for good.

KEYS[1]      events    {P}:events                  STREAM
KEYS[2..4]   due sets  {P}:due:urgent|normal|bulk  ZSET
ARGV[1]      tag ("{prefix}"): job, task and parked keys are built from it (see below)
ARGV[2]      worker id (recorded in the event)
ARGV[3]      wake channel
ARGV[4]      the jobs, as JSON text: a list of n >= 1 lists of 5 strings [job id, fencing
             token, exit code ('' none), duration (ms), output], numbers in decimal text (one
             argument parses faster on both sides than 5n, and text reaches XADD without a
             float format; see docs/benchmarks.md "Queue core")
ARGV[5]      memo lifetime (ms, >= 1; the caller's lease): how long the outcome is remembered
             under the job's token (_lib fs_remember), so a repeat is recognised
Returns      {code_1, ..., code_n}: 0 OK (hash deleted, succeeded + 1, event ack, one parked job
             of the task released; or the same token's ack again, whose first reply was lost:
             nothing written, see _lib fs_recall), -1 STALE_TOKEN (claimed again since) and -2 UNKNOWN_JOB
             (gone: finished by its new owner): the job is unchanged and the refused result is
             recorded (event stale, verb ack, reason, the token presented), -5 NOT_RUNNING
Errors       {-4 BAD_ARGUMENT, message} for malformed arguments; nothing is written.
Derived keys: <tag>:job:<id>, <tag>:task:<task>, <tag>:parked:<task> (and the job hash of a
parked job released by this ack) are built from the tag, which every key of the shard carries,
so they hash to the slot of KEYS[1..4] (Redis Cluster).
]]
local events = KEYS[1]
local due_keys = {urgent = KEYS[2], normal = KEYS[3], bulk = KEYS[4]}
local tag, worker, wake, memo_ms = ARGV[1], ARGV[2], ARGV[3], fs_count(ARGV[5])
fs_effects()

local ok, jobs = pcall(cjson.decode, ARGV[4] or '')
if #KEYS ~= 4 or #ARGV ~= 5 or not ok or type(jobs) ~= 'table' or #jobs < 1 then
  return fs_err(FS_BAD_ARGUMENT,
    'ack needs a JSON list of at least one job [id, token, exit code, duration, output]')
end
if memo_ms == nil or memo_ms < 1 then return fs_err(FS_BAD_ARGUMENT, 'memo lifetime must be an integer >= 1 ms') end
local task_ids = {}
local match = string.match
local ints = {['0'] = true, ['1'] = true, [''] = true}  -- texts already seen to be integers
for i = 1, #jobs do
  local job = jobs[i]
  if type(job) ~= 'table' then return fs_err(FS_BAD_ARGUMENT, 'ack job ' .. i .. ' is not a list') end
  local id, token, exit_code, duration, output = job[1], job[2], job[3], job[4], job[5]
  if type(id) ~= 'string' or type(token) ~= 'string' or type(exit_code) ~= 'string'
      or type(duration) ~= 'string' or type(output) ~= 'string' then
    return fs_err(FS_BAD_ARGUMENT, 'ack job ' .. i .. ' is not [id, token, exit code, duration, output]')
  end
  local task_id = match(id, '^(.+)%.%d+$')
  if task_id == nil then return fs_err(FS_BAD_ARGUMENT, 'job id ' .. id .. ' is not <task>.<n>') end
  task_ids[i] = task_id
  if token == '' or not (ints[token] or match(token, '^%d+$')) or not match(duration, '^%d+$') then
    return fs_err(FS_BAD_ARGUMENT, 'job ' .. id .. ': token and duration must be non-negative integers')
  end
  ints[token] = true
  if not (ints[exit_code] or match(exit_code, '^%-?%d+$')) then
    return fs_err(FS_BAD_ARGUMENT, 'job ' .. id .. ': exit code must be an integer or empty')
  end
end

local now = fs_now()
local now_text = fs_int(now)
local codes = {}
local tasks, task_order = {}, {}  -- task id -> {key, due, max_running, done}: counters move once
local removed, due_order = {}, {} -- due key -> ids, removed with one ZREM per set
local gone, acked = {}, {}        -- job keys, deleted with one DEL
-- A refused ack is recorded with its result (event stale): for a job its new owner finished,
-- or one failed as lost, it is the proof that this worker ran it too.
local function stale(i, job, reason, more)
  local fields = {'task', task_ids[i], 'job', job[1], 'verb', 'ack', 'reason', reason,
    'token', job[2], 'worker', worker, 'exit_code', job[3], 'duration_ms', job[4], 'output', job[5]}
  for k = 1, #more do fields[#fields + 1] = more[k] end
  fs_emit(events, now, 'stale', fields)
end

for i = 1, #jobs do
  local job = jobs[i]
  local id, token = job[1], job[2]
  local jk = tag .. ':job:' .. id
  local j = redis.call('HMGET', jk, 'token', 'state', 'host', 'attempt')
  if acked[jk] then
    codes[i] = FS_NOT_RUNNING  -- the same job twice in one batch: acked the first time
  elseif (not j[2] or (j[1] or '0') ~= token or j[2] ~= 'running') and fs_recall(tag, id, token, 'ack') then
    codes[i] = FS_OK  -- a repeat: this token's ack took effect and its reply was lost
  elseif not j[2] then
    codes[i] = FS_UNKNOWN_JOB
    stale(i, job, 'unknown_job', {})
  elseif (j[1] or '0') ~= token then  -- both canonical decimal text: no number conversion
    codes[i] = FS_STALE_TOKEN
    stale(i, job, 'stale_token', {'host', j[3], 'attempt', j[4] or '0', 'current_token', j[1] or '0'})
  elseif j[2] ~= 'running' then
    codes[i] = FS_NOT_RUNNING
  else
    local task_id = task_ids[i]
    local t = tasks[task_id]
    if t == nil then
      local key = tag .. ':task:' .. task_id
      local f = redis.call('HMGET', key, 'prio', 'max_running')
      t = {key = key, due = fs_due_of(due_keys, f[1]), max_running = fs_num(f[2]), done = 0}
      tasks[task_id] = t
      task_order[#task_order + 1] = task_id
    end
    gone[#gone + 1] = jk
    fs_free_host(tag, j[3], job[1], wake, events, now)
    acked[jk] = true
    fs_remember(tag, id, token, 'ack', '', '', memo_ms)
    local ids = removed[t.due]
    if ids == nil then
      ids = {}
      removed[t.due] = ids
      due_order[#due_order + 1] = t.due
    end
    ids[#ids + 1] = id
    t.done = t.done + 1
    redis.call('XADD', events, '*', 'kind', 'ack', 'ts', now_text, 'task', task_id, 'job', id,
      'host', j[3], 'attempt', j[4] or '0', 'token', token, 'worker', worker,
      'exit_code', job[3], 'duration_ms', job[4], 'output', job[5])  -- hot path: no helper
    if t.max_running > 0 then
      fs_unpark(tag, tag .. ':parked:' .. task_id, t.due, wake, events, now, task_id)
    end
    codes[i] = FS_OK
  end
end
if #gone > 0 then redis.call('DEL', unpack(gone)) end
-- A lease entry is in its task's class set, unless Queue.reprioritize moved the task since the
-- claim (reprioritize.lua): when one ZREM on the home set removes fewer ids than asked, the
-- same ids are removed from the other class sets too (an acked job must leave every set).
for _, due in ipairs(due_order) do
  local ids = removed[due]
  redis.call('ZREM', fs_leases_of(due), unpack(ids))
  if redis.call('ZREM', due, unpack(ids)) < #ids then
    for _, key in pairs(due_keys) do
      if key ~= due then redis.call('ZREM', key, unpack(ids)) end
    end
  end
end
for _, task_id in ipairs(task_order) do
  local t = tasks[task_id]
  redis.call('HINCRBY', t.key, 'running', -t.done)
  redis.call('HINCRBY', t.key, 'succeeded', t.done)
end
return codes
