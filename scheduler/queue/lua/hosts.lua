--[[ hosts.lua: write the connection data of many hosts into their hashes {P}:host:<name>, as a
submission copies them for the workers (scheduler.submission.fanout.write_hosts). One call per
chunk of hosts instead of one HSET each: the client packs one argument and reads one reply.

KEYS[1]   {P}:host:<first host of the chunk>: names the slot (every key of the shard shares it)
ARGV[1]   tag: the "{prefix}" of the shard
ARGV[2]   JSON list, one entry per host: [name, address, port, user, vars (JSON text), limits]
          (limits: the host's limited groups, comma-separated; '' none)
Returns   the number of hosts written
Errors    {-4 BAD_ARGUMENT, message}; nothing is written.
]]
local tag = ARGV[1]
local ok, hosts = pcall(cjson.decode, ARGV[2] or '')
fs_effects()
if not ok or type(hosts) ~= 'table' then return fs_err(FS_BAD_ARGUMENT, 'hosts must be a JSON list') end
for _, h in ipairs(hosts) do
  if type(h) ~= 'table' or type(h[1]) ~= 'string' or h[1] == '' or #h ~= 6 then
    return fs_err(FS_BAD_ARGUMENT, 'each host is [name, address, port, user, vars, limits]')
  end
  for i = 2, 6 do
    if type(h[i]) ~= 'string' then
      return fs_err(FS_BAD_ARGUMENT, 'host ' .. h[1] .. ': every field is text')
    end
  end
end
for _, h in ipairs(hosts) do
  redis.call('HSET', tag .. ':host:' .. h[1], 'address', h[2], 'port', h[3], 'user', h[4],
    'vars', h[5], 'limits', h[6])
end
return #hosts
