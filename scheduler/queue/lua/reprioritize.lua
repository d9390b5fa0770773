--[[ reprioritize.lua: move a task to another priority class: the task first, then its pending
jobs, a chunk of job ids per call (Queue.reprioritize walks ids <task>.0 .. <task>.<span-1>).

KEYS[1]      task      {P}:task:<task id>          HASH
KEYS[2..4]   due sets  {P}:due:urgent|normal|bulk  ZSET job id -> ms epoch
KEYS[5]      events    {P}:events                  STREAM
KEYS[5+i]    job i     {P}:job:<id i>              HASH, i = 1..n
ARGV[1]      task id
ARGV[2]      the new class: urgent | normal | bulk
ARGV[3]      operator (recorded in the event)
ARGV[4]      first: 1 on the first call (checks the task, sets its `prio`, event
             `reprioritize` with detail {"from", "to"}), 0 on the following ones
ARGV[5]      wake channel ({P}:wake)
ARGV[6]      principal: JSON recorded with the event ('' = none)
ARGV[6+i]    job id i, i = 1..n (n >= 0)
Returns      {moved, span, from}: jobs moved by this call, the task's span, and its class
             before this call (on a first call: the class it had)
Errors       {-3 UNKNOWN_TASK | -7 TASK_NOT_ACTIVE (cancelled or aborted) | -4 BAD_ARGUMENT,
             message}; nothing is written.

A job moves when it is pending and its entry sits in a set other than the task's class: it
keeps its score (its place in line, a fair-share reorder's included). Later calls move jobs to
the class the task has *then*, so two reprioritizes that overlap end in the last one's class.
Jobs not moved yet are safe meanwhile: claim.lua moves a pending job it meets in the wrong
class's set instead of claiming it there, and the scripts that end a lease (ack, extend, fail,
defer, release) find a running job's entry in whichever class set holds it. Parked and held
jobs are in no due set: unpark and resume put them into the task's class when they come back.
]]
local task_key = KEYS[1]
local due_keys = {urgent = KEYS[2], normal = KEYS[3], bulk = KEYS[4]}
local events = KEYS[5]
local task_id, prio, operator, first, wake = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local principal = ARGV[6]
local n = #ARGV - 6
fs_effects()

if due_keys[prio] == nil then
  return fs_err(FS_BAD_ARGUMENT, 'priority must be urgent, normal or bulk, not ' .. tostring(prio))
end
if first ~= '0' and first ~= '1' then return fs_err(FS_BAD_ARGUMENT, 'first must be 0 or 1') end
if #KEYS ~= 5 + n then return fs_err(FS_BAD_ARGUMENT, 'reprioritize needs one job key per job id') end
local prefix = task_id .. '.'
for i = 1, n do
  if string.sub(ARGV[6 + i], 1, #prefix) ~= prefix then
    return fs_err(FS_BAD_ARGUMENT, 'job id ' .. ARGV[6 + i] .. ' is not of task ' .. task_id)
  end
end
local t = redis.call('HMGET', task_key, 'state', 'prio', 'span')
if not t[1] then return fs_err(FS_UNKNOWN_TASK, 'no task ' .. task_id) end
local from = t[2] or 'normal'
local target = from
if first == '1' then
  if t[1] ~= 'active' and t[1] ~= 'paused' then
    return fs_err(FS_TASK_NOT_ACTIVE, 'task ' .. task_id .. ' is ' .. t[1] .. '; its priority cannot change')
  end
  target = prio
  if from ~= prio then
    local now = fs_now()
    redis.call('HSET', task_key, 'prio', prio)
    fs_emit(events, now, 'reprioritize', fs_signed({'task', task_id, 'operator', operator,
      'detail', cjson.encode({from = from, to = prio})}, principal))
  end
end

local home = due_keys[target]
local head = redis.call('ZRANGE', home, 0, 0, 'WITHSCORES')
local moved, earliest = 0, nil
for i = 1, n do
  local id = ARGV[6 + i]
  if redis.call('HGET', KEYS[5 + i], 'state') == 'pending' then
    for _, other in ipairs({'urgent', 'normal', 'bulk'}) do
      local key = due_keys[other]
      if key ~= home then
        local score = redis.call('ZSCORE', key, id)
        if score then
          redis.call('ZREM', key, id)
          if not redis.call('ZSCORE', home, id) then
            redis.call('ZADD', home, score, id)
            moved = moved + 1
            if earliest == nil or tonumber(score) < earliest then earliest = tonumber(score) end
          end
        end
      end
    end
  end
end
if earliest ~= nil and (head[2] == nil or earliest < tonumber(head[2])) then
  redis.call('PUBLISH', wake, fs_int(earliest))
end
-- Moved jobs keep their scores in a class whose last reorder has not placed them: something
-- new for the overload check. The shard's tag is the events key's ({P}:events).
if moved > 0 then fs_requeued(string.sub(events, 1, #events - #':events')) end
return {moved, fs_num(t[3]), from}
