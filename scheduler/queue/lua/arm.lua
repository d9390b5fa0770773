--[[ arm.lua: put a schedule's entry into the due set at an occurrence (add, resume, repair).

KEYS[1]     schedule  {P}:sched:<name>   HASH occurrence (ms), token, owner, state
KEYS[2]     due set   {P}:due:urgent     ZSET
ARGV[1]     entry id: "sched:<name>"
ARGV[2]     occurrence (ms epoch) the entry stands for
ARGV[3]     wake channel ({P}:wake)
ARGV[4]     '1': replace an entry that exists; '0': leave an existing entry as it is
Returns     {1, occurrence}: armed at ARGV[2]; {0, occurrence}: an entry existed (kept; its
            occurrence returned). The token survives a replace, so a claim in flight stays stale.
Errors      {-4 BAD_ARGUMENT, message}; nothing is written.
]]
local sk, due = KEYS[1], KEYS[2]
local id, occurrence, wake, replace = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
fs_effects()

if string.sub(id, 1, 6) ~= 'sched:' then return fs_err(FS_BAD_ARGUMENT, 'entry id must start with sched:') end
if not string.match(occurrence, '^%d+$') then return fs_err(FS_BAD_ARGUMENT, 'occurrence must be a ms epoch') end

local old = redis.call('HGET', sk, 'occurrence')
if old and replace ~= '1' then return {0, old} end
redis.call('HINCRBY', sk, 'token', 1)
redis.call('HSET', sk, 'occurrence', occurrence, 'state', 'pending')
redis.call('HDEL', sk, 'owner')
fs_put_due(due, id, tonumber(occurrence), wake)
return {1, occurrence}
