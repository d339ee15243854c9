//! What the worker and its Durable Objects say to each other, one type per message (a probe's
//! [`Arm`], [`ProbeStatus`]..., a shard's [`ShardStatus`], the directory's [`DirectoryChange`]),
//! and the calls themselves ([`ProbeCall`], [`ShardCall`], [`DirectoryCall`]): both sides use
//! these types, so a renamed field or path fails to compile instead of reading `0` or a 404.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A probe's arming: a hint probe's location hint, or a fleet member probe's member, with the
/// interval and how long its answers are kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Arm {
    pub hint: Option<String>,
    pub member: Option<ArmMember>,
    pub every_s: u32,
    pub keep_s: u32,
}

/// The member a member probe calls: its label and base URL.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArmMember {
    pub label: String,
    pub url: String,
}

/// What an arming did: whether the alarm was set now (a tick leaves a live chain alone), and
/// whether the probe is stopped (a tick never re-arms a stopped probe).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Armed {
    pub armed: bool,
    pub stopped: bool,
}

impl Armed {
    /// Reads it out of parsed JSON as its `Deserialize` does (see [`ProbeStatus::read`]).
    pub fn read(v: &serde_json::Value) -> Armed {
        let flag = |k: &str| {
            v.get(k)
                .and_then(serde_json::Value::as_bool)
                .unwrap_or(false)
        };
        Armed {
            armed: flag("armed"),
            stopped: flag("stopped"),
        }
    }
}

/// What a stop did: the probe is stopped (its alarm stays only to delete what it keeps).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stopped {
    pub stopped: bool,
}

impl Stopped {
    /// Reads it out of parsed JSON as its `Deserialize` does (see [`ProbeStatus::read`]).
    pub fn read(v: &serde_json::Value) -> Stopped {
        Stopped {
            stopped: v
                .get("stopped")
                .and_then(serde_json::Value::as_bool)
                .unwrap_or(false),
        }
    }
}

/// The fleet directory: every member a start or the cron armed and whose probe still runs or
/// keeps answers, label → base URL.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Directory {
    pub members: BTreeMap<String, String>,
}

/// A change to the fleet directory: members armed (added, or their URL updated) and labels
/// forgotten.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct DirectoryChange {
    pub armed: BTreeMap<String, String>,
    pub forget: Vec<String>,
}

/// `label → url` of a parsed JSON object, the entries whose value is text (inserted one by one:
/// a `collect` into the map would ship a sort).
fn text_map(v: Option<&serde_json::Value>) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    for (k, v) in v
        .and_then(serde_json::Value::as_object)
        .into_iter()
        .flatten()
    {
        if let Some(url) = v.as_str() {
            map.insert(k.clone(), url.to_string());
        }
    }
    map
}

impl DirectoryChange {
    /// Reads a change out of parsed JSON as its `Deserialize` does, without a deserializer of
    /// its own (see [`ProbeStatus::read`]).
    pub fn read(v: &serde_json::Value) -> DirectoryChange {
        DirectoryChange {
            armed: text_map(v.get("armed")),
            forget: v
                .get("forget")
                .and_then(serde_json::Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|l| Some(l.as_str()?.to_string()))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }
}

impl Directory {
    /// Reads the directory out of parsed JSON as its `Deserialize` does (see
    /// [`ProbeStatus::read`]).
    pub fn read(v: &serde_json::Value) -> Directory {
        Directory {
            members: text_map(v.get("members")),
        }
    }

    /// `change` applied; `true` when it changed something (the object writes only then). A
    /// label both armed and forgotten is forgotten.
    pub fn apply(&mut self, change: DirectoryChange) -> bool {
        let before = self.members.clone();
        self.members.extend(change.armed);
        for label in &change.forget {
            self.members.remove(label);
        }
        self.members != before
    }
}

/// A probe's state as `GET /status` gives it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ProbeStatus {
    /// A hint probe's location hint.
    pub hint: Option<String>,
    /// A member probe's member label.
    pub member: Option<String>,
    /// The colo of its latest answer.
    pub colo: Option<String>,
    /// Its interval and keep, as its last start set them (0: never started).
    pub every_s: u32,
    pub keep_s: u32,
    /// Started and not stopped: an alarm is set, or the alarm is measuring now.
    pub running: bool,
    pub stopped: bool,
    /// When its alarm is due, epoch ms (`null`: none set).
    pub next_alarm_ms: Option<i64>,
    /// Answers (and failure lines) it keeps now, and the times of the first and latest.
    pub kept: u64,
    pub first_t_ms: Option<i64>,
    pub last_t_ms: Option<i64>,
    /// Why its latest wake did not go as it should (a store's error, a failed keep, a stop).
    pub last_error: Option<String>,
    /// Answers it measured and could not keep.
    pub keep_failed: u64,
    /// Deletions of its expired answers that failed (those answers stay until one succeeds).
    pub expire_failed: u64,
    /// A member probe's answers by placement since it started (`null` for a hint probe).
    pub placement: Option<PlacementCounts>,
}

/// A member probe's kept answers by placement check, and the latest `cf-placement` and trace
/// colo.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct PlacementCounts {
    pub placed: u64,
    pub unplaced: u64,
    pub elsewhere: u64,
    /// Answers whose trace named a colo outside the region's metro.
    pub trace_elsewhere: u64,
    /// Answers whose `cf-placement` and trace named different colos (counted whatever the check).
    pub trace_disagrees: u64,
    pub last: Option<String>,
    /// The latest answer's trace colo ("unknown" when the member could not tell).
    pub last_trace: Option<String>,
}

impl PlacementCounts {
    /// Reads counts out of parsed JSON as their `Deserialize` does (see [`ProbeStatus::read`]).
    pub fn read(p: &serde_json::Value) -> PlacementCounts {
        let n = |k: &str| p.get(k).and_then(serde_json::Value::as_u64).unwrap_or(0);
        PlacementCounts {
            placed: n("placed"),
            unplaced: n("unplaced"),
            elsewhere: n("elsewhere"),
            trace_elsewhere: n("trace_elsewhere"),
            trace_disagrees: n("trace_disagrees"),
            last: p.get("last").and_then(|x| x.as_str()).map(str::to_string),
            last_trace: p
                .get("last_trace")
                .and_then(|x| x.as_str())
                .map(str::to_string),
        }
    }
}

impl ProbeStatus {
    /// Reads a status out of parsed JSON as its `Deserialize` does, without a deserializer of
    /// its own (a derived one costs the worker's bundle kilobytes); tested against it.
    pub fn read(v: &serde_json::Value) -> ProbeStatus {
        let text = |k: &str| v.get(k).and_then(|x| x.as_str()).map(str::to_string);
        let count = |k: &str| v.get(k).and_then(serde_json::Value::as_u64).unwrap_or(0);
        let time = |k: &str| v.get(k).and_then(serde_json::Value::as_i64);
        let flag = |k: &str| {
            v.get(k)
                .and_then(serde_json::Value::as_bool)
                .unwrap_or(false)
        };
        let seconds = |k: &str| u32::try_from(count(k)).unwrap_or(u32::MAX);
        ProbeStatus {
            hint: text("hint"),
            member: text("member"),
            colo: text("colo"),
            every_s: seconds("every_s"),
            keep_s: seconds("keep_s"),
            running: flag("running"),
            stopped: flag("stopped"),
            next_alarm_ms: time("next_alarm_ms"),
            kept: count("kept"),
            first_t_ms: time("first_t_ms"),
            last_t_ms: time("last_t_ms"),
            last_error: text("last_error"),
            keep_failed: count("keep_failed"),
            expire_failed: count("expire_failed"),
            placement: v
                .get("placement")
                .filter(|p| p.is_object())
                .map(PlacementCounts::read),
        }
    }

    /// Whether the probe runs or still keeps answers (neither: it is gone). Started and not
    /// stopped is running even with no alarm set (none is while it measures).
    pub fn lives(&self) -> bool {
        let started = !self.stopped && self.every_s > 0;
        self.running || started || self.kept > 0
    }
}

/// A run archive shard's state as `GET /status` gives it: what it keeps, and the answers of
/// its run it could not keep.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ShardStatus {
    pub kept: u64,
    pub first_t_ms: Option<i64>,
    pub last_t_ms: Option<i64>,
    pub keep_failed: u64,
}

impl ShardStatus {
    /// Reads a status out of parsed JSON as its `Deserialize` does (see [`ProbeStatus::read`]).
    pub fn read(v: &serde_json::Value) -> ShardStatus {
        let count = |k: &str| v.get(k).and_then(serde_json::Value::as_u64).unwrap_or(0);
        let time = |k: &str| v.get(k).and_then(serde_json::Value::as_i64);
        ShardStatus {
            kept: count("kept"),
            first_t_ms: time("first_t_ms"),
            last_t_ms: time("last_t_ms"),
            keep_failed: count("keep_failed"),
        }
    }
}

/// A page of kept answers (`GET /answers` of a probe or a run's shard): the NDJSON lines are the
/// body; the headers say the last `seq` the page holds, whether more follow, and the keeps the
/// object counted as failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageHead {
    pub last_seq: i64,
    pub more: bool,
    pub keep_failed: u64,
}

impl PageHead {
    pub const LAST_SEQ: &'static str = "kvbench-last-seq";
    pub const MORE: &'static str = "kvbench-more";
    pub const KEEP_FAILED: &'static str = "kvbench-keep-failed";

    /// The headers that carry it.
    pub fn headers(&self) -> [(&'static str, String); 3] {
        [
            (Self::LAST_SEQ, self.last_seq.to_string()),
            (Self::MORE, if self.more { "1" } else { "0" }.to_string()),
            (Self::KEEP_FAILED, self.keep_failed.to_string()),
        ]
    }

    /// Reads it from a page's headers (`header`: a header's value by name); a count missing or
    /// not a number is an error naming its header.
    pub fn read(header: impl Fn(&str) -> Option<String>) -> Result<PageHead, &'static str> {
        let last_seq = header(Self::LAST_SEQ).and_then(|v| v.trim().parse().ok());
        let keep_failed = header(Self::KEEP_FAILED).and_then(|v| v.trim().parse().ok());
        match (last_seq, keep_failed) {
            (Some(last_seq), Some(keep_failed)) => Ok(PageHead {
                last_seq,
                more: header(Self::MORE).as_deref() == Some("1"),
                keep_failed,
            }),
            (None, _) => Err("no kvbench-last-seq"),
            (_, None) => Err("no kvbench-keep-failed"),
        }
    }
}

/// One row of an append (`POST /append?keep=..&failed=..` to a run's shard): when the answer
/// was measured and its kept line, `<t_ms>\t<line>\n`.
pub fn append_row(t_ms: i64, line: &str) -> String {
    format!("{t_ms}\t{line}\n")
}

/// The rows of an append's body, `None` when one is not `<t_ms>\t<line>` (the append is then
/// refused whole).
pub fn read_append(body: &str) -> Option<Vec<(i64, &str)>> {
    body.lines()
        .filter(|l| !l.is_empty())
        .map(|row| {
            let (t, line) = row.split_once('\t')?;
            Some((t.parse::<i64>().ok()?, line))
        })
        .collect()
}

/// A call the worker makes to one of its Durable Objects, a method and a path named once for
/// the worker's call and the object's dispatch.
pub trait ObjectCall: Copy + Sized + 'static {
    /// Every call of the class.
    const ALL: &'static [Self];
    /// `GET` or `POST`.
    fn method(self) -> &'static str;
    /// The path, `/` first.
    fn path(self) -> &'static str;
    /// The call a request is, by its method and path; `None` for any other.
    fn of(method: &str, path: &str) -> Option<Self> {
        Self::ALL
            .iter()
            .copied()
            .find(|c| c.method() == method && c.path() == path)
    }
}

/// A probe object's calls (`/start`, `/tick`, `/stop`, `/status`, `/answers`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeCall {
    Start,
    Tick,
    Stop,
    Status,
    Answers,
}

impl ObjectCall for ProbeCall {
    const ALL: &'static [ProbeCall] = &[
        ProbeCall::Start,
        ProbeCall::Tick,
        ProbeCall::Stop,
        ProbeCall::Status,
        ProbeCall::Answers,
    ];
    fn method(self) -> &'static str {
        match self {
            ProbeCall::Start | ProbeCall::Tick | ProbeCall::Stop => "POST",
            ProbeCall::Status | ProbeCall::Answers => "GET",
        }
    }
    fn path(self) -> &'static str {
        match self {
            ProbeCall::Start => "/start",
            ProbeCall::Tick => "/tick",
            ProbeCall::Stop => "/stop",
            ProbeCall::Status => "/status",
            ProbeCall::Answers => "/answers",
        }
    }
}

/// A run archive shard's calls: `/append` (rows of [`append_row`]), `/failed`, `/status` and
/// `/answers` (a page, [`PageHead`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardCall {
    Append,
    Failed,
    Status,
    Answers,
}

impl ObjectCall for ShardCall {
    const ALL: &'static [ShardCall] = &[
        ShardCall::Append,
        ShardCall::Failed,
        ShardCall::Status,
        ShardCall::Answers,
    ];
    fn method(self) -> &'static str {
        match self {
            ShardCall::Append | ShardCall::Failed => "POST",
            ShardCall::Status | ShardCall::Answers => "GET",
        }
    }
    fn path(self) -> &'static str {
        match self {
            ShardCall::Append => "/append",
            ShardCall::Failed => "/failed",
            ShardCall::Status => "/status",
            ShardCall::Answers => "/answers",
        }
    }
}

/// The fleet directory's calls: `GET /members` ([`Directory`] back) and `POST /members` with a
/// [`DirectoryChange`] (the [`Directory`] after it back).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DirectoryCall {
    Read,
    Change,
}

impl ObjectCall for DirectoryCall {
    const ALL: &'static [DirectoryCall] = &[DirectoryCall::Read, DirectoryCall::Change];
    fn method(self) -> &'static str {
        match self {
            DirectoryCall::Read => "GET",
            DirectoryCall::Change => "POST",
        }
    }
    fn path(self) -> &'static str {
        "/members"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_head_reads_back_from_its_headers() {
        let head = PageHead {
            last_seq: 1_099_511_627_777,
            more: true,
            keep_failed: 3,
        };
        let headers = head.headers();
        let get = |name: &str| {
            headers
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(PageHead::read(get), Ok(head));
        let missing = |name: &str| (name != PageHead::KEEP_FAILED).then(|| "1".to_string());
        assert_eq!(PageHead::read(missing), Err("no kvbench-keep-failed"));
        let negative = |name: &str| {
            Some(
                if name == PageHead::KEEP_FAILED {
                    "-1"
                } else {
                    "0"
                }
                .to_string(),
            )
        };
        assert!(PageHead::read(negative).is_err());
    }

    #[test]
    fn an_append_is_rows_of_a_time_and_a_line_or_refused_whole() {
        let line = r#"{"t_ms":5,"label":"FRA","vantage":"run","detail":"a\tb"}"#;
        let body = append_row(5, line) + &append_row(6, "{}");
        assert_eq!(read_append(&body), Some(vec![(5, line), (6, "{}")]));
        assert_eq!(read_append(""), Some(vec![]));
        assert_eq!(read_append("5\t{}\nnot a row\n"), None);
        assert_eq!(read_append("x\t{}\n"), None);
    }

    #[test]
    fn a_directory_change_says_whether_it_changed_anything() {
        let mut d = Directory::default();
        let arm = |label: &str, url: &str| DirectoryChange {
            armed: [(label.to_string(), url.to_string())].into(),
            forget: Vec::new(),
        };
        assert!(d.apply(arm("a", "https://a")));
        assert!(
            !d.apply(arm("a", "https://a")),
            "the cron's tick re-arms: no write"
        );
        assert!(d.apply(arm("a", "https://a2")), "a new URL is a change");
        assert!(d.apply(arm("b", "https://b")));
        let forget = |labels: &[&str]| DirectoryChange {
            armed: BTreeMap::new(),
            forget: labels.iter().map(|l| l.to_string()).collect(),
        };
        assert!(
            !d.apply(forget(&["c"])),
            "forgetting what it never held changes nothing"
        );
        assert!(d.apply(forget(&["a"])));
        assert_eq!(d.members.keys().collect::<Vec<_>>(), ["b"]);
        let both = DirectoryChange {
            armed: [("b".to_string(), "https://b".to_string())].into(),
            forget: vec!["b".into()],
        };
        assert!(d.apply(both));
        assert!(
            d.members.is_empty(),
            "armed and forgotten at once: forgotten"
        );
    }

    #[test]
    fn a_status_without_fields_reads_as_a_probe_that_never_ran() {
        let s: ProbeStatus = serde_json::from_str("{}").unwrap();
        assert_eq!(s, ProbeStatus::default());
        assert!(!s.lives());
        let kept = ProbeStatus {
            kept: 3,
            stopped: true,
            ..ProbeStatus::default()
        };
        assert!(kept.lives(), "a stopped probe keeping answers lives on");
        let running = ProbeStatus {
            running: true,
            ..ProbeStatus::default()
        };
        assert!(running.lives());
        // Started, not stopped, measuring now (no alarm set meanwhile), nothing kept yet.
        let started = ProbeStatus {
            every_s: 300,
            ..ProbeStatus::default()
        };
        assert!(started.lives());
        let stopped = ProbeStatus {
            stopped: true,
            ..started
        };
        assert!(!stopped.lives());
    }
}
