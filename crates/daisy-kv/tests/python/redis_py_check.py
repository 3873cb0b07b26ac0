#!/usr/bin/env python3
"""redis-py against `daisy serve`, as an application would use it.

Run by the `server` test binary (tests/server/redis_py.rs) with the server's host and port:

    python3 redis_py_check.py 127.0.0.1 6379

Covers pipelines with and without a transaction, WATCH with retries (`Redis.transaction`,
forced to retry by a second client, and raced by threads), hashes (HSET with a mapping,
HGETALL, counters), sets, lists as a job queue (blocking pops included), sorted sets as a leaderboard and a rate
limiter, the scan iterators over small (packed) and large (table)
collections, `Lock` (acquire, extend, release: EVALSHA), `register_script`, EVAL and FCALL,
`pubsub()` (subscribe, psubscribe, get_message, listen in a thread, keyspace notifications),
and users (ACL SETUSER, Redis(username=, password=), NOPERM, WRONGPASS). Exits 0 after
printing "redis-py: N checks passed"; any
failure is an exception with its traceback (exit status 1).
"""

import sys
import threading

import redis

HOST, PORT = sys.argv[1], int(sys.argv[2])
checks = 0


def check(cond, what):
    global checks
    if not cond:
        raise AssertionError(what)
    checks += 1


def eq(got, want, what):
    check(got == want, f"{what}: got {got!r}, want {want!r}")


def client(db=0):
    return redis.Redis(host=HOST, port=PORT, db=db, socket_timeout=20)


r = client()
r.flushall()
eq(r.ping(), True, "PING")

# ---- pipelines -----------------------------------------------------------------------------

p = r.pipeline(transaction=False)
p.set("p:a", "1").incr("p:a").incrby("p:a", 10).get("p:a").delete("p:missing")
eq(p.execute(), [True, 2, 12, b"12", 0], "pipeline without transaction")

with r.pipeline() as p:  # MULTI ... EXEC
    p.set("p:b", "x").append("p:b", "yz").strlen("p:b").mget("p:a", "p:b", "p:missing")
    eq(p.execute(), [True, 3, 3, [b"12", b"xyz", None]], "pipeline in a transaction")

# A command failing inside EXEC: the others still run; redis-py raises the first error.
with r.pipeline() as p:
    p.set("p:c", "notanumber").incr("p:c").set("p:d", "after")
    try:
        p.execute()
        check(False, "EXEC with a failing INCR raises")
    except redis.ResponseError as e:
        check("not an integer" in str(e), f"INCR's error inside EXEC: {e}")
eq(r.get("p:d"), b"after", "commands after a failing one in EXEC ran")
with r.pipeline() as p:
    p.set("p:c", "notanumber").incr("p:c").get("p:c")
    res = p.execute(raise_on_error=False)
    eq(res[0], True, "SET in EXEC")
    check(isinstance(res[1], redis.ResponseError), f"INCR's error as a value: {res[1]!r}")
    eq(res[2], b"notanumber", "GET after the failing INCR")

# A command refused while queuing discards the whole transaction (EXECABORT).
with r.pipeline() as p:
    p.set("p:e", "1").execute_command("NOSUCHCOMMAND", "x")
    try:
        p.execute()
        check(False, "EXECABORT raised")
    except redis.ResponseError as e:
        check("NOSUCHCOMMAND" in str(e).upper() or "EXECABORT" in str(e).upper(), f"EXECABORT: {e}")
eq(r.exists("p:e"), 0, "nothing of an aborted transaction was stored")

# A long pipeline (one write from the client, group commit on the server).
with r.pipeline(transaction=False) as p:
    for i in range(2000):
        p.hset("p:big", f"f{i}", i)
    eq(sum(p.execute()), 2000, "2000 HSETs in one pipeline")
eq(r.hlen("p:big"), 2000, "HLEN after the pipeline")

# ---- WATCH -----------------------------------------------------------------------------------

r.set("w:counter", 0)
other = client()
calls = []


def bump(pipe):
    calls.append(1)
    cur = int(pipe.get("w:counter"))  # immediate mode: after WATCH, before MULTI
    if len(calls) == 1:
        other.incr("w:counter")  # another client changes the watched key: EXEC fails
    pipe.multi()
    pipe.set("w:counter", cur + 1)


r.transaction(bump, "w:counter")
eq(len(calls), 2, "the transaction was retried once after the watched key changed")
eq(r.get("w:counter"), b"2", "the retry saw the other client's write")

# WatchError surfaces without the helper.
with r.pipeline() as p:
    p.watch("w:counter")
    other.set("w:counter", 100)
    p.multi()
    p.incr("w:counter")
    try:
        p.execute()
        check(False, "EXEC after a watched key changed raises WatchError")
    except redis.WatchError:
        check(True, "WatchError")
eq(r.get("w:counter"), b"100", "the failed transaction wrote nothing")

# UNWATCH (reset) lets the next transaction through.
with r.pipeline() as p:
    p.watch("w:counter")
    p.unwatch()
    other.set("w:counter", 5)
    p.multi()
    p.incr("w:counter")
    eq(p.execute(), [6], "after UNWATCH the transaction runs")

# Threads racing on one counter through WATCH/MULTI/EXEC: no increment lost.
r.set("w:race", 0)
retries = [0]
lock = threading.Lock()


def racer(n):
    c = client()

    def incr(pipe):
        v = int(pipe.get("w:race"))
        pipe.multi()
        pipe.set("w:race", v + 1)

    for _ in range(n):
        while True:
            try:
                with c.pipeline() as p:
                    p.watch("w:race")
                    incr(p)
                    p.execute()
                    break
            except redis.WatchError:
                with lock:
                    retries[0] += 1


threads = [threading.Thread(target=racer, args=(50,)) for _ in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
eq(int(r.get("w:race")), 200, f"4 threads x 50 WATCHed increments ({retries[0]} retries)")

# ---- hashes ----------------------------------------------------------------------------------

fields = {"name": "daisy", "lang": "rust", "n": "1", "empty": ""}
eq(r.hset("h:small", mapping=fields), 4, "HSET with a mapping")
eq(r.hset("h:small", "n", "2", mapping={"extra": "x"}), 1, "HSET key/value and mapping")
eq(
    r.hgetall("h:small"),
    {b"name": b"daisy", b"lang": b"rust", b"n": b"2", b"empty": b"", b"extra": b"x"},
    "HGETALL",
)
eq(r.hget("h:small", "lang"), b"rust", "HGET")
eq(r.hmget("h:small", ["name", "nope", "n"]), [b"daisy", None, b"2"], "HMGET")
eq(r.hincrby("h:small", "n", 40), 42, "HINCRBY")
eq(r.hincrbyfloat("h:small", "f", 2.5), 2.5, "HINCRBYFLOAT on a new field")
eq(r.hexists("h:small", "f"), True, "HEXISTS")
eq(r.hdel("h:small", "f", "nope"), 1, "HDEL")
eq(r.hlen("h:small"), 5, "HLEN")
eq(sorted(r.hkeys("h:small")), sorted([b"name", b"lang", b"n", b"empty", b"extra"]), "HKEYS")
eq(r.hstrlen("h:small", "name"), 5, "HSTRLEN")
eq(r.hsetnx("h:small", "name", "other"), False, "HSETNX on an existing field")
check(r.hrandfield("h:small") in r.hkeys("h:small"), "HRANDFIELD")
eq(len(r.hrandfield("h:small", 3, withvalues=True)), 6, "HRANDFIELD 3 WITHVALUES")
eq(r.object("encoding", "h:small"), b"listpack", "a small hash is a listpack")
big = {f"field:{i}": str(i * i) for i in range(1000)}
r.hset("h:big", mapping=big)
eq(r.object("encoding", "h:big"), b"hashtable", "a big hash is a hash table")
eq(r.hgetall("h:big"), {k.encode(): v.encode() for k, v in big.items()}, "HGETALL of a big hash")
try:
    r.hincrby("h:small", "name", 1)
    check(False, "HINCRBY of a non-integer raises")
except redis.ResponseError as e:
    check("not an integer" in str(e), f"HINCRBY's error: {e}")
r.set("h:string", "x")
try:
    r.hset("h:string", "f", "v")
    check(False, "HSET on a string raises WRONGTYPE")
except redis.ResponseError as e:
    check(str(e).startswith("WRONGTYPE"), f"WRONGTYPE: {e}")

# ---- sets ------------------------------------------------------------------------------------

eq(r.sadd("s:a", 1, 2, 3, 4), 4, "SADD integers")
eq(r.object("encoding", "s:a"), b"intset", "a set of integers is an intset")
eq(r.smembers("s:a"), {b"1", b"2", b"3", b"4"}, "SMEMBERS")
eq(r.sadd("s:b", 3, 4, "five"), 3, "SADD")
eq(r.sinter("s:a", "s:b"), {b"3", b"4"}, "SINTER")
eq(r.sunion("s:a", "s:b"), {b"1", b"2", b"3", b"4", b"five"}, "SUNION")
eq(r.sdiff("s:a", "s:b"), {b"1", b"2"}, "SDIFF")
eq(r.sinterstore("s:i", ["s:a", "s:b"]), 2, "SINTERSTORE")
eq(r.sismember("s:b", "five"), True, "SISMEMBER")
eq(r.smismember("s:b", ["five", "six", 3]), [1, 0, 1], "SMISMEMBER")
eq(r.smove("s:b", "s:a", "five"), True, "SMOVE")
eq(r.scard("s:a"), 5, "SCARD")
popped = r.spop("s:a", 2)
check(len(popped) == 2 and not (set(popped) & r.smembers("s:a")), f"SPOP 2: {popped}")
eq(r.scard("s:a"), 3, "SCARD after SPOP")
check(set(r.srandmember("s:a", 10)) == r.smembers("s:a"), "SRANDMEMBER 10 of 3")
eq(r.srem("s:a", *r.smembers("s:a")), 3, "SREM all")
eq(r.exists("s:a"), 0, "an emptied set is gone")
members = {f"m{i}".encode() for i in range(700)}
r.sadd("s:big", *members)
eq(r.smembers("s:big"), members, "SMEMBERS of a big set")

# ---- lists (a job queue, as RQ, Celery and Sidekiq use them) ----------------------------------

eq(r.rpush("q:jobs", "j1", "j2", "j3"), 3, "RPUSH")
eq(r.lpush("q:jobs", "j0"), 4, "LPUSH")
eq(r.lrange("q:jobs", 0, -1), [b"j0", b"j1", b"j2", b"j3"], "LRANGE")
eq(r.llen("q:jobs"), 4, "LLEN")
eq(r.lindex("q:jobs", -1), b"j3", "LINDEX")
eq(r.lpop("q:jobs"), b"j0", "LPOP")
eq(r.rpop("q:jobs", 2), [b"j3", b"j2"], "RPOP with a count")
# Reliable fetch: move a job onto a processing list, then acknowledge it.
eq(r.lmove("q:jobs", "q:processing", "LEFT", "RIGHT"), b"j1", "LMOVE")
eq(r.lrem("q:processing", 1, "j1"), 1, "LREM acknowledges")
eq(r.exists("q:jobs", "q:processing"), 0, "emptied lists are gone")
eq(r.blpop(["q:empty", "q:other"], timeout=0.1), None, "BLPOP times out with None")
r.rpush("q:other", "late")
eq(r.blpop(["q:empty", "q:other"], timeout=1), (b"q:other", b"late"), "BLPOP finds an item")


def pusher():
    import time
    time.sleep(0.2)
    client().rpush("q:wait", "woken")


t = threading.Thread(target=pusher)
t.start()
eq(r.brpop("q:wait", timeout=5), (b"q:wait", b"woken"), "BRPOP served by another client's push")
t.join()
r.rpush("q:big", *[f"item:{i}" for i in range(5000)])
eq(r.object("encoding", "q:big"), b"quicklist", "lists report quicklist")
eq(r.lrange("q:big", 4998, -1), [b"item:4998", b"item:4999"], "LRANGE at the tail of a big list")
eq(r.lpos("q:big", "item:4321"), 4321, "LPOS")
eq(r.linsert("q:big", "BEFORE", "item:1", "new"), 5001, "LINSERT")
eq(r.lset("q:big", 0, "first"), True, "LSET")
eq(r.ltrim("q:big", 0, 2), True, "LTRIM")
eq(r.lrange("q:big", 0, -1), [b"first", b"new", b"item:1"], "after LTRIM")
eq(r.sort("q:sortme") if r.rpush("q:sortme", 3, 1, 2) else None, [b"1", b"2", b"3"], "SORT")

# ---- sorted sets (a leaderboard and a rate limiter) -------------------------------------------

eq(r.zadd("z:board", {"alice": 30, "bob": 10, "carol": 20}), 3, "ZADD a mapping")
eq(r.zadd("z:board", {"bob": 5}, gt=True, ch=True), 0, "ZADD GT refuses a lower score")
eq(r.zincrby("z:board", 15, "bob"), 25.0, "ZINCRBY")
eq(r.zrange("z:board", 0, -1, withscores=True), [(b"carol", 20.0), (b"bob", 25.0), (b"alice", 30.0)], "ZRANGE WITHSCORES")
eq(r.zrevrank("z:board", "alice"), 0, "ZREVRANK")
eq(r.zscore("z:board", "carol"), 20.0, "ZSCORE")
eq(r.zrangebyscore("z:board", 21, "+inf"), [b"bob", b"alice"], "ZRANGEBYSCORE")
eq(r.zcount("z:board", "-inf", 25), 2, "ZCOUNT")
eq(r.zpopmin("z:board"), [(b"carol", 20.0)], "ZPOPMIN")
eq(r.bzpopmax("z:board", timeout=1), (b"z:board", b"alice", 30.0), "BZPOPMAX finds a member")
eq(r.bzpopmin("z:none", timeout=0.1), None, "BZPOPMIN times out with None")
# A sliding-window rate limiter: timestamps as scores, old ones trimmed, the window counted.
with r.pipeline() as p:
    for t in range(100):
        p.zadd("z:rate", {f"req:{t}": t})
    p.zremrangebyscore("z:rate", 0, 49)
    p.zcard("z:rate")
    res = p.execute()
eq(res[-2:], [50, 50], "rate limiter: 50 trimmed, 50 in the window")
board = {f"member:{i}": i * 0.5 for i in range(1000)}
r.zadd("z:big", board)
eq(r.object("encoding", "z:big"), b"skiplist", "a big sorted set is a skiplist")
eq(r.zrank("z:big", "member:777"), 777, "ZRANK in a big set")
eq(r.zrange("z:big", 998, -1, withscores=True), [(b"member:998", 499.0), (b"member:999", 499.5)], "ZRANGE at the end")
eq(r.zunionstore("z:u", ["z:big", "z:rate"]), 1050, "ZUNIONSTORE")
eq(dict(r.zscan_iter("z:rate")), {f"req:{t}".encode(): float(t) for t in range(50, 100)}, "zscan_iter")

# ---- scan iterators ----------------------------------------------------------------------------

with r.pipeline(transaction=False) as p:
    for i in range(500):
        p.set(f"scan:{i}", i)
    p.execute()
keys = set(r.scan_iter(match="scan:*", count=37))
eq(keys, {f"scan:{i}".encode() for i in range(500)}, "scan_iter(match, count)")
eq(set(r.scan_iter(match="scan:1?", count=100)), {f"scan:1{i}".encode() for i in range(10)}, "scan_iter match")
eq({k for k in r.scan_iter(_type="HASH")}, {b"h:small", b"h:big", b"p:big"}, "scan_iter(_type=HASH)")
eq(dict(r.hscan_iter("h:big", count=50)), {k.encode(): v.encode() for k, v in big.items()}, "hscan_iter of a table")
eq(dict(r.hscan_iter("h:small")), r.hgetall("h:small"), "hscan_iter of a listpack")
want = {k.encode(): v.encode() for k, v in big.items() if k.startswith("field:99")}
eq(len(want), 11, "fields field:99*")
eq(dict(r.hscan_iter("h:big", match="field:99*")), want, "hscan_iter(match)")
eq(set(r.sscan_iter("s:big", count=64)), members, "sscan_iter of a table")
eq(set(r.sscan_iter("s:b")), r.smembers("s:b"), "sscan_iter of a small set")
eq(set(r.sscan_iter("s:big", match="m69*")), {m for m in members if m.startswith(b"m69")}, "sscan_iter(match)")

# ---- databases ---------------------------------------------------------------------------------

r3 = client(db=3)
r3.set("db3:key", "three")
eq(r.get("db3:key"), None, "a key of database 3 is not in database 0")
eq(r3.get("db3:key"), b"three", "Redis(db=3) selects database 3")

# ---- Lock ----------------------------------------------------------------------------------------

lk = r.lock("lock:resource", timeout=30)
eq(lk.acquire(blocking=False), True, "Lock.acquire")
check(0 < r.pttl("lock:resource") <= 30000, "the lock expires")
eq(r.lock("lock:resource").acquire(blocking=False), False, "a held lock is refused")
eq(r.lock("lock:resource", blocking_timeout=0.2).acquire(), False, "acquire with blocking_timeout gives up")
eq(lk.locked(), True, "Lock.locked")
eq(lk.owned(), True, "Lock.owned")
# Release and extend are Lua scripts (EVALSHA after SCRIPT LOAD).
eq(lk.extend(10), True, "Lock.extend")
check(20000 < r.pttl("lock:resource") <= 40000, "extend added time")
lk.release()
eq(r.exists("lock:resource"), 0, "Lock.release deletes the key")
try:
    lk.release()
    check(False, "releasing a lock twice raises")
except redis.exceptions.LockError:
    check(True, "releasing a lock twice raises")
with r.lock("lock:resource", timeout=5) as held:
    eq(held.owned(), True, "the lock as a context manager")
eq(r.exists("lock:resource"), 0, "the context manager released it")

# ---- scripts -----------------------------------------------------------------------------------

incr_by = r.register_script("return redis.call('INCRBY', KEYS[1], ARGV[1])")
eq(incr_by(keys=["counter:script"], args=[5]), 5, "register_script runs (EVALSHA, EVAL on NOSCRIPT)")
eq(incr_by(keys=["counter:script"], args=[2]), 7, "and runs again by its SHA")
r.script_flush()
eq(incr_by(keys=["counter:script"], args=[1]), 8, "after SCRIPT FLUSH it is loaded again")
eq(r.script_exists(incr_by.sha), [True], "SCRIPT EXISTS")
pipe = r.pipeline()
incr_by(keys=["counter:script"], args=[10], client=pipe)
pipe.get("counter:script")
eq(pipe.execute(), [18, b"18"], "a script in a pipeline")
eq(r.eval("return {KEYS[1], ARGV[1]}", 1, "k", "v"), [b"k", b"v"], "eval")
try:
    r.eval("return redis.call('nosuch')", 0)
    check(False, "a script's error raises")
except redis.ResponseError as e:
    check("Unknown Redis command" in str(e), f"the script's error: {e}")
r.function_load("#!lua name=pylib\nredis.register_function('twice', function(k, a) return a[1] * 2 end)")
eq(r.fcall("twice", 0, 21), 42, "FUNCTION LOAD and FCALL")

# ---- pub/sub -------------------------------------------------------------------------------------

ps = r.pubsub()
ps.subscribe("ps:news")
msg = ps.get_message(timeout=5)
eq((msg["type"], msg["channel"], msg["data"]), ("subscribe", b"ps:news", 1), "subscribe confirmation")
ps.psubscribe("ps:*")
msg = ps.get_message(timeout=5)
eq((msg["type"], msg["pattern"], msg["data"]), ("psubscribe", None, 2), "psubscribe confirmation")
eq(r.publish("ps:news", "hello"), 2, "PUBLISH reaches the channel and the pattern")
msg = ps.get_message(timeout=5)
eq((msg["type"], msg["channel"], msg["data"]), ("message", b"ps:news", b"hello"), "get_message: message")
msg = ps.get_message(timeout=5)
eq((msg["type"], msg["pattern"], msg["channel"], msg["data"]), ("pmessage", b"ps:*", b"ps:news", b"hello"), "get_message: pmessage")
eq(r.pubsub_numsub("ps:news"), [(b"ps:news", 1)], "PUBSUB NUMSUB")
eq(r.pubsub_numpat(), 1, "PUBSUB NUMPAT")
ps.psubscribe("__key*")
ps.get_message(timeout=5)
r.config_set("notify-keyspace-events", "KEA")
r.set("ps:key", "v")
got = [ps.get_message(timeout=5) for _ in range(2)]
eq([m["pattern"] for m in got], [b"__key*"] * 2, "the pattern that matched")
eq([(m["channel"], m["data"]) for m in got], [(b"__keyspace@0__:ps:key", b"set"), (b"__keyevent@0__:set", b"ps:key")], "keyspace notifications through pubsub()")
r.config_set("notify-keyspace-events", "")
ps.punsubscribe()
ps.get_message(timeout=5)
ps.get_message(timeout=5)
seen = []
def listener():
    for m in ps.listen():
        if m["type"] == "message":
            seen.append(m["data"])
            if m["data"] == b"stop":
                return
t = threading.Thread(target=listener)
t.start()
for d in ("one", "two", "stop"):
    r.publish("ps:news", d)
t.join(10)
eq(seen, [b"one", b"two", b"stop"], "listen() in a thread")
ps.close()

# ---- access control ------------------------------------------------------------------------------

r.acl_setuser("app", enabled=True, passwords=["+app-secret"], commands=["+@read", "+@write", "+acl|whoami", "-flushall"], keys=["app:*"])
app = redis.Redis(host=HOST, port=PORT, username="app", password="app-secret", socket_timeout=20)
eq(app.acl_whoami(), "app", "Redis(username=, password=) authenticates as that user")
eq(app.set("app:k", "v"), True, "a permitted command on a permitted key")
try:
    app.set("other:k", "v")
    check(False, "a key outside the user's patterns is refused")
except redis.exceptions.NoPermissionError as e:
    check("no permissions to access one of the keys" in str(e), f"NOPERM for the key: {e}")
try:
    app.flushall()
    check(False, "a denied command is refused")
except redis.exceptions.NoPermissionError as e:
    check("'flushall' command" in str(e), f"NOPERM for the command: {e}")
try:
    redis.Redis(host=HOST, port=PORT, username="app", password="wrong").ping()
    check(False, "a wrong password is refused")
except (redis.exceptions.AuthenticationError, redis.exceptions.ResponseError) as e:
    check("WRONGPASS" in str(e), f"WRONGPASS: {e}")
u = r.acl_getuser("app")
check(u["enabled"] and "~app:*" in u["keys"], f"ACL GETUSER as redis-py reads it: {u}")
eq(r.acl_deluser("app"), 1, "ACL DELUSER")

r.flushall()
print(f"redis-py {redis.__version__}: {checks} checks passed")
