--[[ ack.lua: a batch of running jobs succeeded; each is removed for good.

KEYS[1]      events    {P}:events                  STREAM
KEYS[2..4]   due sets  {P}:due:urgent|normal|bulk  ZSET
KEYS[4+3(i-1)+1..3]  job i: {P}:job:<id> HASH, {P}:task:<task> HASH, {P}:parked:<task> LIST
ARGV[1]      tag ("{prefix}", for the job hash of a parked job released by this ack)
ARGV[2]      worker id (recorded in the event)
ARGV[3]      wake channel
ARGV[4]      n, the number of jobs (>= 1)
ARGV[4+5(i-1)+1..5]  job i: job id, fencing token, exit code ('' none), duration (ms), output
Returns      {code_1, ..., code_n}: 0 OK (hash deleted, succeeded + 1, event ack, one parked job
             of the task released), -1 STALE_TOKEN (claimed again since: nothing changed),
             -2 UNKNOWN_JOB, -5 NOT_RUNNING
Errors       {-4 BAD_ARGUMENT, message} for malformed arguments; nothing is written.
A job of a parked task's list is named by a member of that list: its key is built from the
tag, which every key of the shard carries (same slot).
]]
local events = KEYS[1]
local due_keys = {urgent = KEYS[2], normal = KEYS[3], bulk = KEYS[4]}
local tag, worker, wake = ARGV[1], ARGV[2], ARGV[3]
local n = fs_count(ARGV[4])
fs_effects()

if n == nil or n < 1 or #KEYS ~= 4 + 3 * n or #ARGV ~= 4 + 5 * n then
  return fs_err(FS_BAD_ARGUMENT, 'ack needs at least one job, with three keys and five arguments each')
end
for i = 1, n do
  local a = 4 + 5 * (i - 1)
  if fs_count(ARGV[a + 2]) == nil or fs_count(ARGV[a + 4]) == nil then
    return fs_err(FS_BAD_ARGUMENT, 'job ' .. ARGV[a + 1] .. ': token and duration must be non-negative integers')
  end
end

local now = fs_now()
local now_text = fs_int(now)
local codes = {}
local tasks, task_order = {}, {}  -- task key -> {prio, max_running, done}: counters move once per task
local removed = {}                -- due key -> ids, removed with one ZREM per set
local gone, acked = {}, {}        -- job keys, deleted with one DEL
for i = 1, n do
  local a, k = 4 + 5 * (i - 1), 4 + 3 * (i - 1)
  local jk, task_key, parked = KEYS[k + 1], KEYS[k + 2], KEYS[k + 3]
  local id, token = ARGV[a + 1], ARGV[a + 2]
  local j = redis.call('HMGET', jk, 'token', 'state', 'host', 'attempt')
  if acked[jk] then
    codes[i] = FS_NOT_RUNNING  -- the same job twice in one batch: acked the first time
  elseif not j[2] then
    codes[i] = FS_UNKNOWN_JOB
  elseif fs_num(j[1]) ~= tonumber(token) then
    codes[i] = FS_STALE_TOKEN
  elseif j[2] ~= 'running' then
    codes[i] = FS_NOT_RUNNING
  else
    local t = tasks[task_key]
    if t == nil then
      local f = redis.call('HMGET', task_key, 'prio', 'max_running')
      t = {due = fs_due_of(due_keys, f[1]), max_running = fs_num(f[2]), done = 0}
      tasks[task_key] = t
      task_order[#task_order + 1] = task_key
    end
    gone[#gone + 1] = jk
    acked[jk] = true
    local holder = fs_due_holding(due_keys, t.due, id)  -- another class while reprioritized
    removed[holder] = removed[holder] or {}
    table.insert(removed[holder], id)
    t.done = t.done + 1
    local task_id = fs_task_of(id)
    redis.call('XADD', events, '*', 'kind', 'ack', 'ts', now_text, 'task', task_id, 'job', id,
      'host', j[3], 'attempt', j[4] or '0', 'token', token, 'worker', worker,
      'exit_code', ARGV[a + 3], 'duration_ms', ARGV[a + 4], 'output', ARGV[a + 5])  -- hot path
    if t.max_running > 0 then fs_unpark(tag, parked, t.due, wake, events, now, task_id) end
    codes[i] = FS_OK
  end
end
if #gone > 0 then redis.call('DEL', unpack(gone)) end
for due, ids in pairs(removed) do redis.call('ZREM', due, unpack(ids)) end
for _, task_key in ipairs(task_order) do
  redis.call('HINCRBY', task_key, 'running', -tasks[task_key].done)
  redis.call('HINCRBY', task_key, 'succeeded', tasks[task_key].done)
end
return codes
