--[[ fire.lua: a claimed schedule entry has created its occurrence's task: move it on.

KEYS[1]     schedule  {P}:sched:<name>   HASH occurrence (ms), token, owner, state
KEYS[2]     due set   {P}:due:urgent     ZSET (schedule entries live in the urgent set)
KEYS[3]     events    {P}:events         STREAM
ARGV[1]     entry id: "sched:<name>"
ARGV[2]     worker id (the claimer)
ARGV[3]     fencing token from the claim
ARGV[4]     occurrence (ms epoch) the entry stood for when it was claimed
ARGV[5]     next occurrence (ms epoch), or '' when the schedule has no more (entry removed)
ARGV[6]     wake channel ({P}:wake)
ARGV[7]     JSON list of events to append, in order, each an object of string fields
            (kind 'fire': schedule, occurrence, task; kind 'missed': schedule, occurrence,
            error, detail); ts and worker are added here
Returns     {0 OK, n events}; {-1 STALE_TOKEN, message} when the entry was claimed again, moved,
            paused or removed since: nothing is written (the SQL task it created is unique per
            occurrence, so the new holder finds it).
Errors      {-4 BAD_ARGUMENT, message}; nothing is written.
]]
local sk, due, events = KEYS[1], KEYS[2], KEYS[3]
local id, worker, token, occurrence, next_at, wake = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
fs_effects()

if string.sub(id, 1, 6) ~= 'sched:' then return fs_err(FS_BAD_ARGUMENT, 'entry id must start with sched:') end
if not string.match(occurrence, '^%d+$') then return fs_err(FS_BAD_ARGUMENT, 'occurrence must be a ms epoch') end
if next_at ~= '' and not string.match(next_at, '^%d+$') then
  return fs_err(FS_BAD_ARGUMENT, 'next occurrence must be a ms epoch or empty')
end
local ok, list = pcall(cjson.decode, ARGV[7])
if not ok or type(list) ~= 'table' then return fs_err(FS_BAD_ARGUMENT, 'events must be a JSON list') end

local f = redis.call('HMGET', sk, 'token', 'owner', 'state', 'occurrence')
if f[1] ~= token or f[2] ~= worker or f[3] ~= 'firing' or f[4] ~= occurrence then
  return fs_err(FS_STALE_TOKEN, 'schedule entry ' .. id .. ' is no longer this claim\'s')
end

local now = fs_now()
redis.call('ZREM', fs_leases_of(due), id)
for _, ev in ipairs(list) do
  local fields = {}
  for k, v in pairs(ev) do
    if k ~= 'kind' and k ~= 'ts' then
      fields[#fields + 1] = k
      fields[#fields + 1] = tostring(v)
    end
  end
  fields[#fields + 1], fields[#fields + 2] = 'worker', worker
  fields[#fields + 1], fields[#fields + 2] = 'token', token
  fs_emit(events, now, tostring(ev.kind or 'fire'), fields)
end
if next_at == '' then
  redis.call('DEL', sk)
  redis.call('ZREM', due, id)
else
  redis.call('HSET', sk, 'occurrence', next_at, 'state', 'pending')
  redis.call('HDEL', sk, 'owner')
  fs_put_due(due, id, tonumber(next_at), wake)
end
return {FS_OK, #list}
