--[[ places.lua: shard 0 of a sharded queue keeps the limits that hold across tasks (host
exclusivity, group limits) for the jobs of every other shard (docs/architecture.md "Shards").

A job of shard s >= 1 is claimed there without these checks (claim.lua, mode 'remote'); the
worker then takes its places here. A place is leased like the job: it ends when the job stops
running (mode 'free'), or when its lease runs out because the worker stopped renewing it (mode
'extend', with the job's lease; expired places are freed by every call of this script and by
shard 0's claims).

KEYS[1]   events  {P}:events  STREAM (shard 0's; unpark events of shard 0's own waiters)
ARGV[1]   tag: "{prefix}" of shard 0 (busy, glimit, gbusy, gholds, placed, places, hostq:*, gq:*)
ARGV[2]   wake channel of shard 0
ARGV[3]   mode: 'take' | 'free' | 'extend'
ARGV[4]   lease (ms, >= 1): a place taken or extended holds until now + lease
ARGV[5]   JSON list of entries:
            take:   [job id, token, host, exclusive ('1'/'0'), limited groups (comma-separated)]
            free:   [job id, token]
            extend: [job id, token]
Returns   JSON list, one entry per input entry:
            take:   [1] placed | [0, 'host_busy', holder job] | [0, 'group_full', group]
                    | [0, 'stale', token]: the job holds a place under a newer token (it
                    was claimed again since this claim: this claim must not run it)
            free:   1 freed | 0 (no such place, or it belongs to another token)
            extend: 1 renewed | 0 (the place is gone: it ran out, or the job was placed again)
Errors    {-4 BAD_ARGUMENT, message}; nothing is written.

A job placed again under a new token (claimed again after its worker lost it) gives back what
it held under the old one first, so a group never counts one job twice. A take under an older
token than the place's (a stale worker's call arriving late) is refused and changes nothing.
]]
local events = KEYS[1]
local tag, wake, mode = ARGV[1], ARGV[2], ARGV[3]
local lease = fs_count(ARGV[4])
fs_effects()

if mode ~= 'take' and mode ~= 'free' and mode ~= 'extend' then
  return fs_err(FS_BAD_ARGUMENT, 'mode must be take, free or extend')
end
if lease == nil or lease < 1 then return fs_err(FS_BAD_ARGUMENT, 'lease must be an integer >= 1 ms') end
local ok, entries = pcall(cjson.decode, ARGV[5] or '')
if not ok or type(entries) ~= 'table' then return fs_err(FS_BAD_ARGUMENT, 'entries must be a JSON list') end
for _, e in ipairs(entries) do
  if type(e) ~= 'table' or type(e[1]) ~= 'string' or e[1] == '' or fs_count(e[2]) == nil then
    return fs_err(FS_BAD_ARGUMENT, 'each entry starts with a job id and a fencing token')
  end
  if mode == 'take' and (type(e[3]) ~= 'string' or type(e[5]) ~= 'string') then
    return fs_err(FS_BAD_ARGUMENT, 'job ' .. e[1] .. ': a take entry needs host, exclusive and groups')
  end
end

local now = fs_now()
local placed, places = tag .. ':placed', tag .. ':places'
local busy, glimit, gbusy, gholds = tag .. ':busy', tag .. ':glimit', tag .. ':gbusy', tag .. ':gholds'
local expiry = fs_int(now + lease)
fs_sweep_places(tag, wake, events, now, 64)

-- The place of job `id` under `token` ('' = any token), as its host and token, or nil.
local function place_of(id, token)
  local v = redis.call('HGET', places, id)
  if not v then return nil end
  local host, held = string.match(v, '^(.*)|(%d+)$')
  if token ~= '' and held ~= token then return nil end
  return host or '', tonumber(held) or 0
end

local function free(id, host)
  redis.call('ZREM', placed, id)
  redis.call('HDEL', places, id)
  fs_free_host(tag, host, id, wake, events, now)
end

local function holder_of(host, id)
  local holder = redis.call('HGET', busy, host)
  if not holder or holder == id then return nil end
  if redis.call('HGET', tag .. ':job:' .. holder, 'state') == 'running' then return holder end
  local until_ms = redis.call('ZSCORE', placed, holder)
  if until_ms and tonumber(until_ms) > now then return holder end
  return nil
end

local out = {}
for i, e in ipairs(entries) do
  local id, token = e[1], fs_int(fs_count(e[2]))
  if mode == 'take' then
    local host, exclusive, groups = e[3], e[4] == '1', e[5]
    local old, old_token = place_of(id, '')
    local refused
    if old and old_token > tonumber(token) then
      refused = {0, 'stale', tostring(old_token)}
    elseif old then
      free(id, old)  -- placed again (a new claim of the same job)
    end
    local holder = not refused and exclusive and host ~= '' and holder_of(host, id)
    if refused then
      -- nothing changes: the newer claim's place stands
    elseif holder then
      refused = {0, 'host_busy', holder}
    else
      local limited = {}
      for g in string.gmatch(groups, '[^,]+') do
        local max = redis.call('HGET', glimit, g)
        if max then
          if fs_num(redis.call('HGET', gbusy, g)) >= fs_num(max) then
            refused = {0, 'group_full', g}
            break
          end
          limited[#limited + 1] = g
        end
      end
      if not refused then
        if exclusive and host ~= '' then redis.call('HSET', busy, host, id) end
        for _, g in ipairs(limited) do redis.call('HINCRBY', gbusy, g, 1) end
        if #limited > 0 then redis.call('HSET', gholds, id, table.concat(limited, ',')) end
        redis.call('ZADD', placed, expiry, id)
        redis.call('HSET', places, id, host .. '|' .. token)
      end
    end
    out[i] = refused or {1}
  elseif mode == 'free' then
    local host = place_of(id, token)
    if host then free(id, host) end
    out[i] = host and 1 or 0
  else
    if place_of(id, token) then
      redis.call('ZADD', placed, 'XX', expiry, id)
      out[i] = 1
    else
      out[i] = 0
    end
  end
end
return cjson.encode(out)
