--[[ release.lua: give back the leases of running jobs without counting an attempt (shutdown).

Each job goes back to pending at its own due time (so it keeps its place in line).
KEYS[1]      events    {P}:events                  STREAM
KEYS[2..4]   due sets  {P}:due:urgent|normal|bulk  ZSET
KEYS[4+3(i-1)+1..3]  job i: {P}:job:<id> HASH, {P}:task:<task> HASH, {P}:parked:<task> LIST
ARGV[1]      tag ("{prefix}", for the job hash of a parked job released in exchange)
ARGV[2]      worker id (recorded in the event)
ARGV[3]      wake channel
ARGV[4]      n, the number of jobs (>= 1)
ARGV[5]      memo lifetime (ms, >= 1; the caller's lease): see _lib fs_remember
ARGV[5+2(i-1)+1..2]  job i: job id, fencing token
Returns      {code_1, ..., code_n}: 0 OK (pending again, attempt - 1, running - 1, event release;
             or the same token's release again, whose first reply was lost: nothing written),
             -1 STALE_TOKEN, -2 UNKNOWN_JOB, -5 NOT_RUNNING
Errors       {-4 BAD_ARGUMENT, message}; nothing is written.
]]
local events = KEYS[1]
local due_keys = {urgent = KEYS[2], normal = KEYS[3], bulk = KEYS[4]}
local tag, worker, wake = ARGV[1], ARGV[2], ARGV[3]
local n, memo_ms = fs_count(ARGV[4]), fs_count(ARGV[5])
fs_effects()

if n == nil or n < 1 or #KEYS ~= 4 + 3 * n or #ARGV ~= 5 + 2 * n then
  return fs_err(FS_BAD_ARGUMENT, 'release needs at least one job, with three keys and two arguments each')
end
if memo_ms == nil or memo_ms < 1 then return fs_err(FS_BAD_ARGUMENT, 'memo lifetime must be an integer >= 1 ms') end
for i = 1, n do
  if fs_count(ARGV[5 + 2 * i]) == nil then
    return fs_err(FS_BAD_ARGUMENT, 'job ' .. ARGV[4 + 2 * i] .. ': token must be a non-negative integer')
  end
end

local now = fs_now()
local codes = {}
for i = 1, n do
  local k = 4 + 3 * (i - 1)
  local jk, task_key, parked = KEYS[k + 1], KEYS[k + 2], KEYS[k + 3]
  local id, token = ARGV[4 + 2 * i], ARGV[5 + 2 * i]
  local task_id = fs_task_of(id) or ''
  local j = redis.call('HMGET', jk, 'token', 'state', 'host', 'attempt', 'due')
  if (not j[2] or fs_num(j[1]) ~= tonumber(token) or j[2] ~= 'running')
      and fs_recall(tag, id, token, 'release') then
    codes[i] = FS_OK  -- a repeat: this token's release took effect and its reply was lost
  elseif not j[2] then
    codes[i] = FS_UNKNOWN_JOB
  elseif fs_num(j[1]) ~= tonumber(token) then
    codes[i] = FS_STALE_TOKEN
  elseif j[2] ~= 'running' then
    codes[i] = FS_NOT_RUNNING
  else
    local t = redis.call('HMGET', task_key, 'prio', 'max_running')
    local due = fs_due_of(due_keys, t[1])
    local attempt = math.max(fs_num(j[4]) - 1, 0)
    local due_ms = fs_num(j[5])
    redis.call('HSET', jk, 'state', 'pending', 'attempt', attempt)
    redis.call('HDEL', jk, 'owner')
    fs_drop_elsewhere(due_keys, due, id)  -- its lease entry may be in its task's old class
    redis.call('ZREM', fs_leases_of(due), id)
    fs_free_host(tag, j[3], id, wake, events, now)
    fs_put_due(due, id, due_ms, wake)
    fs_requeued(tag)  -- back at its old due time, which a reorder since may have passed
    fs_finish(task_key, nil)
    fs_emit(events, now, 'release', {'task', task_id, 'job', id, 'host', j[3], 'attempt', fs_int(attempt),
      'token', token, 'worker', worker, 'due', fs_int(due_ms)})
    if fs_num(t[2]) > 0 then fs_unpark(tag, parked, due, wake, events, now, task_id) end
    fs_remember(tag, id, token, 'release', '', '', memo_ms)
    codes[i] = FS_OK
  end
end
return codes
