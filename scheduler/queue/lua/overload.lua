--[[ overload.lua: the overload-handling lock and the bookkeeping of fair-share reorders.

One script, three modes (ARGV[1]), all on the same keys; scheduler/queue/fairshare.py calls it.

KEYS[1..3]  due sets  {P}:due:urgent|normal|bulk  ZSET job id -> ms epoch
KEYS[4]     lock      {P}:lock:overload           STRING: owner token, with a TTL
KEYS[5]     stats     {P}:stats                   HASH (see below)
KEYS[6]     events    {P}:events                  STREAM
ARGV[1]     mode: begin | finish | unlock
ARGV[2]     owner token (unique per reorder run)

begin   ARGV[3] lock TTL (ms, >= 1), ARGV[4] overload threshold (ms), ARGV[5] force (1 | 0)
        Starts a reorder when (unless forced) all of these hold:
          1. overload: the head of some due set is older than now - threshold;
          2. something new since the last reorder: stats `enqueued` moved (jobs were queued)
             or `requeued` did (a parked or waiting job went back to its due set at its old
             due time, which may be before the cut), or an overloaded set holds an entry that became due after the last reorder's cut
             (a retry, a deferral, a job due later than the cut), or the last reorder never
             finished (its holder died: `fairshare_open` is still set);
          3. not too soon: now >= `fairshare_next` (set by finish);
          4. the lock is free: SET NX PX (a crashed holder's lock expires after the TTL).
        Then it records the cut (now) and the `enqueued` value seen, marks the run open.
        Returns {1, now, classes} (classes: the overloaded ones, space-separated; all classes
        when forced) or {0, now, why} (nothing written).
finish  ARGV[3] worker, ARGV[4] gap (ms: no reorder before now + gap), ARGV[5] detail JSON,
        ARGV[6] jobs moved, ARGV[7] tasks (share keys), ARGV[8] duration (ms),
        ARGV[9] chunks (script calls), ARGV[10] longest call (ms)
        Writes one `reorder` event and the summary into stats (`reorder_*`), closes the run,
        releases the lock if still the owner. Returns {1} if it was the owner, {0} otherwise.
unlock  Releases the lock if still the owner (a run that failed). Returns {1} or {0}.
Errors  {-4 BAD_ARGUMENT, message}; nothing is written.

Stats fields: `reorder_at` (ms epoch of the last finish), `reorder_jobs`, `reorder_tasks`,
`reorder_duration` (ms), `reorder_chunks`, `reorder_longest_call` (ms), `reorder_worker`,
`reorder_count` (reorders so far), `requeued` (written by _lib.lua); internal: `fairshare_seq`, `fairshare_cut`,
`fairshare_next`, `fairshare_open`.
]]
local due_keys = {urgent = KEYS[1], normal = KEYS[2], bulk = KEYS[3]}
local lock, stats, events = KEYS[4], KEYS[5], KEYS[6]
local mode, token = ARGV[1], ARGV[2]
local classes = {'urgent', 'normal', 'bulk'}
fs_effects()

if token == nil or token == '' then return fs_err(FS_BAD_ARGUMENT, 'owner token is empty') end
local now = fs_now()

if mode == 'begin' then
  local ttl, threshold, force = fs_count(ARGV[3]), fs_count(ARGV[4]), ARGV[5]
  if ttl == nil or ttl < 1 then return fs_err(FS_BAD_ARGUMENT, 'lock TTL must be an integer >= 1 ms') end
  if threshold == nil then return fs_err(FS_BAD_ARGUMENT, 'threshold must be a non-negative integer (ms)') end
  if force ~= '0' and force ~= '1' then return fs_err(FS_BAD_ARGUMENT, 'force must be 0 or 1') end
  local s = redis.call('HMGET', stats, 'enqueued', 'fairshare_seq', 'fairshare_cut', 'fairshare_next',
    'fairshare_open', 'requeued')
  local seq = (s[1] or '0') .. '/' .. (s[6] or '0')
  local fresh = seq ~= (s[2] or '') or (s[5] ~= false and s[5] ~= '')
  local late = {}
  for _, prio in ipairs(classes) do
    local head = redis.call('ZRANGE', due_keys[prio], 0, 0, 'WITHSCORES')
    if head[2] ~= nil and (force == '1' or tonumber(head[2]) < now - threshold) then
      late[#late + 1] = prio
      if not fresh then
        local newer = redis.call('ZRANGE', due_keys[prio], '(' .. fs_int(fs_num(s[3])), now,
          'BYSCORE', 'LIMIT', 0, 1)
        fresh = #newer > 0
      end
    end
  end
  if force ~= '1' then
    if #late == 0 then return {0, now, 'not overloaded'} end
    if not fresh then return {0, now, 'nothing new since the last reorder'} end
    if now < fs_num(s[4]) then return {0, now, 'too soon after the last reorder'} end
  end
  if not redis.call('SET', lock, token, 'NX', 'PX', ttl) then
    return {0, now, 'another worker holds the overload lock'}
  end
  redis.call('HSET', stats, 'fairshare_seq', seq, 'fairshare_cut', fs_int(now), 'fairshare_open', token)
  return {1, now, table.concat(late, ' ')}
end

local owner = redis.call('GET', lock) == token
if mode == 'finish' then
  local gap = fs_count(ARGV[4])
  if gap == nil or #ARGV ~= 10 then return fs_err(FS_BAD_ARGUMENT, 'finish needs 10 arguments, gap in ms') end
  for i = 6, 10 do
    if fs_count(ARGV[i]) == nil then return fs_err(FS_BAD_ARGUMENT, 'figures must be non-negative integers') end
  end
  redis.call('HSET', stats, 'reorder_at', fs_int(now), 'reorder_jobs', ARGV[6], 'reorder_tasks', ARGV[7],
    'reorder_duration', ARGV[8], 'reorder_chunks', ARGV[9], 'reorder_longest_call', ARGV[10],
    'reorder_worker', ARGV[3], 'fairshare_next', fs_int(now + gap))
  redis.call('HINCRBY', stats, 'reorder_count', 1)
  if redis.call('HGET', stats, 'fairshare_open') == token then redis.call('HDEL', stats, 'fairshare_open') end
  fs_emit(events, now, 'reorder', {'worker', ARGV[3], 'count', ARGV[6], 'detail', ARGV[5]})
  if owner then redis.call('DEL', lock) end
  return {owner and 1 or 0}
end

if mode == 'unlock' then
  if owner then redis.call('DEL', lock) end
  return {owner and 1 or 0}
end
return fs_err(FS_BAD_ARGUMENT, 'mode must be begin, finish or unlock, not ' .. tostring(mode))
