-- who.lua lists the live holders: {holder, the record's fields in
-- recordFields order, its settled fence (see raise_fence.lua; "" if not
-- marked), its cached mark (see quorum/cache.go), ...}; a tail holds nothing (see
-- delayed.lua).
-- KEYS: set. ARGV: holder key prefix.
-- (holders.lua, which follows, appends the holders to out and returns it.)
local out = {}
