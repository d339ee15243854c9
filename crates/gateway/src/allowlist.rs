//! Which Redis commands the gateway forwards: Upstash's REST surface (read 2026-12 from
//! upstash/docs) minus what would change or stall the one redis-server the stack shares; the
//! rest is a 400 `ERR command is not allowed: NAME`. Left out on purpose: blocking commands,
//! MULTI/EXEC/WATCH on `/` (use `/multi-exec`), SUBSCRIBE/MONITOR, connection commands but PING
//! and ECHO, ACL/CONFIG (`CONFIG GET requirepass` would reveal the password), administration.

use crate::name::display_name;

/// Commands forwarded whatever their arguments (names in upper case).
const ALLOWED: &[&str] = &[
    // String
    "APPEND",
    "DECR",
    "DECRBY",
    "GET",
    "GETDEL",
    "GETEX",
    "GETRANGE",
    "GETSET",
    "INCR",
    "INCRBY",
    "INCRBYFLOAT",
    "MGET",
    "MSET",
    "MSETNX",
    "PSETEX",
    "SET",
    "SETEX",
    "SETNX",
    "SETRANGE",
    "STRLEN",
    "DELEX",
    "DIGEST",
    // Bitmap
    "BITCOUNT",
    "BITFIELD",
    "BITFIELD_RO",
    "BITOP",
    "BITPOS",
    "GETBIT",
    "SETBIT",
    // Hash
    "HDEL",
    "HEXISTS",
    "HEXPIRE",
    "HEXPIREAT",
    "HEXPIRETIME",
    "HGET",
    "HGETALL",
    "HGETDEL",
    "HGETEX",
    "HINCRBY",
    "HINCRBYFLOAT",
    "HKEYS",
    "HLEN",
    "HMGET",
    "HMSET",
    "HPERSIST",
    "HPEXPIRE",
    "HPEXPIREAT",
    "HPEXPIRETIME",
    "HPTTL",
    "HRANDFIELD",
    "HSCAN",
    "HSET",
    "HSETEX",
    "HSETNX",
    "HSTRLEN",
    "HTTL",
    "HVALS",
    // List (not the blocking ones)
    "LINDEX",
    "LINSERT",
    "LLEN",
    "LMOVE",
    "LMPOP",
    "LPOP",
    "LPOS",
    "LPUSH",
    "LPUSHX",
    "LRANGE",
    "LREM",
    "LSET",
    "LTRIM",
    "RPOP",
    "RPOPLPUSH",
    "RPUSH",
    "RPUSHX",
    // Set
    "SADD",
    "SCARD",
    "SDIFF",
    "SDIFFSTORE",
    "SINTER",
    "SINTERCARD",
    "SINTERSTORE",
    "SISMEMBER",
    "SMEMBERS",
    "SMISMEMBER",
    "SMOVE",
    "SPOP",
    "SRANDMEMBER",
    "SREM",
    "SSCAN",
    "SUNION",
    "SUNIONSTORE",
    // Sorted set (not the blocking ones)
    "ZADD",
    "ZCARD",
    "ZCOUNT",
    "ZDIFF",
    "ZDIFFSTORE",
    "ZINCRBY",
    "ZINTER",
    "ZINTERCARD",
    "ZINTERSTORE",
    "ZLEXCOUNT",
    "ZMPOP",
    "ZMSCORE",
    "ZPOPMAX",
    "ZPOPMIN",
    "ZRANDMEMBER",
    "ZRANGE",
    "ZRANGEBYLEX",
    "ZRANGEBYSCORE",
    "ZRANGESTORE",
    "ZRANK",
    "ZREM",
    "ZREMRANGEBYLEX",
    "ZREMRANGEBYRANK",
    "ZREMRANGEBYSCORE",
    "ZREVRANGE",
    "ZREVRANGEBYLEX",
    "ZREVRANGEBYSCORE",
    "ZREVRANK",
    "ZSCAN",
    "ZSCORE",
    "ZUNION",
    "ZUNIONSTORE",
    // Geo
    "GEOADD",
    "GEODIST",
    "GEOHASH",
    "GEOPOS",
    "GEORADIUS",
    "GEORADIUS_RO",
    "GEORADIUSBYMEMBER",
    "GEORADIUSBYMEMBER_RO",
    "GEOSEARCH",
    "GEOSEARCHSTORE",
    // HyperLogLog
    "PFADD",
    "PFCOUNT",
    "PFMERGE",
    // Generic
    "COPY",
    "DEL",
    "DUMP",
    "EXISTS",
    "EXPIRE",
    "EXPIREAT",
    "EXPIRETIME",
    "KEYS",
    "PERSIST",
    "PEXPIRE",
    "PEXPIREAT",
    "PEXPIRETIME",
    "PTTL",
    "RANDOMKEY",
    "RENAME",
    "RENAMENX",
    "RESTORE",
    "SCAN",
    "TOUCH",
    "TTL",
    "TYPE",
    "UNLINK",
    // Scripting and functions (bounded by --script-timeout-ms)
    "EVAL",
    "EVAL_RO",
    "EVALSHA",
    "EVALSHA_RO",
    "FCALL",
    "FCALL_RO",
    // Pub/Sub: publishing only
    "PUBLISH",
    "PUBSUB",
    // Server: data-level only
    "DBSIZE",
    "FLUSHALL",
    "FLUSHDB",
    "TIME",
    "INFO",
    "COMMAND",
    // Connection: what Upstash's REST API offers
    "PING",
    "ECHO",
    // JSON (redis-server needs the module; without it Redis answers "unknown command")
    "JSON.ARRAPPEND",
    "JSON.ARRINDEX",
    "JSON.ARRINSERT",
    "JSON.ARRLEN",
    "JSON.ARRPOP",
    "JSON.ARRTRIM",
    "JSON.CLEAR",
    "JSON.DEBUG",
    "JSON.DEL",
    "JSON.FORGET",
    "JSON.GET",
    "JSON.MERGE",
    "JSON.MGET",
    "JSON.MSET",
    "JSON.NUMINCRBY",
    "JSON.NUMMULTBY",
    "JSON.OBJKEYS",
    "JSON.OBJLEN",
    "JSON.RESP",
    "JSON.SET",
    "JSON.STRAPPEND",
    "JSON.STRLEN",
    "JSON.TOGGLE",
    "JSON.TYPE",
    // Streams (XREAD/XREADGROUP below: not with BLOCK)
    "XACK",
    "XACKDEL",
    "XADD",
    "XAUTOCLAIM",
    "XCLAIM",
    "XDEL",
    "XDELEX",
    "XLEN",
    "XPENDING",
    "XRANGE",
    "XREVRANGE",
    "XTRIM",
];

/// Commands forwarded only with these subcommands (first argument, upper case).
const SUBCOMMANDS: &[(&str, &[&str])] = &[
    ("SCRIPT", &["EXISTS", "FLUSH", "KILL", "LOAD"]),
    (
        "FUNCTION",
        &["DELETE", "FLUSH", "KILL", "LIST", "LOAD", "STATS"],
    ),
    ("MEMORY", &["USAGE"]),
    ("XINFO", &["CONSUMERS", "GROUPS", "STREAM", "HELP"]),
    (
        "XGROUP",
        &[
            "CREATE",
            "CREATECONSUMER",
            "DELCONSUMER",
            "DESTROY",
            "SETID",
            "HELP",
        ],
    ),
];

/// Why a command is refused; [`Refusal::message`] is the text of the 400.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Not part of the REST surface.
    NotAllowed,
    /// A subcommand that is not part of the REST surface.
    SubcommandNotAllowed,
    /// MULTI and friends outside `/multi-exec`.
    Transaction,
    /// A command that would wait on the server (BLPOP, XREAD BLOCK ...).
    Blocking,
}

impl Refusal {
    /// `ERR command is not allowed: NAME`, with a hint where one helps. The wording is ours:
    /// Upstash documents a 400 for unsupported commands but not its message.
    pub fn message(self, args: &[Vec<u8>]) -> String {
        let name = display_name(&args[0]);
        match self {
            Self::NotAllowed => format!("ERR command is not allowed: {name}"),
            Self::SubcommandNotAllowed => {
                let sub = args.get(1).map(|s| display_name(s)).unwrap_or_default();
                format!("ERR command is not allowed: {name} {sub}")
            }
            Self::Transaction => format!(
                "ERR command is not allowed: {name} (transactions across requests are not supported: use /multi-exec)"
            ),
            Self::Blocking => format!(
                "ERR command is not allowed: {name} (blocking commands are not supported over REST)"
            ),
        }
    }
}

/// Checks a command (name first) against the REST surface.
pub fn check(args: &[Vec<u8>]) -> Result<(), Refusal> {
    let name = args[0].to_ascii_uppercase();
    let is = |candidate: &str| name == candidate.as_bytes();
    if ALLOWED.iter().any(|c| is(c)) {
        return Ok(());
    }
    if ["XREAD", "XREADGROUP"].iter().any(|c| is(c)) {
        // The options come before STREAMS; after it are keys and ids, which may be called BLOCK.
        let options = args[1..]
            .iter()
            .take_while(|a| !a.eq_ignore_ascii_case(b"STREAMS"));
        return match options
            .into_iter()
            .any(|a| a.eq_ignore_ascii_case(b"BLOCK"))
        {
            true => Err(Refusal::Blocking),
            false => Ok(()),
        };
    }
    if let Some((_, subs)) = SUBCOMMANDS.iter().find(|(c, _)| is(c)) {
        let sub = args.get(1).map(|s| s.to_ascii_uppercase());
        return match sub {
            Some(sub) if subs.iter().any(|s| sub == s.as_bytes()) => Ok(()),
            _ => Err(Refusal::SubcommandNotAllowed),
        };
    }
    if ["MULTI", "EXEC", "DISCARD", "WATCH", "UNWATCH"]
        .iter()
        .any(|c| is(c))
    {
        return Err(Refusal::Transaction);
    }
    if [
        "BLPOP",
        "BRPOP",
        "BRPOPLPUSH",
        "BLMOVE",
        "BLMPOP",
        "BZPOPMIN",
        "BZPOPMAX",
        "BZMPOP",
        "WAIT",
        "WAITAOF",
    ]
    .iter()
    .any(|c| is(c))
    {
        return Err(Refusal::Blocking);
    }
    Err(Refusal::NotAllowed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<Vec<u8>> {
        words.iter().map(|w| w.as_bytes().to_vec()).collect()
    }

    #[test]
    fn data_commands_pass_in_any_case() {
        for cmd in [
            &["get", "k"][..],
            &["SET", "k", "v", "EX", "60"],
            &["Eval", "return 1", "0"],
            &["evalsha_ro", "abc", "0"],
            &["script", "load", "return 1"],
            &["SCRIPT", "KILL"],
            &["function", "list"],
            &["MEMORY", "USAGE", "k"],
            &["XREAD", "COUNT", "1", "STREAMS", "s", "0"],
            // A stream named BLOCK is not the BLOCK option.
            &["XREAD", "STREAMS", "BLOCK", "0"],
            &["XINFO", "STREAM", "s"],
            &["PING"],
            &["json.get", "k"],
            &["FLUSHDB"],
        ] {
            assert_eq!(check(&args(cmd)), Ok(()), "{cmd:?}");
        }
    }

    #[test]
    fn admin_state_and_blocking_commands_are_refused() {
        for (cmd, refusal) in [
            (&["REPLICAOF", "127.0.0.1", "1"][..], Refusal::NotAllowed),
            (&["SLAVEOF", "no", "one"], Refusal::NotAllowed),
            (&["CONFIG", "SET", "maxmemory", "1"], Refusal::NotAllowed),
            (&["config", "get", "requirepass"], Refusal::NotAllowed),
            (&["ACL", "SETUSER", "x", "on"], Refusal::NotAllowed),
            (&["SHUTDOWN", "NOSAVE"], Refusal::NotAllowed),
            (&["SAVE"], Refusal::NotAllowed),
            (&["BGSAVE"], Refusal::NotAllowed),
            (&["BGREWRITEAOF"], Refusal::NotAllowed),
            (&["DEBUG", "SLEEP", "10"], Refusal::NotAllowed),
            (&["MONITOR"], Refusal::NotAllowed),
            (&["CLIENT", "KILL", "TYPE", "normal"], Refusal::NotAllowed),
            (&["CLIENT", "PAUSE", "20000"], Refusal::NotAllowed),
            (&["CLIENT", "LIST"], Refusal::NotAllowed),
            (&["SELECT", "1"], Refusal::NotAllowed),
            (&["AUTH", "x"], Refusal::NotAllowed),
            (&["HELLO", "3"], Refusal::NotAllowed),
            (&["QUIT"], Refusal::NotAllowed),
            (&["RESET"], Refusal::NotAllowed),
            (&["SUBSCRIBE", "ch"], Refusal::NotAllowed),
            (&["MODULE", "LOAD", "/x.so"], Refusal::NotAllowed),
            (&["SYNC"], Refusal::NotAllowed),
            (&["FAILOVER"], Refusal::NotAllowed),
            (&["CLUSTER", "INFO"], Refusal::NotAllowed),
            (&["SCRIPT", "DEBUG", "YES"], Refusal::SubcommandNotAllowed),
            (&["SCRIPT"], Refusal::SubcommandNotAllowed),
            (&["FUNCTION", "RESTORE", "x"], Refusal::SubcommandNotAllowed),
            (&["MEMORY", "PURGE"], Refusal::SubcommandNotAllowed),
            (&["multi"], Refusal::Transaction),
            (&["WATCH", "k"], Refusal::Transaction),
            (&["BLPOP", "l", "0"], Refusal::Blocking),
            (&["WAIT", "1", "0"], Refusal::Blocking),
            (
                &["XREAD", "BLOCK", "0", "STREAMS", "s", "$"],
                Refusal::Blocking,
            ),
            (
                &[
                    "xreadgroup",
                    "GROUP",
                    "g",
                    "c",
                    "block",
                    "0",
                    "STREAMS",
                    "s",
                    ">",
                ],
                Refusal::Blocking,
            ),
        ] {
            assert_eq!(check(&args(cmd)), Err(refusal), "{cmd:?}");
        }
    }

    #[test]
    fn messages_name_the_command() {
        let a = args(&["config", "set", "x", "y"]);
        assert_eq!(
            check(&a).unwrap_err().message(&a),
            "ERR command is not allowed: CONFIG"
        );
        let a = args(&["SCRIPT", "debug"]);
        assert_eq!(
            check(&a).unwrap_err().message(&a),
            "ERR command is not allowed: SCRIPT DEBUG"
        );
        let a = args(&["MULTI"]);
        assert!(check(&a).unwrap_err().message(&a).contains("/multi-exec"));
    }
}
