--[[ extend.lua: renew the leases of running jobs (heartbeat). Not a state change: no event.

KEYS[1..3]   due sets  {P}:due:urgent|normal|bulk  ZSET
KEYS[3+2(i-1)+1..2]  job i: {P}:job:<id> HASH, {P}:task:<task> HASH (for its priority class)
ARGV[1]      lease (ms, >= 1): the new score is now + lease
ARGV[2]      n, the number of jobs (>= 1)
ARGV[2+2(i-1)+1..2]  job i: job id, fencing token
Returns      {code_1, ..., code_n}: 0 OK, -1 STALE_TOKEN (claimed again since: nothing changed),
             -2 UNKNOWN_JOB, -5 NOT_RUNNING
Errors       {-4 BAD_ARGUMENT, message}; nothing is written.
]]
local due_keys = {urgent = KEYS[1], normal = KEYS[2], bulk = KEYS[3]}
local lease, n = fs_count(ARGV[1]), fs_count(ARGV[2])

if lease == nil or lease < 1 then return fs_err(FS_BAD_ARGUMENT, 'lease must be an integer >= 1 ms') end
if n == nil or n < 1 or #KEYS ~= 3 + 2 * n or #ARGV ~= 2 + 2 * n then
  return fs_err(FS_BAD_ARGUMENT, 'extend needs at least one job, with two keys and two arguments each')
end
for i = 1, n do
  if fs_count(ARGV[2 + 2 * i]) == nil then
    return fs_err(FS_BAD_ARGUMENT, 'job ' .. ARGV[1 + 2 * i] .. ': token must be a non-negative integer')
  end
end

local expiry = fs_now() + lease
local codes = {}
for i = 1, n do
  local jk, task_key = KEYS[2 + 2 * i], KEYS[3 + 2 * i]
  local id, token = ARGV[1 + 2 * i], ARGV[2 + 2 * i]
  local j = redis.call('HMGET', jk, 'token', 'state')
  if not j[2] then
    codes[i] = FS_UNKNOWN_JOB
  elseif fs_num(j[1]) ~= tonumber(token) then
    codes[i] = FS_STALE_TOKEN
  elseif j[2] ~= 'running' then
    codes[i] = FS_NOT_RUNNING
  else
    local due = fs_due_holding(due_keys, fs_due_of(due_keys, redis.call('HGET', task_key, 'prio')), id)
    redis.call('ZADD', due, 'XX', expiry, id)
    redis.call('ZADD', fs_leases_of(due), expiry, id)
    codes[i] = FS_OK
  end
end
return codes
