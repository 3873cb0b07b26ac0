-- The sandbox of daisy serve's Lua interpreter (Redis 7.0's script_lua.c rules), run once per
-- interpreter with the real globals table as its environment. Scripts see `G`, an empty
-- read-only proxy of the real globals: reading a missing global is an error, writing any is
-- "Attempt to modify a readonly table", and every library table is such a proxy too.
local real, bridge, sha1, killed, setresp, register, errtext, ccall, cpcall, acl_check = ...
local error, type, tostring, select, rawget, rawset, next, unpack =
      error, type, tostring, select, rawget, rawset, next, unpack
local raw_setmetatable, raw_pcall, raw_loadstring, setfenv, getfenv =
      setmetatable, pcall, loadstring, setfenv, getfenv
local concat = table.concat

local protected = raw_setmetatable({}, {__mode = 'k'})
local function ro_error() error("Attempt to modify a readonly table", 2) end
-- What getmetatable() answers for a protected table: itself read-only.
local mtview = raw_setmetatable({}, {__newindex = ro_error, __metatable = false})
protected[mtview] = true

local function readonly(t)
  if protected[t] then return t end
  for k, v in next, t do
    if type(v) == 'table' and not protected[v] and v ~= real then t[k] = readonly(v) end
  end
  local proxy = raw_setmetatable({}, {__index = t, __newindex = ro_error, __metatable = mtview})
  protected[proxy] = true
  return proxy
end

local gmt = {__index = real, __newindex = ro_error, __metatable = mtview}
local G = raw_setmetatable({}, gmt)
protected[G] = true
protected[real] = true

local function pack(...) return select('#', ...), {...} end

-- luaPushErrorBuff: "-CODE msg" (or "msg") to "CODE msg".
local function errbuff(s)
  local code, msg
  if s:sub(1, 1) ~= '-' then
    code, msg = 'ERR', s
  else
    local sp = s:find(' ', 1, true)
    if not sp then code, msg = 'ERR', s:sub(2) else code, msg = s:sub(2, sp - 1), s:sub(sp + 1) end
  end
  msg = (msg:gsub('^[\r\n]+', ''))
  msg = (msg:gsub('[\r\n]+$', ''))
  return code .. ' ' .. msg
end
local function fail(msg) error({err = 'ERR ' .. msg}, 0) end

local redis = {}
-- C functions (`ccall`), so that `return redis.call(...)` keeps the script's frame.
redis.call, redis.pcall = ccall, cpcall
redis.sha1hex = function(...)
  if select('#', ...) ~= 1 then fail('wrong number of arguments') end
  return sha1((...))
end
redis.error_reply = function(...)
  local s = ...
  if select('#', ...) ~= 1 or type(s) ~= 'string' then
    return {err = 'ERR wrong number or type of arguments'}
  end
  if s:sub(1, 1) ~= '-' then s = '-' .. s end
  return {err = errbuff(s)}
end
redis.status_reply = function(...)
  local s = ...
  if select('#', ...) ~= 1 or type(s) ~= 'string' then
    return {err = 'ERR wrong number or type of arguments'}
  end
  return {ok = s}
end
redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
redis.log = function(...)
  local n, level = select('#', ...), ...
  if n < 2 then fail('redis.log() requires two arguments or more.') end
  if type(level) ~= 'number' and not tonumber(level) then
    fail('First argument must be a number (log level).')
  end
  level = tonumber(level)
  if level < 0 or level > 3 then fail('Invalid debug level.') end
end
redis.setresp = function(...)
  local n, v = select('#', ...), ...
  if n ~= 1 then fail('redis.setresp() requires one argument.') end
  v = tonumber(v)
  if v ~= 2 and v ~= 3 then fail('RESP version must be 2 or 3.') end
  local ok, e = setresp(v)
  if not ok then fail(e) end
end
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL = 0, 1, 2, 2, 3
redis.set_repl = function(...)
  local n, v = select('#', ...), ...
  if n ~= 1 then fail('redis.set_repl() requires two arguments.') end
  v = tonumber(v)
  if v == nil or v < 0 or v > 3 or v ~= math.floor(v) then
    fail('Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.')
  end
end
redis.replicate_commands = function() return true end

redis.breakpoint = function() return false end
redis.debug = function() end
redis.acl_check_cmd = acl_check
redis.REDIS_VERSION = REDIS_VERSION_STRING
redis.REDIS_VERSION_NUM = REDIS_VERSION_NUMBER
rawset(real, 'redis', redis)
rawset(real, 'REDIS_VERSION_STRING', nil)
rawset(real, 'REDIS_VERSION_NUMBER', nil)

-- Redis's pcall: an error table becomes its message; a killed script cannot be caught.
rawset(real, 'pcall', function(f, ...)
  local n, r = pack(raw_pcall(f, ...))
  if not r[1] then
    if killed() then error(r[2], 0) end
    local e = r[2]
    if type(e) == 'table' and type(rawget(e, 'err')) == 'string' then
      r[2] = rawget(e, 'err')
    elseif type(e) == 'userdata' then
      r[2] = errtext(e)
    end
  end
  return unpack(r, 1, n)
end)
rawset(real, 'setmetatable', function(t, m)
  if protected[t] then error("Attempt to modify a readonly table", 2) end
  return raw_setmetatable(t, m)
end)
rawset(real, 'rawset', function(t, k, v)
  if protected[t] then error("Attempt to modify a readonly table", 2) end
  return rawset(t, k, v)
end)
rawset(real, 'loadstring', function(s, name)
  if type(s) == 'string' and s:byte(1) == 27 then return nil, 'binary chunks are not allowed' end
  local f, e = raw_loadstring(s, name)
  if f then setfenv(f, G) end
  return f, e
end)
rawset(real, 'load', function(fn, name)
  if type(fn) == 'string' then return real.loadstring(fn, name) end
  local parts = {}
  while true do
    local p = fn()
    if p == nil or p == '' then break end
    parts[#parts + 1] = p
  end
  return real.loadstring(concat(parts), name)
end)
rawset(real, 'getfenv', function(f)
  if type(f) == 'number' and f > 0 then f = f + 1 end
  local e = getfenv(f or 2)
  if e == real then return G end
  return e
end)
rawset(real, 'setfenv', function(f, t)
  if f == 0 then error("Attempt to modify a readonly table", 2) end
  if type(f) == 'number' and f > 0 then f = f + 1 end
  return setfenv(f, t)
end)
for _, name in ipairs({'print', 'loadfile', 'dofile', 'module', 'require', 'package', 'os', 'io', 'debug'}) do
  rawset(real, name, nil)
end
for _, name in ipairs({'string', 'math', 'table', 'coroutine', 'cjson', 'cmsgpack', 'bit', 'struct', 'redis'}) do
  local t = rawget(real, name)
  if type(t) == 'table' then rawset(real, name, readonly(t)) end
end
rawset(real, '_G', G)
raw_setmetatable(real, {__index = function(_, k)
  error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
end, __newindex = ro_error, __metatable = mtview})
-- Strings' metatable names the real string table: hide it too.
local smt = getmetatable('')
if smt then smt.__metatable = mtview end
-- What FUNCTION LOAD's code sees instead of the globals (function_lua.c's library API): only
-- `redis`, with register_function, log and the version; everything else is missing.
local function missing(_, k)
  error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 2)
end
local loadlib = raw_setmetatable({
  register_function = function(...)
    local ok, e = register(...)
    if not ok then fail(e) end
  end,
  log = redis.log,
  LOG_DEBUG = 0, LOG_VERBOSE = 1, LOG_NOTICE = 2, LOG_WARNING = 3,
  REDIS_VERSION = rawget(redis, 'REDIS_VERSION'), REDIS_VERSION_NUM = rawget(redis, 'REDIS_VERSION_NUM'),
}, {__index = missing})
local load_index = raw_setmetatable({redis = readonly(loadlib)}, {__index = missing})
return G, gmt, load_index
