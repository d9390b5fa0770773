--[[ enqueue.lua: queue a batch of jobs of one task, each at its due time.

KEYS[1]      task      {P}:task:<task id>       HASH (must exist, state active or paused)
KEYS[2..4]   due sets  {P}:due:urgent|normal|bulk  ZSET job id -> ms epoch
KEYS[5]      stats     {P}:stats                HASH (field enqueued)
KEYS[6]      events    {P}:events               STREAM
KEYS[6+i]    job i     {P}:job:<job id i>       HASH, i = 1..n (passed so the script is cluster-safe)
ARGV[1]      task id
ARGV[2]      wake channel ({P}:wake)
ARGV[3]      n, the number of jobs (>= 1)
ARGV[3+5(i-1)+1..5]  job i: job id "<task id>.<k>", host, due (ms epoch, 0 = now by the
             Redis clock), window name ('' = none), window close (ms epoch, '' = none)
Returns  {added, total} where added counts the new jobs (ids already present are skipped) and
         total is the task's job count. One event enqueue per call (jobs = space-separated ids).
         Publishes on wake when the batch puts a job ahead of the head of the due set.
Errors   {-3 UNKNOWN_TASK | -7 TASK_NOT_ACTIVE | -4 BAD_ARGUMENT, message}; nothing is written.
]]
local task_key = KEYS[1]
local due_keys = {urgent = KEYS[2], normal = KEYS[3], bulk = KEYS[4]}
local stats = KEYS[5]
local events = KEYS[6]
local task_id, wake = ARGV[1], ARGV[2]
local n = fs_count(ARGV[3])
fs_effects()

-- Validate everything before the first write.
if n == nil or n < 1 or #KEYS ~= 6 + n or #ARGV ~= 3 + 5 * n then
  return fs_err(FS_BAD_ARGUMENT, 'enqueue needs at least one job, with one job key and five arguments each')
end
local t = redis.call('HMGET', task_key, 'state', 'prio', 'span')
if not t[1] then return fs_err(FS_UNKNOWN_TASK, 'no task ' .. task_id) end
if t[1] ~= 'active' and t[1] ~= 'paused' then
  return fs_err(FS_TASK_NOT_ACTIVE, 'task ' .. task_id .. ' is ' .. t[1] .. '; it takes no new jobs')
end
local prefix = task_id .. '.'
local span = fs_num(t[3])
for i = 1, n do
  local a = 3 + 5 * (i - 1)
  local id, host, due, wclose = ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 5]
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
for i = 1, n do
  local a = 3 + 5 * (i - 1)
  local jk = KEYS[6 + i]
  if redis.call('EXISTS', jk) == 0 then
    local id, host, due, window, wclose = ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], ARGV[a + 5]
    if tonumber(due) == 0 then due = now_text end
    -- A small hash: the task is the id's prefix, attempt and token are absent until the first
    -- claim (read as 0).
    if window ~= '' then
      redis.call('HSET', jk, 'host', host, 'state', 'pending', 'due', due, 'window', window, 'wclose', wclose)
    else
      redis.call('HSET', jk, 'host', host, 'state', 'pending', 'due', due)
    end
    added[#added + 1] = id
    scored[#scored + 1], scored[#scored + 2] = due, id
    if earliest == nil or tonumber(due) < earliest then earliest = tonumber(due) end
  end
end
-- One ZADD per 500 jobs at most (the same job id twice in a batch was skipped above by EXISTS).
for start = 1, #scored, 1000 do
  redis.call('ZADD', due_key, unpack(scored, start, math.min(start + 999, #scored)))
end

local total = fs_num(redis.call('HGET', task_key, 'total'))
if #added > 0 then
  total = redis.call('HINCRBY', task_key, 'total', #added)
  redis.call('HSET', task_key, 'span', fs_int(span))
  redis.call('HINCRBY', stats, 'enqueued', #added)
  fs_emit(events, now, 'enqueue', {'task', task_id, 'count', fs_int(#added),
    'jobs', table.concat(added, ' '), 'due', fs_int(earliest)})
  if head[2] == nil or earliest < tonumber(head[2]) then
    redis.call('PUBLISH', wake, fs_int(earliest))
  end
end
return {#added, total}
