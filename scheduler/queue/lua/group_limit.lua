--[[ group_limit.lua: set or remove a group's limit: most jobs running at once on its hosts,
across all tasks (claim.lua enforces it; _lib fs_free_host gives the counts back).

KEYS[1]  glimit   {P}:glimit           HASH group -> limit
KEYS[2]  events   {P}:events           STREAM
ARGV[1]  tag ("{prefix}": the group's waiting list {P}:gq:<group>, the job and task hashes)
ARGV[2]  group
ARGV[3]  limit (>= 1), or '' to remove it
ARGV[4]  wake channel
ARGV[5]  operator (unused: the change is recorded in SQL with its operator, scheduler.inventory
         set_group_limit, before the queue hears of it)
Returns  {1}; the jobs waiting for the group go back to their due sets (they check the new
         limit when claimed). Jobs already running keep counting; a limit set while more of
         the group's jobs run than it allows lets no new one start until enough have ended.
Errors   {-4 BAD_ARGUMENT, message}
]]
local glimit, events = KEYS[1], KEYS[2]
local tag, group, limit, wake, operator = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
fs_effects()

if group == '' or string.find(group, ',', 1, true) then
  return fs_err(FS_BAD_ARGUMENT, 'a group name must not be empty or hold a comma')
end
if limit ~= '' and (fs_count(limit) == nil or tonumber(limit) < 1) then
  return fs_err(FS_BAD_ARGUMENT, 'a group limit must be an integer >= 1, or empty to remove it')
end
local now = fs_now()
if limit == '' then
  redis.call('HDEL', glimit, group)
else
  redis.call('HSET', glimit, group, limit)
end
fs_release_waiters(tag, tag .. ':gq:' .. group, wake, events, now)
return {1}
