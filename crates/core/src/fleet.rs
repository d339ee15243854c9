//! The fleet: the benchmark worker deployed once per cloud region (Workers placement,
//! `[placement] region = "aws:us-east-1"`), each member a vantage point that the probes call over
//! plain HTTP — only a fetch handler is placed, not alarms, cron or RPC, so a Durable Object alarm
//! asks the placed member to run `/test` where it runs. The default regions live in
//! `fleet-regions.json` (one place: `scripts/fleet.mjs` deploys from it, the report names each
//! region's metro from it); the `FLEET` var lists the members of a deployment.

use crate::params::ParamError;
use kvbench_wire::kept::FailureKind;

/// Var: the members the probes call, `label=url` pairs separated by commas or whitespace
/// (`npm run deploy` sets it; `npm run dev` points it at its local members).
pub const FLEET_VAR: &str = "FLEET";
/// Most members a deployment may list (an account has at most 500 workers).
pub const MAX_MEMBERS: usize = 200;
/// Longest member label.
pub const MAX_LABEL_LEN: usize = 64;
/// The default regions, with the metro and colo each is expected in.
pub const REGIONS_JSON: &str = include_str!("../fleet-regions.json");

/// A placement region of the default fleet.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct Region {
    /// `aws:us-east-1`, `gcp:europe-west9`, `azure:southafricanorth`: the `[placement] region`.
    pub region: String,
    /// Where the cloud region is.
    pub metro: String,
    /// The Cloudflare data center it is expected to map to (`cf-placement` says where it ran).
    pub colo: String,
    pub continent: String,
}

#[derive(serde::Deserialize)]
struct RegionsFile {
    regions: Vec<Region>,
}

/// The default regions (`fleet-regions.json`), parsed once per isolate.
pub fn regions() -> &'static [Region] {
    static REGIONS: std::sync::OnceLock<Vec<Region>> = std::sync::OnceLock::new();
    REGIONS.get_or_init(|| {
        serde_json::from_str::<RegionsFile>(REGIONS_JSON)
            .map(|f| f.regions)
            .unwrap_or_default()
    })
}

/// The default region a label names, if it is one.
pub fn region(label: &str) -> Option<&'static Region> {
    regions().iter().find(|r| r.region == label)
}

/// One member: its label (the region it is placed in, or any name) and its base URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub label: String,
    pub url: String,
}

impl Member {
    /// The member's `/test` with its own defaults, like a probe's, except that `do` measures
    /// the member's colo's own objects (`do_scope=colo`): created near where the placed member
    /// runs, whatever touched the key elsewhere — as a hint probe measures its hint's.
    pub fn test_url(&self) -> String {
        format!("{}/test?do_scope=colo", self.url.trim_end_matches('/'))
    }

    /// The name of the probe object that calls this member.
    pub fn object_name(&self) -> String {
        format!("member:{}", self.label)
    }
}

/// A label: 1-64 of `A-Z a-z 0-9 : . _ -` (a region id is one).
pub fn parse_label(parameter: &str, text: &str) -> Result<String, ParamError> {
    crate::probes::parse_name(parameter, "member label", text, MAX_LABEL_LEN, b":._-")
}

/// A member's base URL: `http(s)://host[:port][/path]`, no credentials, query or fragment (the
/// probes send `BENCH_TOKEN` as a header; a secret never travels in a URL).
pub fn parse_member_url(parameter: &str, label: &str, text: &str) -> Result<String, ParamError> {
    let bad = |why: &str| ParamError::new(parameter, format!("member {label}: {why}"));
    let rest = text
        .strip_prefix("https://")
        .or_else(|| text.strip_prefix("http://"))
        .ok_or_else(|| bad("the URL must start with http:// or https://"))?;
    let host = rest.split('/').next().unwrap_or("");
    if host.is_empty() {
        return Err(bad("the URL has no host"));
    }
    // Anywhere, not only before the first `/`: `http://tok:SECRET/x@host` is a credential
    // too, to some parsers; a member's URL never needs an `@`.
    if rest.contains('@') {
        return Err(bad(
            "the URL must not carry credentials (no '@' anywhere; the probes send BENCH_TOKEN as a header)",
        ));
    }
    if text.contains(['?', '#']) || text.bytes().any(|b| b <= b' ' || b >= 0x7f) {
        return Err(bad(
            "the URL must be a plain base URL (no query, fragment or spaces)",
        ));
    }
    Ok(text.trim_end_matches('/').to_string())
}

/// `FLEET`: `label=url` pairs, comma or whitespace separated; labels unique. Empty: no members.
pub fn parse_members(parameter: &str, text: &str) -> Result<Vec<Member>, ParamError> {
    let mut members: Vec<Member> = Vec::new();
    for pair in text
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|p| !p.is_empty())
    {
        let (label, url) = pair.split_once('=').ok_or_else(|| {
            ParamError::new(
                parameter,
                format!("expected label=url, got {pair:?} (e.g. aws:us-east-1=https://kvbench-aws-us-east-1.you.workers.dev)"),
            )
        })?;
        let label = parse_label(parameter, label)?;
        let url = parse_member_url(parameter, &label, url)?;
        if members.iter().any(|m| m.label == label) {
            return Err(ParamError::new(
                parameter,
                format!("member {label} is listed twice"),
            ));
        }
        members.push(Member { label, url });
    }
    if members.len() > MAX_MEMBERS {
        return Err(ParamError::new(
            parameter,
            format!("at most {MAX_MEMBERS} members, got {}", members.len()),
        ));
    }
    Ok(members)
}

/// What a member's answer to `GET /test` was, read once every span of it is over.
#[derive(Debug, Clone, PartialEq)]
pub struct MemberReply {
    /// The colo the member measured in (its answer's `colo`), or "unknown".
    pub colo: String,
    /// Its isolate's first request (`isolate_requests` 1): a cold answer.
    pub cold: bool,
    /// `None`: a `/test` answer, kept as sent. Else why it is not one: `malformed` (a 200 whose
    /// body is no answer) or `status` (any other status), with what it said (cleaned).
    pub failure: Option<(FailureKind, Option<u16>, String)>,
}

/// Reads a member's `status` and `body`.
pub fn member_reply(status: u16, body: &str) -> MemberReply {
    let answer: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let field = |name: &str| answer.as_ref().and_then(|a| a.get(name));
    let colo = field("colo")
        .and_then(serde_json::Value::as_str)
        .filter(|c| c.len() <= 16 && c.bytes().all(|b| b.is_ascii_alphanumeric()))
        .unwrap_or("unknown")
        .to_string();
    let cold = field("isolate_requests").and_then(serde_json::Value::as_u64) == Some(1);
    let is_answer = field("stores").is_some_and(serde_json::Value::is_object);
    let detail = || crate::probes::clean_detail(body, 300);
    let failure = match (status, is_answer) {
        (200, true) => None,
        (200, false) => Some((FailureKind::Malformed, None, detail())),
        (status, _) => Some((FailureKind::Status, Some(status), detail())),
    };
    MemberReply {
        colo,
        cold: cold && failure.is_none(),
        failure,
    }
}

/// The `cf-placement` header of a placed worker's answer (`remote-IAD`, `local-LHR`): kept as
/// sent when it has that shape, else dropped (a member's text never reaches a report unchecked).
pub fn placement(header: Option<&str>) -> Option<String> {
    let value = header?.trim();
    let (kind, colo) = value.split_once('-')?;
    let ok = matches!(kind, "remote" | "local")
        && (2..=8).contains(&colo.len())
        && colo.bytes().all(|b| b.is_ascii_alphanumeric());
    ok.then(|| value.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_regions_are_at_least_twenty_distinct_metros_on_every_inhabited_continent() {
        let regions = regions();
        assert!(regions.len() >= 20, "{} regions", regions.len());
        let mut metros: Vec<_> = regions.iter().map(|r| r.metro.as_str()).collect();
        metros.sort();
        metros.dedup();
        assert_eq!(metros.len(), regions.len(), "one region per metro");
        let mut colos: Vec<_> = regions.iter().map(|r| r.colo.as_str()).collect();
        colos.sort();
        colos.dedup();
        assert_eq!(colos.len(), regions.len(), "one region per expected colo");
        for continent in [
            "North America",
            "South America",
            "Europe",
            "Africa",
            "Asia",
            "Oceania",
        ] {
            assert!(
                regions.iter().any(|r| r.continent == continent),
                "{continent}"
            );
        }
        for r in regions {
            assert!(
                ["aws:", "gcp:", "azure:"]
                    .iter()
                    .any(|p| r.region.starts_with(p)),
                "{}",
                r.region
            );
            assert_eq!(parse_label("FLEET", &r.region).unwrap(), r.region);
        }
        assert_eq!(region("aws:us-east-1").unwrap().colo, "IAD");
    }

    #[test]
    fn members_from_the_var() {
        let m = parse_members(
            "FLEET",
            "aws:us-east-1=https://a.example.workers.dev/, local-b=http://127.0.0.1:9001\nlocal-c=http://127.0.0.1:9002/base",
        )
        .unwrap();
        assert_eq!(m.len(), 3);
        assert_eq!(m[0].label, "aws:us-east-1");
        assert_eq!(
            m[0].test_url(),
            "https://a.example.workers.dev/test?do_scope=colo"
        );
        assert_eq!(
            m[2].test_url(),
            "http://127.0.0.1:9002/base/test?do_scope=colo"
        );
        assert_eq!(m[1].object_name(), "member:local-b");
        assert!(parse_members("FLEET", "  ").unwrap().is_empty());
        for bad in [
            "nolabel",
            "a=ftp://x",
            "a=https://",
            "a=https://user:secret@x.dev",
            "a=http://tok:secret/x@host",
            "a=https://x.dev/p@secret",
            "a=https://x.dev/?token=1",
            "a b=https://x.dev",
            "a/b=https://x.dev",
            "a=https://x.dev,a=https://y.dev",
        ] {
            let e = parse_members("FLEET", bad).unwrap_err();
            assert_eq!(e.parameter, "FLEET", "{bad}");
            assert!(!e.message.contains("secret"), "{}", e.message);
        }
    }

    #[test]
    fn member_replies() {
        let ok = member_reply(
            200,
            r#"{"colo":"IAD","isolate_requests":1,"stores":{"kv":{}}}"#,
        );
        assert_eq!((ok.colo.as_str(), ok.cold, ok.failure), ("IAD", true, None));
        let warm = member_reply(200, r#"{"colo":"IAD","isolate_requests":2,"stores":{}}"#);
        assert!(!warm.cold);
        let busy = member_reply(503, "overloaded \u{1b}[31m");
        assert_eq!(busy.colo, "unknown");
        assert!(!busy.cold);
        let (kind, status, detail) = busy.failure.unwrap();
        assert_eq!((kind, status), (FailureKind::Status, Some(503)));
        assert!(!detail.contains('\u{1b}'));
        let odd = member_reply(200, r#"{"colo":"<b>","isolate_requests":1}"#);
        assert_eq!(odd.colo, "unknown");
        assert!(!odd.cold, "a failure is never a cold answer");
        assert_eq!(odd.failure.unwrap().0, FailureKind::Malformed);
    }

    #[test]
    fn placement_headers() {
        assert_eq!(placement(Some("remote-IAD")).as_deref(), Some("remote-IAD"));
        assert_eq!(placement(Some(" local-LHR ")).as_deref(), Some("local-LHR"));
        for bad in [
            None,
            Some(""),
            Some("remote-"),
            Some("x-IAD"),
            Some("remote-<b>"),
        ] {
            assert_eq!(placement(bad), None, "{bad:?}");
        }
    }
}
