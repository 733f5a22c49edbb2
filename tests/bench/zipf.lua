-- tests/bench/zipf.lua -- the request streams of cache.sh for wrk:
--   wrk ... -s zipf.lua URL -- zipf  N S PREFIX   rank r asked with
--                                    probability r^-S / sum(k^-S), k = 1..N
--   wrk ... -s zipf.lua URL -- hot50 N _ PREFIX   half of the requests on
--                                    PREFIXhot.jpg, the rest uniform over N
--   optional after PREFIX: PAUSE ONEHIT TAG   each connection waits PAUSE
--                                    ms after a response (paced: RATE is
--                                    connections * 1000 / PAUSE at most),
--                                    and ONEHIT of the requests are for
--                                    /u/TAG<thread>-<n>.jpg, a URL never
--                                    asked before (by a run of another TAG
--                                    either): a cache's steady misses
-- URLs are PREFIX<rank>.jpg.  What is costly happens once per thread in
-- init(): the cumulative distribution (one array of N numbers, 1.6 MB for
-- N = 200,000) and the request formatted around a placeholder, so that
-- request() is a random number, a binary search over the table and one
-- string concatenation: wrk spends its CPU on the sockets, not in Lua.
-- (Formatting all N requests up front costs the same per request, but
-- 30 MB and half a second of init per thread.)  done() prints one RESULT
-- line with exact percentiles, as compare.sh reads it.
local nthreads = 0
function setup(thread)
	nthreads = nthreads + 1
	thread:set("tid", nthreads)
end

local cdf, head, tail, hot, n, mode = {}, "", "", nil, 0, "zipf"
local onehit, tag, once = 0, "", 0
function init(args)
	mode = args[1] or "zipf"
	n = tonumber(args[2]) or 200000
	local s = tonumber(args[3]) or 0.9
	local prefix = args[4] or "/thumbs/"
	local pause = tonumber(args[5]) or 0
	onehit, tag = tonumber(args[6]) or 0, args[7] or ""
	if pause > 0 then
		-- wrk paces only a script that has delay() after init()
		function delay() return pause end
	end
	math.randomseed(7919 * (tid or 1) + os.time())
	-- head .. rank .. tail is wrk.format("GET", prefix .. rank .. ".jpg")
	local f = wrk.format("GET", prefix .. "@.jpg")
	local at = f:find("@", 1, true)
	head, tail = f:sub(1, at - 1), f:sub(at + 1)
	hot = wrk.format("GET", prefix .. "hot.jpg")
	if mode == "zipf" then
		local sum = 0
		for i = 1, n do
			sum = sum + i ^ -s
			cdf[i] = sum
		end
		for i = 1, n do
			cdf[i] = cdf[i] / sum
		end
		cdf[n] = 1
	end
end

-- The smallest rank whose cumulative probability reaches u in [0, 1).
local function rank(u)
	local lo, hi = 1, n
	while lo < hi do
		local mid = math.floor((lo + hi) / 2)
		if cdf[mid] < u then lo = mid + 1 else hi = mid end
	end
	return lo
end

function request()
	if onehit > 0 and math.random() < onehit then
		once = once + 1
		return wrk.format("GET", "/u/" .. tag .. (tid or 1) .. "-" .. once .. ".jpg")
	end
	if mode == "zipf" then
		return head .. rank(math.random()) .. tail
	end
	if math.random() < 0.5 then
		return hot
	end
	return head .. math.random(n) .. tail
end

function done(summary, latency, requests)
	local e = summary.errors
	io.write(string.format(
		"RESULT requests=%d duration_us=%d p50_us=%d p99_us=%d errors=%d status_errors=%d\n",
		summary.requests, summary.duration,
		latency:percentile(50), latency:percentile(99),
		e.connect + e.read + e.write + e.status + e.timeout, e.status))
end
