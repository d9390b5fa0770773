--[[ _lib.lua: helpers shared by the verb scripts of scheduler/queue/lua/.

scheduler/queue/client.py prepends this file to every verb file before register_script, so each verb
is one self-contained script on the server; there is no other include mechanism. This file
defines local functions only and touches no key of its own: every key a helper writes is handed
to it by the verb script.

Time: fs_now() (and fs_clock(), with the microseconds) reads the Redis clock (TIME), never a
worker's clock. Since Redis 5 scripts are replicated by their effects, so a write after TIME is
allowed; fs_effects() asks for it explicitly for servers configured otherwise (a no-op on
Redis 7).

Derived keys (cluster safety): a helper that reaches a job hash named by a member of a set
(fs_unpark pops a job id from a parked list) builds the key as <tag>:job:<id>, where <tag> is
the "{prefix}" hash tag the caller passed as an argument. Every key of a shard carries that one
tag, so the derived key hashes to the same slot as the keys in KEYS and the script stays in one
slot on Redis Cluster.

Status codes: the FS_ constants below, one for each member of scheduler.errors.Code (same name,
same value; tests/test_queue_scripts.py checks it). -6 is not used: enqueue skips a job id that
already exists without an error.
]]

local FS_OK, FS_STALE_TOKEN, FS_UNKNOWN_JOB, FS_UNKNOWN_TASK = 0, -1, -2, -3
local FS_BAD_ARGUMENT, FS_NOT_RUNNING, FS_TASK_NOT_ACTIVE = -4, -5, -7

local function fs_effects()
  if redis.replicate_commands then redis.replicate_commands() end
end

-- The Redis clock: whole ms since the epoch, and the microseconds past them (0-999).
local function fs_clock()
  local t = redis.call('TIME')
  local us = tonumber(t[2])
  return tonumber(t[1]) * 1000 + math.floor(us / 1000), us % 1000
end

-- The Redis clock in ms since the epoch (one value, wherever it is used).
local function fs_now()
  return (fs_clock())
end

-- An integer as a decimal string (tostring would print 1.7e+12 for big doubles).
local function fs_int(x)
  return string.format('%d', x)
end

-- A number from a hash field that may be missing (false) or empty.
local function fs_num(x)
  return tonumber(x) or 0
end

-- A non-negative integer argument, or nil.
local function fs_count(x)
  local n = tonumber(x)
  if n == nil or n < 0 or n ~= math.floor(n) then return nil end
  return n
end

-- The task id of a job id "<task id>.<n>" (the job hash does not store it).
local function fs_task_of(job_id)
  return string.match(job_id, '^(.+)%.%d+$')
end

-- An error reply: {code, message}.
local function fs_err(code, message)
  return {code, message}
end

-- Reply memos (docs/reliability.md, "Ambiguous replies"). A verb that ends a job's run (ack,
-- fail, release, defer) remembers its outcome under the token it was given, in
-- <tag>:memo:<job id>:<token> ("<verb> <a> <b>"), for `memo_ms` (a lease and the time a node
-- may wait for a reply, Queue.memo_ms). When the same token's same verb comes again (its first
-- reply was lost and the node, or redis-py, sent it again), fs_recall finds it: the verb
-- answers the first outcome and writes nothing. One memo per run (job and token): a later run
-- of the job cannot overwrite it. Only the refusal branches look, so a verb that takes effect
-- pays one SET and no read.
local function fs_memo_key(tag, id, token)
  return tag .. ':memo:' .. id .. ':' .. fs_int(tonumber(token))
end

local function fs_remember(tag, id, token, verb, a, b, memo_ms)
  redis.call('SET', fs_memo_key(tag, id, token), verb .. ' ' .. a .. ' ' .. b, 'PX', memo_ms)
end

-- The first outcome {a, b} of `verb` under `token` for job `id`, or nil if there is none.
local function fs_recall(tag, id, token, verb)
  local memo = redis.call('GET', fs_memo_key(tag, id, token))
  if not memo then return nil end
  local v, a, b = string.match(memo, '^(%S+) (%S*) (%S*)$')
  if v ~= verb then return nil end
  return {a, b}
end

-- Append one audit event: kind, ts, then the flat list of field/value pairs.
local function fs_emit(events, now, kind, fields)
  redis.call('XADD', events, '*', 'kind', kind, 'ts', fs_int(now), unpack(fields))
end

-- An operator event's fields with the acting principal appended (JSON: via, role, tenant,
-- source; Principal.audit); '' (a service acting under its own name) appends nothing.
local function fs_signed(fields, principal)
  if principal and principal ~= '' then
    fields[#fields + 1], fields[#fields + 2] = 'principal', principal
  end
  return fields
end

-- A task's jobs newly queued (enqueue.lua) or staged (stage.lua): the task's total and span,
-- the enqueued stat, one enqueue event (job ids, due; `extra` fields after). The task's total.
local function fs_count_enqueued(task_key, stats, events, now, task_id, added, span, due, extra)
  local total = fs_num(redis.call('HGET', task_key, 'total'))
  if #added == 0 then return total end
  total = redis.call('HINCRBY', task_key, 'total', #added)
  redis.call('HSET', task_key, 'span', fs_int(span))
  redis.call('HINCRBY', stats, 'enqueued', #added)
  local fields = {'task', task_id, 'count', fs_int(#added), 'jobs', table.concat(added, ' '),
    'due', fs_int(due)}
  for _, v in ipairs(extra or {}) do fields[#fields + 1] = v end
  fs_emit(events, now, 'enqueue', fields)
  return total
end

-- Put a job into a due set at score; publish on the wake channel when it becomes the head of
-- that set, so sleeping workers wake up earlier than they planned.
local function fs_put_due(due, id, score, wake)
  local head = redis.call('ZRANGE', due, 0, 0, 'WITHSCORES')
  redis.call('ZADD', due, score, id)
  if head[2] == nil or score < tonumber(head[2]) then
    redis.call('PUBLISH', wake, fs_int(score))
  end
end

-- The shard's leases set {P}:leases (a running job's or firing schedule entry's id -> its lease
-- expiry), named from any due set key of the shard: same hash tag, so the same cluster slot.
local function fs_leases_of(due_key)
  return (string.gsub(due_key, ':due:%a+$', ':leases'))
end

-- The staged-waves set {P}:waves:<task> of a task, named from its held set {P}:held:<task>
-- (same hash tag, so the same cluster slot).
local function fs_waves_of(held_key)
  return (string.gsub(held_key, ':held:([^:]+)$', ':waves:%1'))
end

-- The due set of a priority class; due_keys = {urgent=..., normal=..., bulk=...}.
local function fs_due_of(due_keys, prio)
  return due_keys[prio] or due_keys['normal']
end

-- The due set holding a job's entry: `home` (its task's class set) or, while
-- Queue.reprioritize moves the task (reprioritize.lua), another class's set. `home` if none.
local function fs_due_holding(due_keys, home, id)
  if redis.call('ZSCORE', home, id) then return home end
  for _, key in pairs(due_keys) do
    if key ~= home and redis.call('ZSCORE', key, id) then return key end
  end
  return home
end

-- Drop a job's entry from every class set but `home` (a lease entry left in the class the
-- task had when the job was claimed), before the job is filed into `home` or buried.
local function fs_drop_elsewhere(due_keys, home, id)
  for _, key in pairs(due_keys) do
    if key ~= home then redis.call('ZREM', key, id) end
  end
end

-- A running job of the task finished (slot freed): running - 1, counter + 1 (if given).
local function fs_finish(task_key, counter)
  redis.call('HINCRBY', task_key, 'running', -1)
  if counter then redis.call('HINCRBY', task_key, counter, 1) end
end

-- A job went back into a due set at its own (old) due time (unparked, released by a worker,
-- resumed, moved to another class): the stats' `requeued` counter tells overload.lua that the
-- overdue range holds something no reorder has placed yet. Without it such a job, due before the last reorder's cut, would wait behind every
-- job that reorder moved below the head until the backlog drains (a small task's job that met
-- a big task's job on the same host was served last, not first).
local function fs_requeued(tag)
  redis.call('HINCRBY', tag .. ':stats', 'requeued', 1)
end

-- One parked job of the task goes back into its due set at its own due time. Ids whose job
-- is gone or no longer parked (cancelled meanwhile) are skipped; at most a few pops per call.
local function fs_unpark(tag, parked, due, wake, events, now, task_id)
  for _ = 1, 8 do
    local id = redis.call('LPOP', parked)
    if not id then return nil end
    local jk = tag .. ':job:' .. id
    local j = redis.call('HMGET', jk, 'state', 'due', 'host')
    if j[1] == 'parked' then
      redis.call('HSET', jk, 'state', 'pending')
      fs_put_due(due, id, fs_num(j[2]), wake)
      fs_requeued(tag)
      fs_emit(events, now, 'unpark', {'task', task_id, 'job', id, 'host', j[3], 'due', j[2]})
      return id
    end
  end
  return nil
end

-- Limits that hold across tasks. A job that may not start because of one waits in a list
-- (its hash: state 'hostwait', field 'waitq' naming the list) without counting an attempt:
--   host exclusivity (a task's `exclusive` flag): {tag}:busy maps a host to the job holding
--     it; waiters in {tag}:hostq:<host>;
--   group limits ({tag}:glimit: group -> most jobs running at once on its hosts, across all
--     tasks; a host hash's `limits` field lists its limited groups): {tag}:gbusy counts the
--     running jobs per group, {tag}:gholds remembers which groups each running job counts in
--     (so a freed job gives back exactly what it took, whatever changed meanwhile); waiters
--     in {tag}:gq:<group>.
-- Every waiter of a list goes back to its task's due set at its own due time (event unpark)
-- when what it waits for may have room: the first claimed takes it, the others wait again.
-- Moving them all (not just the first) means a waiter cancelled meanwhile never strands the
-- rest.
local function fs_release_waiters(tag, q, wake, events, now)
  local waiting = redis.call('LRANGE', q, 0, -1)
  if #waiting == 0 then return end
  redis.call('DEL', q)
  for i = 1, #waiting do
    local wid = waiting[i]
    local wk = tag .. ':job:' .. wid
    local j = redis.call('HMGET', wk, 'state', 'due', 'host', 'waitq')
    if j[1] == 'hostwait' and j[4] == q then
      local task_id = fs_task_of(wid) or ''
      local prio = redis.call('HGET', tag .. ':task:' .. task_id, 'prio') or 'normal'
      redis.call('HSET', wk, 'state', 'pending')
      redis.call('HDEL', wk, 'waitq')
      fs_put_due(tag .. ':due:' .. prio, wid, fs_num(j[2]), wake)
      fs_requeued(tag)
      fs_emit(events, now, 'unpark', {'task', task_id, 'job', wid, 'host', j[3], 'due', j[2]})
    end
  end
end

-- The job `id` stops running on `host` (ack, fail, retry, release, defer, lost): it gives back
-- the host it held and the group counts it took, and their waiters go back to their due sets.
local function fs_free_host(tag, host, id, wake, events, now)
  local busy = tag .. ':busy'
  if host and host ~= '' and redis.call('HGET', busy, host) == id then
    redis.call('HDEL', busy, host)
    fs_release_waiters(tag, tag .. ':hostq:' .. host, wake, events, now)
  end
  local holds = tag .. ':gholds'
  local groups = redis.call('HGET', holds, id)
  if groups then
    redis.call('HDEL', holds, id)
    for g in string.gmatch(groups, '[^,]+') do
      if redis.call('HINCRBY', tag .. ':gbusy', g, -1) <= 0 then
        redis.call('HDEL', tag .. ':gbusy', g)
      end
      fs_release_waiters(tag, tag .. ':gq:' .. g, wake, events, now)
    end
  end
end

-- Places (a sharded queue, shard 0 only; places.lua): a job of another shard that holds a host
-- or counts in a group here is in {tag}:placed (job id -> place lease expiry, ms) and
-- {tag}:places (job id -> '<host>|<token>'). Up to `limit` places whose lease ran out (their
-- worker stopped renewing them) are freed like a job that stopped running. Returns how many.
local function fs_sweep_places(tag, wake, events, now, limit)
  local placed = tag .. ':placed'
  local gone = redis.call('ZRANGE', placed, '-inf', fs_int(now), 'BYSCORE', 'LIMIT', '0', fs_int(limit))
  for _, id in ipairs(gone) do
    local place = redis.call('HGET', tag .. ':places', id) or ''
    redis.call('ZREM', placed, id)
    redis.call('HDEL', tag .. ':places', id)
    fs_free_host(tag, string.match(place, '^(.*)|') or '', id, wake, events, now)
  end
  return #gone
end

-- A job's attempt failed (for good or to be retried): the first time for this job, count its
-- host in the task's failed_hosts (and name the first FAILED_NAMES of them). The count.
-- Also true when this is the job's first failed attempt.
local FAILED_NAMES = 10
local function fs_append_name(key, field, host)
  local names = redis.call('HGET', key, field)
  redis.call('HSET', key, field, (names and names ~= '') and (names .. ',' .. (host or '?')) or (host or '?'))
end

local function fs_note_failed_host(task_key, jk, host)
  if redis.call('HSETNX', jk, 'failed_once', '1') == 0 then
    return fs_num(redis.call('HGET', task_key, 'failed_hosts')), false
  end
  local n = redis.call('HINCRBY', task_key, 'failed_hosts', 1)
  if n <= FAILED_NAMES then fs_append_name(task_key, 'failed_names', host) end
  return n, true
end

-- The job's host no longer counts in its task's failed_hosts (nor among failed_names): its
-- job is retried by an operator (retry_failed.lua) or cancelled (its hash goes). Call before
-- the job hash is deleted. A host counts once, and only while its job may still fail the task.
local function fs_forget_failed_host(task_key, jk)
  if redis.call('HDEL', jk, 'failed_once') == 0 then return end
  redis.call('HINCRBY', task_key, 'failed_hosts', -1)
  local host = redis.call('HGET', jk, 'host')
  local names = redis.call('HGET', task_key, 'failed_names')
  if not (host and names) then return end
  local kept, dropped = {}, false
  for name in string.gmatch(names, '[^,]+') do
    if name == host and not dropped then dropped = true else kept[#kept + 1] = name end
  end
  redis.call('HSET', task_key, 'failed_names', table.concat(kept, ','))
end

-- A rollout in waves: the failure limit of a wave of `size` hosts (the task hash's
-- wave_limit, written as the wave is released): --max-failures as a percentage is taken of the
-- wave's hosts (wave_policy's max_failures as typed; rounded up, at least 1); as a count it is
-- the task's own (which the task's abort reaches first). 0 = none.
local function fs_wave_limit(policy_json, size, task_max)
  local ok, p = pcall(cjson.decode, policy_json or '')
  local asked = ok and type(p) == 'table' and p.max_failures or nil
  local pct = type(asked) == 'string' and string.match(asked, '^([%d%.]+)%%$')
  if pct then return math.min(size, math.max(1, math.ceil(size * tonumber(pct) / 100))) end
  return fs_num(task_max)
end

-- The current wave's failure count and names start again (a wave is released).
local function fs_wave_begins(task_key, size)
  local t = redis.call('HMGET', task_key, 'wave_policy', 'max_failures')
  redis.call('HSET', task_key, 'wave_size', fs_int(size), 'wave_failures', 0, 'wave_failed_names', '',
    'wave_limit', fs_int(fs_wave_limit(t[1], size, t[2])))
end

-- A rollout in waves: one more failure, as the task counts them (count_failures), in the
-- current wave. Reaching the wave's limit while the wave runs stops the rollout at once
-- (event wave-stop) and pauses an active task (event pause, operator rollout; wave_held = 1):
-- the wave's pending jobs are held, running ones finish. `tasks continue` resumes them, and the
-- next wave waits until this one has ended. A task not in waves has no wave_state: nothing.
local function fs_wave_failed(task_key, task_id, events, now, host)
  local w = redis.call('HMGET', task_key, 'wave_state', 'wave_limit', 'wave_size', 'wave', 'state',
    'count_failures')
  if not w[1] then return end
  local n = redis.call('HINCRBY', task_key, 'wave_failures', 1)
  if n <= FAILED_NAMES then fs_append_name(task_key, 'wave_failed_names', host) end
  local limit = fs_num(w[2])
  if w[1] ~= 'running' or limit <= 0 or n < limit or (w[5] ~= 'active' and w[5] ~= 'paused') then
    return
  end
  local why = 'wave ' .. (w[4] or '?') .. ': ' .. fs_int(n) .. ' of ' .. (w[3] or '?') .. ' hosts ' ..
    (w[6] == 'attempts' and 'failed an attempt' or 'failed') .. ' (' ..
    (redis.call('HGET', task_key, 'wave_failed_names') or '') .. (n > FAILED_NAMES and ', ...' or '') ..
    '), the limit is ' .. fs_int(limit)
  if w[5] == 'active' then why = why .. '; its pending jobs are held, running ones finish' end
  redis.call('HSET', task_key, 'wave_state', 'stopped', 'wave_why', why, 'wave_until', '')
  fs_emit(events, now, 'wave-stop', {'task', task_id, 'wave', w[4] or '', 'state', 'stopped', 'error', why})
  if w[5] == 'active' then
    redis.call('HSET', task_key, 'state', 'paused', 'wave_held', '1')
    fs_emit(events, now, 'pause', {'task', task_id, 'operator', 'rollout'})
  end
end

-- What counts against max_failures: 'attempts' (the default of new tasks: hosts that failed any
-- attempt) or 'final' (jobs failed for good; tasks created before the field existed).
local function fs_failure_count(t_mode, failed, hosts)
  if t_mode == 'attempts' then return hosts end
  return failed
end

-- The shard's set of aborted tasks whose sweep (cancel.lua, first = 2) has not finished
-- ({P}:aborting), named from a task hash key (same hash tag, so the same cluster slot). An
-- abort adds the task; the sweep's last chunk, or a revival, removes it. Nodes sweep what
-- it holds (workers.heartbeat), so a lost reply of the verb that aborted delays the sweep
-- and never strands it.
local function fs_aborting_of(task_key)
  return (string.gsub(task_key, ':task:[^:]+$', ':aborting'))
end

-- The limit crossed: abort an active or paused task (event abort, saying why). True if so.
local function fs_abort_over_limit(task_key, task_id, events, now, state, limit, mode, counted)
  if not (limit > 0 and counted >= limit and (state == 'active' or state == 'paused')) then
    return false
  end
  redis.call('HSET', task_key, 'state', 'aborted')
  redis.call('SADD', fs_aborting_of(task_key), task_id)
  local why
  if mode == 'attempts' then
    why = fs_int(counted) .. ' hosts failed an attempt (' ..
      (redis.call('HGET', task_key, 'failed_names') or '') .. (counted > FAILED_NAMES and ', ...' or '') ..
      '), the limit is ' .. fs_int(limit)
  else
    why = fs_int(counted) .. ' jobs failed, the limit is ' .. fs_int(limit)
  end
  fs_emit(events, now, 'abort', {'task', task_id, 'count', fs_int(counted), 'error',
    why .. '; pending jobs are cancelled, running ones finish'})
  return true
end

-- A failed attempt that would be retried: true when counting it crosses the task's limit (the
-- job is then failed for good instead, and fs_count_failure aborts the task).
local function fs_attempt_crosses_limit(task_key, task_id, events, now, jk, host)
  local hosts, first = fs_note_failed_host(task_key, jk, host)
  local t = redis.call('HMGET', task_key, 'max_failures', 'count_failures')
  local limit = fs_num(t[1])
  if t[2] == 'attempts' and limit > 0 and hosts >= limit then return true end
  if first and t[2] == 'attempts' then fs_wave_failed(task_key, task_id, events, now, host) end
  return false
end

-- Count a failure for good against the task. Crossing max_failures aborts an active or paused
-- task (event abort); a failure after the abort counts in overshoot. True if it aborted now.
local function fs_count_failure(task_key, task_id, events, now, jk, host)
  local failed = redis.call('HINCRBY', task_key, 'failed', 1)
  local hosts, first = fs_note_failed_host(task_key, jk, host)
  local t = redis.call('HMGET', task_key, 'state', 'max_failures', 'count_failures', 'lost_failed')
  if t[1] == 'aborted' then
    redis.call('HINCRBY', task_key, 'overshoot', 1)
    return false
  end
  -- Jobs lost with their worker are among `failed` but are no host's failure.
  if fs_abort_over_limit(task_key, task_id, events, now, t[1], fs_num(t[2]), t[3],
      fs_failure_count(t[3], failed - fs_num(t[4]), hosts)) then
    return true
  end
  if t[3] ~= 'attempts' or first then fs_wave_failed(task_key, task_id, events, now, host) end
  return false
end

-- A job failed for good because its run was lost with its worker (fail.lua blame worker; a
-- non-idempotent job lost at a lease expiry, claim.lua): failed + 1 and lost_failed + 1. It
-- is no failure of its host: max_failures, wave limits and failed_hosts do not count it. The
-- job's hash (jk, once buried) is marked `lost` = 1, so that retry_failed.lua takes it out of
-- lost_failed again: the views' `lost` (scheduler.progress) stays the SQL record's.
local function fs_count_lost_failure(task_key, jk)
  redis.call('HINCRBY', task_key, 'failed', 1)
  redis.call('HINCRBY', task_key, 'lost_failed', 1)
  if jk then redis.call('HSET', jk, 'lost', 1) end
end

-- A job fails for good: it keeps its hash (state failed, error), leaves its due set and goes
-- to the dead letter set, scored by the failure time.
local function fs_bury(jk, id, due, dead, now, err)
  redis.call('HSET', jk, 'state', 'failed', 'error', err)
  redis.call('HDEL', jk, 'owner')
  redis.call('ZREM', due, id)
  redis.call('ZREM', fs_leases_of(due), id)
  redis.call('ZADD', dead, now, id)
end
