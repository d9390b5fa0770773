--[[ reorder.lua: apply one chunk of a fair-share reorder to one due set (scheduler/queue/fairshare.py).

KEYS[1]      due set   {P}:due:<class>      ZSET job id -> ms epoch
KEYS[2]      lock      {P}:lock:overload    STRING: the token of the worker running the reorder
KEYS[2+i]    job i     {P}:job:<id i>       HASH, i = 1..n (passed so the script is cluster-safe)
ARGV[1]      owner token: the value the lock must still hold
ARGV[2]      lock TTL (ms, >= 1): every call renews the lock for this long
ARGV[3]      n, the number of moves (>= 0; 0 only renews the lock)
ARGV[3+3(i-1)+1..3]  move i: job id, expected score (ms epoch, as read), new score (ms epoch)
Returns      {moved, 1}: moved counts the jobs rewritten; {0, 0}: the lock is not ours any more
             (it expired and another worker may run a reorder): nothing is written
Errors       {-4 BAD_ARGUMENT, message}; nothing is written.

Compare-and-set per job: a move applies only if the job is still pending, its entry is still in
this set at the expected score, and the new score is earlier than both the expected score and
the Redis clock. Everything that happened since the caller read the set wins: a claim (score
now the lease expiry, state running), an ack (entry gone), a retry or deferral (another score),
a reprioritize (entry in another class's set). Such a job is skipped and keeps its place. A
move never makes a job due later, and never makes a job due that was not due already.

No event per job: the whole reorder is one `reorder` event, written by overload.lua (finish).
]]
local due, lock = KEYS[1], KEYS[2]
local token, ttl, n = ARGV[1], fs_count(ARGV[2]), fs_count(ARGV[3])
fs_effects()

if token == nil or token == '' then return fs_err(FS_BAD_ARGUMENT, 'owner token is empty') end
if ttl == nil or ttl < 1 then return fs_err(FS_BAD_ARGUMENT, 'lock TTL must be an integer >= 1 ms') end
if n == nil or #KEYS ~= 2 + n or #ARGV ~= 3 + 3 * n then
  return fs_err(FS_BAD_ARGUMENT, 'reorder needs n moves, with one job key and three arguments each')
end
for i = 1, n do
  local a = 3 + 3 * (i - 1)
  if tonumber(ARGV[a + 2]) == nil or tonumber(ARGV[a + 3]) == nil then
    return fs_err(FS_BAD_ARGUMENT, 'job ' .. ARGV[a + 1] .. ': scores must be numbers')
  end
end

if redis.call('GET', lock) ~= token then return {0, 0} end
redis.call('PEXPIRE', lock, ttl)

local now = fs_now()
local moved = 0
for i = 1, n do
  local a = 3 + 3 * (i - 1)
  local id, expected, new = ARGV[a + 1], tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  if new < expected and new < now then
    local score = redis.call('ZSCORE', due, id)
    if score and tonumber(score) == expected and redis.call('HGET', KEYS[2 + i], 'state') == 'pending' then
      redis.call('ZADD', due, 'XX', ARGV[a + 3], id)
      moved = moved + 1
    end
  end
end
return {moved, 1}
