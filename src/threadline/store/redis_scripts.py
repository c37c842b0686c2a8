"""The server-side half of the Redis store: its Lua scripts.

Redis runs a script atomically, so each script is one indivisible step of the
store: create a session, append a batch with consecutive seqs, page through an
index, forget an expired session. The scripts build key names from the prefix
passed as ``ARGV[1]`` (the layout is described in ``threadline.store.redis``)
and read everything they check before they write anything, so a script that
fails on a bad key fails before changing the data. They return small arrays
whose first element is a status code, decoded by ``RedisStore``.
"""

from __future__ import annotations

REAP_BATCH = 500
"""Expired sessions forgotten per script call, so one call never blocks Redis for long."""
PUSH_CHUNK = 1000
"""Arguments unpacked per Lua call (Lua's stack limits unpack())."""


_PRELUDE = f"""
local P = ARGV[1]
local PARTS = {{'s:', 'm:', 'i:', 'c:', 'p:', 'n:'}}

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function touch(id)
  local ttl = tonumber(redis.call('HGET', P .. 's:' .. id, 'ttl_ms') or '0') or 0
  if ttl > 0 then
    for _, part in ipairs(PARTS) do redis.call('PEXPIRE', P .. part .. id, ttl) end
    redis.call('ZADD', P .. 'expires', now_ms() + ttl, id)
  end
end

-- a session is in 'sessions' and its agent's index, and either in its parent's
-- 'kids:<parent>' or, listed under no other, in 'top' and its agent's 'top-agent:'
local function reindex(id, score)
  local s = P .. 's:' .. id
  local agent = redis.call('HGET', s, 'agent')
  local parent = redis.call('HGET', s, 'parent_id')
  redis.call('ZADD', P .. 'sessions', score, id)
  redis.call('ZADD', P .. 'agent:' .. agent, score, id)
  if parent then
    redis.call('ZADD', P .. 'kids:' .. parent, score, id)
  else
    redis.call('ZADD', P .. 'top', score, id)
    redis.call('ZADD', P .. 'top-agent:' .. agent, score, id)
  end
end

-- a session whose hash is gone leaves every index; its children become top-level
local function forget(id)
  local agent = redis.call('HGET', P .. 'owner', id)
  if agent then
    redis.call('ZREM', P .. 'agent:' .. agent, id)
    redis.call('ZREM', P .. 'top-agent:' .. agent, id)
  end
  local parent = redis.call('HGET', P .. 'up', id)
  if parent then redis.call('ZREM', P .. 'kids:' .. parent, id) end
  redis.call('HDEL', P .. 'owner', id)
  redis.call('HDEL', P .. 'up', id)
  redis.call('ZREM', P .. 'sessions', id)
  redis.call('ZREM', P .. 'top', id)
  redis.call('ZREM', P .. 'ids', id)
  redis.call('ZREM', P .. 'expires', id)
  for _, part in ipairs(PARTS) do redis.call('UNLINK', P .. part .. id) end
  local kids = redis.call('ZRANGE', P .. 'kids:' .. id, 0, -1, 'WITHSCORES')
  for k = 1, #kids, 2 do
    local kid = kids[k]
    local ks = P .. 's:' .. kid
    if redis.call('EXISTS', ks) == 1 then
      redis.call('HDEL', ks, 'parent_id')
      redis.call('HDEL', P .. 'up', kid)
      redis.call('ZADD', P .. 'top', kids[k + 1], kid)
      redis.call('ZADD', P .. 'top-agent:' .. redis.call('HGET', ks, 'agent'), kids[k + 1], kid)
    end
  end
  redis.call('UNLINK', P .. 'kids:' .. id)
end

-- the scratchpad's name index 'n:<id>' (every name scored 0, so ZRANGEBYLEX reads a
-- range of names in byte order), built from the pad's hash when a pad written before
-- the index has none; it expires with the session's other keys
local function pad_index(id)
  local n = P .. 'n:' .. id
  if redis.call('EXISTS', n) == 0 then
    local names = redis.call('HKEYS', P .. 'p:' .. id)
    for _, name in ipairs(names) do redis.call('ZADD', n, 0, name) end
    local left = redis.call('PTTL', P .. 's:' .. id)
    if #names > 0 and left > 0 then redis.call('PEXPIRE', n, left) end
  end
  return n
end

-- scratchpad entries from ARGV[from] on (name, content, ...) written at 'now'; with
-- 'keep', an entry that exists stays as it is; returns the first as stored
local function pad_put(id, keep, now, from)
  local pad, n = P .. 'p:' .. id, pad_index(id)
  local first
  for k = from, #ARGV, 2 do
    local name = ARGV[k]
    local stored = redis.call('HGET', pad, name)
    if not (stored and keep) then
      local created = now
      if stored then
        local ok, was = pcall(cjson.decode, stored)
        if ok and type(was) == 'table' and type(was.created_at) == 'string' then
          created = was.created_at
        end
      end
      stored = cjson.encode({{name = name, content = ARGV[k + 1], created_at = created,
                             updated_at = now}})
      redis.call('HSET', pad, name, stored)
      redis.call('ZADD', n, 0, name)
    end
    first = first or stored
  end
  return first
end

local function reap()
  local now = now_ms()
  local due = redis.call('ZRANGEBYSCORE', P .. 'expires', '-inf', now, 'LIMIT', 0, {REAP_BATCH})
  for _, id in ipairs(due) do
    if redis.call('EXISTS', P .. 's:' .. id) == 0 then
      forget(id)
    else
      local left = redis.call('PTTL', P .. 's:' .. id)
      if left >= 0 then redis.call('ZADD', P .. 'expires', now + left, id)
      else redis.call('ZREM', P .. 'expires', id) end
    end
  end
  return #due
end
"""

# ARGV: P, id, agent, score, parent ('' for none), field, value, ...
# -> 1 | 0 the id is taken | -1 the parent does not exist
_CREATE = """
local id, agent, score, parent = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
if redis.call('EXISTS', P .. 's:' .. id) == 1 then return 0 end
if parent ~= '' and redis.call('EXISTS', P .. 's:' .. parent) == 0 then return -1 end
forget(id)
redis.call('HSET', P .. 's:' .. id, unpack(ARGV, 6))
if parent ~= '' then redis.call('HSET', P .. 'up', id, parent) end
reindex(id, score)
redis.call('ZADD', P .. 'ids', 0, id)
redis.call('HSET', P .. 'owner', id, agent)
touch(id)
return 1
"""

# ARGV: P, id, parent -> 1 linked (or already) | 0 no session | -1 no parent
#    | {-2, current parent}: listed under another already
_LINK = """
local id, parent = ARGV[2], ARGV[3]
local s = P .. 's:' .. id
if redis.call('EXISTS', s) == 0 then return 0 end
if redis.call('EXISTS', P .. 's:' .. parent) == 0 then return -1 end
local current = redis.call('HGET', s, 'parent_id')
if current == parent then return 1 end
if current then return {-2, current} end
local agent = redis.call('HGET', s, 'agent')
local score = redis.call('ZSCORE', P .. 'sessions', id)
redis.call('HSET', s, 'parent_id', parent)
redis.call('HSET', P .. 'up', id, parent)
redis.call('ZREM', P .. 'top', id)
redis.call('ZREM', P .. 'top-agent:' .. agent, id)
if score then redis.call('ZADD', P .. 'kids:' .. parent, score, id) end
touch(id)
return 1
"""

# ARGV: P, id, ... -> {-1} (more to reap) | {count of children, ...} in the order given
_COUNT_CHILDREN = f"""
if reap() >= {REAP_BATCH} then return {{-1}} end
local out = {{}}
for k = 2, #ARGV do out[#out + 1] = redis.call('ZCARD', P .. 'kids:' .. ARGV[k]) end
return out
"""

# ARGV: P, id, updated_at, score, tokens, n, ids[n], bodies[n], then what goes with the
# batch (store/alongside.py), if anything: metadata expected ('' keeps it), metadata to
# store, now, the session whose scratchpad takes the entries, the mark (created_at, ''
# for none, and last_seq), scratchpad name, content, ...; updated_at only moves forward
# (scores are minus microseconds: exact in a double, and compared as numbers); n may be
# 0 (the mark and the companions alone)
# -> {1, first seq} | {0, seq, body, ...} (already stored) | {-1, id} no session
#    | {-2, id} partly stored | {-3, id} stored already or twice in the batch
#    | {-4, llen, last_seq} the list and the counter disagree
#    | {-5} the metadata is not the expected (the caller merges again and retries)
#    | {-6} the session is not as the mark says
_APPEND = f"""
local id = ARGV[2]
local s, m, ix = P .. 's:' .. id, P .. 'm:' .. id, P .. 'i:' .. id
local n = tonumber(ARGV[6])
local extra = 7 + 2 * n
local pad = ARGV[extra + 3] or id
if redis.call('EXISTS', s) == 0 then return {{-1, id}} end
if pad ~= id and redis.call('EXISTS', P .. 's:' .. pad) == 0 then return {{-1, pad}} end
if (ARGV[extra + 4] or '') ~= '' and (redis.call('HGET', s, 'created_at') ~= ARGV[extra + 4]
    or redis.call('HGET', s, 'last_seq') ~= ARGV[extra + 5]) then
  return {{-6}}
end
local base = tonumber(redis.call('HGET', s, 'seq_base') or 0)
if n > 0 and redis.call('HEXISTS', ix, ARGV[7]) == 1 then
  local out = {{0}}
  for k = 1, n do
    local seq = redis.call('HGET', ix, ARGV[6 + k])
    if not seq then return {{-2, ARGV[6 + k]}} end
    out[#out + 1] = tonumber(seq)
    out[#out + 1] = redis.call('LINDEX', m, tonumber(seq) - base - 1)
  end
  return out
end
local seen = {{}}
for k = 1, n do
  local mid = ARGV[6 + k]
  if seen[mid] or redis.call('HEXISTS', ix, mid) == 1 then return {{-3, mid}} end
  seen[mid] = true
end
local last = tonumber(redis.call('HGET', s, 'last_seq'))
local len = redis.call('LLEN', m)
if len + base ~= last then return {{-4, len + base, last}} end
if #ARGV >= extra then
  if ARGV[extra] ~= '' and (redis.call('HGET', s, 'metadata') or '{{}}') ~= ARGV[extra] then
    return {{-5}}
  end
  -- a scratchpad key of the wrong type fails here, before anything is written
  redis.call('HLEN', P .. 'p:' .. pad)
  redis.call('ZCARD', P .. 'n:' .. pad)
end
for a = 1, n, {PUSH_CHUNK} do
  local b = math.min(a + {PUSH_CHUNK} - 1, n)
  redis.call('RPUSH', m, unpack(ARGV, 6 + n + a, 6 + n + b))
  local seqs = {{}}
  for k = a, b do
    seqs[#seqs + 1] = ARGV[6 + k]
    seqs[#seqs + 1] = last + k
  end
  redis.call('HSET', ix, unpack(seqs))
end
if n > 0 then
  redis.call('HSET', s, 'last_seq', last + n)
  redis.call('HINCRBY', s, 'message_count', n)
  redis.call('HINCRBY', s, 'total_tokens', ARGV[5])
  local was = tonumber(redis.call('ZSCORE', P .. 'sessions', id))
  if not was or tonumber(ARGV[4]) < was then
    redis.call('HSET', s, 'updated_at', ARGV[3])
    reindex(id, ARGV[4])
  end
end
if #ARGV >= extra then
  if ARGV[extra] ~= '' then redis.call('HSET', s, 'metadata', ARGV[extra + 1]) end
  pad_put(pad, false, ARGV[extra + 2], extra + 6)
end
touch(id)
if pad ~= id then touch(pad) end
return {{1, last + 1}}
"""

# ARGV: P, id, score ('' keeps updated_at's index), nset, field, value, ..., fields to delete
_SET_FIELDS = """
local id = ARGV[2]
local s = P .. 's:' .. id
if redis.call('EXISTS', s) == 0 then return 0 end
local nset = tonumber(ARGV[4])
if nset > 0 then redis.call('HSET', s, unpack(ARGV, 5, 4 + 2 * nset)) end
if #ARGV > 4 + 2 * nset then redis.call('HDEL', s, unpack(ARGV, 5 + 2 * nset)) end
if ARGV[3] ~= '' then reindex(id, ARGV[3]) end
touch(id)
return 1
"""

# ARGV: P, id, covers_up_to, checkpoint JSON, expected number of checkpoints ('' = any)
# -> {0, id} | {-1, 0} no session | {-2, last_seq} out of range | {-3, count} not the expected
# count: the compare-and-set under add_checkpoint, whose rule (check_checkpoint) Python
# applied to what it read; checkpoints are only ever appended, so an unchanged count
# means an unchanged latest checkpoint, and last_seq only grows
_CHECKPOINT = """
local id = ARGV[2]
local s = P .. 's:' .. id
if redis.call('EXISTS', s) == 0 then return {-1, 0} end
local last = tonumber(redis.call('HGET', s, 'last_seq'))
local covers = tonumber(ARGV[3])
if covers < 0 or covers > last then return {-2, last} end
local c = P .. 'c:' .. id
-- a resend after a lost reply carries the very same body (created_at included)
if redis.call('LINDEX', c, -1) == ARGV[4] then return {0, redis.call('LLEN', c)} end
local count = redis.call('LLEN', c)
if ARGV[5] ~= '' and count ~= tonumber(ARGV[5]) then return {-3, count} end
local cid = redis.call('RPUSH', c, ARGV[4])
touch(id)
return {0, cid}
"""

# ARGV: P, id, expected memo JSON, new memo JSON -> 1 set | 0 not the expected memo | -1 no
# session; the text is compared as stored, so a memo another writer changed is never
# overwritten (the memo stays one JSON string, never re-encoded by Lua)
_SWAP_MEMO = """
local id = ARGV[2]
local s = P .. 's:' .. id
if redis.call('EXISTS', s) == 0 then return -1 end
local memo = redis.call('HGET', s, 'memo') or '{}'
if memo ~= ARGV[3] then return 0 end
redis.call('HSET', s, 'memo', ARGV[4])
touch(id)
return 1
"""

# ARGV: P, index key (without P), offset, limit[, min score, max score] -> {-1} (more to
# reap) | {total, {hash, ...}}; with scores, a page of the ids scored within them (a time
# range: the score is minus the update time) and their count, each one range of the index
_LIST = f"""
if reap() >= {REAP_BATCH} then return {{-1}} end
local index = P .. ARGV[2]
local offset, limit = tonumber(ARGV[3]), tonumber(ARGV[4])
local low, high = ARGV[5], ARGV[6]
while true do
  local ids
  if low then
    ids = redis.call('ZRANGEBYSCORE', index, low, high, 'LIMIT', offset, limit)
  else
    ids = redis.call('ZRANGE', index, offset, offset + limit - 1)
  end
  local rows, gone = {{}}, false
  for _, id in ipairs(ids) do
    local h = redis.pcall('HGETALL', P .. 's:' .. id)
    if type(h) == 'table' and h.err then
      rows[#rows + 1] = {{'!corrupt', id}}
    elseif #h == 0 then
      forget(id)
      gone = true
    else
      rows[#rows + 1] = h
    end
  end
  if not gone then
    if low then return {{redis.call('ZCOUNT', index, low, high), rows}} end
    return {{redis.call('ZCARD', index), rows}}
  end
end
"""

# ARGV: P, id, 'tail', limit, before_seq | P, id, 'read', after_seq, limit ('' = none)
# -> {-1, {}} no session | {first seq, {body, ...}}; LRANGE counts from the nearer end of the
# list, so a tail costs the same however long the session (invariant 4)
_SLICE = """
local id, mode = ARGV[2], ARGV[3]
if redis.call('EXISTS', P .. 's:' .. id) == 0 then return {-1, {}} end
local m = P .. 'm:' .. id
local len = redis.call('LLEN', m)
local base = tonumber(redis.call('HGET', P .. 's:' .. id, 'seq_base') or 0)
local start, stop
if mode == 'tail' then
  stop = len - 1
  if ARGV[5] ~= '' then stop = math.min(stop, tonumber(ARGV[5]) - 2 - base) end
  start = math.max(0, stop - tonumber(ARGV[4]) + 1)
else
  start = math.max(0, tonumber(ARGV[4]) - base)
  stop = len - 1
  if ARGV[5] ~= '' then stop = math.min(stop, start + tonumber(ARGV[5]) - 1) end
end
if stop < start then return {start + 1 + base, {}} end
local first = start + 1 + base
if start > len - 1 - stop then start, stop = start - len, stop - len end
return {first, redis.call('LRANGE', m, start, stop)}
"""

# ARGV: P, id, ... : forget the ids whose session hash is gone (expired, or deleted just
# before in the same transaction)
_FORGET = """
for k = 2, #ARGV do
  if redis.call('EXISTS', P .. 's:' .. ARGV[k]) == 0 then forget(ARGV[k]) end
end
return 1
"""

# ARGV: P, id, ttl in ms (0: none)
_SET_TTL = """
local id = ARGV[2]
local s = P .. 's:' .. id
if redis.call('EXISTS', s) == 0 then return 0 end
local ttl = tonumber(ARGV[3])
if ttl > 0 then
  redis.call('HSET', s, 'ttl_ms', ttl)
  touch(id)
else
  redis.call('HDEL', s, 'ttl_ms')
  for _, part in ipairs(PARTS) do redis.call('PERSIST', P .. part .. id) end
  redis.call('ZREM', P .. 'expires', id)
end
return 1
"""

# ARGV: P, id: refresh the TTL after a MULTI/EXEC write
_TOUCH = """
if redis.call('EXISTS', P .. 's:' .. ARGV[2]) == 1 then touch(ARGV[2]) end
return 1
"""

# ARGV: P, id, keep ('1': leave an entry that is stored as it is), now (RFC 3339),
# name, content, ... -> -1 no session | the first entry as stored (JSON). All entries in
# one step; an entry kept is one that is stored when the script runs (compare-and-set)
_PAD_WRITE = """
local id, keep, now = ARGV[2], ARGV[3] == '1', ARGV[4]
if redis.call('EXISTS', P .. 's:' .. id) == 0 then return -1 end
local first = pad_put(id, keep, now, 5)
touch(id)
return first
"""

# ARGV: P, id, name -> -1 no session | 1 deleted | 0 not there
_PAD_DELETE = """
local id, name = ARGV[2], ARGV[3]
if redis.call('EXISTS', P .. 's:' .. id) == 0 then return -1 end
local n = pad_index(id)
local gone = redis.call('HDEL', P .. 'p:' .. id, name)
redis.call('ZREM', n, name)
touch(id)
return gone
"""

# ARGV: P, id, limit, low, high ('': none) -> {-1} no session | {1, name, entry, ...}:
# the last ``limit`` names from ``low`` on and below ``high``, last first
_PAD_PAGE = """
local id, limit, low, high = ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5]
if redis.call('EXISTS', P .. 's:' .. id) == 0 then return {-1} end
local top = high == '' and '+' or '(' .. high
local names = redis.call('ZREVRANGEBYLEX', pad_index(id), top, '[' .. low, 'LIMIT', 0, limit)
local out, pad = {1}, P .. 'p:' .. id
for _, name in ipairs(names) do
  local v = redis.call('HGET', pad, name)
  if v then out[#out + 1] = name; out[#out + 1] = v end
end
return out
"""

# ARGV: P, id, count, name * count, (low, high ('': none)) ... -> {-1} no session
# | {1, name, entry, ...}: the named entries and those of each range of names
_PAD_CONTENTS = """
local id, count = ARGV[2], tonumber(ARGV[3])
if redis.call('EXISTS', P .. 's:' .. id) == 0 then return {-1} end
local out, pad = {1}, P .. 'p:' .. id
local function take(name)
  local v = redis.call('HGET', pad, name)
  if v then out[#out + 1] = name; out[#out + 1] = v end
end
for k = 4, 3 + count do take(ARGV[k]) end
if #ARGV > 3 + count then
  local n = pad_index(id)
  for k = 4 + count, #ARGV, 2 do
    local top = ARGV[k + 1] == '' and '+' or '(' .. ARGV[k + 1]
    for _, name in ipairs(redis.call('ZRANGEBYLEX', n, '[' .. ARGV[k], top)) do take(name) end
  end
end
return out
"""

SCRIPTS: dict[str, str] = {
    name: _PRELUDE + body
    for name, body in (
        ("create", _CREATE),
        ("link", _LINK),
        ("count_children", _COUNT_CHILDREN),
        ("append", _APPEND),
        ("set_fields", _SET_FIELDS),
        ("checkpoint", _CHECKPOINT),
        ("swap_memo", _SWAP_MEMO),
        ("list", _LIST),
        ("slice", _SLICE),
        ("forget", _FORGET),
        ("set_ttl", _SET_TTL),
        ("touch", _TOUCH),
        ("pad_write", _PAD_WRITE),
        ("pad_delete", _PAD_DELETE),
        ("pad_page", _PAD_PAGE),
        ("pad_contents", _PAD_CONTENTS),
    )
}
"""Every Lua script the store runs, by name (tests inspect them)."""
