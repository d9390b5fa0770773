--[[ enqueue.lua: queue a batch of jobs of one task, each at its due time.

KEYS[1]      task      {P}:task:<task id>       HASH (must exist, state active or paused)
KEYS[2..4]   due sets  {P}:due:urgent|normal|bulk  ZSET job id -> ms epoch
KEYS[5]      stats     {P}:stats                HASH (field enqueued)
KEYS[6]      events    {P}:events               STREAM
ARGV[1]      tag ("{prefix}"): job i's hash is <tag>:job:<job id i>, in the slot of KEYS[1..6]
ARGV[2]      task id
ARGV[3]      wake channel ({P}:wake)
ARGV[4]      the jobs, as JSON text: a list of n >= 1 lists of 5 strings [job id "<task id>.<k>",
             host, due (ms epoch in decimal text, '0' = now by the Redis clock), window name
             ('' = none), window close (ms epoch, '' = none)] (one argument parses faster on
             both sides than 5n, see docs/benchmarks.md "Queue core"), or of 7 with the
             attempts made and the last fencing token of a job rebuilt from SQL (reconcile):
             its next claim goes on from them
Returns  {added, total} where added counts the new jobs and total is the task's job count.
         A job is skipped when its hash exists, or when its index <k> is below the task's span
         (the highest index ever enqueued + 1) from before this call: it was queued once and
         has finished since (an ack deletes the hash), so queuing it again would run it twice.
         This is what makes a fan-out resumed after another worker completed it (a stalled
         schedule firer, a retried submission) queue nothing twice. One event enqueue per call (jobs = space-separated ids).
         Publishes on wake when the batch puts a job ahead of the head of the due set.
Errors   {-3 UNKNOWN_TASK | -7 TASK_NOT_ACTIVE | -4 BAD_ARGUMENT, message}; nothing is written.
]]
local task_key = KEYS[1]
local due_keys = {urgent = KEYS[2], normal = KEYS[3], bulk = KEYS[4]}
local stats = KEYS[5]
local events = KEYS[6]
local tag, task_id, wake = ARGV[1], ARGV[2], ARGV[3]
fs_effects()

-- Validate everything before the first write.
local ok, jobs = pcall(cjson.decode, ARGV[4] or '')
if #KEYS ~= 6 or #ARGV ~= 4 or not ok or type(jobs) ~= 'table' or #jobs < 1 then
  return fs_err(FS_BAD_ARGUMENT,
    'enqueue needs a JSON list of at least one job [id, host, due, window, window close]')
end
local t = redis.call('HMGET', task_key, 'state', 'prio', 'span')
if not t[1] then return fs_err(FS_UNKNOWN_TASK, 'no task ' .. task_id) end
if t[1] ~= 'active' and t[1] ~= 'paused' then
  return fs_err(FS_TASK_NOT_ACTIVE, 'task ' .. task_id .. ' is ' .. t[1] .. '; it takes no new jobs')
end
local prefix = task_id .. '.'
local span = fs_num(t[3])
local span_before = span
for i = 1, #jobs do
  local job = jobs[i]
  if type(job) ~= 'table' or type(job[1]) ~= 'string' or type(job[2]) ~= 'string'
      or type(job[3]) ~= 'string' or type(job[4]) ~= 'string' or type(job[5]) ~= 'string'
      or (#job ~= 5 and #job ~= 7) then
    return fs_err(FS_BAD_ARGUMENT,
      'enqueue job ' .. i .. ' is not 5 strings [id, host, due, window, window close]')
  end
  if #job == 7 and (type(job[6]) ~= 'string' or not string.match(job[6], '^%d+$')
      or type(job[7]) ~= 'string' or not string.match(job[7], '^%d+$')) then
    return fs_err(FS_BAD_ARGUMENT, 'enqueue job ' .. i .. ': attempt and token must be integers')
  end
  local id, host, due, wclose = job[1], job[2], job[3], job[5]
  local k = string.sub(id, #prefix + 1)
  if string.sub(id, 1, #prefix) ~= prefix or not string.match(k, '^%d+$') then
    return fs_err(FS_BAD_ARGUMENT, 'job id ' .. id .. ' is not of task ' .. task_id .. ' (<task>.<n>)')
  end
  if host == '' then return fs_err(FS_BAD_ARGUMENT, 'job ' .. id .. ' has no host') end
  if not string.match(due, '^%d+$') then
    return fs_err(FS_BAD_ARGUMENT, 'job ' .. id .. ': due must be a non-negative integer (ms), not ' .. due)
  end
  if wclose ~= '' and not string.match(wclose, '^%d+$') then
    return fs_err(FS_BAD_ARGUMENT, 'job ' .. id .. ': window close must be a ms epoch, not ' .. wclose)
  end
  if tonumber(k) + 1 > span then span = tonumber(k) + 1 end
end

local now = fs_now()
local now_text = fs_int(now)
local due_key = fs_due_of(due_keys, t[2])
local head = redis.call('ZRANGE', due_key, 0, 0, 'WITHSCORES')
local earliest = nil
local added, scored = {}, {}
for i = 1, #jobs do
  local id, host, due, window, wclose, attempt, token = unpack(jobs[i])
  local jk = tag .. ':job:' .. id
  if tonumber(string.sub(id, #prefix + 1)) >= span_before and redis.call('EXISTS', jk) == 0 then
    local at = tonumber(due)
    if at == 0 then due, at = now_text, now end
    -- A small hash: the task is the id's prefix, attempt and token are absent until the first
    -- claim (read as 0).
    if window ~= '' then
      redis.call('HSET', jk, 'host', host, 'state', 'pending', 'due', due, 'window', window, 'wclose', wclose)
    else
      redis.call('HSET', jk, 'host', host, 'state', 'pending', 'due', due)
    end
    if attempt then redis.call('HSET', jk, 'attempt', attempt, 'token', token) end
    added[#added + 1] = id
    scored[#scored + 1], scored[#scored + 2] = due, id
    if earliest == nil or at < earliest then earliest = at end
  end
end
-- One ZADD per 500 jobs at most (the same job id twice in a batch was skipped above by EXISTS).
for start = 1, #scored, 1000 do
  redis.call('ZADD', due_key, unpack(scored, start, math.min(start + 999, #scored)))
end

local total = fs_count_enqueued(task_key, stats, events, now, task_id, added, span, earliest)
if #added > 0 and (head[2] == nil or earliest < tonumber(head[2])) then
  redis.call('PUBLISH', wake, fs_int(earliest))
end
return {#added, total}
