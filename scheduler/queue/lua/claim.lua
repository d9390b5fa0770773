--[[ claim.lua: take up to `batch` due jobs for one worker, urgent first, then normal, bulk.

KEYS[1..3]  due sets  {P}:due:urgent|normal|bulk  ZSET job id -> ms epoch
KEYS[4]     dead      {P}:dead                    ZSET job id -> failure ms epoch
KEYS[5]     events    {P}:events                  STREAM
ARGV[1]     tag: the "{prefix}" hash tag of this shard (derived keys, see below)
ARGV[2]     worker id (owner of the claimed jobs)
ARGV[3]     batch: jobs to claim at most (>= 1)
ARGV[4]     lease (ms, >= 1): a claimed job's score becomes now + lease
ARGV[5]     scan limit: due entries visited at most in this call (>= batch), bounds the work
            spent parking, holding, cancelling and burying when few jobs are claimable
ARGV[6]     wake channel ({P}:wake)
ARGV[7]     shard mode (optional; docs/architecture.md "Shards"):
            ''/absent: the queue is not sharded: limits across tasks are kept here, as below;
            'coord':   shard 0 of a sharded queue: as '', and places that jobs of other shards
                       hold here ({P}:placed, {P}:places, taken by places.lua) count as running
                       holders until their place lease runs out (expired ones are freed first);
            'remote':  shard >= 1: the limits across tasks live in shard 0, so this call checks
                       none; a claimed job of an exclusive task, or on a host with limited groups
                       (its host hash's `limits`), gets two more fields in its row: '1'/'0'
                       (exclusive) and its limited groups (comma-separated). The worker then takes
                       its places in shard 0 (places.lua) or defers it (scheduler/queue/sharded.py).
ARGV[8]     '1': also return each claimed job's host hash ({P}:host:<host>, what a worker needs
            to reach the host), saving the worker a round trip between the claim and the start;
            optional (absent: not returned)
ARGV[9]     request id (optional; '' or absent: none): a claim whose reply was lost is sent
            again with the same id, and gets the first call's reply again (docs/reliability.md,
            "Ambiguous replies"): its jobs that still run under the tokens it gave them, each
            lease moved to now + lease (a replay late in the lease must not hand out a job about
            to be found lost); one that ended or was claimed again since is left out. Nothing
            else is written. A call that claimed or failed anything keeps its reply in
            <tag>:claimreq:<request id> for ARGV[10] ms
ARGV[10]    how long a request's reply is kept (ms; optional, default the lease): a lease and
            the time a node may wait for a reply (Queue.memo_ms)
Returns     {now_ms, next_due_ms or -1, claimed, lost, schedules, hosts}
            claimed: JSON text (one bulk reply parses faster than a nested array): a list with
                     one list per job, in the field order of scheduler.queue.types.ClaimedJob:
                     id, task id, host, token, attempt, due (ms, '' none), window (null none),
                     window close (ms, null none), after_loss (true | false); '{}' when empty.
                     Numbers travel as decimal text (a Lua number costs a float format in
                     cjson and in redis.call; see docs/benchmarks.md "Queue core")
            lost:    ids failed as lost by this call (a lost run is no failure of its host:
                     it counts against max_attempts only, never max_failures or a wave's
                     limit, so a loss never aborts a task)
            schedules: JSON text: one list of 3 strings per schedule entry claimed: name,
                     token, occurrence (ms); '{}' when empty
            hosts:   with ARGV[8] '1', JSON text: one HGETALL reply (a flat list of field and
                     value, '{}' when the host is unknown) per claimed job, in the order of
                     `claimed`; '{}' when none is claimed; absent without ARGV[8]
Errors      {-4 BAD_ARGUMENT, message}; nothing is written.

Expired leases come first: before the due sets, the call visits up to `batch` entries of the
leases set ({P}:leases, derived from KEYS[1]: running jobs and firing schedule entries scored
by their lease expiry) whose lease has run out, so a dead worker's jobs are found within a lease
of their expiry whatever the backlog of jobs due before it (their entries in the due sets sort
behind every job due earlier). A leases entry whose job is no longer running, or whose due
entry is not yet due, is dropped.

Every due entry visited leaves the range [-inf, now] in the same call (claimed: moved to the
lease expiry; otherwise removed from the set), so the loop always advances: O(B log N) when
jobs are claimable, O(scan limit * log N) at worst.

What happens to a due entry, by the state of its job and task (one branch of visit() each):
  job running (its lease expired: its worker lost it), see lose(); the lost event's `outcome`:
      task active, idempotent, attempts left -> events lost (retry) + claim, after_loss = 1
      task paused, idempotent, attempts left -> event lost (held), job held until resume
      task cancelled or aborted (or gone)    -> event lost (cancelled), job cancelled
      otherwise                              -> event lost (failed), job failed for good (dead letter)
  task cancelled or aborted (or gone)        -> job cancelled (one cancel event per task)
  job pending, its active task now in another class (Queue.reprioritize under way)
                                             -> moved to that class's set at its score
  task paused                                -> job moved to {P}:held:<task> at its due time
  task at its max_running                    -> job moved to {P}:parked:<task> (event park)
  task exclusive, its host held by another running job ({P}:busy)
                                             -> job moved to {P}:hostq:<host>, state hostwait
                                                (event park, detail host_busy); back when the
                                                host is freed (_lib fs_free_host)
  a limited group of its host at its limit ({P}:glimit, {P}:gbusy)
                                             -> job moved to {P}:gq:<group>, state hostwait
                                                (event park, detail group_full); back when a
                                                job of the group ends or the limit changes
  otherwise                                  -> claimed: new fencing token, attempt + 1,
                                                score = now + lease, running + 1 (event claim)
(Fair-share reorder and window deferral are not in this script: the worker runs them in Python
after a claim, scheduler.queue.fairshare.maybe_reorder and workers.deferral.window_deferral.)
A schedule's entry `sched:<name>` (no job hash; its hash is <tag>:sched:<name>) is claimed like a
job: token + 1, owner and state 'firing' in its hash, score = now + lease; it counts toward the
batch. The worker creates the occurrence's task, then fire.lua moves the entry on (token-checked).
An entry without its hash is dropped with a cancel event.

Derived keys: job ids come from the due sets, task ids from the job hashes; their keys
<tag>:job:<id>, <tag>:task:<id>, <tag>:parked:<id>, <tag>:held:<id> (and <tag>:host:<host>,
read with ARGV[8] and for a host's limits) are built from the tag in
ARGV[1], which every key of the shard carries, so they hash to the slot of KEYS[1..5].
]]
local due_keys = {urgent = KEYS[1], normal = KEYS[2], bulk = KEYS[3]}
local dead = KEYS[4]
local events = KEYS[5]
local tag, worker, wake = ARGV[1], ARGV[2], ARGV[6]
local mode = ARGV[7] or ''
local with_hosts = ARGV[8] == '1'
local request = ARGV[9] or ''
local keep_ms = fs_count(ARGV[10] or '')
local remote = mode == 'remote'
local batch, lease, scan_limit = fs_count(ARGV[3]), fs_count(ARGV[4]), fs_count(ARGV[5])
fs_effects()

if batch == nil or batch < 1 then return fs_err(FS_BAD_ARGUMENT, 'batch must be an integer >= 1') end
if lease == nil or lease < 1 then return fs_err(FS_BAD_ARGUMENT, 'lease must be an integer >= 1 ms') end
if scan_limit == nil or scan_limit < batch then
  return fs_err(FS_BAD_ARGUMENT, 'scan limit must be an integer >= batch')
end
if worker == '' then return fs_err(FS_BAD_ARGUMENT, 'worker id is empty') end
if mode ~= '' and mode ~= 'coord' and mode ~= 'remote' then
  return fs_err(FS_BAD_ARGUMENT, 'shard mode must be empty, coord or remote')
end

-- A repeat of a claim whose reply was lost: the first reply again, with the jobs that still
-- run under its tokens, their leases renewed (see ARGV[9]).
local request_key = request ~= '' and (tag .. ':claimreq:' .. request) or nil
if request_key then
  local first = redis.call('GET', request_key)
  if first then
    local r = cjson.decode(first)
    local now0 = fs_now()
    local renewed = fs_int(now0 + lease)
    local rows, hosts = cjson.decode(r[3]), r[6] and cjson.decode(r[6])
    local kept_rows, kept_hosts = {}, {}
    for i, row in ipairs(rows) do
      local f = redis.call('HMGET', tag .. ':job:' .. row[1], 'state', 'token')
      if f[1] == 'running' and f[2] == row[4] then
        local prio = redis.call('HGET', tag .. ':task:' .. row[2], 'prio')
        local due = fs_due_holding(due_keys, due_keys[prio] or due_keys.normal, row[1])
        redis.call('ZADD', due, 'XX', renewed, row[1])
        redis.call('ZADD', fs_leases_of(due), renewed, row[1])
        kept_rows[#kept_rows + 1] = row
        if hosts then kept_hosts[#kept_hosts + 1] = hosts[i] end
      end
    end
    r[1], r[2], r[3] = now0, tonumber(r[2]), cjson.encode(kept_rows)
    if hosts then r[6] = cjson.encode(kept_hosts) end
    return r
  end
end

local now = fs_now()
local now_text = fs_int(now)
local expiry = now + lease
local expiry_text = fs_int(expiry)
local claimed, lost, schedules = {}, {}, {}
local taken = 0
local tasks = {}     -- task id -> cached {key, state, max_running, running, claimed, ...}
local task_order = {}
local cancels = {}   -- task id -> ids cancelled by this call
local cancel_order = {}

local function task_of(task_id)
  local t = tasks[task_id]
  if t == nil then
    local key = tag .. ':task:' .. task_id
    local f = redis.call('HMGET', key, 'state', 'max_running', 'idempotent', 'max_attempts', 'running', 'prio',
      'exclusive')
    t = {key = key, id = task_id, state = f[1] or 'gone', max_running = fs_num(f[2]),
         idempotent = f[3] == '1', max_attempts = fs_num(f[4]), running = fs_num(f[5]),
         prio = f[6] or 'normal', claimed = 0, exclusive = f[7] == '1'}
    tasks[task_id] = t
    task_order[#task_order + 1] = task_id
  end
  return t
end

local leases = fs_leases_of(due_keys.urgent)
local busy = tag .. ':busy'
local glimit, gbusy, gholds = tag .. ':glimit', tag .. ':gbusy', tag .. ':gholds'

-- The limited groups of a host (its hash's `limits`, written at submit and by `groups
-- limit`), read once per host per call; none at all (no host hash read) while no group has a
-- limit, the common case.
local any_limit = remote or redis.call('EXISTS', glimit) == 1
local host_limits = {}
local NO_LIMITS = {}
local function limits_of(host)
  if not any_limit then return NO_LIMITS end
  local l = host_limits[host]
  if l == nil then
    l = {}
    local text = redis.call('HGET', tag .. ':host:' .. host, 'limits')
    if text then
      for g in string.gmatch(text, '[^,]+') do l[#l + 1] = g end
    end
    host_limits[host] = l
  end
  return l
end

-- Each group's limit (false: none) and running count, read once per call; the counts this
-- call adds are kept here too.
local group_state = {}
local function group_of(g)
  local s = group_state[g]
  if s == nil then
    local max = redis.call('HGET', glimit, g)
    s = {max = max and fs_num(max) or false, busy = fs_num(redis.call('HGET', gbusy, g))}
    group_state[g] = s
  end
  return s
end

-- The first of the host's groups whose running jobs are at its limit, or nil.
local function group_full(host)
  if not host or host == '' then return nil end
  for _, g in ipairs(limits_of(host)) do
    local s = group_of(g)
    if s.max and s.busy >= s.max then return g end
  end
  return nil
end

-- A claimed job counts in each limited group of its host (remembered in gholds).
local function take_groups(host, id)
  if not host or host == '' then return end
  local taken
  for _, g in ipairs(limits_of(host)) do
    local s = group_of(g)
    if s.max then
      redis.call('HINCRBY', gbusy, g, 1)
      s.busy = s.busy + 1
      taken = taken and (taken .. ',' .. g) or g
    end
  end
  if taken then redis.call('HSET', gholds, id, taken) end
end

-- A job that may not start now waits in list `q` (state hostwait), without an attempt.
local function wait_in(due, id, jk, t, host, q, detail)
  redis.call('HSET', jk, 'state', 'hostwait', 'waitq', q)
  redis.call('ZREM', due, id)
  redis.call('RPUSH', q, id)
  fs_emit(events, now, 'park', {'task', t.id, 'job', id, 'host', host, 'detail', cjson.encode(detail)})
end

-- The job holding `host` when it is not `id` and still runs there; nil when the host is free
-- (no holder, or a holder that has stopped running: its hold is stale).
local function host_busy(host, id)
  if not host or host == '' then return nil end
  local holder = redis.call('HGET', busy, host)
  if not holder or holder == id then return nil end
  if redis.call('HGET', tag .. ':job:' .. holder, 'state') == 'running' then return holder end
  -- A job of another shard holds it through a place (places.lua) until its place lease ends.
  local until_ms = redis.call('ZSCORE', tag .. ':placed', holder)
  if until_ms and tonumber(until_ms) > now then return holder end
  return nil
end

-- quiet: the job's end is recorded already (its lost event, outcome cancelled): no second one.
local function cancel(due, id, jk, t, quiet)
  if t.state ~= 'gone' then fs_forget_failed_host(t.key, jk) end
  redis.call('DEL', jk)
  redis.call('ZREM', due, id)
  if t.state ~= 'gone' then redis.call('HINCRBY', t.key, 'cancelled', 1) end
  if quiet then return end
  if cancels[t.id] == nil then
    cancels[t.id] = {}
    cancel_order[#cancel_order + 1] = t.id
  end
  table.insert(cancels[t.id], id)
end

-- Decimal text of small integers (attempts, tokens), formatted once per call: redis.call and
-- cjson format a Lua number as a float, several times dearer than passing text.
local int_texts = {}
local function int_text(n)
  local s = int_texts[n]
  if s == nil then
    s = fs_int(n)
    int_texts[n] = s
  end
  return s
end

-- f: the job hash fields read by visit() (HMGET order: state, attempt, token, host, due, window,
-- wclose). The hot path: the event is written inline, numbers are passed as text.
local function take(due, id, jk, f, t, after_loss, pairs_out)
  local attempt, token = (tonumber(f[2]) or 0) + 1, (tonumber(f[3]) or 0) + 1
  attempt, token = int_texts[attempt] or int_text(attempt), int_texts[token] or int_text(token)
  local host, window, wclose = f[4], f[6], f[7]
  redis.call('HSET', jk, 'state', 'running', 'owner', worker, 'attempt', attempt, 'token', token)
  local groups
  if remote then
    groups = table.concat(limits_of(host), ',')
  else
    if t.exclusive then redis.call('HSET', busy, host, id) end
    take_groups(host, id)
  end
  t.running = t.running + 1
  t.claimed = t.claimed + 1  -- added to the task's running counter once, at the end
  pairs_out[#pairs_out + 1] = expiry_text
  pairs_out[#pairs_out + 1] = id
  redis.call('XADD', events, '*', 'kind', 'claim', 'ts', now_text, 'task', t.id, 'job', id,
    'host', host, 'attempt', attempt, 'token', token, 'worker', worker)
  if not window or window == '' then window = cjson.null end
  if not wclose or wclose == '' then wclose = cjson.null end
  if remote and (t.exclusive or groups ~= '') then
    claimed[#claimed + 1] = {id, t.id, host, token, attempt, f[5] or '', window, wclose, after_loss,
      t.exclusive and '1' or '0', groups}
  else
    claimed[#claimed + 1] = {id, t.id, host, token, attempt, f[5] or '', window, wclose, after_loss}
  end
  taken = taken + 1
end

-- The job's lease expired while it was running: its worker stopped renewing it.
-- Returns true when the job is to be claimed again (after_loss).
local function lose(due, id, jk, j, t)
  local attempt, owner = fs_num(j.attempt), j.owner or '?'
  redis.call('ZREM', leases, id)
  fs_free_host(tag, j.host, id, wake, events, now)
  group_state = {}  -- it gave back group counts: read them again
  redis.call('HINCRBY', t.key, 'running', -1)
  redis.call('HINCRBY', t.key, 'lost', 1)
  t.running = t.running - 1
  local retry = t.idempotent and attempt < t.max_attempts
  local head = 'worker ' .. owner .. ' stopped renewing its lease'
  -- When the lease ran out: the last heartbeat that reached Redis renewed it until then.
  local expired = redis.call('ZSCORE', due, id)
  expired = expired and fs_int(tonumber(expired)) or ''
  local fields = {'task', t.id, 'job', id, 'host', j.host, 'attempt', fs_int(attempt),
    'token', j.token or '0', 'worker', owner, 'expired', expired}
  local function emit(outcome, message)
    fields[#fields + 1], fields[#fields + 2] = 'outcome', outcome
    fields[#fields + 1], fields[#fields + 2] = 'error', message
    fs_emit(events, now, 'lost', fields)
  end
  if retry and t.state == 'active' then
    emit('retry', head .. '; run again because the action is idempotent')
    return true
  end
  local pq = tag .. ':parked:' .. t.id
  if retry and t.state == 'paused' then
    emit('held', head .. '; runs again when the task resumes')
    redis.call('HSET', jk, 'state', 'held')
    redis.call('HDEL', jk, 'owner')
    redis.call('ZREM', due, id)
    redis.call('ZADD', tag .. ':held:' .. t.id, fs_num(j.due), id)
  elseif t.state ~= 'active' and t.state ~= 'paused' then
    emit('cancelled', head .. '; not run again because the task is ' .. t.state)
    cancel(due, id, jk, t, true)
  else
    local why
    if not t.idempotent then
      why = head .. '; not run again because the action is not idempotent'
    else
      why = head .. '; not run again because attempt ' .. fs_int(attempt) .. ' of ' ..
        fs_int(t.max_attempts) .. ' was the last'
    end
    -- The token moves so that a late ack, fail or extend of the lost worker is refused as stale.
    redis.call('HINCRBY', jk, 'token', 1)
    emit('failed', why)
    fs_bury(jk, id, due, dead, now, why)
    fs_count_lost_failure(t.key, jk)  -- the worker's loss, not the host's failure: no threshold
    lost[#lost + 1] = id
  end
  -- The freed slot goes to a parked job, in the task's class now (not the class of the lost
  -- job's lease entry, which is the old one while Queue.reprioritize moves the task).
  if t.max_running > 0 then
    fs_unpark(tag, pq, due_keys[t.prio] or due_keys.normal, wake, events, now, t.id)
  end
  return false
end

local function take_schedule(due, id, pairs_out)
  local sk = tag .. ':' .. id
  local f = redis.call('HMGET', sk, 'occurrence', 'token')
  if not f[1] then
    redis.call('ZREM', due, id)
    fs_emit(events, now, 'cancel', {'schedule', string.sub(id, 7), 'error', 'no schedule hash for this due entry'})
    return
  end
  local token = fs_int(fs_num(f[2]) + 1)
  redis.call('HSET', sk, 'token', token, 'owner', worker, 'state', 'firing')
  pairs_out[#pairs_out + 1] = expiry_text
  pairs_out[#pairs_out + 1] = id
  schedules[#schedules + 1] = {string.sub(id, 7), token, f[1]}
  taken = taken + 1
end

-- Claim the job, unless a limit that holds across tasks makes it wait (without an attempt).
local function admit(due, id, jk, f, t, after_loss, pairs_out)
  if remote then return take(due, id, jk, f, t, after_loss, pairs_out) end  -- places: shard 0
  if t.exclusive and host_busy(f[4], id) then
    -- Another task's job runs on this host: wait for it.
    wait_in(due, id, jk, t, f[4], tag .. ':hostq:' .. f[4], {host_busy = host_busy(f[4], id)})
    return
  end
  local full = group_full(f[4])
  if full then
    -- A group of its host has as many running jobs as its limit (across all tasks).
    wait_in(due, id, jk, t, f[4], tag .. ':gq:' .. full, {group_full = full})
    return
  end
  take(due, id, jk, f, t, after_loss, pairs_out)
end

local function visit(due, id, pairs_out)
  if string.sub(id, 1, 6) == 'sched:' then return take_schedule(due, id, pairs_out) end
  local jk = tag .. ':job:' .. id
  local f = redis.call('HMGET', jk, 'state', 'attempt', 'token', 'host', 'due', 'window', 'wclose')
  if not f[1] then
    -- No job hash: an orphan entry (nothing can run it). Drop it so it cannot block the head.
    redis.call('ZREM', due, id)
    fs_emit(events, now, 'cancel', {'task', fs_task_of(id) or '', 'job', id, 'count', '1', 'jobs', id,
      'error', 'no job hash for this due entry'})
    return
  end
  local state = f[1]
  local task_id = fs_task_of(id) or ''
  local t = tasks[task_id] or task_of(task_id)
  if t.state == 'gone' then
    cancel(due, id, jk, t)
    return
  end
  local home = due_keys[t.prio] or due_keys['normal']
  if home ~= due and state == 'pending' and t.state == 'active' then
    -- Queue.reprioritize is moving this task to another class: file the job there, at its
    -- score, and claim it in its class's turn (this call's, or the next one's).
    local score = redis.call('ZSCORE', due, id)
    redis.call('ZREM', due, id)
    if not redis.call('ZSCORE', home, id) then redis.call('ZADD', home, score, id) end
    fs_requeued(tag)  -- in a class whose last reorder has not placed it
    return
  end
  if state == 'running' then
    local j = {attempt = f[2], token = f[3], host = f[4], due = f[5], owner = redis.call('HGET', jk, 'owner')}
    -- Run again at once, within the limits: the lost run gave its host and group counts back,
    -- and other jobs of the group may have taken them meanwhile.
    if lose(due, id, jk, j, t) then admit(due, id, jk, f, t, true, pairs_out) end
    return
  end
  if t.state ~= 'active' and t.state ~= 'paused' then
    cancel(due, id, jk, t)
  elseif t.state == 'paused' then
    redis.call('HSET', jk, 'state', 'held')
    redis.call('ZREM', due, id)
    redis.call('ZADD', tag .. ':held:' .. t.id, fs_num(f[5]), id)
  elseif t.max_running > 0 and t.running >= t.max_running then
    redis.call('HSET', jk, 'state', 'parked')
    redis.call('ZREM', due, id)
    redis.call('RPUSH', tag .. ':parked:' .. t.id, id)
    fs_emit(events, now, 'park', {'task', t.id, 'job', id, 'host', f[4],
      'detail', '{"running":' .. fs_int(t.running) .. ',"max_running":' .. fs_int(t.max_running) .. '}'})
  else
    admit(due, id, jk, f, t, false, pairs_out)
  end
end

local visited = 0

-- Visit due entries of one set; the ones taken get their lease, in the set and in `leases`.
local function visit_all(due, ids)
  local pairs_out = {}
  for _, id in ipairs(ids) do
    visited = visited + 1
    visit(due, id, pairs_out)
  end
  if #pairs_out > 0 then
    redis.call('ZADD', due, 'XX', unpack(pairs_out))
    redis.call('ZADD', leases, unpack(pairs_out))
  end
end

-- Places of other shards' jobs whose place lease ran out: their hosts and group counts are free.
if mode == 'coord' then
  if fs_sweep_places(tag, wake, events, now, batch) > 0 then group_state = {} end
end

-- Expired leases first (see the header): each is visited in the due set holding its entry.
local expired = redis.call('ZRANGE', leases, '-inf', now_text, 'BYSCORE', 'LIMIT', '0', fs_int(batch))
for _, id in ipairs(expired) do
  if taken >= batch then break end
  redis.call('ZREM', leases, id)
  local due
  if string.sub(id, 1, 6) == 'sched:' then
    due = due_keys.urgent
  else
    local t = task_of(fs_task_of(id) or '')  -- task_of reads each task once per call
    due = fs_due_holding(due_keys, due_keys[t.prio] or due_keys.normal, id)
  end
  local score = redis.call('ZSCORE', due, id)
  if score and tonumber(score) <= now then visit_all(due, {id}) end
end
for _, prio in ipairs({'urgent', 'normal', 'bulk'}) do
  local due = due_keys[prio]
  while taken < batch and visited < scan_limit do
    local want = math.min(batch - taken, scan_limit - visited)
    local ids = redis.call('ZRANGE', due, '-inf', now_text, 'BYSCORE', 'LIMIT', '0', fs_int(want))
    if #ids == 0 then break end
    visit_all(due, ids)
  end
end

for _, task_id in ipairs(task_order) do
  if tasks[task_id].claimed > 0 then redis.call('HINCRBY', tasks[task_id].key, 'running', tasks[task_id].claimed) end
end
for _, task_id in ipairs(cancel_order) do
  local ids = cancels[task_id]
  fs_emit(events, now, 'cancel', {'task', task_id, 'count', fs_int(#ids), 'jobs', table.concat(ids, ' '),
    'error', 'the task is ' .. tasks[task_id].state})
end

local next_due = -1
for _, prio in ipairs({'urgent', 'normal', 'bulk'}) do
  local head = redis.call('ZRANGE', due_keys[prio], 0, 0, 'WITHSCORES')
  if head[2] ~= nil and (next_due < 0 or tonumber(head[2]) < next_due) then next_due = tonumber(head[2]) end
end
local reply = {now, next_due, cjson.encode(claimed), lost, cjson.encode(schedules)}
if with_hosts then
  local hosts = {}
  for i, row in ipairs(claimed) do
    -- pcall: the claim's writes are done; a key that is not a hash reads as an unknown host
    -- (the worker fails that job with a clear message) rather than losing the whole reply
    local h = redis.pcall('HGETALL', tag .. ':host:' .. row[3])
    if h.err then h = {} end
    hosts[i] = h
  end
  reply[6] = cjson.encode(hosts)
end
if request_key and (taken > 0 or #lost > 0) then
  -- Numbers as text: cjson would print a ms epoch with too few digits.
  local kept = {fs_int(now), fs_int(next_due)}
  for i = 3, #reply do kept[i] = reply[i] end
  redis.call('SET', request_key, cjson.encode(kept), 'PX', keep_ms or lease)
end
return reply
